/* A weights file held read-only: mapped in place when the file is
 * immutable, else copied into a sealed memfd at open (weight_map.h says
 * why), with the state that says whether a mapped file still holds the
 * bytes hashed when it was mapped; or a block of decoded weights handed
 * over by an importer, shared the same way. */
#include "core/weight_map.h"

#include "core/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <llvm-c/blake3.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct sj_weight_map {
    sj_ctx *ctx; /* allocated on it */
    _Atomic uint64_t refs;
    bool copied; /* base is a sealed copy: nothing the file does reaches it */
    bool adopted; /* base is an sj_alloc'ed block (sj__weight_map_adopt): no file at all */
    bool owned;   /* a file of ours, never rewritten (sj__weight_map_open_owned): verified, not checked */
    int fd; /* mapped in place: kept open, fstat sees the very file the pages come from */
    char *path;
    const uint8_t *base;
    size_t size; /* bytes mapped: the whole file when it was mapped */
    size_t hashed_from; /* the checks hash bytes [hashed_from, size) of the file */
    uint8_t hash[32];
    pthread_mutex_t mu;
    sj_file_identity ok;  /* the last state whose bytes hashed equal */
    sj_file_identity bad; /* the last state whose bytes did not (valid when has_bad) */
    bool has_bad;
    _Atomic uint64_t rehashes;
    sj_file_identity opened; /* the file's identity when its bytes were taken (not for adopted) */
};

static void hash_bytes(const uint8_t *p, size_t n, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, p, n);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

/* Whether the file cannot change while the flag stays: an immutable file
 * (chattr +i) refuses writes, truncation and O_TRUNC to every process,
 * root's included, so its pages cannot vanish under a mapping. */
static bool immutable(int fd) {
    int flags = 0;
    return ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 && (flags & FS_IMMUTABLE_FL);
}

/* Hashes bytes [from, n) of fd with pread, never touching a mapping: a
 * file truncated meanwhile reads short (false) instead of raising SIGBUS. */
static bool hash_fd(int fd, size_t from, size_t n, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    uint8_t buf[1 << 16];
    for (size_t at = from; at < n;) {
        size_t want = n - at < sizeof buf ? n - at : sizeof buf;
        if (sj__pread_all(fd, buf, want, at) != 1) return false;
        llvm_blake3_hasher_update(&h, buf, want);
        at += want;
    }
    llvm_blake3_hasher_finalize(&h, out, 32);
    return true;
}

/* Copies n bytes of fd into a memfd named after the file (so
 * /proc/PID/maps still says which weights the process holds), sealed
 * against any write, shrink or growth, and maps that read-only. The pages
 * belong to the process: a file rewritten in place or truncated later (cp
 * over it, a restore) cannot raise SIGBUS in a kernel that reads them, nor
 * change the weights under a request. *why gets what failed; *raced is set
 * when the file read short (it was being truncated or rewritten). */
static void *copy_sealed(int fd, size_t n, const char *path, const char **why, bool *raced) {
    *raced = false;
    /* memfd names are at most 249 bytes: the end of a long path. */
    char name[250];
    size_t pl = strlen(path), keep = sizeof name - 1 - strlen("shapejit:");
    snprintf(name, sizeof name, "shapejit:%s", pl > keep ? path + pl - keep : path);
    int mfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0) {
        *why = "memfd_create";
        return MAP_FAILED;
    }
    void *base = MAP_FAILED;
    if (ftruncate(mfd, (off_t)n) != 0) {
        *why = "memfd size";
        goto out;
    }
    uint8_t *w = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (w == MAP_FAILED) {
        *why = "memfd mmap";
        goto out;
    }
    int got = sj__pread_all(fd, w, n, 0);
    if (got != 1) {
        *why = got < 0 ? "read" : "read short";
        *raced = got == 0;
        munmap(w, n);
        goto out;
    }
    munmap(w, n); /* F_SEAL_WRITE needs no writable mapping left */
    if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        *why = "memfd seals";
        goto out;
    }
    base = mmap(NULL, n, PROT_READ, MAP_SHARED, mfd, 0);
    if (base == MAP_FAILED) *why = "mmap";
out:
    close(mfd); /* the mapping keeps the memfd alive */
    return base;
}

sj_status sj__weight_map_open(sj_ctx *ctx, const char *path, sj_weight_map **out) {
    *out = NULL;
    int fd;
    struct stat sb;
    SJ_TRY(sj__open_regular(ctx, "weights file ", path, &fd, &sb));
    sj_status st = SJ_OK;
    void *base = MAP_FAILED;
    bool copied = false;
    if (sb.st_size <= 0 || (uint64_t)sb.st_size > SIZE_MAX) {
        st = sj_fail(ctx, SJ_E_IO, "weights file %s: %lld bytes cannot be mapped", path,
                     (long long)sb.st_size);
    } else if (immutable(fd)) {
        if ((base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
            st = sj_fail(ctx, SJ_E_IO, "weights file %s: mmap: %s", path, strerror(errno));
    } else {
        copied = true;
        /* A writer racing the copy: the state before and after must agree
         * (and the read must not come up short), else read again; a file
         * rewritten without pause fails the load, naming it. */
        for (int attempt = 0; attempt < 3 && st == SJ_OK; attempt++) {
            const char *why = NULL;
            bool raced = false;
            base = copy_sealed(fd, (size_t)sb.st_size, path, &why, &raced);
            struct stat after;
            sj_file_identity was, now;
            sj__file_identity_of(&sb, &was);
            bool same = fstat(fd, &after) == 0 &&
                        (sj__file_identity_of(&after, &now), sj__file_identity_equal(&was, &now));
            if (base != MAP_FAILED && same) break;
            if (base != MAP_FAILED) munmap(base, (size_t)sb.st_size);
            base = MAP_FAILED;
            if (!raced && !same && why == NULL) raced = true;
            if (!raced && why) {
                st = sj_fail(ctx, SJ_E_IO, "weights file %s: copying it: %s: %s", path, why,
                             strerror(errno));
            } else if (attempt == 2) {
                st = sj_fail(ctx, SJ_E_CORRUPT, "weights file %s changed while it was being read "
                             "(3 tries): write model files elsewhere and rename them into place",
                             path);
            } else if (fstat(fd, &sb) != 0 || sb.st_size <= 0 || (uint64_t)sb.st_size > SIZE_MAX) {
                st = sj_fail(ctx, SJ_E_IO, "weights file %s: %lld bytes cannot be read", path,
                             (long long)sb.st_size);
            }
        }
    }
    sj_weight_map *m = NULL;
    if (st == SJ_OK && (!(m = sj_calloc(ctx, 1, sizeof *m)) || !(m->path = sj_strdup(ctx, path))))
        st = sj_fail(ctx, SJ_E_NOMEM, "weights file %s: out of memory", path);
    if (st != SJ_OK) {
        if (m) sj_free(ctx, m);
        if (base != MAP_FAILED) munmap(base, (size_t)sb.st_size);
        close(fd);
        return st;
    }
    m->ctx = ctx;
    atomic_init(&m->refs, 1);
    atomic_init(&m->rehashes, 0);
    m->copied = copied;
    m->base = base;
    m->size = (size_t)sb.st_size;
    pthread_mutex_init(&m->mu, NULL);
    sj__file_identity_of(&sb, &m->opened);
    m->ok = m->opened;
    if (copied) {
        /* The copy is the weights from now on: the file is not needed, and
         * nothing is ever compared with it (check is SJ_OK for a copy), so
         * it is not hashed: the graph hashes each weight once, later. */
        close(fd);
        m->fd = -1;
        *out = m;
        return SJ_OK;
    }
    m->fd = fd;
    /* Hashed now, so a later change is told from a touch by the bytes. A
     * writer racing this very hash is the one case it cannot tell apart:
     * the file's state is read before and compared after. */
    hash_bytes(m->base, m->size, m->hash);
    struct stat after;
    sj_file_identity now = {0};
    if (fstat(fd, &after) == 0) sj__file_identity_of(&after, &now);
    if (!sj__file_identity_equal(&m->ok, &now)) {
        sj__weight_map_release(m);
        return sj_fail(ctx, SJ_E_CORRUPT, "weights file %s changed while it was being mapped",
                       path);
    }
    *out = m;
    return SJ_OK;
}

sj_status sj__weight_map_adopt(sj_ctx *ctx, void *buf, size_t size, sj_weight_map **out) {
    *out = NULL;
    sj_weight_map *m = sj_calloc(ctx, 1, sizeof *m);
    if (!m) return sj_fail(ctx, SJ_E_NOMEM, "out of memory for a weights block");
    m->ctx = ctx;
    atomic_init(&m->refs, 1);
    atomic_init(&m->rehashes, 0);
    m->copied = m->adopted = true; /* nothing outside can change it: never checked */
    m->fd = -1;
    m->base = buf;
    m->size = size;
    pthread_mutex_init(&m->mu, NULL);
    *out = m;
    return SJ_OK;
}

sj_status sj__weight_map_open_owned(sj_ctx *ctx, int fd, const char *path, size_t offset, size_t size,
                                   const uint8_t hash[32], sj_weight_map **out) {
    *out = NULL;
    struct stat sb;
    size_t total;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return sj_fail(ctx, SJ_E_IO, "weights file %s: fstat: %s", path, strerror(e));
    }
    if (sj_add_overflow_size(offset, size, &total) || size == 0 || !S_ISREG(sb.st_mode) ||
        (uint64_t)sb.st_size != total) {
        close(fd);
        return sj_fail(ctx, SJ_E_CORRUPT, "weights file %s: %lld bytes, expected %zu + %zu", path,
                       (long long)sb.st_size, offset, size);
    }
    void *base = mmap(NULL, total, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        return sj_fail(ctx, SJ_E_IO, "weights file %s: mmap: %s", path, strerror(e));
    }
    sj_weight_map *m = sj_calloc(ctx, 1, sizeof *m);
    if (!m || !(m->path = sj_strdup(ctx, path))) {
        sj_free(ctx, m);
        munmap(base, total);
        close(fd);
        return sj_fail(ctx, SJ_E_NOMEM, "weights file %s: out of memory", path);
    }
    m->ctx = ctx;
    atomic_init(&m->refs, 1);
    atomic_init(&m->rehashes, 0);
    m->fd = fd;
    m->base = base;
    m->size = total;
    m->hashed_from = offset;
    m->owned = true;
    memcpy(m->hash, hash, 32);
    pthread_mutex_init(&m->mu, NULL);
    sj__file_identity_of(&sb, &m->opened);
    m->ok = m->opened;
    *out = m;
    return SJ_OK;
}

void sj__weight_map_retain(sj_weight_map *m) {
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void sj__weight_map_release(sj_weight_map *m) {
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    if (m->adopted)
        sj_free(m->ctx, (void *)m->base);
    else
        munmap((void *)m->base, m->size);
    if (m->fd >= 0) close(m->fd);
    pthread_mutex_destroy(&m->mu);
    sj_free(m->ctx, m->path);
    sj_free(m->ctx, m);
}

const uint8_t *sj__weight_map_data(const sj_weight_map *m) { return m->base; }
size_t sj__weight_map_size(const sj_weight_map *m) { return m->size; }
const char *sj__weight_map_path(const sj_weight_map *m) { return m->path; }
bool sj__weight_map_is_file(const sj_weight_map *m) { return !m->adopted; }
const sj_file_identity *sj__weight_map_identity(const sj_weight_map *m) {
    return m->adopted ? NULL : &m->opened;
}
uint64_t sj__weight_map_rehashes(const sj_weight_map *m) {
    return atomic_load_explicit(&((sj_weight_map *)m)->rehashes, memory_order_relaxed);
}

static sj_status changed(sj_weight_map *m, sj_ctx *ctx, const sj_file_identity *now) {
    m->bad = *now;
    m->has_bad = true;
    return sj_fail(ctx, SJ_E_CORRUPT,
                   "weights file %s changed after it was mapped (its bytes no longer hash as when "
                   "the model was loaded): reload the model",
                   m->path);
}

/* Caller holds m->mu. */
static sj_status check_locked(sj_weight_map *m, sj_ctx *ctx, bool force) {
    /* A copy holds the bytes hashed at open whatever the file does now;
     * a file of ours changes only when someone outside breaks its contract,
     * which an explicit verify looks for, not every run (check() returns
     * before this for those). */
    if (m->copied) return SJ_OK;
    struct stat sb;
    if (fstat(m->fd, &sb) != 0)
        return sj_fail(ctx, SJ_E_IO, "weights file %s: fstat: %s", m->path, strerror(errno));
    sj_file_identity now;
    sj__file_identity_of(&sb, &now);
    if (!force && sj__file_identity_equal(&now, &m->ok)) return SJ_OK;
    if (now.size < m->size) {
        /* Pages past the new end would raise SIGBUS: never touched. */
        m->bad = now;
        m->has_bad = true;
        return sj_fail(ctx, SJ_E_CORRUPT,
                       "weights file %s was truncated to %llu bytes after it was mapped (%zu "
                       "bytes): reload the model",
                       m->path, (unsigned long long)now.size, m->size);
    }
    if (!force && m->has_bad && sj__file_identity_equal(&now, &m->bad)) return changed(m, ctx, &now);
    /* The file's bytes, read, not the mapping's pages: a truncation racing
     * this hash reads short instead of raising SIGBUS here (the fault the
     * campaign found on an HTTP thread). Untouched private pages show the
     * file, so the two agree. */
    uint8_t h[32];
    bool whole = hash_fd(m->fd, m->hashed_from, m->size, h);
    atomic_fetch_add_explicit(&m->rehashes, 1, memory_order_relaxed);
    if (!whole) {
        m->bad = now;
        m->has_bad = true;
        return sj_fail(ctx, SJ_E_CORRUPT, "weights file %s was truncated while it was checked: "
                       "reload the model", m->path);
    }
    if (memcmp(h, m->hash, 32) != 0) return changed(m, ctx, &now);
    m->ok = now; /* touched, or rewritten with the same bytes */
    m->has_bad = false;
    return SJ_OK;
}

static sj_status check(sj_weight_map *m, sj_ctx *ctx, bool force) {
    /* Set at open and never changed: a run's checks of maps that are never
     * checked (a copy, a file of ours) take no lock. */
    if (!force && (m->copied || m->owned)) return SJ_OK;
    pthread_mutex_lock(&m->mu);
    sj_status st = check_locked(m, ctx, force);
    pthread_mutex_unlock(&m->mu);
    return st;
}

sj_status sj__weight_map_check(sj_weight_map *m, sj_ctx *ctx) { return check(m, ctx, false); }
sj_status sj__weight_map_verify(sj_weight_map *m, sj_ctx *ctx) { return check(m, ctx, true); }

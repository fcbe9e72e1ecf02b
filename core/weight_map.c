/* A weights file mapped read-only, with the state that says whether it
 * still holds the bytes hashed when it was mapped (weight_map.h). */
#include "weight_map.h"

#include "file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <llvm-c/blake3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* What fstat says about the file, as far as a change shows in it. */
typedef struct file_state {
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
} file_state;

struct sj_weight_map {
    sj_ctx *ctx; /* allocated on it */
    _Atomic uint64_t refs;
    int fd; /* kept open: fstat sees the very file the pages come from */
    char *path;
    const uint8_t *base;
    size_t size; /* bytes mapped: the whole file when it was mapped */
    uint8_t hash[32];
    pthread_mutex_t mu;
    file_state ok;  /* the last state whose bytes hashed equal */
    file_state bad; /* the last state whose bytes did not (valid when has_bad) */
    bool has_bad;
    _Atomic uint64_t rehashes;
};

static file_state state_of(const struct stat *sb) {
    return (file_state){(uint64_t)sb->st_size,
                        (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec,
                        (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec};
}

static bool same_state(const file_state *a, const file_state *b) {
    return a->size == b->size && a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

static void hash_bytes(const uint8_t *p, size_t n, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, p, n);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

sj_status sj_weight_map_open(sj_ctx *ctx, const char *path, sj_weight_map **out) {
    *out = NULL;
    int fd;
    struct stat sb;
    SJ_TRY(sj_open_regular(ctx, "weights file ", path, &fd, &sb));
    sj_status st = SJ_OK;
    void *base = MAP_FAILED;
    if (sb.st_size <= 0 || (uint64_t)sb.st_size > SIZE_MAX)
        st = sj_fail(ctx, SJ_E_IO, "weights file %s: %lld bytes cannot be mapped", path,
                     (long long)sb.st_size);
    else if ((base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
        st = sj_fail(ctx, SJ_E_IO, "weights file %s: mmap: %s", path, strerror(errno));
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
    m->fd = fd;
    m->base = base;
    m->size = (size_t)sb.st_size;
    pthread_mutex_init(&m->mu, NULL);
    /* Hashed now, so a later change is told from a touch by the bytes. A
     * writer racing this very hash is the one case it cannot tell apart:
     * the file's state is read before and compared after. */
    hash_bytes(m->base, m->size, m->hash);
    m->ok = state_of(&sb);
    struct stat after;
    file_state now = fstat(fd, &after) == 0 ? state_of(&after) : (file_state){0};
    if (!same_state(&m->ok, &now)) {
        sj_weight_map_release(m);
        return sj_fail(ctx, SJ_E_CORRUPT, "weights file %s changed while it was being mapped",
                       path);
    }
    *out = m;
    return SJ_OK;
}

void sj_weight_map_retain(sj_weight_map *m) {
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void sj_weight_map_release(sj_weight_map *m) {
    if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    munmap((void *)m->base, m->size);
    close(m->fd);
    pthread_mutex_destroy(&m->mu);
    sj_free(m->ctx, m->path);
    sj_free(m->ctx, m);
}

const uint8_t *sj_weight_map_data(const sj_weight_map *m) { return m->base; }
size_t sj_weight_map_size(const sj_weight_map *m) { return m->size; }
const char *sj_weight_map_path(const sj_weight_map *m) { return m->path; }
uint64_t sj_weight_map_rehashes(const sj_weight_map *m) {
    return atomic_load_explicit(&((sj_weight_map *)m)->rehashes, memory_order_relaxed);
}

static sj_status changed(sj_weight_map *m, sj_ctx *ctx, const file_state *now) {
    m->bad = *now;
    m->has_bad = true;
    return sj_fail(ctx, SJ_E_CORRUPT,
                   "weights file %s changed after it was mapped (its bytes no longer hash as when "
                   "the model was loaded): reload the model",
                   m->path);
}

/* Caller holds m->mu. */
static sj_status check_locked(sj_weight_map *m, sj_ctx *ctx, bool force) {
    struct stat sb;
    if (fstat(m->fd, &sb) != 0)
        return sj_fail(ctx, SJ_E_IO, "weights file %s: fstat: %s", m->path, strerror(errno));
    file_state now = state_of(&sb);
    if (!force && same_state(&now, &m->ok)) return SJ_OK;
    if (now.size < m->size) {
        /* Pages past the new end would raise SIGBUS: never touched. */
        m->bad = now;
        m->has_bad = true;
        return sj_fail(ctx, SJ_E_CORRUPT,
                       "weights file %s was truncated to %llu bytes after it was mapped (%zu "
                       "bytes): reload the model",
                       m->path, (unsigned long long)now.size, m->size);
    }
    if (!force && m->has_bad && same_state(&now, &m->bad)) return changed(m, ctx, &now);
    uint8_t h[32];
    hash_bytes(m->base, m->size, h);
    atomic_fetch_add_explicit(&m->rehashes, 1, memory_order_relaxed);
    if (memcmp(h, m->hash, 32) != 0) return changed(m, ctx, &now);
    m->ok = now; /* touched, or rewritten with the same bytes */
    m->has_bad = false;
    return SJ_OK;
}

static sj_status check(sj_weight_map *m, sj_ctx *ctx, bool force) {
    pthread_mutex_lock(&m->mu);
    sj_status st = check_locked(m, ctx, force);
    pthread_mutex_unlock(&m->mu);
    return st;
}

sj_status sj_weight_map_check(sj_weight_map *m, sj_ctx *ctx) { return check(m, ctx, false); }
sj_status sj_weight_map_verify(sj_weight_map *m, sj_ctx *ctx) { return check(m, ctx, true); }

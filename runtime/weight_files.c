/* Derived weights as files: the header, the write-once save, the mapping
 * (weight_files.h says why each is so). */
#include "runtime/weight_files.h"

#include "core/file_identity.h"
#include "core/array.h"
#include "core/file_read.h"
#include "core/hash.h"
#include "core/path_writable.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <llvm-c/blake3.h>
#include <stdio.h>
#include <stdlib.h> /* mkostemp */
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEADER_BYTES 4096 /* the bytes start on a page, so the mapping is as aligned */
#define MAGIC "SJWPACK1"
/* The header's fields: magic, u64 bytes, key, hash of the bytes, then a
 * hash of all that. */
enum { AT_SIZE = 8, AT_KEY = 16, AT_HASH = 48, FIELDS_BYTES = 80, CHECK_BYTES = 32 };

static void header_check(const uint8_t *fields, uint8_t out[CHECK_BYTES]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, fields, FIELDS_BYTES);
    llvm_blake3_hasher_finalize(&h, out, CHECK_BYTES);
}

/* DIR/<hex>.pack into out; false when it does not fit, or when this
 * library's file cannot be told. The name hashes the key with that file's
 * identity: the bytes a key names are this build's packing, and another
 * build (whose panels may be laid out otherwise) must never map them. */
static bool file_path(const char *dir, const uint8_t key[32], char *out, size_t cap) {
    sj_file_identity lib;
    if (!sj__library_identity(&lib)) return false;
    uint8_t id[SJ_FILE_IDENTITY_BYTES], name[32];
    sj__file_identity_bytes(&lib, id);
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, key, 32);
    llvm_blake3_hasher_update(&h, id, sizeof id);
    llvm_blake3_hasher_finalize(&h, name, sizeof name);
    char hex[65];
    sj__hex_encode(name, 32, hex);
    int n = snprintf(out, cap, "%s/%s.pack", dir, hex);
    return n > 0 && (size_t)n < cap;
}

/* Whether path's folder may be written, by the store's own rule
 * (core/path_writable.h: a folder made read-only stays unwritten even by
 * root). */
static bool folder_writable(const char *path) {
    char parent[4096];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    while (n > 0 && path[n - 1] != '/') n--;
    if (n == 0) snprintf(parent, sizeof parent, ".");
    else snprintf(parent, sizeof parent, "%.*s", (int)n, path);
    struct stat sb;
    return stat(parent, &sb) == 0 && sj__path_writable("the folder", parent, &sb, NULL, 0);
}

sj_status sj__weight_file_map(sj_ctx *ctx, const char *dir, const uint8_t key[32], size_t bytes,
                             sj_weight_map **out, const void **data) {
    *out = NULL;
    *data = NULL;
    char path[4096];
    if (!file_path(dir, key, path, sizeof path))
        return sj_fail(ctx, SJ_E_IO, "packed weights folder %s: no file name (the path is too long, "
                       "or this library's own file cannot be found)", dir);
    /* non-blocking: a FIFO put in its place must not hang the open */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? SJ_E_NOT_FOUND
                               : sj_fail(ctx, SJ_E_IO, "packed weights %s: %s", path, strerror(errno));
    uint8_t header[FIELDS_BYTES + CHECK_BYTES], check[CHECK_BYTES];
    int got = sj__pread_all(fd, header, sizeof header, 0);
    if (got != 1) {
        int e = errno;
        close(fd);
        return sj_fail(ctx, got < 0 ? SJ_E_IO : SJ_E_CORRUPT, "packed weights %s: %s", path,
                       got < 0 ? strerror(e) : "shorter than its header");
    }
    header_check(header, check);
    const char *wrong = memcmp(header, MAGIC, 8) ? "not a packed weights file"
                        : memcmp(check, header + FIELDS_BYTES, CHECK_BYTES) ? "its header is damaged"
                        : sj__get_le(header + AT_SIZE, 8) != bytes ? "it holds another size"
                        : memcmp(header + AT_KEY, key, 32) ? "it holds another key"
                        : NULL;
    if (wrong) {
        close(fd);
        return sj_fail(ctx, SJ_E_CORRUPT, "packed weights %s: %s", path, wrong);
    }
    /* marks it used, for a prune to keep (not in a folder made read-only) */
    if (folder_writable(path))
        (void)futimens(fd, (const struct timespec[2]){{0, UTIME_OMIT}, {0, UTIME_NOW}});
    /* the very file whose header was read (the map takes fd) */
    SJ_TRY(sj__weight_map_open_owned(ctx, fd, path, HEADER_BYTES, bytes, header + AT_HASH, out));
    *data = sj__weight_map_data(*out) + HEADER_BYTES;
    return SJ_OK;
}

static bool write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

bool sj__weight_file_save(sj_ctx *ctx, const char *dir, const uint8_t key[32], const void *buf,
                         size_t bytes) {
    char path[4096], tmp[4096 + 16];
    if (!file_path(dir, key, path, sizeof path) || !folder_writable(dir)) return false;
    if ((mkdir(dir, 0700) != 0 && errno != EEXIST) || !folder_writable(path)) return false;
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return false;
    uint8_t *header = sj_calloc(ctx, 1, HEADER_BYTES);
    bool ok = header != NULL;
    if (ok) {
        memcpy(header, MAGIC, 8);
        sj__put_le(header + AT_SIZE, bytes, 8);
        memcpy(header + AT_KEY, key, 32);
        llvm_blake3_hasher h;
        llvm_blake3_hasher_init(&h);
        llvm_blake3_hasher_update(&h, buf, bytes);
        llvm_blake3_hasher_finalize(&h, header + AT_HASH, 32);
        header_check(header, header + FIELDS_BYTES);
        /* Not synced: a sync would cost a cold process about as much as
         * the packing. A crash before write-back leaves at worst a file
         * shorter than its header says (ext4 and XFS move a file's size
         * on disk only as its data lands), which the map refuses. */
        ok = write_all(fd, header, HEADER_BYTES) && write_all(fd, buf, bytes) &&
             fchmod(fd, 0400) == 0;
    }
    sj_free(ctx, header);
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
    return ok;
}

/* A file of the folder, for the prune's order. */
typedef struct listed {
    char name[256];
    int64_t bytes;
    struct timespec used;
} listed;

static int newest_first(const void *a, const void *b) {
    const struct timespec *x = &((const listed *)a)->used, *y = &((const listed *)b)->used;
    if (x->tv_sec != y->tv_sec) return x->tv_sec < y->tv_sec ? 1 : -1;
    return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

/* Whether name is a packed weights file (hex + ".pack"), or (tmp) the
 * temporary of one (hex + ".pack." + 6 characters). */
static bool ours(const char *name, bool *tmp) {
    size_t n = strlen(name);
    if (n < 64 + 5 || strspn(name, "0123456789abcdef") != 64 || strncmp(name + 64, ".pack", 5) != 0)
        return false;
    *tmp = n == 64 + 5 + 7 && name[69] == '.';
    return n == 64 + 5 || *tmp;
}

sj_status sj__weight_files_prune(sj_ctx *ctx, const char *dir, int64_t max_bytes, int64_t *files,
                                int64_t *bytes) {
    int64_t gone = 0, freed = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (files) *files = 0;
        if (bytes) *bytes = 0;
        return errno == ENOENT ? SJ_OK
                               : sj_fail(ctx, SJ_E_IO, "packed weights folder %s: %s", dir, strerror(errno));
    }
    listed *l = NULL;
    size_t n = 0, cap = 0;
    sj_status st = SJ_OK;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (struct dirent *e; st == SJ_OK && (e = readdir(d));) {
        bool tmp;
        struct stat sb;
        if (!ours(e->d_name, &tmp) || fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(sb.st_mode))
            continue;
        if (tmp) { /* a writer's, unless it is over an hour old */
            if (now.tv_sec - sb.st_mtim.tv_sec > 3600 && unlinkat(dirfd(d), e->d_name, 0) == 0) {
                gone++;
                freed += (int64_t)sb.st_size;
            }
            continue;
        }
        if (!sj__array_reserve(ctx, (void **)&l, &cap, n + 1, sizeof *l)) {
            st = sj_fail(ctx, SJ_E_NOMEM, "packed weights folder %s: out of memory", dir);
            break;
        }
        snprintf(l[n].name, sizeof l[n].name, "%s", e->d_name);
        l[n].bytes = (int64_t)sb.st_size;
        l[n].used = sb.st_mtim;
        n++;
    }
    if (st == SJ_OK) {
        qsort(l, n, sizeof *l, newest_first);
        int64_t kept = 0;
        for (size_t i = 0; i < n && st == SJ_OK; i++) {
            if (kept + l[i].bytes <= max_bytes) {
                kept += l[i].bytes;
                continue;
            }
            if (unlinkat(dirfd(d), l[i].name, 0) == 0) {
                gone++;
                freed += l[i].bytes;
            } else if (errno != ENOENT) { /* ENOENT: another prune took it */
                st = sj_fail(ctx, SJ_E_IO, "packed weights %s/%s: %s", dir, l[i].name, strerror(errno));
            }
        }
    }
    sj_free(ctx, l);
    closedir(d);
    if (files) *files = gone;
    if (bytes) *bytes = freed;
    return st;
}

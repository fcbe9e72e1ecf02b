#include "core/file_identity.h"
#include "core/hash.h"

#include <dlfcn.h>
#include <errno.h> /* program_invocation_name */
#include <string.h>
#include <time.h>

void sj__file_identity_of(const struct stat *sb, sj_file_identity *out) {
    *out = (sj_file_identity){(uint64_t)sb->st_dev, (uint64_t)sb->st_ino, (uint64_t)sb->st_size,
                              (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec,
                              (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec};
}

bool sj__file_identity_get(const char *path, sj_file_identity *out) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return false;
    sj__file_identity_of(&sb, out);
    return true;
}

bool sj__file_identity_equal(const sj_file_identity *a, const sj_file_identity *b) {
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
           a->ctime_ns == b->ctime_ns;
}

bool sj__file_identity_settled(const sj_file_identity *id) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return false;
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    return id->ctime_ns <= now_ns - (int64_t)2000000000 && id->mtime_ns <= now_ns - (int64_t)2000000000;
}

void sj__file_identity_bytes(const sj_file_identity *id, uint8_t out[SJ_FILE_IDENTITY_BYTES]) {
    uint64_t v[5] = {id->dev, id->ino, id->size, (uint64_t)id->mtime_ns, (uint64_t)id->ctime_ns};
    for (int k = 0; k < 5; k++) sj__put_le(out + 8 * k, v[k], 8);
}

bool sj__library_identity(sj_file_identity *out) {
    /* Linked into the program itself, the loader names the program by its
     * argv[0] (or, in a static program, nothing): the program's file is
     * the code's. A shared library is named by the path it was loaded
     * from; a relative one (a dlopen of "./lib.so") may mean another file
     * now: no identity rather than a wrong one. */
    Dl_info info;
    const char *file = "/proc/self/exe";
    if (dladdr((void *)(uintptr_t)&sj__library_identity, &info) && info.dli_fname && info.dli_fname[0] &&
        strcmp(info.dli_fname, program_invocation_name) != 0)
        file = info.dli_fname;
    return file[0] == '/' && sj__file_identity_get(file, out);
}

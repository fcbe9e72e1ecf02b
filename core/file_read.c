#include "core/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core_impl.h"

int sj__pread_all(int fd, void *dst, size_t n, uint64_t at) {
    for (size_t done = 0; done < n;) {
        ssize_t got = pread(fd, (uint8_t *)dst + done, n - done, (off_t)(at + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return got < 0 ? -1 : 0;
        done += (size_t)got;
    }
    return 1;
}

const char *sj__file_kind(mode_t mode) {
    return S_ISREG(mode)    ? "a regular file"
           : S_ISLNK(mode)  ? "a symlink"
           : S_ISDIR(mode)  ? "a folder"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
                            : "not a regular file";
}

sj_status sj__open_regular(sj_ctx *ctx, const char *what, const char *path, int *fd, struct stat *sb) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return sj_fail(ctx, SJ_E_IO, "%s%s: cannot open: %s", what, path, strerror(errno));
    sj_status st = SJ_OK;
    int flags;
    if (fstat(*fd, sb) != 0)
        st = sj_fail(ctx, SJ_E_IO, "%s%s: stat: %s", what, path, strerror(errno));
    else if (!S_ISREG(sb->st_mode))
        st = sj_fail(ctx, SJ_E_IO, "%s%s: not a regular file (%s)", what, path, sj__file_kind(sb->st_mode));
    else if ((flags = fcntl(*fd, F_GETFL)) < 0 || fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = sj_fail(ctx, SJ_E_IO, "%s%s: fcntl: %s", what, path, strerror(errno));
    if (st != SJ_OK) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

sj_status sj__check_replaceable(sj_ctx *ctx, const char *what, const char *path) {
    struct stat sb;
    if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: %s exists and is not a regular file (%s): refused",
                       what, path, sj__file_kind(sb.st_mode));
    return SJ_OK;
}

sj_status sj__read_file(sj_ctx *ctx, const char *path, char **bytes, size_t *len) {
    *bytes = NULL;
    *len = 0;
    int fd;
    struct stat sb;
    SJ_TRY(sj__open_regular(ctx, "", path, &fd, &sb));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return sj_fail(ctx, SJ_E_IO, "%s: cannot open: %s", path, strerror(e));
    }
    sj_status st = SJ_OK;
    if (sb.st_size > SJ_READ_FILE_MAX_BYTES) {
        st = sj_fail(ctx, SJ_E_IO, "%s: %lld bytes is too large to read whole (at most %lld)", path,
                     (long long)sb.st_size, (long long)SJ_READ_FILE_MAX_BYTES);
    } else if (!(*bytes = sj_alloc(ctx, (size_t)sb.st_size + 1))) {
        st = sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory reading %lld bytes", path,
                     (long long)sb.st_size);
    } else if (fread(*bytes, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        st = sj_fail(ctx, SJ_E_IO, "%s: read failed%s", path,
                     ferror(f) ? "" : " (the file shrank while being read)");
    } else {
        (*bytes)[sb.st_size] = '\0';
        *len = (size_t)sb.st_size;
    }
    fclose(f);
    if (st != SJ_OK) {
        sj_free(ctx, *bytes);
        *bytes = NULL;
    }
    return st;
}

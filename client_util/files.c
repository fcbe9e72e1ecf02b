/* File checks shared by cli/ and server/ (client_util/files.h). */
#include "client_util/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *cu_file_kind(mode_t mode) {
    static const struct {
        mode_t type;
        const char *name;
    } kinds[] = {
        {S_IFREG, "a regular file"}, {S_IFLNK, "a symlink"},          {S_IFDIR, "a folder"},
        {S_IFIFO, "a FIFO"},         {S_IFSOCK, "a socket"},          {S_IFCHR, "a character device"},
        {S_IFBLK, "a block device"},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if ((mode & S_IFMT) == kinds[i].type) return kinds[i].name;
    return "not a regular file";
}

sj_status cu_check_replaceable(sj_ctx *ctx, const char *what, const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode)) return SJ_OK;
    return sj_ctx_set_error(ctx, SJ_E_INVALID_ARG, "%s: %s exists and is not a regular file (%s): refused",
                            what, path, cu_file_kind(sb.st_mode));
}

sj_status cu_open_regular(sj_ctx *ctx, const char *path, int *fd) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return sj_ctx_set_error(ctx, SJ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    int flags;
    sj_status st = SJ_OK;
    if (fstat(*fd, &sb) != 0)
        st = sj_ctx_set_error(ctx, SJ_E_IO, "%s: stat: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = sj_ctx_set_error(ctx, SJ_E_IO, "%s: not a regular file (%s)", path, cu_file_kind(sb.st_mode));
    else if ((flags = fcntl(*fd, F_GETFL)) < 0 || fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = sj_ctx_set_error(ctx, SJ_E_IO, "%s: fcntl: %s", path, strerror(errno));
    if (st != SJ_OK) {
        close(*fd);
        *fd = -1;
    }
    return st;
}

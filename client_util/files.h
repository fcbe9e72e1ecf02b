/* client_util/files.h — file checks the shapejit command and the HTTP
 * server share: refusing to replace what is not a regular file, and opening
 * a file to read without blocking on a FIFO. Client-side, on the public API
 * only (errors go on the context with sj_ctx_set_error); not in libshapejit.
 *
 *   if (cu_check_replaceable(ctx, "--out", path) != SJ_OK) ...;   // before a rename onto path
 *   int fd;
 *   if (cu_open_regular(ctx, path, &fd) == SJ_OK) { read(fd, ...); close(fd); }
 */
#ifndef SJ_CLIENT_UTIL_FILES_H
#define SJ_CLIENT_UTIL_FILES_H

#include <sys/types.h>

#include "shapejit/common.h"

/* What a file of this mode is, for messages: "a FIFO", "a symlink", ... */
const char *cu_file_kind(mode_t mode);

/* SJ_OK when path is absent or a regular file; else SJ_E_INVALID_ARG with
 * "<what>: <path> exists and is not a regular file (<kind>): refused". For
 * writers that put a file in place by rename, which would replace a FIFO, a
 * device node or a symlink itself rather than write to it. */
sj_status cu_check_replaceable(sj_ctx *ctx, const char *what, const char *path);

/* Opens path read-only (blocking reads), refusing anything but a regular
 * file before a read could block: the open is non-blocking and the type
 * checked on the descriptor (no race with a rename). SJ_E_IO with
 * "<path>: ..." otherwise, *fd -1. */
sj_status cu_open_regular(sj_ctx *ctx, const char *path, int *fd);

#endif

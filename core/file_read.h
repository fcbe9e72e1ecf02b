/* Reading a whole input file (a model, a tensor .pb) into memory, with the
 * checks and messages every reader wants. Private to the library. */
#ifndef SJ_FILE_READ_H
#define SJ_FILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include <sys/stat.h>

#include "shapejit/common.h"

/* Files are read whole; past this a file is surely not a model or tensor
 * we can hold twice in memory. */
#define SJ_READ_FILE_MAX_BYTES ((int64_t)4 << 30)

/* Reads the regular file at path into *bytes (sj_alloc'ed, with a '\0'
 * after the last byte so text can be parsed in place). On failure *bytes
 * is NULL and the message starts with the path. */
sj_status sj__read_file(sj_ctx *ctx, const char *path, char **bytes, size_t *len);

/* Reads exactly n bytes of fd at offset `at` with pread, retrying short
 * reads and EINTR: 1 when all were read, 0 when the file ended first (it
 * is shorter than the caller thought: truncated or being rewritten), -1 on
 * a read error (errno says which). */
int sj__pread_all(int fd, void *dst, size_t n, uint64_t at);

/* What a file of this mode is, for messages: "a FIFO", "a symlink", ... */
const char *sj__file_kind(mode_t mode);

/* Opens path read-only, refusing anything but a regular file before a read
 * could block: a FIFO opened plainly waits for a writer forever, so the
 * open is non-blocking and the type checked on the open descriptor (no
 * race with a rename), then the descriptor made blocking again. what
 * starts the message ("weights file", "store import: "). *sb is the
 * file's fstat. */
sj_status sj__open_regular(sj_ctx *ctx, const char *what, const char *path, int *fd, struct stat *sb);

/* SJ_OK when path is absent or a regular file; else SJ_E_INVALID_ARG
 * naming it and what it is. For writers that put a file in place by
 * rename, which would replace a FIFO, a device node (as root, /dev/full)
 * or a symlink itself rather than write to it. what starts the message
 * ("store export", "emit"). */
sj_status sj__check_replaceable(sj_ctx *ctx, const char *what, const char *path);

#endif

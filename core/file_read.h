/* Reading a whole input file (a model, a tensor .pb) into memory, with the
 * checks and messages every reader wants. Private to the library. */
#ifndef SJ_FILE_READ_H
#define SJ_FILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "shapejit/common.h"

/* Files are read whole; past this a file is surely not a model or tensor
 * we can hold twice in memory. */
#define SJ_READ_FILE_MAX_BYTES ((int64_t)4 << 30)

/* Reads the regular file at path into *bytes (sj_alloc'ed, with a '\0'
 * after the last byte so text can be parsed in place). On failure *bytes
 * is NULL and the message starts with the path. */
sj_status sj_read_file(sj_ctx *ctx, const char *path, char **bytes, size_t *len);

#endif

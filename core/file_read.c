#include "file_read.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core_impl.h"

sj_status sj_read_file(sj_ctx *ctx, const char *path, char **bytes, size_t *len) {
    *bytes = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sj_fail(ctx, SJ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    sj_status st = SJ_OK;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = sj_fail(ctx, SJ_E_IO, "%s: not a regular file", path);
    } else if (sb.st_size > SJ_READ_FILE_MAX_BYTES) {
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

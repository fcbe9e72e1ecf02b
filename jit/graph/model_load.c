/* sj_model_load: reads a model file and hands its bytes to the loader its
 * extension names. A new format is one row in `loaders`. */
#include "graph_impl.h"
#include "shapejit/model.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Model files are read whole; past this a file is surely not a model text
 * or protobuf we can hold twice in memory. */
#define SJ_MODEL_MAX_BYTES ((int64_t)4 << 30)

typedef sj_status (*model_loader_fn)(sj_ctx *ctx, const char *path, const char *bytes, size_t len,
                                     const sj_model_options *o, sj_graph **out);

static sj_status load_sjg(sj_ctx *ctx, const char *path, const char *bytes, size_t len,
                          const sj_model_options *o, sj_graph **out) {
    (void)o;
    /* .npy weights are found next to the graph file. */
    const char *slash = strrchr(path, '/');
    char *dir = NULL;
    if (slash) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        if (!(dir = sj_alloc(ctx, n + 1))) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", path);
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    sj_status st = sj_sjg_parse(ctx, bytes, len, path, dir, out);
    sj_free(ctx, dir);
    return st;
}

static sj_status load_onnx(sj_ctx *ctx, const char *path, const char *bytes, size_t len,
                           const sj_model_options *o, sj_graph **out) {
    return sj_onnx_load_mem(ctx, bytes, len, path, o, out);
}

static const struct {
    const char *ext;
    model_loader_fn load;
} loaders[] = {
    {".sjg", load_sjg},
    {".onnx", load_onnx},
};

void sj_model_options_init(sj_model_options *o) {
    memset(o, 0, sizeof *o);
    o->dynamic_axis = -1;
}

static sj_status read_file(sj_ctx *ctx, const char *path, char **bytes, size_t *len) {
    *bytes = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sj_fail(ctx, SJ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    sj_status st = SJ_OK;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = sj_fail(ctx, SJ_E_IO, "%s: not a regular file", path);
    } else if (sb.st_size > SJ_MODEL_MAX_BYTES) {
        st = sj_fail(ctx, SJ_E_IO, "%s: %lld bytes is too large for a model file", path,
                     (long long)sb.st_size);
    } else if (!(*bytes = sj_alloc(ctx, (size_t)sb.st_size + 1))) {
        st = sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory reading %lld bytes", path,
                     (long long)sb.st_size);
    } else if (fread(*bytes, 1, (size_t)sb.st_size, f) != (size_t)sb.st_size) {
        st = sj_fail(ctx, SJ_E_IO, "%s: read failed", path);
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

sj_status sj_model_load(sj_ctx *ctx, const char *path, const sj_model_options *o, sj_graph **out) {
    if (!ctx || !path || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "sj_model_load: NULL argument");
    *out = NULL;
    sj_model_options defaults;
    if (!o) {
        sj_model_options_init(&defaults);
        o = &defaults;
    }
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && slash && dot < slash) dot = NULL;
    size_t n_loaders = sizeof loaders / sizeof loaders[0];
    for (size_t i = 0; dot && i < n_loaders; i++) {
        if (strcasecmp(dot, loaders[i].ext) != 0) continue;
        char *bytes;
        size_t len;
        SJ_TRY(read_file(ctx, path, &bytes, &len));
        sj_status st = loaders[i].load(ctx, path, bytes, len, o, out);
        sj_free(ctx, bytes);
        return st;
    }
    char known[128] = "";
    for (size_t i = 0; i < n_loaders; i++) {
        if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, loaders[i].ext, sizeof known - strlen(known) - 1);
    }
    return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: unknown model format %s%s%s (known extensions: %s)",
                   path, dot ? "'" : "(no extension)", dot ? dot : "", dot ? "'" : "", known);
}

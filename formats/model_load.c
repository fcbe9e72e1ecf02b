/* sj_model_load: reads a model file and hands its bytes to the loader its
 * extension names. A new format is one row in `loaders`. */
#include "ir/graph_impl.h"
#include "shapejit/model.h"
#include "core/file_read.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef sj_status (*model_loader_fn)(sj_ctx *ctx, const char *path, const char *bytes, size_t len,
                                     const sj_model_options *o, sj_graph **out);

static sj_status load_sjg(sj_ctx *ctx, const char *path, const char *bytes, size_t len,
                          const sj_model_options *o, sj_graph **out) {
    /* A .sjg graph names its symbolic dim and sizes itself: the ONNX dim
     * options would be ignored, and a caller who gave one believes it took
     * effect. The flag and keyword are named (CLI, Python), as the message
     * is all a user of either sees. */
    if (o->n_fixed_dims > 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "%s: --dim / dims= ('%s') is for ONNX models; a .sjg graph declares its dims itself",
                       path, o->fixed_dims && o->fixed_dims[0].name ? o->fixed_dims[0].name : "?");
    if (o->dynamic_name)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "%s: --dynamic / dynamic= ('%s') is for ONNX models; a .sjg graph declares its "
                       "symbolic dim itself",
                       path, o->dynamic_name);
    if (o->dynamic_input)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "%s: --dynamic-axis / dynamic=(input, axis) ('%s') is for ONNX models; a .sjg "
                       "graph declares its symbolic dim itself",
                       path, o->dynamic_input);
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
    o->size = sizeof *o;
    o->dynamic_axis = -1;
}

sj_status sj_model_load(sj_ctx *ctx, const char *path, const sj_model_options *o, sj_graph **out) {
    if (!ctx || !path || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "sj_model_load: NULL argument");
    *out = NULL;
    sj_model_options c; /* the caller's options as this library reads them */
    sj_model_options_init(&c);
    if (o)
        SJ_TRY(sj__config_read(ctx, "sj_model_options", o, SJ_CONFIG_SIZE(sj_model_options, copy_external_data),
                               sizeof c, &c));
    o = &c;
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && slash && dot < slash) dot = NULL;
    size_t n_loaders = sizeof loaders / sizeof loaders[0];
    for (size_t i = 0; dot && i < n_loaders; i++) {
        if (strcasecmp(dot, loaders[i].ext) != 0) continue;
        char *bytes;
        size_t len;
        SJ_TRY(sj__read_file(ctx, path, &bytes, &len));
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

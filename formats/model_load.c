/* sj_model_load: hands a model file to the loader its extension names. A
 * new format is one row in `loaders`. */
#include "ir/graph_impl.h"
#include "shapejit/model.h"
#include "core/file_identity.h"
#include "core/hash.h"
#include "core/file_read.h"
#include "formats/onnx/onnx_file.h"

#include <limits.h>
#include <llvm-c/blake3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef sj_status (*model_loader_fn)(sj_ctx *ctx, const char *path, const sj_model_options *o,
                                     sj_graph **out);

static sj_status load_sjg(sj_ctx *ctx, const char *path, const sj_model_options *o, sj_graph **out) {
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
    char *bytes;
    size_t len;
    sj_status st = sj__read_file(ctx, path, &bytes, &len);
    if (st == SJ_OK) st = sj_sjg_parse(ctx, bytes, len, path, dir, out);
    sj_free(ctx, bytes);
    sj_free(ctx, dir);
    return st;
}

/* keyed: whether the format's graph holds only bytes of the model file
 * and the files its weight maps name, so that note_source can key it. A
 * .sjg graph reads .npy files beside it that nothing tracks. */
static const struct {
    const char *ext;
    model_loader_fn load;
    bool keyed;
} loaders[] = {
    {".sjg", load_sjg, false},
    {".onnx", sj__onnx_load_file, true},
};

static void put_u64(llvm_blake3_hasher *h, uint64_t v) {
    uint8_t b[8];
    sj__put_le(b, v, 8);
    llvm_blake3_hasher_update(h, b, sizeof b);
}

static void put_str(llvm_blake3_hasher *h, const char *s) {
    put_u64(h, s ? strlen(s) : UINT64_MAX);
    if (s) llvm_blake3_hasher_update(h, s, strlen(s));
}

static void put_identity(llvm_blake3_hasher *h, const sj_file_identity *id) {
    uint8_t b[SJ_FILE_IDENTITY_BYTES];
    sj__file_identity_bytes(id, b);
    llvm_blake3_hasher_update(h, b, sizeof b);
}

/* Gives g its source key (ir/graph_impl.h) when every byte it was made of
 * came from files the key names, each settled and unchanged across the
 * read (before: path's identity taken before it was read): the model file,
 * the external-data files its params are mapped from (a tensor read into
 * memory instead is from a file the key would not name), with the options
 * that shaped the import and this library's own file (another build may
 * import the same file into other params). Else g gets none, and is
 * hashed whole, as always. */
static void note_source(sj_ctx *ctx, const char *path, const sj_file_identity *before,
                        const sj_model_options *o, sj_graph *g) {
    sj_file_identity after, lib;
    if (g->external_copied > 0 || !sj__file_identity_settled(before) ||
        !sj__file_identity_get(path, &after) || !sj__file_identity_equal(before, &after) ||
        !sj__library_identity(&lib))
        return;
    for (int i = 0; i < g->n_maps; i++) {
        const sj_file_identity *id = sj__weight_map_identity(g->maps[i]);
        if (id && !sj__file_identity_settled(id)) return;
    }
    char *real = realpath(path, NULL);
    if (!real) return;
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    put_str(&h, "sj-model-source-1");
    put_identity(&h, &lib);
    put_str(&h, real);
    put_identity(&h, before);
    put_str(&h, o->dynamic_name);
    put_str(&h, o->dynamic_input);
    put_u64(&h, (uint64_t)(int64_t)o->dynamic_axis);
    put_u64(&h, (uint64_t)o->n_fixed_dims);
    for (int i = 0; i < o->n_fixed_dims; i++) {
        put_str(&h, o->fixed_dims[i].name);
        put_u64(&h, (uint64_t)o->fixed_dims[i].value);
    }
    put_u64(&h, o->copy_external_data);
    for (int i = 0; i < g->n_maps; i++) {
        const sj_file_identity *id = sj__weight_map_identity(g->maps[i]);
        if (!id) continue;
        put_str(&h, sj__weight_map_path(g->maps[i]));
        put_identity(&h, id);
    }
    llvm_blake3_hasher_finalize(&h, g->source_key, sizeof g->source_key);
    g->source_path = sj_strdup(ctx, real); /* NULL (no source) when out of memory */
    free(real);
}

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
    if (c.load_threads < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: sj_model_options.load_threads %d is negative", path,
                       c.load_threads);
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && slash && dot < slash) dot = NULL;
    size_t n_loaders = sizeof loaders / sizeof loaders[0];
    for (size_t i = 0; dot && i < n_loaders; i++) {
        if (strcasecmp(dot, loaders[i].ext) != 0) continue;
        sj_file_identity before;
        bool known = loaders[i].keyed && sj__file_identity_get(path, &before);
        sj_status st = loaders[i].load(ctx, path, o, out);
        if (st == SJ_OK && known) note_source(ctx, path, &before, o, *out);
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

/* shapejit/model.h — load a graph from a file: .sjg text or .onnx; print .sjg.
 *
 *   sj_model_options o;
 *   sj_model_options_init(&o);
 *   sj_graph *g;
 *   if (sj_model_load(ctx, "ffn.sjg", &o, &g) != SJ_OK)
 *       fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));  // "ffn.sjg:3:14: expected ..."
 *
 * An ONNX export whose inputs name two dims (input_ids [batch, seq]) loads
 * with one of them fixed:
 *
 *   sj_dim_value fixed[] = {{"batch", 1}};
 *   o.dynamic_name = "seq";
 *   o.fixed_dims = fixed;
 *   o.n_fixed_dims = 1;
 *
 * The .sjg grammar is described in docs/sjg.md. Errors name file:line:col
 * and what was expected. Weights are inline or come from an .npy file
 * resolved relative to the graph file.
 */
#ifndef SHAPEJIT_MODEL_H
#define SHAPEJIT_MODEL_H

#include "shapejit/graph.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A named dim fixed to a constant, e.g. {"batch", 1}, or tied to the
 * symbolic dim: SJ_DIM_AFFINE(k, c) (graph.h) makes it k * N + c, as
 * {"total", SJ_DIM_AFFINE(1, 1)} says a decode step's mask covers the N
 * cached tokens and this one. */
typedef struct sj_dim_value {
    const char *name;
    int64_t value; /* >= 1, or SJ_DIM_AFFINE(k, c) */
} sj_dim_value;

/* Set fields after sj_model_options_init; pointers are borrowed for the
 * duration of the load. */
typedef struct sj_model_options {
    /* Set by sj_model_options_init to the size of this struct the caller is built with;
     * leave it (see "Config structs" in shapejit/common.h). */
    size_t size;
    /* ONNX: which dim_param is the symbolic dim when there are several. */
    const char *dynamic_name;
    /* ONNX: declare input `dynamic_input`'s axis `dynamic_axis` symbolic
     * (for models with no dim_param). NULL = not used. */
    const char *dynamic_input;
    int dynamic_axis;
    /* ONNX: dim_params that become constants wherever they appear (inputs,
     * declared output and value shapes), so that a model whose inputs name
     * several dims (batch, seq) loads with the one remaining (or
     * dynamic_name) as the symbolic dim. n_fixed_dims entries of fixed_dims;
     * each name must be a dim_param of the model's inputs, at most once,
     * and not dynamic_name. */
    const sj_dim_value *fixed_dims;
    int n_fixed_dims;
    /* ONNX: read external-data weights into memory. By default a float32
     * tensor at an offset aligned to 4 bytes is mapped from its file
     * read-only instead (no copy; the pages are the file's, shared with
     * other processes); sj_graph_weights_get says which happened. */
    bool copy_external_data;
    /* ONNX: threads reading an .onnx file's weights in sj_model_load (a
     * large model loads that much sooner: most of the time is the kernel
     * zeroing fresh pages, on the reader's CPU). 0 = one per online CPU,
     * at most 8; 1 = the calling thread alone. */
    int load_threads;
} sj_model_options;

SJ_API void sj_model_options_init(sj_model_options *o);

/* Picks the format from the extension (.sjg, .onnx). */
SJ_API sj_status sj_model_load(sj_ctx *ctx, const char *path, const sj_model_options *o, sj_graph **out);

/* Parses .sjg text. `filename` is used in messages and `base_dir` to find
 * .npy weights (NULL = current directory). */
SJ_API sj_status sj_sjg_parse(sj_ctx *ctx, const char *text, size_t len, const char *filename,
                              const char *base_dir, sj_graph **out);

/* Prints g as .sjg text with every weight inline; the result parses to an
 * equal graph (equal hash). *out is allocated with sj_alloc; free with sj_free. */
SJ_API sj_status sj_sjg_print(const sj_graph *g, char **out, size_t *out_len);

/* ONNX from memory (the loader behind sj_model_load for .onnx). */
SJ_API sj_status sj_onnx_load_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *filename,
                                  const sj_model_options *o, sj_graph **out);

#ifdef __cplusplus
}
#endif
#endif

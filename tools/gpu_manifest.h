/* The GPU check's pack (scripts/gpu-check.sh): what tools/gpu_pack.c (a full
 * build, on a CPU build machine) writes and tools/gpu_check.c (the
 * runtime-only build, on the GPU machine) reads. Header-only, shared by the
 * two programs.
 *
 * PACK/manifest.tsv, one line per model, tab-separated:
 *   KIND NAME MODEL DYNAMIC FIXED LADDER ROWS
 * KIND "model" (checked against the interpreter's outputs under
 * PACK/cases/NAME/ROWS/: in0.npy ... and want0.npy ...) or "matmul" (timed
 * against torch, no expected outputs); MODEL relative to PACK; DYNAMIC the
 * ONNX dim_param made symbolic and FIXED one NAME=VALUE fixed dim, "-" for
 * none; LADDER a ladder spec; ROWS the request sizes, comma-separated, one
 * per bucket. PACK/store.db holds every bucket for both GPU emitters (sm_90);
 * PACK/onnx/ the ONNX node tests that pass on the host, their graphs in the
 * store at the extents conformance_extent() gives. */
#ifndef SJ_TOOLS_GPU_MANIFEST_H
#define SJ_TOOLS_GPU_MANIFEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/interp.h"
#include "tools/conformance/conformance.h"
#include "shapejit/ext/runtime.h"

#define GPU_PACK_ARCH "sm_90"
#define GPU_MAX_ROWS 8

typedef struct gpu_entry {
    char kind[16], name[128], model[512], dynamic[64], fixed[96], ladder[128];
    int64_t rows[GPU_MAX_ROWS];
    int n_rows;
} gpu_entry;

/* Parses one manifest line; 0 on success. */
static inline int gpu_entry_parse(const char *line, gpu_entry *e) {
    memset(e, 0, sizeof *e);
    char rows[256];
    if (sscanf(line, "%15[^\t]\t%127[^\t]\t%511[^\t]\t%63[^\t]\t%95[^\t]\t%127[^\t]\t%255[^\t\n]",
               e->kind, e->name, e->model, e->dynamic, e->fixed, e->ladder, rows) != 7)
        return -1;
    for (char *p = rows; *p && e->n_rows < GPU_MAX_ROWS;) {
        char *end;
        e->rows[e->n_rows++] = strtoll(p, &end, 10);
        if (end == p) return -1;
        p = *end == ',' ? end + 1 : end;
    }
    return e->n_rows ? 0 : -1;
}

/* Loads the entry's model (path relative to dir). */
static inline sj_status gpu_entry_load(sj_ctx *ctx, const char *dir, const gpu_entry *e,
                                       sj_graph **g) {
    char path[1024], fixed_name[96];
    snprintf(path, sizeof path, "%s/%s", dir, e->model);
    sj_model_options o;
    sj_model_options_init(&o);
    sj_dim_value fixed = {0};
    if (strcmp(e->dynamic, "-") != 0) o.dynamic_name = e->dynamic;
    const char *eq = strchr(e->fixed, '=');
    if (strcmp(e->fixed, "-") != 0 && eq) {
        snprintf(fixed_name, sizeof fixed_name, "%.*s", (int)(eq - e->fixed), e->fixed);
        fixed.name = fixed_name;
        fixed.value = strtoll(eq + 1, NULL, 10);
        o.fixed_dims = &fixed;
        o.n_fixed_dims = 1;
    }
    return sj_model_load(ctx, path, &o, g);
}

/* The bucket a conformance graph is compiled at: as the host backend of the
 * conformance runner does (the power of two above the active extent, so
 * padding is exercised), the extent itself for a graph without a symbolic dim. */
static inline int64_t gpu_conformance_extent(const sj_graph *g, int64_t extent) {
    if (!sj_graph_symbol(g)) return extent > 0 ? extent : 1;
    int64_t b = 1;
    while (b <= extent && b < SJ_MAX_EXTENT) b *= 2;
    return b > extent ? b : extent;
}

/* Seeded uniform values in [-1, 1) for input i of g at `rows`. */
static inline sj_status gpu_random_input(sj_ctx *ctx, const sj_graph *g, int i, int64_t rows,
                                         uint64_t seed, sj_tensor *t) {
    sj_value_desc d;
    sj_status st = sj_graph_input_desc(g, i, &d);
    if (st != SJ_OK) return st;
    sj_shape s = sj_shape_at(&d.shape, rows);
    st = sj_tensor_alloc(ctx, s.rank, s.dims, t);
    if (st != SJ_OK) return st;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i + 1;
    for (int64_t k = 0; k < sj_tensor_numel(t); k++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        t->data[k] = (float)((double)((x * 0x2545f4914f6cdd1dull) >> 40) / 8388608.0 - 1.0);
    }
    return SJ_OK;
}

#endif

/* Two engines on one model, timed side by side in one process: the rig
 * bench_threads (1 thread against 2) and bench_buckets (tight buckets
 * against one large bucket) share.
 *
 *   sj_engine_config cfg[2];                 // sj_engine_config_init, then what differs
 *   bench_pair p;
 *   bench_sides_measure(ctx, "ffn.sjg", cfg, 64, &p);  // p.us[0], p.us[1], p.ratio
 *                                            // (an .onnx: batch 1, seq dynamic)
 *
 * Each round runs one batch of about 1 ms per engine, the order alternating
 * every round, so load from other processes on a shared machine falls on
 * both alike; the figures are the median per-call wall time over the rounds
 * and the median of the rounds' own ratios (the two batches of a round ran
 * within about 2 ms of each other). Inputs are zeros of each input's dtype,
 * plus a ramp through [-1, 1) for float inputs (a zero matmul costs the
 * same, but keep the numbers finite and ordinary). Header-only, as
 * bench_timing.h, so that each benchmark stays one .c file. */
#ifndef SJ_BENCH_SIDES_H
#define SJ_BENCH_SIDES_H

#include <stdio.h>
#include <string.h>

#include "bench/bench_timing.h"
#include "core/core_impl.h"
#include "shapejit/engine.h"

#define BENCH_SIDE_MAX_IO 16
#define BENCH_SIDE_BATCH_NS 1e6
#define BENCH_SIDE_ROUNDS 31

typedef struct bench_side {
    sj_engine *e;
    sj_named_tensor in[BENCH_SIDE_MAX_IO];
    int n_in, n_out;
} bench_side;

typedef struct bench_pair {
    double us[2]; /* median wall time per run, each side */
    double ratio; /* median over the rounds of side 1 / side 0 */
} bench_pair;

static inline bool bench_is_onnx(const char *path) {
    size_t l = strlen(path);
    return l > 5 && strcmp(path + l - 5, ".onnx") == 0;
}

/* Opens path with cfg (an exported .onnx as batch 1, seq dynamic; one whose
 * batch is already a number, as bench/bert_encoder_gen.py writes, with seq
 * dynamic alone). */
static inline sj_status bench_side_open(sj_ctx *ctx, const char *path, const sj_engine_config *cfg,
                                        bench_side *s) {
    sj_engine_config ec = *cfg;
    sj_dim_value batch1[] = {{"batch", 1}};
    if (bench_is_onnx(path)) {
        ec.model.dynamic_name = "seq";
        ec.model.fixed_dims = batch1;
        ec.model.n_fixed_dims = 1;
    }
    memset(s, 0, sizeof *s);
    sj_status st = sj_engine_open(ctx, path, &ec, &s->e);
    if (st == SJ_OK || !bench_is_onnx(path)) return st;
    ec.model.n_fixed_dims = 0;
    sj_ctx_clear_error(ctx);
    return sj_engine_open(ctx, path, &ec, &s->e);
}

static inline void bench_side_free_inputs(sj_ctx *ctx, bench_side *s) {
    for (int i = 0; i < s->n_in; i++) sj_tensor_free(ctx, &s->in[i].tensor);
    s->n_in = 0;
}

static inline void bench_side_close(sj_ctx *ctx, bench_side *s) {
    bench_side_free_inputs(ctx, s);
    sj_engine_close(s->e);
    s->e = NULL;
}

/* Inputs of s's model at n rows. */
static inline sj_status bench_side_inputs(sj_ctx *ctx, bench_side *s, int64_t n) {
    bench_side_free_inputs(ctx, s);
    int count = sj_engine_num_inputs(s->e);
    if (count > BENCH_SIDE_MAX_IO || sj_engine_num_outputs(s->e) > BENCH_SIDE_MAX_IO)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "bench: more than %d inputs or outputs",
                       BENCH_SIDE_MAX_IO);
    s->n_out = sj_engine_num_outputs(s->e);
    for (int i = 0; i < count; i++) {
        sj_value_desc d;
        sj_engine_input(s->e, i, &d);
        int64_t dims[SJ_MAX_RANK];
        for (int k = 0; k < d.shape.rank; k++)
            dims[k] = d.shape.dims[k] == SJ_DIM_SYM ? n : d.shape.dims[k];
        s->in[i].name = d.name;
        SJ_TRY(sj_tensor_alloc_typed(ctx, d.dtype, d.shape.rank, dims, &s->in[i].tensor));
        s->n_in++;
        int64_t count_el = sj_tensor_numel(&s->in[i].tensor);
        if (d.dtype == SJ_F32)
            for (int64_t j = 0; j < count_el; j++)
                s->in[i].tensor.data[j] = (float)((j * 7919) % 2048) / 1024.0f - 1.0f;
        else
            memset(s->in[i].tensor.bytes, 0, (size_t)count_el * sj_dtype_size(d.dtype));
    }
    return SJ_OK;
}

static inline sj_status bench_side_run(sj_ctx *ctx, bench_side *s) {
    sj_named_tensor out[BENCH_SIDE_MAX_IO];
    SJ_TRY(sj_engine_run(s->e, s->in, s->n_in, out, s->n_out, NULL));
    for (int k = 0; k < s->n_out; k++) sj_tensor_free(ctx, &out[k].tensor);
    return SJ_OK;
}

/* Mean wall ns per call over `calls` calls; negative when a run failed. */
static inline double bench_side_batch(sj_ctx *ctx, bench_side *s, int calls) {
    double t0 = bench_wall_ns();
    for (int i = 0; i < calls; i++)
        if (bench_side_run(ctx, s) != SJ_OK) return -1;
    return (bench_wall_ns() - t0) / calls;
}

/* Both sides at n rows: inputs made, a first run each (which compiles or
 * loads the bucket), then the interleaved rounds. */
static inline sj_status bench_sides_compare(sj_ctx *ctx, bench_side s[2], int64_t n, bench_pair *p) {
    for (int t = 0; t < 2; t++) SJ_TRY(bench_side_inputs(ctx, &s[t], n));
    for (int t = 0; t < 2; t++) SJ_TRY(bench_side_run(ctx, &s[t]));
    double one = bench_side_batch(ctx, &s[0], 20);
    if (one < 0) return SJ_E_INTERNAL;
    int calls = one > BENCH_SIDE_BATCH_NS ? 1 : (int)(BENCH_SIDE_BATCH_NS / one);
    for (int t = 0; t < 2; t++) /* warm both before the clock counts */
        if (bench_side_batch(ctx, &s[t], calls) < 0) return SJ_E_INTERNAL;
    double v[2][BENCH_SIDE_ROUNDS], ratio[BENCH_SIDE_ROUNDS];
    for (int b = 0; b < BENCH_SIDE_ROUNDS; b++) {
        for (int k = 0; k < 2; k++) {
            int t = (b + k) % 2;
            v[t][b] = bench_side_batch(ctx, &s[t], calls);
            if (v[t][b] < 0) return SJ_E_INTERNAL;
        }
        ratio[b] = v[1][b] / v[0][b];
    }
    p->us[0] = bench_median(v[0], BENCH_SIDE_ROUNDS) / 1e3;
    p->us[1] = bench_median(v[1], BENCH_SIDE_ROUNDS) / 1e3;
    p->ratio = bench_median(ratio, BENCH_SIDE_ROUNDS);
    return SJ_OK;
}

/* Opens path with cfg[0] and with cfg[1], compares them at n rows, closes both. */
static inline sj_status bench_sides_measure(sj_ctx *ctx, const char *path, const sj_engine_config cfg[2],
                                            int64_t n, bench_pair *p) {
    bench_side s[2] = {{0}};
    sj_status st = SJ_OK;
    for (int t = 0; t < 2 && st == SJ_OK; t++) st = bench_side_open(ctx, path, &cfg[t], &s[t]);
    if (st == SJ_OK) st = bench_sides_compare(ctx, s, n, p);
    for (int t = 0; t < 2; t++)
        if (s[t].e) bench_side_close(ctx, &s[t]);
    return st;
}

/* The file's name; for an exported model.onnx, its folder's name. */
static inline void bench_model_label(const char *path, char *out, size_t cap) {
    const char *end = path + strlen(path), *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (bench_is_onnx(path) && strcmp(name, "model.onnx") == 0 && name > path + 1) {
        end = name - 1;
        for (name = end; name > path && name[-1] != '/'; name--) {}
    }
    snprintf(out, cap, "%.*s", (int)(end - name), name);
}

#endif

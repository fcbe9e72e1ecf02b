/* Graphs the GPU tests and benchmarks compile: named model blocks covering
 * every kernel kind (elementwise chains, attention with a contraction over
 * the symbolic dim, reductions and row ops over it, an FFN block, batched
 * matmul through views, a batch merged into a multiple of the symbolic
 * dim, a KV cache grown by one row), plus seeded random graphs in the style of the host
 * backend's differential generator. Header-only, static; included by
 * test_*.c and bench/ programs only. */
#ifndef SJ_TESTS_GPU_GRAPHS_H
#define SJ_TESTS_GPU_GRAPHS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/graph.h"

#define GG_S SJ_DIM_SYM

typedef struct gg {
    sj_graph *g;
    uint64_t seed;
    sj_status st; /* first builder failure; later calls are skipped */
} gg;

static inline uint64_t gg_rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static inline float gg_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((gg_rng(s) >> 11) * (1.0 / 9007199254740992.0));
}

static inline sj_value gg_input(gg *b, const char *name, int rank, const int64_t *dims) {
    sj_value v = SJ_NO_VALUE;
    if (b->st == SJ_OK) b->st = sj_graph_input(b->g, name, rank, dims, &v);
    return v;
}

static inline sj_value gg_param(gg *b, const char *name, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    float *data = malloc((size_t)n * sizeof *data);
    for (int64_t i = 0; i < n; i++) data[i] = gg_uniform(&b->seed, -0.5f, 0.5f);
    sj_value v = SJ_NO_VALUE;
    if (b->st == SJ_OK) b->st = sj_graph_param(b->g, name, rank, dims, data, &v);
    free(data);
    return v;
}

#define GG(b, call)                                                                                \
    do {                                                                                           \
        if ((b)->st == SJ_OK) (b)->st = (call);                                                    \
    } while (0)

static inline void gg_elementwise(gg *b) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 8}), p = gg_param(b, "p", 1, (int64_t[]){8});
    sj_value col = gg_input(b, "col", 2, (int64_t[]){GG_S, 1}), a, c, y, z;
    GG(b, sj_graph_binary(b->g, SJ_OP_MUL, x, p, &a));
    GG(b, sj_graph_unary(b->g, SJ_OP_GELU, a, &c));
    GG(b, sj_graph_binary(b->g, SJ_OP_SUB, c, col, &c));
    GG(b, sj_graph_unary(b->g, SJ_OP_TANH, c, &y));
    GG(b, sj_graph_leaky_relu(b->g, y, 0.1f, &z));
    GG(b, sj_graph_binary(b->g, SJ_OP_MAX, z, x, &z));
    GG(b, sj_graph_output(b->g, z, "y"));
}

static inline void gg_attention(gg *b) {
    sj_value q = gg_input(b, "q", 2, (int64_t[]){GG_S, 16}), k = gg_input(b, "k", 2, (int64_t[]){GG_S, 16});
    sj_value v = gg_input(b, "v", 2, (int64_t[]){GG_S, 16}), sc = gg_param(b, "s", 1, (int64_t[]){1});
    sj_value kt, s, s2, p, o;
    GG(b, sj_graph_transpose(b->g, k, (int[]){1, 0}, &kt));
    GG(b, sj_graph_matmul(b->g, q, kt, &s));
    GG(b, sj_graph_binary(b->g, SJ_OP_MUL, s, sc, &s2));
    GG(b, sj_graph_softmax(b->g, SJ_OP_SOFTMAX, s2, -1, &p));
    GG(b, sj_graph_matmul(b->g, p, v, &o));
    GG(b, sj_graph_output(b->g, o, "out"));
    GG(b, sj_graph_output(b->g, p, "probs"));
}

static inline void gg_reductions(gg *b) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 8}), r1, r2, r3, r4, e;
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_SUM, x, 1, (int[]){0}, false, &r1));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_MEAN, x, 1, (int[]){0}, true, &r2));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_MAX, x, 0, NULL, false, &r3));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_MEAN, x, 1, (int[]){1}, false, &r4));
    GG(b, sj_graph_unary(b->g, SJ_OP_EXP, r2, &e));
    GG(b, sj_graph_output(b->g, r1, "sum0"));
    GG(b, sj_graph_output(b->g, e, "expmean0"));
    GG(b, sj_graph_output(b->g, r3, "max"));
    GG(b, sj_graph_output(b->g, r4, "mean1"));
}

static inline void gg_row_ops(gg *b) {
    sj_value x = gg_input(b, "x", 3, (int64_t[]){2, GG_S, 4}), a, c, d, l;
    GG(b, sj_graph_softmax(b->g, SJ_OP_SOFTMAX, x, 1, &a));
    GG(b, sj_graph_softmax(b->g, SJ_OP_LOG_SOFTMAX, x, 1, &l));
    GG(b, sj_graph_layernorm(b->g, x, SJ_NO_VALUE, SJ_NO_VALUE, 1, 1e-5f, &c));
    GG(b, sj_graph_unary(b->g, SJ_OP_RELU, c, &d));
    GG(b, sj_graph_output(b->g, a, "softmax"));
    GG(b, sj_graph_output(b->g, l, "logsoftmax"));
    GG(b, sj_graph_output(b->g, d, "ln"));
}

/* The example FFN block: layernorm, x @ w1 + b1, gelu, gemm back, residual. */
static inline void gg_ffn_dims(gg *b, int64_t d, int64_t h) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, d});
    sj_value g = gg_param(b, "g", 1, (int64_t[]){d}), bb = gg_param(b, "b", 1, (int64_t[]){d});
    sj_value w1 = gg_param(b, "w1", 2, (int64_t[]){d, h}), b1 = gg_param(b, "b1", 1, (int64_t[]){h});
    sj_value w2 = gg_param(b, "w2", 2, (int64_t[]){d, h}), b2 = gg_param(b, "b2", 1, (int64_t[]){d});
    sj_value ln, hh, h1, act, o, y;
    GG(b, sj_graph_layernorm(b->g, x, g, bb, 1, 1e-5f, &ln));
    GG(b, sj_graph_matmul(b->g, ln, w1, &hh));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, hh, b1, &h1));
    GG(b, sj_graph_unary(b->g, SJ_OP_GELU, h1, &act));
    GG(b, sj_graph_gemm(b->g, act, w2, b2, 0.5f, 2.0f, false, true, &o));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, o, x, &y));
    GG(b, sj_graph_output(b->g, y, "y"));
}
static inline void gg_ffn(gg *b) { gg_ffn_dims(b, 32, 64); }

static inline void gg_batched_views(gg *b) {
    sj_value x = gg_input(b, "x", 3, (int64_t[]){2, GG_S, 8}), w = gg_param(b, "w", 2, (int64_t[]){8, 4});
    sj_value vec = gg_param(b, "vec", 1, (int64_t[]){8}), m, mv, r, t, t2;
    GG(b, sj_graph_matmul(b->g, x, w, &m));
    GG(b, sj_graph_matmul(b->g, x, vec, &mv));
    GG(b, sj_graph_reshape(b->g, m, 4, (int64_t[]){2, GG_S, 2, 2}, &r));
    GG(b, sj_graph_transpose(b->g, r, (int[]){1, 3, 0, 2}, &t));
    GG(b, sj_graph_unary(b->g, SJ_OP_NEG, t, &t2));
    GG(b, sj_graph_output(b->g, mv, "mv"));
    GG(b, sj_graph_output(b->g, t2, "t2"));
    GG(b, sj_graph_output(b->g, r, "r"));
}

/* A dynamic batch merged with the dims inside it ([N, 4, 8] as [4N, 8]):
 * rows, a softmax over the 4N axis and a sum over it, all bounded by 4n. */
static inline void gg_multiples(gg *b) {
    sj_value x = gg_input(b, "x", 3, (int64_t[]){GG_S, 4, 8}), w = gg_param(b, "w", 2, (int64_t[]){8, 8});
    sj_value m, mm, t, sm, sum, back;
    GG(b, sj_graph_reshape(b->g, x, 2, (int64_t[]){SJ_DIM_SYM_TIMES(4), 8}, &m));
    GG(b, sj_graph_matmul(b->g, m, w, &mm));
    GG(b, sj_graph_transpose(b->g, mm, (int[]){1, 0}, &t));
    GG(b, sj_graph_softmax(b->g, SJ_OP_SOFTMAX, t, -1, &sm));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_SUM, mm, 1, (int[]){0}, false, &sum));
    GG(b, sj_graph_reshape(b->g, mm, 2, (int64_t[]){GG_S, 32}, &back));
    GG(b, sj_graph_output(b->g, sm, "sm"));
    GG(b, sj_graph_output(b->g, sum, "sum"));
    GG(b, sj_graph_output(b->g, back, "back"));
}

/* A KV-cache step: N past rows grown by one ([N+1, 8], the new row placed
 * at the active extent), attended over; a softmax and a sum over N + 1;
 * the past joined after the grown cache ([2N+1, 8], a symbolic part at an
 * offset n + 1). */
static inline void gg_cache_step(gg *b) {
    sj_value past = gg_input(b, "past", 2, (int64_t[]){GG_S, 8}), x = gg_input(b, "x", 2, (int64_t[]){1, 8});
    sj_value w = gg_param(b, "w", 2, (int64_t[]){8, 8}), k, cache, ct, s, p, ctx, sum, twice;
    GG(b, sj_graph_matmul(b->g, x, w, &k));
    GG(b, sj_graph_concat(b->g, past, k, 0, &cache));
    GG(b, sj_graph_concat(b->g, cache, past, 0, &twice));
    GG(b, sj_graph_transpose(b->g, cache, (int[]){1, 0}, &ct));
    GG(b, sj_graph_matmul(b->g, x, ct, &s));
    GG(b, sj_graph_softmax(b->g, SJ_OP_SOFTMAX, s, -1, &p));
    GG(b, sj_graph_matmul(b->g, p, cache, &ctx));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_SUM, cache, 1, (int[]){0}, false, &sum));
    GG(b, sj_graph_output(b->g, cache, "cache"));
    GG(b, sj_graph_output(b->g, ctx, "ctx"));
    GG(b, sj_graph_output(b->g, sum, "sum"));
    GG(b, sj_graph_output(b->g, twice, "twice"));
}

/* Every unary and binary op, the domain-limited ones on positive values. */
static inline void gg_all_ops(gg *b) {
    static const sj_op un[] = {SJ_OP_NEG,  SJ_OP_ABS,   SJ_OP_EXP,   SJ_OP_TANH,  SJ_OP_SIGMOID,
                               SJ_OP_RELU, SJ_OP_GELU,  SJ_OP_SILU,  SJ_OP_ERF,   SJ_OP_SIN,
                               SJ_OP_COS,  SJ_OP_TAN,   SJ_OP_ATAN,  SJ_OP_SINH,  SJ_OP_COSH,
                               SJ_OP_ASINH, SJ_OP_FLOOR, SJ_OP_CEIL, SJ_OP_ROUND, SJ_OP_SIGN};
    static const sj_op pos_un[] = {SJ_OP_LOG,  SJ_OP_SQRT, SJ_OP_RSQRT, SJ_OP_RECIPROCAL,
                                   SJ_OP_ASIN, SJ_OP_ACOS, SJ_OP_ATANH};
    static const sj_op bin[] = {SJ_OP_ADD, SJ_OP_SUB, SJ_OP_MUL, SJ_OP_DIV,
                                SJ_OP_POW, SJ_OP_MAX, SJ_OP_MIN};
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 5}), y = gg_input(b, "y", 1, (int64_t[]){5});
    sj_value pos, acc = x, v;
    GG(b, sj_graph_unary(b->g, SJ_OP_SIGMOID, y, &pos));
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++) {
        GG(b, sj_graph_unary(b->g, un[i], x, &v));
        GG(b, sj_graph_binary(b->g, SJ_OP_ADD, acc, v, &acc));
    }
    for (size_t i = 0; i < sizeof pos_un / sizeof pos_un[0]; i++) {
        GG(b, sj_graph_unary(b->g, pos_un[i], pos, &v));
        GG(b, sj_graph_binary(b->g, SJ_OP_ADD, acc, v, &acc));
    }
    for (size_t i = 0; i < sizeof bin / sizeof bin[0]; i++) {
        GG(b, sj_graph_binary(b->g, bin[i], bin[i] == SJ_OP_POW ? pos : x, pos, &v));
        GG(b, sj_graph_binary(b->g, SJ_OP_ADD, acc, v, &acc));
    }
    GG(b, sj_graph_output(b->g, acc, "acc"));
}

/* NaN and infinities made inside the graph (log of a negative, 1 / +0)
 * reach the outputs through max, reductions and softmax as the interpreter
 * has them. */
static inline void gg_nan_inf(gg *b) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 4});
    sj_value zero, inf, e, ne, nan, a, r, shifted, sm, mn, s0, rl;
    GG(b, sj_graph_binary(b->g, SJ_OP_SUB, x, x, &zero));
    GG(b, sj_graph_unary(b->g, SJ_OP_RECIPROCAL, zero, &inf));
    GG(b, sj_graph_unary(b->g, SJ_OP_EXP, x, &e));
    GG(b, sj_graph_unary(b->g, SJ_OP_NEG, e, &ne));
    GG(b, sj_graph_unary(b->g, SJ_OP_LOG, ne, &nan));
    GG(b, sj_graph_binary(b->g, SJ_OP_MAX, x, nan, &a));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_MAX, a, 1, (int[]){1}, false, &r));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, x, inf, &shifted));
    GG(b, sj_graph_softmax(b->g, SJ_OP_SOFTMAX, shifted, 1, &sm));
    GG(b, sj_graph_binary(b->g, SJ_OP_MIN, inf, x, &mn));
    GG(b, sj_graph_reduce(b->g, SJ_OP_REDUCE_SUM, inf, 1, (int[]){0}, false, &s0));
    GG(b, sj_graph_unary(b->g, SJ_OP_RELU, nan, &rl));
    GG(b, sj_graph_output(b->g, r, "rowmax_nan"));
    GG(b, sj_graph_output(b->g, sm, "softmax_inf"));
    GG(b, sj_graph_output(b->g, mn, "min_inf"));
    GG(b, sj_graph_output(b->g, s0, "sum_inf"));
    GG(b, sj_graph_output(b->g, rl, "relu_nan"));
}

/* One fused kernel reading more buffers than any fixed table would hold. */
static inline void gg_wide(gg *b) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 3}), acc = x;
    for (int i = 0; i < 70 && b->st == SJ_OK; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        sj_value p = gg_param(b, name, 1, (int64_t[]){3});
        GG(b, sj_graph_binary(b->g, i % 3 ? SJ_OP_ADD : SJ_OP_MUL, acc, p, &acc));
    }
    GG(b, sj_graph_output(b->g, acc, "y"));
}

/* Layout ops as transformer exports use them: a strided slice, rows in
 * reverse and the last row (starts relative to the active extent), a
 * constant table sliced to n rows (position embeddings), rotate-half by
 * slices and concat, a broadcast by expand. */
static inline void gg_layout(gg *b) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 8}), col = gg_input(b, "col", 2, (int64_t[]){GG_S, 1});
    sj_value tab = gg_param(b, "tab", 2, (int64_t[]){128, 8});
    sj_value strided, rev, last, rows, lo, hi, nhi, rot, ex, g, sum, cat;
    GG(b, sj_graph_slice(b->g, x, (sj_slice_axis[]){{0, 0, 1, GG_S}, {1, 0, 2, 3}}, &strided));
    GG(b, sj_graph_slice(b->g, x, (sj_slice_axis[]){{-1, 1, -1, GG_S}, {0, 0, 1, 8}}, &rev));
    GG(b, sj_graph_slice(b->g, x, (sj_slice_axis[]){{-1, 1, 1, 1}, {7, 0, -1, 8}}, &last));
    GG(b, sj_graph_slice(b->g, tab, (sj_slice_axis[]){{0, 0, 1, GG_S}, {0, 0, 1, 8}}, &rows));
    GG(b, sj_graph_slice(b->g, x, (sj_slice_axis[]){{0, 0, 1, GG_S}, {0, 0, 1, 4}}, &lo));
    GG(b, sj_graph_slice(b->g, x, (sj_slice_axis[]){{0, 0, 1, GG_S}, {4, 0, 1, 4}}, &hi));
    GG(b, sj_graph_unary(b->g, SJ_OP_NEG, hi, &nhi));
    GG(b, sj_graph_concat(b->g, nhi, lo, -1, &rot));
    GG(b, sj_graph_expand(b->g, col, 2, (int64_t[]){GG_S, 8}, &ex));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, rot, rows, &sum));
    GG(b, sj_graph_binary(b->g, SJ_OP_MUL, sum, ex, &sum));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, sum, rev, &sum));
    GG(b, sj_graph_unary(b->g, SJ_OP_GELU, strided, &g));
    GG(b, sj_graph_concat(b->g, g, x, 1, &cat));
    /* q, k, v of a packed projection picked by constant gathers (views) */
    sj_value w3 = gg_param(b, "w3", 2, (int64_t[]){8, 24}), pk, r3, t3, one = SJ_NO_VALUE, kk, kc;
    int64_t idx = -2;
    GG(b, sj_graph_param_typed(b->g, "idx", SJ_I64, 0, NULL, &idx, &one));
    GG(b, sj_graph_matmul(b->g, x, w3, &pk));
    GG(b, sj_graph_reshape(b->g, pk, 3, (int64_t[]){GG_S, 3, 8}, &r3));
    GG(b, sj_graph_transpose(b->g, r3, (int[]){1, 0, 2}, &t3));
    GG(b, sj_graph_gather(b->g, t3, one, 0, &kk));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, sum, kk, &sum));
    GG(b, sj_graph_gather(b->g, r3, one, 1, &kc));
    GG(b, sj_graph_output(b->g, kc, "k_copy"));
    GG(b, sj_graph_output(b->g, sum, "sum"));
    GG(b, sj_graph_output(b->g, last, "last"));
    GG(b, sj_graph_output(b->g, cat, "cat"));
    GG(b, sj_graph_output(b->g, rev, "rev"));
}

/* Causal self-attention with the mask built as exporters write it: a
 * constant expanded to [N, N], trilu above the diagonal, added to the
 * scores; plus a lower-triangular trilu of the scores themselves. */
static inline void gg_causal(gg *b) {
    sj_value x = gg_input(b, "x", 2, (int64_t[]){GG_S, 8}), wq = gg_param(b, "wq", 2, (int64_t[]){8, 8});
    sj_value big = SJ_NO_VALUE, q, kt, sc, full, mask, masked, p, o, low;
    float neg = -1e9f;
    GG(b, sj_graph_param(b->g, "neg", 2, (int64_t[]){1, 1}, &neg, &big));
    GG(b, sj_graph_matmul(b->g, x, wq, &q));
    GG(b, sj_graph_transpose(b->g, x, (int[]){1, 0}, &kt));
    GG(b, sj_graph_matmul(b->g, q, kt, &sc));
    GG(b, sj_graph_expand(b->g, big, 2, (int64_t[]){GG_S, GG_S}, &full));
    GG(b, sj_graph_trilu(b->g, full, true, 1, &mask));
    GG(b, sj_graph_binary(b->g, SJ_OP_ADD, sc, mask, &masked));
    GG(b, sj_graph_softmax(b->g, SJ_OP_SOFTMAX, masked, 1, &p));
    GG(b, sj_graph_matmul(b->g, p, x, &o));
    GG(b, sj_graph_trilu(b->g, sc, false, -1, &low));
    GG(b, sj_graph_output(b->g, o, "o"));
    GG(b, sj_graph_output(b->g, low, "low"));
}

typedef struct gg_model {
    const char *name;
    void (*build)(gg *b);
} gg_model;

static const gg_model gg_models[] = {
    {"elementwise", gg_elementwise}, {"attention", gg_attention}, {"reductions", gg_reductions},
    {"row_ops", gg_row_ops},         {"ffn", gg_ffn},             {"batched_views", gg_batched_views},
    {"all_ops", gg_all_ops},         {"wide", gg_wide},           {"nan_inf", gg_nan_inf},
    {"multiples", gg_multiples},     {"cache_step", gg_cache_step}, {"layout", gg_layout},
    {"causal", gg_causal},
};
#define GG_N_MODELS ((int)(sizeof gg_models / sizeof gg_models[0]))

/* --- seeded random graphs (the differential generator's op mix) */

typedef struct gg_pool {
    sj_value v[64];
    int n;
} gg_pool;

static inline sj_value gg_pick(gg_pool *p, uint64_t *s) { return p->v[gg_rng(s) % (uint64_t)p->n]; }
static inline void gg_push(gg_pool *p, sj_value v) {
    if (p->n < 64) p->v[p->n++] = v;
}

/* One random op on pool values; ops whose shapes do not fit are refused by
 * the builder and skipped. Domain-limited ops get positive operands. */
static inline void gg_random_op(gg *b, gg_pool *p) {
    static const sj_op un[] = {SJ_OP_NEG, SJ_OP_ABS, SJ_OP_TANH, SJ_OP_SIGMOID, SJ_OP_RELU,
                               SJ_OP_GELU, SJ_OP_SILU, SJ_OP_ERF};
    static const sj_op bin[] = {SJ_OP_ADD, SJ_OP_SUB, SJ_OP_MUL, SJ_OP_MAX, SJ_OP_MIN};
    sj_graph *g = b->g;
    uint64_t *s = &b->seed;
    sj_value a = gg_pick(p, s), c = gg_pick(p, s), out, t;
    sj_value_desc d;
    sj_graph_value_desc(g, a, &d);
    int r = d.shape.rank;
    switch (gg_rng(s) % 13) {
    case 0:
    case 1:
        if (sj_graph_unary(g, un[gg_rng(s) % (sizeof un / sizeof un[0])], a, &out) == SJ_OK) gg_push(p, out);
        break;
    case 2:
    case 3:
    case 4:
        if (sj_graph_binary(g, bin[gg_rng(s) % (sizeof bin / sizeof bin[0])], a, c, &out) == SJ_OK)
            gg_push(p, out);
        break;
    case 5:
        if (sj_graph_unary(g, SJ_OP_SIGMOID, c, &t) == SJ_OK &&
            sj_graph_unary(g, gg_rng(s) % 2 ? SJ_OP_LOG : SJ_OP_RSQRT, t, &out) == SJ_OK)
            gg_push(p, out);
        break;
    case 6: {
        int axis = r ? (int)(gg_rng(s) % (uint64_t)r) : 0;
        sj_op op = SJ_OP_REDUCE_SUM + (sj_op)(gg_rng(s) % 3);
        if (sj_graph_reduce(g, op, a, r ? 1 : 0, &axis, gg_rng(s) % 2, &out) == SJ_OK) gg_push(p, out);
        break;
    }
    case 7: {
        int axis = r ? (int)(gg_rng(s) % (uint64_t)r) : 0;
        if (sj_graph_softmax(g, gg_rng(s) % 2 ? SJ_OP_SOFTMAX : SJ_OP_LOG_SOFTMAX, a, axis, &out) == SJ_OK)
            gg_push(p, out);
        break;
    }
    case 8:
        if (r && sj_graph_layernorm(g, a, SJ_NO_VALUE, SJ_NO_VALUE, (int)(gg_rng(s) % (uint64_t)r),
                                    1e-3f, &out) == SJ_OK)
            gg_push(p, out);
        break;
    case 9:
    case 10:
        if (sj_graph_matmul(g, a, c, &out) == SJ_OK) {
            gg_push(p, out);
        } else if (r >= 1 && d.shape.dims[r - 1] != SJ_DIM_SYM) {
            char name[32];
            snprintf(name, sizeof name, "w%d", sj_graph_num_values(g));
            sj_value w = gg_param(b, name, 2, (int64_t[]){d.shape.dims[r - 1], 1 + (int64_t)(gg_rng(s) % 9)});
            if (b->st == SJ_OK && sj_graph_matmul(g, a, w, &out) == SJ_OK) gg_push(p, out);
        }
        break;
    case 11: {
        if (r < 2) break;
        int perm[SJ_MAX_RANK];
        for (int i = 0; i < r; i++) perm[i] = i;
        for (int i = r - 1; i > 0; i--) {
            int j = (int)(gg_rng(s) % (uint64_t)(i + 1)), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        if (sj_graph_transpose(g, a, perm, &out) == SJ_OK) gg_push(p, out);
        break;
    }
    default:
        if (r == 2 && sj_graph_gemm(g, a, c, SJ_NO_VALUE, 0.5f, 1.0f, false, true, &out) == SJ_OK)
            gg_push(p, out);
        break;
    }
}

static inline void gg_random(gg *b) {
    gg_pool p = {.n = 0};
    int64_t d1 = 1 + (int64_t)(gg_rng(&b->seed) % 12), d2 = 2 * (1 + (int64_t)(gg_rng(&b->seed) % 4));
    gg_push(&p, gg_input(b, "x", 2, (int64_t[]){GG_S, d1}));
    gg_push(&p, gg_input(b, "y", 2, (int64_t[]){GG_S, d2}));
    gg_push(&p, gg_input(b, "z", 3, (int64_t[]){2, GG_S, d1}));
    gg_push(&p, gg_param(b, "row", 1, (int64_t[]){d1}));
    gg_push(&p, gg_param(b, "sq", 2, (int64_t[]){d2, d2}));
    if (b->st != SJ_OK) return;
    int n_ops = 4 + (int)(gg_rng(&b->seed) % 10);
    for (int i = 0; i < n_ops && b->st == SJ_OK; i++) gg_random_op(b, &p);
    int n_out = 0;
    char name[16];
    for (int i = p.n - 1; i >= 5 && n_out < 2; i--, n_out++) {
        snprintf(name, sizeof name, "o%d", n_out);
        GG(b, sj_graph_output(b->g, p.v[i], name));
    }
    snprintf(name, sizeof name, "o%d", n_out);
    GG(b, sj_graph_output(b->g, gg_pick(&p, &b->seed), name));
}

/* Builds model i (0..GG_N_MODELS-1) or, for i >= GG_N_MODELS, random graph
 * i - GG_N_MODELS, into a new graph with symbolic dim "N". */
static inline sj_status gg_build(sj_ctx *ctx, int i, uint64_t seed, sj_graph **out, const char **name) {
    gg b = {.seed = seed * 2654435761u + 12345u + (uint64_t)i};
    if ((b.st = sj_graph_create(ctx, "N", &b.g)) != SJ_OK) return b.st;
    if (i < GG_N_MODELS) {
        gg_models[i].build(&b);
        *name = gg_models[i].name;
    } else {
        gg_random(&b);
        *name = "random";
    }
    if (b.st != SJ_OK) {
        sj_graph_destroy(b.g);
        return b.st;
    }
    *out = b.g;
    return SJ_OK;
}

#endif

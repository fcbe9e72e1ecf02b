/* ONNX ops that read along the symbolic dim, imported and run on the host
 * backend against the interpreter with every padded element poisoned
 * (tests/host_harness.h): CumSum (the running sum RoBERTa's position ids
 * and BLOOM's ALiBi take over the mask), ArgMax and Hardmax over the
 * symbolic dim, OneHot and the losses over a dynamic batch, depthwise
 * convs and pools (sums over taps by vectors of channels), and a conv
 * run as Winograd F(2x2, 3x3) over a dynamic batch (its 16 weight
 * matrices packed once, its tiles gathered and scattered). A host kernel
 * that read past the active extent, or a scan step that wrapped into
 * padding, shows as a NaN or -1 in a result. The interpreter's own answers
 * are checked against C loops in tests/test_onnx.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/test_util.h"
#include "tests/onnx_builder.h"
#include "tests/host_harness.h"
#include "runtime/host_code/host_code.h"

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static int setup(void **state) { return h_fixture_setup(state, 0xc0ffee); }
static int teardown(void **state) { return h_fixture_teardown(state); }

/* Loads b (freed here) and checks host == interpreter at bucket 16 and
 * extents 1, in between and the bucket's. */
static void check_host(fixture *f, mb *b, const char *what) {
    sj_graph *g = NULL;
    sj_status st = load(f->ctx, b, NULL, &g);
    mb_free(b);
    if (st != SJ_OK) fail_msg("%s: %s", what, sj_ctx_last_error(f->ctx));
    sj_compile_options o;
    sj_compile_options_init(&o);
    const int64_t ns[] = {1, 2, 7, 16};
    int ok = h_check(f->dev, g, 16, ns, 4, &o, f->seed, 1e-5, what);
    sj_graph_destroy(g);
    assert_true(ok);
}

/* A cache of seq rows grown by this step's row (Concat along the symbolic
 * dim: seq + 1 rows), with positions over the grown length read off its
 * Shape (Range 0 .. seq + 1) and a reshape to it written out in full, as
 * a decode step's exporters write them. */
static void test_cache_append_positions(void **state) {
    fixture *f = *state;
    mb b;
    mb_init(&b, 14);
    mb_input(&b, "past", "seq,4");
    mb_input(&b, "x", "1,4");
    mb_init_i64(&b, "zero", 1, (int64_t[]){0});
    mb_init_i64(&b, "one", 1, (int64_t[]){1});
    mb_init_i64(&b, "four", 1, (int64_t[]){4});
    mb_init_i64(&b, "axes", 1, (int64_t[]){1});
    mb_init_f(&b, "half", 1, (int64_t[]){1}, (float[]){0.5f});
    mb_attr_i(&b, mb_node(&b, "Concat", "grow", "past,x", "cache"), "axis", 0);
    mb_node(&b, "Shape", "shape", "cache", "s");
    mb_attr_i(&b, mb_node(&b, "Gather", "len", "s,zero", "n1"), "axis", 0);
    mb_node(&b, "Squeeze", "scalar", "n1", "n");
    mb_node(&b, "Squeeze", "scalar0", "zero", "z0");
    mb_node(&b, "Squeeze", "scalar1", "one", "o1");
    mb_node(&b, "Range", "range", "z0,n,o1", "pos");
    mb_attr_i(&b, mb_node(&b, "Cast", "cast", "pos", "posf"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_node(&b, "Unsqueeze", "col", "posf,axes", "pcol");
    mb_node(&b, "Mul", "scale", "pcol,half", "ps");
    mb_node(&b, "Add", "add", "cache,ps", "y0");
    mb_attr_i(&b, mb_node(&b, "Concat", "target", "n1,four", "tshape"), "axis", 0);
    mb_node(&b, "Reshape", "full", "y0,tshape", "y");
    mb_node(&b, "Softmax", "sm", "y", "z");
    mb_output(&b, "z", NULL);
    check_host(f, &b, "cache append with positions");
}

/* Positions that start at the symbolic dim, Range(seq, 2 * seq): a decode
 * step's positions after seq cached tokens, seq of them here; and the
 * length itself used as data (x * seq). */
static void test_positions_from_n(void **state) {
    fixture *f = *state;
    mb b;
    mb_init(&b, 14);
    mb_input(&b, "x", "seq,4");
    mb_init_i64(&b, "zero", 1, (int64_t[]){0});
    mb_init_i64(&b, "one", 1, (int64_t[]){1});
    mb_init_i64(&b, "axes", 1, (int64_t[]){1});
    mb_node(&b, "Shape", "shape", "x", "s");
    mb_attr_i(&b, mb_node(&b, "Gather", "len", "s,zero", "n1"), "axis", 0);
    mb_node(&b, "Squeeze", "scalar", "n1", "n");
    mb_node(&b, "Add", "twice", "n,n", "n2");
    mb_node(&b, "Squeeze", "scalar1", "one", "o1");
    mb_node(&b, "Range", "range", "n,n2,o1", "pos");
    mb_attr_i(&b, mb_node(&b, "Cast", "cast", "pos", "posf"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_node(&b, "Unsqueeze", "col", "posf,axes", "pcol");
    mb_attr_i(&b, mb_node(&b, "Cast", "castn", "n1", "nf"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mb_node(&b, "Mul", "scale", "x,nf", "xs");
    mb_node(&b, "Add", "add", "xs,pcol", "y");
    mb_output(&b, "y", NULL);
    check_host(f, &b, "positions from n");
}

/* RoBERTa's position ids: cumsum(mask != pad, seq) * mask + pad, as the
 * transformers export writes them, then an embedding lookup. */
static void test_cumsum_position_ids(void **state) {
    fixture *f = *state;
    float table[24 * 4];
    for (int i = 0; i < 24 * 4; i++) table[i] = (float)i * 0.25f - 3.0f;
    mb b;
    mb_init(&b, 14);
    mb_input_typed(&b, "ids", I64, "1,seq");
    mb_init_i64(&b, "pad", 1, (int64_t[]){1});
    mb_init_i64(&b, "axis", 1, (int64_t[]){1});
    mb_init_f(&b, "embed", 2, (int64_t[]){24, 4}, table);
    mb_node(&b, "Equal", "eq", "ids,pad", "is_pad");
    mb_node(&b, "Not", "not", "is_pad", "keep");
    mb_attr_i(&b, mb_node(&b, "Cast", "cast", "keep", "mask"), "to", I64);
    mb_node(&b, "CumSum", "cumsum", "mask,axis", "run");
    mb_node(&b, "Mul", "mul", "run,mask", "kept");
    mb_node(&b, "Add", "add", "kept,pad", "pos");
    mb_node(&b, "Gather", "lookup", "embed,pos", "y");
    mb_output(&b, "y", NULL);
    check_host(f, &b, "RoBERTa position ids");
}

/* Every CumSum flavour along the symbolic dim of a float input: plain,
 * exclusive, reverse, both, with a negative axis. */
static void test_cumsum_flavours(void **state) {
    fixture *f = *state;
    for (int flav = 0; flav < 4; flav++) {
        mb b;
        mb_init(&b, 14);
        mb_input(&b, "x", "3,seq,2");
        mb_init_i64(&b, "axis", 1, (int64_t[]){-2});
        Onnx__NodeProto *c = mb_node(&b, "CumSum", "cumsum", "x,axis", "y");
        mb_attr_i(&b, c, "exclusive", flav & 1);
        mb_attr_i(&b, c, "reverse", flav >> 1);
        mb_output(&b, "y", NULL);
        char what[64];
        snprintf(what, sizeof what, "CumSum exclusive=%d reverse=%d", flav & 1, flav >> 1);
        check_host(f, &b, what);
    }
}

/* ArgMax (first and last index) and Hardmax over the symbolic dim, where a
 * padded maximum would win if a kernel read it. */
static void test_argmax_hardmax_over_seq(void **state) {
    fixture *f = *state;
    for (int last = 0; last <= 1; last++) {
        mb b;
        mb_init(&b, 13);
        mb_input(&b, "x", "2,seq");
        Onnx__NodeProto *a = mb_node(&b, "ArgMax", "argmax", "x", "i");
        mb_attr_i(&b, a, "axis", 1);
        mb_attr_i(&b, a, "select_last_index", last);
        mb_attr_i(&b, mb_node(&b, "Cast", "cast", "i", "y"), "to", F32);
        mb_output(&b, "y", NULL);
        check_host(f, &b, last ? "ArgMax select_last_index" : "ArgMax");
    }
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", "seq,5");
    mb_attr_i(&b, mb_node(&b, "Hardmax", "hardmax", "x", "y"), "axis", 0);
    mb_output(&b, "y", NULL);
    check_host(f, &b, "Hardmax over seq");
}

/* GatherND: coordinates into the symbolic dim (clamped to the active rows,
 * so a padded row would show as NaN), index tuples along it (int32 ones
 * too), and batch_dims 1 over it. The random int inputs reach below 0 and
 * past every axis, so counting from the end and clamping are both taken. */
static void test_gather_nd_over_seq(void **state) {
    static const struct {
        const char *data, *ix, *what;
        int batch_dims;
        bool i32;
    } cases[] = {
        {"seq,5,3", "4,2", "GatherND into seq", 0, false},
        {"3,6", "seq,1,2", "GatherND tuples along seq", 0, true},
        {"seq,4,2", "seq,3,1", "GatherND batch_dims 1 over seq", 1, false},
    };
    fixture *f = *state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mb b;
        mb_init(&b, 13);
        mb_input(&b, "x", cases[c].data);
        mb_input_typed(&b, "ix", I64, cases[c].ix);
        if (cases[c].i32)
            mb_attr_i(&b, mb_node(&b, "Cast", "cast", "ix", "ix32"), "to",
                      ONNX__TENSOR_PROTO__DATA_TYPE__INT32);
        Onnx__NodeProto *g = mb_node(&b, "GatherND", "gather_nd", cases[c].i32 ? "x,ix32" : "x,ix", "y");
        mb_attr_i(&b, g, "batch_dims", cases[c].batch_dims);
        mb_output(&b, "y", NULL);
        check_host(f, &b, cases[c].what);
    }
}

/* OneHot of a dynamic batch of ids (some negative, some past depth), and
 * SoftmaxCrossEntropyLoss over it with an ignore_index, summed. */
static void test_onehot_and_loss_dynamic_batch(void **state) {
    fixture *f = *state;
    mb b;
    mb_init(&b, 13);
    mb_input_typed(&b, "ids", I64, "batch,3");
    mb_init_i64(&b, "depth", 1, (int64_t[]){5});
    float vals[2] = {-0.5f, 2.0f};
    mb_init_f(&b, "values", 1, (int64_t[]){2}, vals);
    mb_node(&b, "OneHot", "onehot", "ids,depth,values", "y");
    mb_output(&b, "y", NULL);
    check_host(f, &b, "OneHot");

    for (int red = 0; red < 3; red++) {
        static const char *const names[] = {"none", "sum", "mean"};
        mb_init(&b, 13);
        mb_input(&b, "scores", "batch,9,2");
        mb_input_typed(&b, "raw", I64, "batch,2");
        mb_init_i64(&b, "zero", 1, (int64_t[]){0});
        mb_node(&b, "Max", "clamp", "raw,zero", "target"); /* the harness's ids start at -3 */
        Onnx__NodeProto *l = mb_node(&b, "SoftmaxCrossEntropyLoss", "loss", "scores,target", "y");
        mb_attr_s(&b, l, "reduction", names[red]);
        mb_attr_i(&b, l, "ignore_index", 2);
        mb_output(&b, "y", NULL);
        char what[64];
        snprintf(what, sizeof what, "SoftmaxCrossEntropyLoss reduction=%s", names[red]);
        check_host(f, &b, what);
    }
}

/* A depthwise conv (of a pointwise conv's channels-last output), a max
 * pool and an average pool over C channels, padded, over a dynamic
 * batch: reductions over taps that keep the channels, which the host sums
 * in registers by tiles of vectors of channels, the padding read as the
 * fill. */
static void check_depthwise_and_pools(fixture *f, int C) {
    enum { C_MAX = 40 };
    assert_true(C <= C_MAX);
    static float pw[C_MAX * C_MAX], w[C_MAX * 9], bias[C_MAX];
    for (int i = 0; i < C * C; i++) pw[i] = (float)((i * 13) % 11 - 5) * 0.04f;
    for (int i = 0; i < C * 9; i++) w[i] = (float)((i * 29) % 17 - 8) * 0.05f;
    for (int i = 0; i < C; i++) bias[i] = (float)(i % 7) * 0.1f - 0.3f;
    char shape[32], what[64];
    snprintf(shape, sizeof shape, "n,%d,7,6", C);
    snprintf(what, sizeof what, "depthwise conv and pools over %d channels", C);
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", shape);
    mb_init_f(&b, "pw", 4, (int64_t[]){C, C, 1, 1}, pw);
    mb_init_f(&b, "w", 4, (int64_t[]){C, 1, 3, 3}, w);
    mb_init_f(&b, "b", 1, (int64_t[]){C}, bias);
    mb_node(&b, "Conv", "pointwise", "x,pw", "p"); /* leaves p channels last */
    Onnx__NodeProto *dw = mb_node(&b, "Conv", "dw", "p,w,b", "c");
    mb_attr_i(&b, dw, "group", C);
    mb_attr_ints(&b, dw, "pads", 4, (int64_t[]){1, 1, 1, 1});
    mb_node(&b, "Relu", "relu", "c", "r");
    Onnx__NodeProto *mp = mb_node(&b, "MaxPool", "max", "r", "m");
    mb_attr_ints(&b, mp, "kernel_shape", 2, (int64_t[]){3, 3});
    mb_attr_ints(&b, mp, "strides", 2, (int64_t[]){2, 2});
    mb_attr_ints(&b, mp, "pads", 4, (int64_t[]){1, 1, 1, 1});
    Onnx__NodeProto *ap = mb_node(&b, "AveragePool", "avg", "m", "y");
    mb_attr_ints(&b, ap, "kernel_shape", 2, (int64_t[]){2, 2});
    mb_output(&b, "y", NULL);
    check_host(f, &b, what);
}

/* 40 channels: a full tile of 8 vectors and a part tile at x86-64-v3, two
 * vectors and a half-width one at AVX-512; 20: whole vectors and a 4-float
 * vector at both. */
static void test_depthwise_and_pools_dynamic_batch(void **state) {
    check_depthwise_and_pools(*state, 40);
    check_depthwise_and_pools(*state, 20);
}

/* A model of one input x of shape x_shape and a conv's params: weight w
 * [M, C, kernel, kernel] and bias [M]. */
static void mb_conv_params(mb *b, const char *x_shape, int64_t M, int64_t C, int64_t kernel,
                           const float *w, const float *bias) {
    mb_init(b, 13);
    mb_input(b, "x", x_shape);
    mb_init_f(b, "w", 4, (int64_t[]){M, C, kernel, kernel}, w);
    mb_init_f(b, "b", 1, (int64_t[]){M}, bias);
}

/* check_host at each x86-64 level this CPU runs (x86-64-v2, x86-64-v3 and
 * native): the reductions by vectors and the GEMM take their width and
 * their masked last vectors from the level. b is freed here. */
static void check_host_levels(fixture *f, mb *b, const char *what) {
    static const char *const cpus[] = {"x86-64-v2", "x86-64-v3", NULL};
    sj_graph *g = NULL;
    sj_status st = load(f->ctx, b, NULL, &g);
    mb_free(b);
    if (st != SJ_OK) fail_msg("%s: %s", what, sj_ctx_last_error(f->ctx));
    const int64_t ns[] = {1, 2, 7, 16};
    for (size_t ci = 0; ci < sizeof cpus / sizeof cpus[0]; ci++) {
        if (cpus[ci] && !strcmp(cpus[ci], "x86-64-v3") && sj__host_kernel_level(3) < 3) continue;
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.cpu = cpus[ci];
        char msg[160];
        snprintf(msg, sizeof msg, "%s, cpu %s", what, cpus[ci] ? cpus[ci] : "native");
        if (!h_check(f->dev, g, 16, ns, 4, &o, f->seed + ci, 1e-5, msg)) {
            sj_graph_destroy(g);
            fail();
        }
    }
    sj_graph_destroy(g);
}

/* A depthwise conv over C channels, kernel k, stride s, padded, with a
 * bias and ReLU, on a pointwise conv's channels-last output over a dynamic
 * batch, at every level. From 128 channels the host runs each tile of
 * channels over all positions before the next tile (TILES_OUTSIDE_COLUMNS
 * in host_emit.c); 131, odd, is no whole number of 4-float vectors (the
 * generic sum); 200 leaves a part tile and a narrower last vector at every
 * level. */
static void check_depthwise_wide(fixture *f, int C, int k, int s) {
    enum { C_MAX = 200 };
    assert_true(C <= C_MAX);
    static float pw[C_MAX * C_MAX], w[C_MAX * 25], bias[C_MAX];
    for (int i = 0; i < C * C; i++) pw[i] = (float)((i * 13) % 11 - 5) * 0.01f;
    for (int i = 0; i < C * k * k; i++) w[i] = (float)((i * 29) % 17 - 8) * 0.05f;
    for (int i = 0; i < C; i++) bias[i] = (float)(i % 7) * 0.1f - 0.3f;
    char shape[32], what[96];
    snprintf(shape, sizeof shape, "n,%d,9,7", C);
    snprintf(what, sizeof what, "depthwise conv over %d channels, kernel %d, stride %d", C, k, s);
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", shape);
    mb_init_f(&b, "pw", 4, (int64_t[]){C, C, 1, 1}, pw);
    mb_init_f(&b, "w", 4, (int64_t[]){C, 1, k, k}, w);
    mb_init_f(&b, "b", 1, (int64_t[]){C}, bias);
    mb_node(&b, "Conv", "pointwise", "x,pw", "p");
    Onnx__NodeProto *dw = mb_node(&b, "Conv", "dw", "p,w,b", "c");
    mb_attr_i(&b, dw, "group", C);
    int64_t pad = k / 2;
    mb_attr_ints(&b, dw, "pads", 4, (int64_t[]){pad, pad, pad, pad});
    mb_attr_ints(&b, dw, "strides", 2, (int64_t[]){s, s});
    mb_node(&b, "Relu", "relu", "c", "y");
    mb_output(&b, "y", NULL);
    check_host_levels(f, &b, what);
}

static void test_depthwise_wide_every_level(void **state) {
    check_depthwise_wide(*state, 200, 3, 1);
    check_depthwise_wide(*state, 200, 5, 2);
    check_depthwise_wide(*state, 132, 5, 1);
    check_depthwise_wide(*state, 131, 3, 2);
}

/* Depthwise convs over few channels, at every level: 16 (one AVX-512
 * vector, two AVX2 ones) and 8 (a narrower vector at AVX-512) take a tile
 * of positions at once (host_emit.c's tile_positions), 9 x 7 = 63 of them
 * (stride 1) or 5 x 4 = 20 (stride 2) leaving a remainder of single
 * positions; the taps' table indices are read unclamped (kernel.h's
 * gsafe), the padded ones reading the fill. */
static void test_depthwise_narrow_every_level(void **state) {
    check_depthwise_wide(*state, 16, 3, 1);
    check_depthwise_wide(*state, 16, 3, 2);
    check_depthwise_wide(*state, 8, 5, 1);
    check_depthwise_wide(*state, 4, 3, 2);
}

/* A vision model's stem over a dynamic batch, at every level: a conv of C
 * input channels as the images come (channels first), kernel k, stride s,
 * padded, to M channels with a bias and HardSwish. At most 32 taps of
 * K * C and 32 output channels, so its taps times the weight are summed
 * with the taps read inside the sum (onnx_op_conv.c's few_taps), a tile of
 * positions at once where M is a vector or two (16 at AVX-512, 8 a
 * narrower one) and by the generic tiles where it is not (24: a vector and
 * a narrower one). */
static void check_stem(fixture *f, int C, int M, int k, int s, int h, int w) {
    enum { W_MAX = 32 * 32 };
    static float wt[W_MAX], bias[32];
    assert_true(M * C * k * k <= W_MAX && M <= 32);
    for (int i = 0; i < M * C * k * k; i++) wt[i] = (float)((i * 31) % 19 - 9) * 0.03f;
    for (int i = 0; i < M; i++) bias[i] = (float)(i % 6) * 0.1f - 0.25f;
    char shape[32], what[96];
    snprintf(shape, sizeof shape, "n,%d,%d,%d", C, h, w);
    snprintf(what, sizeof what, "stem conv %d -> %d channels, kernel %d, stride %d, %d x %d", C, M, k,
             s, h, w);
    mb b;
    mb_conv_params(&b, shape, M, C, k, wt, bias);
    Onnx__NodeProto *conv = mb_node(&b, "Conv", "stem", "x,w,b", "c");
    int64_t pad = k / 2;
    mb_attr_ints(&b, conv, "pads", 4, (int64_t[]){pad, pad, pad, pad});
    mb_attr_ints(&b, conv, "strides", 2, (int64_t[]){s, s});
    mb_node(&b, "HardSwish", "hswish", "c", "y");
    mb_output(&b, "y", NULL);
    check_host_levels(f, &b, what);
}

static void test_stem_every_level(void **state) {
    check_stem(*state, 3, 16, 3, 2, 17, 15);
    check_stem(*state, 3, 8, 3, 1, 9, 7);
    check_stem(*state, 3, 24, 3, 2, 16, 16);
    check_stem(*state, 1, 16, 5, 1, 7, 9);
}

/* A 1x1 conv to M channels with a bias and hardswish over a dynamic batch
 * of side x side images, at every level, each image's rows more than one
 * chunk of rows (host_emit.c's epilogue_chunk_rows: 784 rows of 72
 * channels in chunks of 264, 3136 of 16 in chunks of 1056): the packed
 * GEMM (72 channels: a masked last vector at AVX-512) and the register
 * tiles (16 channels, k 27 as a stem's). */
static void check_pointwise_chunks(fixture *f, int C, int M, int side) {
    enum { CM_MAX = 72 * 27 };
    static float w[CM_MAX], bias[72];
    for (int i = 0; i < M * C; i++) w[i] = (float)((i * 37) % 23 - 11) * 0.02f;
    for (int i = 0; i < M; i++) bias[i] = (float)(i % 5) * 0.1f - 0.2f;
    char shape[32], what[96];
    snprintf(shape, sizeof shape, "n,%d,%d,%d", C, side, side);
    snprintf(what, sizeof what, "1x1 conv %d -> %d channels by chunks of rows", C, M);
    mb b;
    mb_conv_params(&b, shape, M, C, 1, w, bias);
    mb_node(&b, "Conv", "conv", "x,w,b", "c");
    mb_node(&b, "HardSwish", "hswish", "c", "y");
    mb_output(&b, "y", NULL);
    check_host_levels(f, &b, what);
}

static void test_pointwise_chunks_every_level(void **state) {
    check_pointwise_chunks(*state, 16, 72, 28);
    check_pointwise_chunks(*state, 27, 16, 56);
}

/* A vision model's head: a global average pool, then a 1x1 conv on the
 * pooled [N, C, 1, 1] (MobileNetV3's conv_head), each image one row of
 * the conv's matmul, whose weight is large enough to read as packed
 * panels, at every level. The pooled row's stride along its size-1 dim
 * is 0, which the GEMM must not take for its packed-tile layout (it once
 * did: MobileNetV3 differed from ORT by the size of its logits). */
static void test_pooled_conv_head_dynamic_batch(void **state) {
    fixture *f = *state;
    enum { C = 512, M = 512 };
    static float w[M * C], bias[M];
    for (int i = 0; i < M * C; i++) w[i] = (float)((i * 41) % 29 - 14) * 0.003f;
    for (int i = 0; i < M; i++) bias[i] = (float)(i % 9) * 0.05f - 0.2f;
    mb b;
    mb_conv_params(&b, "n,512,3,3", M, C, 1, w, bias);
    mb_node(&b, "GlobalAveragePool", "pool", "x", "p");
    mb_node(&b, "Conv", "head", "p,w,b", "y");
    mb_output(&b, "y", NULL);
    check_host_levels(f, &b, "pooled 1x1 conv head");
}

/* A squeeze-excite block as MobileNetV3 has it, over a dynamic batch, at
 * every level: a global average pool, a 1x1 conv down to S channels with
 * ReLU, one back up with HardSigmoid, and the input scaled by it. Each
 * 1x1 conv is a matmul of one row per image against one weight, which the
 * host runs with the images as its rows (host_emit.c's batch_rows_dim). */
static void test_squeeze_excite_every_level(void **state) {
    fixture *f = *state;
    enum { C = 72, S = 24 };
    static float w1[S * C], b1[S], w2[C * S], b2[C];
    for (int i = 0; i < S * C; i++) w1[i] = (float)((i * 31) % 19 - 9) * 0.02f;
    for (int i = 0; i < C * S; i++) w2[i] = (float)((i * 17) % 13 - 6) * 0.03f;
    for (int i = 0; i < S; i++) b1[i] = (float)(i % 5) * 0.1f - 0.2f;
    for (int i = 0; i < C; i++) b2[i] = (float)(i % 3) * 0.2f - 0.1f;
    mb b;
    mb_init(&b, 13);
    mb_input(&b, "x", "n,72,5,5");
    mb_init_f(&b, "w1", 4, (int64_t[]){S, C, 1, 1}, w1);
    mb_init_f(&b, "b1", 1, (int64_t[]){S}, b1);
    mb_init_f(&b, "w2", 4, (int64_t[]){C, S, 1, 1}, w2);
    mb_init_f(&b, "b2", 1, (int64_t[]){C}, b2);
    mb_node(&b, "GlobalAveragePool", "pool", "x", "p");
    mb_node(&b, "Conv", "reduce", "p,w1,b1", "r");
    mb_node(&b, "Relu", "relu", "r", "rr");
    mb_node(&b, "Conv", "expand", "rr,w2,b2", "e");
    mb_node(&b, "HardSigmoid", "gate", "e", "g");
    mb_node(&b, "Mul", "scale", "x,g", "y");
    mb_output(&b, "y", NULL);
    check_host_levels(f, &b, "squeeze-excite block");
}

/* A conv the importer runs as Winograd F(2x2, 3x3), with bias, ReLU and
 * a residual add after it (its output transform's epilogue), over a
 * dynamic batch: the batched GEMM reads its weight as 16 packed matrices. */
static void test_winograd_conv_dynamic_batch(void **state) {
    fixture *f = *state;
    enum { C = 128, M = 128 }; /* wide enough for the packed GEMM */
    static float w[M * C * 9], bias[M];
    for (int i = 0; i < M * C * 9; i++) w[i] = (float)((i * 37) % 23 - 11) * 0.002f;
    for (int i = 0; i < M; i++) bias[i] = (float)(i % 5) * 0.1f - 0.2f;
    mb b;
    mb_conv_params(&b, "n,128,9,8", M, C, 3, w, bias);
    mb_attr_ints(&b, mb_node(&b, "Conv", "conv", "x,w,b", "c"), "pads", 4, (int64_t[]){1, 1, 1, 1});
    mb_node(&b, "Relu", "relu", "c", "r");
    mb_node(&b, "Add", "residual", "r,x", "y");
    mb_output(&b, "y", NULL);
    check_host(f, &b, "Winograd conv");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_append_positions),
        cmocka_unit_test(test_positions_from_n),
        cmocka_unit_test(test_cumsum_position_ids),
        cmocka_unit_test(test_cumsum_flavours),
        cmocka_unit_test(test_argmax_hardmax_over_seq),
        cmocka_unit_test(test_gather_nd_over_seq),
        cmocka_unit_test(test_onehot_and_loss_dynamic_batch),
        cmocka_unit_test(test_depthwise_and_pools_dynamic_batch),
        cmocka_unit_test(test_depthwise_wide_every_level),
        cmocka_unit_test(test_depthwise_narrow_every_level),
        cmocka_unit_test(test_stem_every_level),
        cmocka_unit_test(test_pointwise_chunks_every_level),
        cmocka_unit_test(test_winograd_conv_dynamic_batch),
        cmocka_unit_test(test_pooled_conv_head_dynamic_batch),
        cmocka_unit_test(test_squeeze_excite_every_level),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

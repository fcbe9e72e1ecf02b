/* The .sjg text format: every op parses with its attributes, print/parse
 * round trips keep the hash (and weights bit for bit), every error kind
 * names file:line:col, and sj_model_load finds files and .npy weights. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/graph_impl.h"
#include "shapejit/model.h"
#include "shapejit/tensor.h"
#include "tests/test_util.h"

static sj_ctx *ctx;
static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    return scratch_dir_create(tmpdir, sizeof tmpdir, "test_sjg") ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove_tree(tmpdir);
    sj_ctx_destroy(ctx);
    return 0;
}

static sj_graph *parse_ok(const char *text) {
    sj_graph *g = NULL;
    sj_status st = sj_sjg_parse(ctx, text, strlen(text), "t.sjg", tmpdir, &g);
    if (st != SJ_OK) fail_msg("parse failed: %s", sj_ctx_last_error(ctx));
    return g;
}

static const sj_node *node_named(const sj_graph *g, const char *name) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].name && !strcmp(g->nodes[i].name, name)) return &g->nodes[i];
    fail_msg("no value named %s", name);
    return NULL;
}

static void hash_of(const sj_graph *g, uint8_t h[32]) { sj_graph_hash(g, h); }

/* print(g) parses to a graph with the same hash, and printing that again
 * gives the same text (the printed form is canonical). */
static void assert_round_trip(const sj_graph *g) {
    char *text, *again;
    size_t len, len2;
    assert_int_equal(sj_sjg_print(g, &text, &len), SJ_OK);
    assert_int_equal(strlen(text), len);
    sj_graph *back = NULL;
    sj_status st = sj_sjg_parse(ctx, text, len, "printed.sjg", NULL, &back);
    if (st != SJ_OK) fail_msg("printed text does not parse: %s\n%s", sj_ctx_last_error(ctx), text);
    uint8_t h1[32], h2[32];
    hash_of(g, h1);
    hash_of(back, h2);
    assert_memory_equal(h1, h2, 32);
    assert_int_equal(back->n_nodes, g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SJ_OP_PARAM)
            assert_memory_equal(back->nodes[i].bytes, g->nodes[i].bytes,
                                (size_t)sj_shape_numel(&g->nodes[i].shape, 1) *
                                    sj_dtype_size(g->nodes[i].dtype));
    assert_int_equal(sj_sjg_print(back, &again, &len2), SJ_OK);
    assert_string_equal(text, again);
    sj_free(ctx, text);
    sj_free(ctx, again);
    sj_graph_destroy(back);
}

static const char all_ops[] =
    "# every op of graph.h\n"
    "graph all(N) {\n"
    "  input x: [N, 4]\n"
    "  input y: [N, 4]\n"
    "  param w: [4, 3] = [1, -2, 3.5, 0.25, 1e-3, -1E+2, .5, 7, 8, 9, 10, 11]\n"
    "  param c: [3] = fill(0.5)\n"
    "  param s: [4] = random(seed=7, scale=2)\n"
    "  u1 = neg(x); u2 = abs(u1)\n"
    "  u3 = exp(x)\n  u4 = log(u2)\n  u5 = sqrt(u2)\n  u6 = rsqrt(u2)\n  u7 = reciprocal(u3)\n"
    "  u8 = tanh(x)\n  u9 = sigmoid(x)\n  u10 = relu(x)\n  u11 = leaky_relu(x, alpha=0.2)\n"
    "  u12 = gelu(x)\n  u13 = silu(x)\n  u14 = erf(x)\n"
    "  v1 = sin(x)\n  v2 = cos(x)\n  v3 = tan(x)\n  v4 = asin(x)\n  v5 = acos(x)\n"
    "  v6 = atan(x)\n  v7 = sinh(x)\n  v8 = cosh(x)\n  v9 = asinh(x)\n  v10 = acosh(u3)\n"
    "  v11 = atanh(x)\n  v12 = floor(x)\n  v13 = ceil(x)\n  v14 = round(x)\n  v15 = sign(x)\n"
    "  l1 = slice(x, start=[-1, 3], start_n=[1, 0], step=[-1, -1], shape=[N, 2])\n"
    "  l2 = concat(x, l1, axis=-1)\n  l3 = expand(c, shape=[N, 3])\n"
    "  l4 = trilu(x, k=1, upper=false)\n"
    "  b1 = add(x, y)\n  b2 = sub(x, s)\n  b3 = mul(x, 2.5)\n  b4 = div(x, y)\n"
    "  b5 = pow(u2, 2)\n  b6 = max(x, y)\n  b7 = min(x, -1e-3)\n"
    "  r1 = reduce_sum(x, axes=[1], keepdims=true)\n"
    "  r2 = reduce_mean(x, axes=[-1])\n"
    "  r3 = reduce_max(x)\n"
    "  m1 = matmul(x, w)\n"
    "  g1 = gemm(x, w, c, alpha=0.5, beta=2, trans_a=false, trans_b=false)\n"
    "  g2 = gemm(w, x, trans_a=true, trans_b=true)\n"
    "  sm = softmax(x, axis=1)\n"
    "  ls = log_softmax(x, axis=-1)\n"
    "  ln = layernorm(x, s, none, axis=1, epsilon=1e-6)\n"
    "  ln2 = layernorm(x, none, s)\n"
    "  ln3 = layernorm(x)\n"
    "  tr = transpose(x, perm=[1, 0])\n"
    "  tr2 = transpose(x)\n"
    "  rs = reshape(x, shape=[N, 2, 2])\n"
    "  nested = add(matmul(relu(x), w), c)  # values without names\n"
    "  output u1\n output u2\n output u3\n output u4\n output u5\n output u6\n output u7\n"
    "  output u8\n output u9\n output u10\n output u11\n output u12\n output u13\n output u14\n"
    "  output b1\n output b2\n output b3\n output b4\n output b5\n output b6\n output b7\n"
    "  output r1\n output r2\n output r3\n output m1\n output g1\n output g2\n output sm\n"
    "  output ls\n output ln\n output ln2\n output ln3\n output tr\n output tr2\n output rs\n"
    "  output nested\n"
    "  output v1\n output v2\n output v3\n output v4\n output v5\n output v6\n output v7\n"
    "  output v8\n output v9\n output v10\n output v11\n output v12\n output v13\n"
    "  output v14\n output v15\n output l2\n output l3\n output l4\n"
    "  output \"renamed out\" = add(b1, 1)\n"
    "}\n";

/* The ops on int64, int32 and bool values, and typed leaves. */
static const char typed_ops[] =
    "graph typed(N) {\n"
    "  input ids: int64[N]\n"
    "  input mask: bool[N]\n"
    "  input x: [N, 4]\n"
    "  param table: [5, 4] = random(seed=3)\n"
    "  param k: int32[2] = [7, -2147483648]\n"
    "  param big: int64[2] = [9007199254740993, -3]\n"
    "  param flags: bool[2, 1] = [1, 0]\n"
    "  param lim: int64[] = fill(3)\n"
    "  emb = gather(table, ids, axis=0)\n"
    "  pos = range(dtype=int64, start=0, delta=1, shape=[N])\n"
    "  c1 = cast(pos, to=float32)\n"
    "  e = equal(ids, pos); l = less(ids, lim); le = less_equal(ids, pos)\n"
    "  gt = greater(ids, lim); ge = greater_equal(ids, pos)\n"
    "  a = and(e, mask); o = or(l, le); xo = xor(gt, ge); n = not(a)\n"
    "  md = mod(ids, lim)\n"
    "  isn = isnan(x); isi = isinf(x)\n"
    "  w = where(mask, c1, -1)\n"
    "  f = fill(dtype=float32, value=-inf, shape=[N, 4])\n"
    "  ki = cast(k, to=int64)\n"
    "  ge2 = gather_elements(table, cast(fill(dtype=int64, value=-1, shape=[2, 4]), to=int32), axis=0)\n"
    "  gnd = gather_nd(x, cast(fill(dtype=int64, value=-1, shape=[N, 1, 1]), to=int32), batch_dims=1)\n"
    "  output ge2\n output gnd\n"
    "  output emb\n output w\n output o\n output xo\n output n\n output md\n output isn\n"
    "  output isi\n output f\n output ki\n output big\n output flags\n"
    "}\n";

static void test_every_op_parses(void **state) {
    (void)state;
    bool seen[SJ_OP_COUNT_] = {false};
    sj_graph *tg = parse_ok(typed_ops);
    for (int i = 0; i < tg->n_nodes; i++) seen[tg->nodes[i].op] = true;
    assert_int_equal(node_named(tg, "ids")->dtype, SJ_I64);
    assert_int_equal(node_named(tg, "mask")->dtype, SJ_BOOL);
    assert_int_equal(node_named(tg, "e")->dtype, SJ_BOOL);
    assert_int_equal(node_named(tg, "w")->dtype, SJ_F32);
    assert_int_equal(node_named(tg, "md")->dtype, SJ_I64);
    assert_true(((const int64_t *)node_named(tg, "big")->bytes)[0] == 9007199254740993LL);
    assert_true(((const int32_t *)node_named(tg, "k")->bytes)[1] == INT32_MIN);
    assert_round_trip(tg);
    sj_graph_destroy(tg);
    sj_graph *g = parse_ok(all_ops);
    for (int i = 0; i < g->n_nodes; i++) seen[g->nodes[i].op] = true;
    for (int op = 0; op < SJ_OP_COUNT_; op++)
        if (!seen[op]) fail_msg("op %s missing from the all-ops graph", sj_op_name((sj_op)op));

    assert_string_equal(sj_graph_symbol(g), "N");
    assert_int_equal(sj_graph_num_inputs(g), 2);
    assert_int_equal(sj_graph_num_outputs(g), 55);
    const sj_node *w = node_named(g, "w");
    assert_true(w->data[1] == -2.0f && w->data[5] == -100.0f && w->data[6] == 0.5f);
    assert_true(node_named(g, "c")->data[2] == 0.5f);
    assert_true(node_named(g, "u11")->attrs.alpha == 0.2f);
    const sj_node *r1 = node_named(g, "r1"), *r2 = node_named(g, "r2"), *r3 = node_named(g, "r3");
    assert_int_equal(r1->attrs.axes, 2u);
    assert_true(r1->attrs.keepdims);
    assert_int_equal(r1->shape.rank, 2);
    assert_int_equal(r2->attrs.axes, 2u);
    assert_false(r2->attrs.keepdims);
    assert_int_equal(r3->attrs.axes, 3u);
    assert_int_equal(r3->shape.rank, 0);
    const sj_node *g1 = node_named(g, "g1"), *g2 = node_named(g, "g2");
    assert_true(g1->attrs.alpha == 0.5f && g1->attrs.beta == 2.0f);
    assert_false(g1->attrs.trans_a || g1->attrs.trans_b);
    assert_true(g2->attrs.trans_a && g2->attrs.trans_b && g2->attrs.alpha == 1.0f);
    assert_int_equal(g2->inputs[2], SJ_NO_VALUE);
    assert_int_equal(g2->shape.dims[0], 3);
    assert_int_equal(g2->shape.dims[1], SJ_DIM_SYM);
    const sj_node *ln = node_named(g, "ln"), *ln2 = node_named(g, "ln2"), *ln3 = node_named(g, "ln3");
    assert_true(ln->attrs.epsilon == 1e-6f);
    assert_int_equal(ln->attrs.axis, 1);
    assert_int_equal(ln->inputs[2], SJ_NO_VALUE);
    assert_int_equal(ln2->inputs[1], SJ_NO_VALUE);
    assert_true(ln2->inputs[2] != SJ_NO_VALUE);
    assert_true(ln3->attrs.epsilon == 1e-5f);
    assert_int_equal(ln3->attrs.axis, 1);
    assert_int_equal(node_named(g, "ls")->attrs.axis, 1);
    assert_int_equal(node_named(g, "tr2")->attrs.perm[0], 1);
    const sj_node *rs = node_named(g, "rs");
    assert_int_equal(rs->shape.rank, 3);
    assert_int_equal(rs->shape.dims[0], SJ_DIM_SYM);
    /* A bare number operand is a rank-0 param. */
    const sj_node *b3 = node_named(g, "b3");
    const sj_node *lit = &g->nodes[b3->inputs[1]];
    assert_int_equal(lit->op, SJ_OP_PARAM);
    assert_int_equal(lit->shape.rank, 0);
    assert_true(lit->data[0] == 2.5f);
    assert_true(g->nodes[node_named(g, "b7")->inputs[1]].data[0] == -1e-3f);
    assert_round_trip(g);
    sj_graph_destroy(g);
}

/* The generator is part of the format (docs/sjg.md): splitmix64 from the
 * seed, top 24 bits as u in [0, 1), value scale * (2u - 1). */
static void test_random_is_the_documented_generator(void **state) {
    (void)state;
    sj_graph *g = parse_ok("graph g {\n  param w: [3, 5] = random(seed=42, scale=0.5)\n"
                           "  param v: [3, 5] = random(seed=42, scale=0.5)\n"
                           "  param u: [3, 5] = random(seed=43, scale=0.5)\n  output w\n}\n");
    const sj_node *w = node_named(g, "w");
    uint64_t state64 = 42;
    for (int i = 0; i < 15; i++) {
        uint64_t z = (state64 += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        double u = (double)(z >> 40) / 16777216.0;
        assert_true(w->data[i] == (float)(0.5 * (2.0 * u - 1.0)));
        assert_true(fabsf(w->data[i]) <= 0.5f);
    }
    assert_memory_equal(w->data, node_named(g, "v")->data, 15 * sizeof(float));
    assert_memory_not_equal(w->data, node_named(g, "u")->data, 15 * sizeof(float));
    sj_graph_destroy(g);
}

static void test_examples_round_trip(void **state) {
    (void)state;
    const char *models[] = {"ffn", "mlp", "attention"};
    for (int i = 0; i < 3; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/examples/models/%s.sjg", SJ_SOURCE_DIR, models[i]);
        sj_graph *g = NULL;
        if (sj_model_load(ctx, path, NULL, &g) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
        assert_true(sj_graph_symbol(g) != NULL);
        assert_int_equal(sj_graph_num_outputs(g), 1);
        assert_round_trip(g);
        sj_graph_destroy(g);
    }
}

/* Weights round trip bit for bit, including the values %g spells oddly. */
static void test_float_values_bit_exact(void **state) {
    (void)state;
    enum { N = 20000 };
    float *v = malloc(N * sizeof *v);
    const float special[] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN, 1.40129846e-45f,
                             -1.17549435e-38f, 3.40282347e+38f, 0.1f, 1.0f / 3.0f};
    memcpy(v, special, sizeof special);
    uint64_t s = 1;
    for (int i = (int)(sizeof special / sizeof special[0]); i < N; i++) {
        uint32_t bits;
        do {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            bits = (uint32_t)(s >> 32);
        } while ((bits & 0x7f800000u) == 0x7f800000u); /* no NaN payloads */
        memcpy(&v[i], &bits, 4);
    }
    sj_graph *g;
    int64_t dims[1] = {N};
    assert_int_equal(sj_graph_create(ctx, NULL, &g), SJ_OK);
    sj_value p, r;
    assert_int_equal(sj_graph_param(g, "p", 1, dims, v, &p), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_NEG, p, &r), SJ_OK);
    assert_int_equal(sj_graph_output(g, r, "r"), SJ_OK);
    assert_round_trip(g);
    sj_graph_destroy(g);
    free(v);
}

/* Names that are not identifiers (ONNX names often are not), reserved
 * words, and an author's name that a generated name would collide with. */
static void test_names_survive_printing(void **state) {
    (void)state;
    sj_graph *g;
    assert_int_equal(sj_graph_create(ctx, "batch size", &g), SJ_OK);
    int64_t d[2] = {SJ_DIM_SYM, 3};
    sj_value x, a, b, c;
    assert_int_equal(sj_graph_input(g, "onnx::x/0 \"q\"\\", 2, d, &x), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_RELU, x, &a), SJ_OK); /* value 1, unnamed */
    assert_int_equal(sj_graph_unary(g, SJ_OP_NEG, a, &b), SJ_OK);
    assert_int_equal(sj_graph_set_name(g, b, "t1"), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, a, b, &c), SJ_OK);
    assert_int_equal(sj_graph_set_name(g, c, "output"), SJ_OK);
    assert_int_equal(sj_graph_output(g, c, "y\t1"), SJ_OK);
    assert_int_equal(sj_graph_output(g, a, "t1"), SJ_OK);
    assert_round_trip(g);
    char *text;
    assert_int_equal(sj_sjg_print(g, &text, NULL), SJ_OK);
    sj_graph *back = parse_ok(text);
    assert_string_equal(sj_graph_symbol(back), "batch size");
    assert_int_equal(sj_graph_find_input(back, "onnx::x/0 \"q\"\\"), 0);
    sj_value_desc od;
    assert_int_equal(sj_graph_output_desc(back, 0, &od), SJ_OK);
    assert_string_equal(od.name, "y\t1");
    assert_non_null(strstr(text, "t1_ = relu("));
    assert_non_null(strstr(text, "\"output\" = add("));
    sj_free(ctx, text);
    sj_graph_destroy(back);
    sj_graph_destroy(g);
}

/* Graphs from ONNX carry names that are not identifiers and shapes the
 * examples do not have: every ONNX node test model that loads must print
 * and parse back to the same hash. */
static void test_onnx_models_round_trip(void **state) {
    (void)state;
    const char *root = "/usr/share/libonnx-testdata/data/node";
    DIR *d = opendir(root);
    if (!d) {
        print_message("skipped: %s not found (Debian: libonnx-testdata)\n", root);
        return;
    }
    int loaded = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/model.onnx", root, e->d_name);
        sj_graph *g = NULL;
        if (sj_model_load(ctx, path, NULL, &g) != SJ_OK) continue; /* unsupported ops */
        assert_round_trip(g);
        sj_graph_destroy(g);
        loaded++;
    }
    closedir(d);
    assert_true(loaded > 50);
}

/* Number operands print back in place; a literal param with two uses stays
 * a param (inlining it twice would make two params, another graph). */
static void test_literals_print_in_place(void **state) {
    (void)state;
    sj_graph *g = parse_ok("graph g(N) {\n  input x: [N, 4]\n  y = add(mul(x, -0.5), 2)\n"
                           "  output y\n}\n");
    char *text;
    assert_int_equal(sj_sjg_print(g, &text, NULL), SJ_OK);
    assert_non_null(strstr(text, "= mul(x, -0.5)\n"));
    assert_non_null(strstr(text, "y = add(t2, 2)\n"));
    assert_null(strstr(text, "param"));
    sj_free(ctx, text);
    assert_round_trip(g);
    sj_graph_destroy(g);

    int64_t d[1] = {4};
    float half = 0.5f;
    sj_value x, c, a, b;
    assert_int_equal(sj_graph_create(ctx, NULL, &g), SJ_OK);
    assert_int_equal(sj_graph_input(g, "x", 1, d, &x), SJ_OK);
    assert_int_equal(sj_graph_param(g, "lit@1:1", 0, NULL, &half, &c), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_MUL, x, c, &a), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, a, c, &b), SJ_OK);
    assert_int_equal(sj_graph_output(g, b, "y"), SJ_OK);
    assert_int_equal(sj_sjg_print(g, &text, NULL), SJ_OK);
    assert_non_null(strstr(text, "param \"lit@1:1\": [] = [0.5]"));
    sj_free(ctx, text);
    assert_round_trip(g);
    sj_graph_destroy(g);
}

static void write_file(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    write_text_file(path, text);
}

static void write_npy(const char *name, int rank, const int64_t *dims) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    sj_tensor t;
    assert_int_equal(sj_tensor_alloc(ctx, rank, dims, &t), SJ_OK);
    for (int64_t i = 0; i < sj_tensor_numel(&t); i++) t.data[i] = (float)i + 0.5f;
    assert_int_equal(sj_npy_write(ctx, path, &t), SJ_OK);
    sj_tensor_free(ctx, &t);
}

/* A well-formed .npy of float64, which the format refuses: a version 1.0
 * preamble, the dict padded with spaces to 128 bytes, then 12 zero doubles. */
static void write_f8_npy(const char *name) {
    static const char dict[] = "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 3), }";
    uint8_t file[128 + 12 * sizeof(double)] = {0};
    memset(file, ' ', 128);
    memcpy(file, "\x93NUMPY\x01\x00\x76\x00", 10);
    memcpy(file + 10, dict, strlen(dict));
    file[127] = '\n';
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    write_whole_file(path, file, sizeof file);
}

static void test_model_load_with_npy_weights(void **state) {
    (void)state;
    int64_t wd[2] = {4, 3};
    write_npy("w.npy", 2, wd);
    write_file("m.sjg", "graph m(N) {\n  input x: [N, 4]\n  param w: [4, 3] = npy(\"w.npy\")\n"
                        "  y = matmul(x, w)\n  output y\n}\n");
    char path[512];
    snprintf(path, sizeof path, "%s/m.sjg", tmpdir);
    sj_model_options o;
    sj_model_options_init(&o);
    assert_null(o.dynamic_name);
    sj_graph *g = NULL;
    /* Relative weights resolve against the graph file's directory, not the
     * current one. */
    if (sj_model_load(ctx, path, &o, &g) != SJ_OK) fail_msg("%s", sj_ctx_last_error(ctx));
    const sj_node *w = node_named(g, "w");
    for (int i = 0; i < 12; i++) assert_true(w->data[i] == (float)i + 0.5f);
    assert_round_trip(g);
    sj_graph_destroy(g);

    snprintf(path, sizeof path, "%s/m.txt", tmpdir);
    assert_int_equal(sj_model_load(ctx, path, NULL, &g), SJ_E_UNSUPPORTED);
    assert_error_contains(ctx, "m.txt: unknown model format '.txt'");
    assert_null(g);
    snprintf(path, sizeof path, "%s/noext", tmpdir);
    assert_int_equal(sj_model_load(ctx, path, NULL, &g), SJ_E_UNSUPPORTED);
    snprintf(path, sizeof path, "%s/absent.sjg", tmpdir);
    assert_int_equal(sj_model_load(ctx, path, NULL, &g), SJ_E_IO);
    assert_error_contains(ctx, "absent.sjg");
    /* An error inside a loaded file names that file. */
    write_file("bad.sjg", "graph m(N) {\n  input x: [N, 4]\n  y = relu(z)\n}\n");
    snprintf(path, sizeof path, "%s/bad.sjg", tmpdir);
    assert_int_equal(sj_model_load(ctx, path, NULL, &g), SJ_E_NOT_FOUND);
    assert_error_contains(ctx, "bad.sjg:3:12: undefined name 'z'");
}

typedef struct error_case {
    const char *body; /* lines 3.. after "graph g(N) {\n  input x: [N, 4]\n" */
    sj_status st;
    const char *msg; /* must appear in the message, position included */
} error_case;

#define HDR "graph g(N) {\n  input x: [N, 4]\n"

static void test_error_messages(void **state) {
    (void)state;
    int64_t wd[2] = {4, 2};
    write_npy("w42.npy", 2, wd);
    write_f8_npy("f8.npy");
    const error_case cases[] = {
        {HDR "  y = matmul(x x)\n}", SJ_E_PARSE, "t.sjg:3:16: expected ')' after arguments of matmul, found 'x'"},
        {HDR "  y = matmull(x)\n}", SJ_E_PARSE, "t.sjg:3:7: unknown op 'matmull' (did you mean 'matmul'?)"},
        {HDR "  y = frobnicate(x)\n}", SJ_E_PARSE, "t.sjg:3:7: unknown op 'frobnicate'"},
        {HDR "  y = relu(z)\n}", SJ_E_NOT_FOUND, "t.sjg:3:12: undefined name 'z'"},
        {HDR "  y = relu(h)\n  h = neg(y)\n}", SJ_E_PARSE, "t.sjg:3:12: 'h' is used before its definition at 4:3"},
        {HDR "  y = relu(y)\n}", SJ_E_PARSE, "t.sjg:3:12: 'y' is used before its definition at 3:3"},
        {HDR "  input z: [-1, 4]\n}", SJ_E_SHAPE, "t.sjg:3:12: dim 0 of an input is -1; dims must be >= 1"},
        {HDR "  y = reshape(x, shape=[N, 0])\n}", SJ_E_SHAPE, "t.sjg:3:18: dim 1 of shape= of reshape is 0"},
        {HDR "  h = relu(x)\n  h = neg(h)\n}", SJ_E_PARSE, "t.sjg:4:3: 'h' is already defined at 3:3"},
        {HDR "  param x: [4] = fill(1)\n}", SJ_E_PARSE, "t.sjg:3:9: 'x' is already defined at 2:9"},
        {HDR "  param w: [5, 3] = fill(1)\n  y = matmul(x, w)\n}", SJ_E_SHAPE, "t.sjg:4:7: matmul"},
        {HDR "  y = relu(matmul(x, x))\n}", SJ_E_SHAPE, "t.sjg:3:12: matmul"},
        {HDR "  y = reshape(x, shape=[N, 3])\n}", SJ_E_SHAPE, "t.sjg:3:7: reshape"},
        {HDR "  input z: [N, 1099511627777]\n}", SJ_E_SHAPE, "t.sjg:3:12: dim 1 of an input is 1099511627777"},
        {HDR "  input z: [1048576, 1048576, 2]\n}", SJ_E_SHAPE, "t.sjg:3:12: an input has more than 2^40 elements"},
        {HDR "  param w: [100000, 100000] = random(seed=1)\n}", SJ_E_SHAPE, "t.sjg:3:31: param w would have 10000000000 generated elements"},
        {HDR "  param w: [4, 3] = npy(\"nope.npy\")\n}", SJ_E_IO, "t.sjg:3:21: weights of param w: "},
        {HDR "  param w: [4, 3] = npy(\"w42.npy\")\n}", SJ_E_SHAPE, "w42.npy holds shape [4, 2] but param w is declared [4, 3]"},
        {HDR "  param w: [4, 3] = npy(\"f8.npy\")\n}", SJ_E_PARSE, "f8.npy: header field 'descr' is '<f8'"},
        {HDR "  param w: [4, 3] = npy(w42.npy)\n}", SJ_E_PARSE, "t.sjg:3:25: expected a quoted file name"},
        {HDR "  input z: [M, 4]\n}", SJ_E_PARSE, "t.sjg:3:13: unknown dim 'M' (the graph's symbolic dim is 'N')"},
        {HDR "  param w: [N, 4] = fill(0)\n}", SJ_E_SHAPE, "t.sjg:3:12: a param cannot use the symbolic dim 'N'"},
        {HDR "  input z: [1, 1, 1, 1, 1, 1, 1]\n}", SJ_E_PARSE, "t.sjg:3:12: more than 6 entries"},
        {HDR "  input z: [0, 4]\n}", SJ_E_SHAPE, "t.sjg:3:12: dim 0 of an input is 0; dims must be >= 1"},
        {HDR "  output \"y\n}", SJ_E_PARSE, "t.sjg:3:10: unterminated string"},
        {HDR "  output \"y\\q\"\n}", SJ_E_PARSE, "t.sjg:3:12: unknown escape '\\q'"},
        {HDR "  y = relu(x) @\n}", SJ_E_PARSE, "t.sjg:3:15: unexpected character '@'"},
        {HDR "  y = relu(x) \xc3\xa9\n}", SJ_E_PARSE, "t.sjg:3:15: unexpected byte 0xc3"},
        {HDR "  y = relu(output)\n}", SJ_E_PARSE, "t.sjg:3:12: 'output' is a reserved word"},
        {HDR "  output x\n}\nextra", SJ_E_PARSE, "t.sjg:5:1: expected end of file after the graph's closing '}', found 'extra'"},
        {HDR "  output x\n", SJ_E_PARSE, "t.sjg:4:1: expected '}' to close the graph, found end of file"},
        {HDR "  y = softmax(x, axes=[1])\n}", SJ_E_PARSE, "t.sjg:3:18: softmax has no attribute 'axes' (it takes axis)"},
        {HDR "  y = softmax(x, axis=1, axis=0)\n}", SJ_E_PARSE, "t.sjg:3:26: attribute 'axis' given twice"},
        {HDR "  y = softmax(x, axis=7)\n}", SJ_E_SHAPE, "t.sjg:3:18: axis 7 of softmax is out of range"},
        {HDR "  y = softmax(x, axis=1, x)\n}", SJ_E_PARSE, "t.sjg:3:26: expected an attribute (name=value) in softmax"},
        {HDR "  y = reduce_sum(x, keepdims=1)\n}", SJ_E_PARSE, "t.sjg:3:21: keepdims of reduce_sum must be true or false"},
        {HDR "  y = reduce_sum(x, axes=[])\n}", SJ_E_PARSE, "t.sjg:3:7: axes=[] of reduce_sum is empty"},
        {HDR "  y = add(x)\n}", SJ_E_PARSE, "t.sjg:3:7: add takes 2 operands, got 1"},
        {HDR "  y = gemm(x)\n}", SJ_E_PARSE, "t.sjg:3:7: gemm takes 2 to 3 operands, got 1"},
        {HDR "  y = add(x, none)\n}", SJ_E_PARSE, "t.sjg:3:7: operand 2 of add cannot be none"},
        {HDR "  y = relu(none)\n}", SJ_E_PARSE, "t.sjg:3:7: operand 1 of relu cannot be none"},
        {HDR "  param w: [2, 2] = [1, 2, 3]\n}", SJ_E_SHAPE, "t.sjg:3:29: param w has 3 values but its shape holds 4"},
        {HDR "  param w: [2] = [1, 2, 3]\n}", SJ_E_SHAPE, "t.sjg:3:25: param w has more than the 2 values"},
        {HDR "  param w: [2] = [1 2]\n}", SJ_E_PARSE, "t.sjg:3:21: expected ',' or ']' in the values of param w"},
        {HDR "  param w: [2] = zeros()\n}", SJ_E_PARSE, "t.sjg:3:18: expected the values of param w"},
        {HDR "  param w: [2] = random(scale=1)\n}", SJ_E_PARSE, "t.sjg:3:18: random needs seed="},
        {HDR "  param w: [2] = random(seed=1, sigma=1)\n}", SJ_E_PARSE, "t.sjg:3:33: random takes seed=INTEGER and scale=NUMBER"},
        {HDR "  y = mul(x, 1e39)\n}", SJ_E_PARSE, "t.sjg:3:14: number 1e39 is beyond the float32 range"},
        {HDR "  y = mul(x, 1.5e)\n}", SJ_E_PARSE, "t.sjg:3:18: expected the exponent's digits"},
        {HDR "  y = mul(x, 12abc)\n}", SJ_E_PARSE, "t.sjg:3:16: unexpected 'a' after a number"},
        {HDR "  y = softmax(x, axis=99999999999999999999)\n}", SJ_E_PARSE, "t.sjg:3:23: integer 99999999999999999999 is too large"},
        {HDR "  y = softmax(x, axis=1.5)\n}", SJ_E_PARSE, "t.sjg:3:23: expected an integer, found number 1.5"},
        {HDR "  y = x\n}", SJ_E_PARSE, "t.sjg:3:7: expected an op call after 'y =', found 'x'"},
        {HDR "  y = input(x)\n}", SJ_E_PARSE, "t.sjg:3:7: 'input' is a statement, not an op"},
        {HDR "  y = transpose(x, perm=[0])\n}", SJ_E_SHAPE, "t.sjg:3:7: perm of transpose has 1 entries but the operand has rank 2"},
        {HDR "  y = transpose(x, perm=[0, 0])\n}", SJ_E_INVALID_ARG, "t.sjg:3:7: transpose"},
        {HDR "  y = reshape(x)\n}", SJ_E_PARSE, "t.sjg:3:7: reshape needs shape=[...]"},
        {HDR "  output x\n  output x\n}", SJ_E_INVALID_ARG, "t.sjg:4:10: output x"},
        {HDR "  output nope\n}", SJ_E_NOT_FOUND, "t.sjg:3:10: undefined name 'nope'"},
        {HDR "  ) \n}", SJ_E_PARSE, "t.sjg:3:3: expected a statement (input, param, output or NAME = op(...)), found ')'"},
        {"grph g {}", SJ_E_PARSE, "t.sjg:1:1: expected 'graph' at the start of a .sjg file, found 'grph'"},
        {"graph g(N)\n  input x: [N]\n}", SJ_E_PARSE, "t.sjg:2:3: expected '{' to open the graph's body, found 'input'"},
        {"graph g {\n  input x: [N, 4]\n}", SJ_E_PARSE, "t.sjg:2:13: 'N' is not a dim: this graph has no symbolic dim"},
        {"", SJ_E_PARSE, "t.sjg:1:1: expected 'graph' at the start of a .sjg file, found end of file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sj_graph *g = (sj_graph *)&g; /* must be reset to NULL on failure */
        sj_status st = sj_sjg_parse(ctx, cases[i].body, strlen(cases[i].body), "t.sjg", tmpdir, &g);
        const char *msg = sj_ctx_last_error(ctx);
        if (st != cases[i].st || !strstr(msg, cases[i].msg))
            fail_msg("case %zu: got status %d '%s'\n  wanted %d with '%s'", i, st, msg,
                     cases[i].st, cases[i].msg);
        if (strncmp(msg, "t.sjg:", 6) != 0) fail_msg("case %zu: message '%s' lacks the file", i, msg);
        assert_null(g);
    }
}

/* Op calls nest by recursion: a hostile file nesting thousands deep is a
 * parse error naming where, not a stack overflow; the limit's depth still
 * parses. */
static char *nested_relu(int depth) {
    size_t cap = strlen(HDR) + (size_t)depth * 6 + 64;
    char *s = malloc(cap);
    assert_non_null(s);
    size_t n = (size_t)snprintf(s, cap, "%s  y = ", HDR);
    for (int i = 0; i < depth; i++) n += (size_t)snprintf(s + n, cap - n, "relu(");
    s[n++] = 'x';
    for (int i = 0; i < depth; i++) s[n++] = ')';
    snprintf(s + n, cap - n, "\n  output y\n}\n");
    return s;
}

static void test_deep_nesting_refused(void **state) {
    (void)state;
    char *deep = nested_relu(20000);
    sj_graph *g = (sj_graph *)&g;
    assert_int_equal(sj_sjg_parse(ctx, deep, strlen(deep), "t.sjg", tmpdir, &g), SJ_E_PARSE);
    assert_null(g);
    const char *msg = sj_ctx_last_error(ctx);
    if (!strstr(msg, "t.sjg:3:") || !strstr(msg, "expressions nested too deeply"))
        fail_msg("message: %s", msg);
    free(deep);
    char *ok = nested_relu(100);
    sj_graph_destroy(parse_ok(ok));
    free(ok);
    /* a NUL byte is an unexpected byte, not the end of the file (strchr
     * matched it as punctuation) */
    static const char nul[] = "\0graph g {}";
    assert_int_equal(sj_sjg_parse(ctx, nul, sizeof nul - 1, "t.sjg", tmpdir, &g), SJ_E_PARSE);
    assert_error_contains(ctx, "t.sjg:1:1: unexpected byte 0x00");
    char *over = nested_relu(101);
    assert_int_equal(sj_sjg_parse(ctx, over, strlen(over), "t.sjg", tmpdir, &g), SJ_E_PARSE);
    free(over);
}

/* Every allocation in parse and print may fail: the call then reports an
 * error, never crashes, and leaks nothing. */
static void test_allocation_failures(void **state) {
    (void)state;
    bool parsed = false, printed = false;
    for (long k = 0; !(parsed && printed) && k < 5000; k++) {
        alloc_counter fa;
        sj_ctx *c = ctx_with_counter(&fa);
        fa.fail_at = fa.calls + k;
        fa.keep_failing = true;
        sj_graph *g = NULL;
        sj_status st = sj_sjg_parse(c, all_ops, strlen(all_ops), "t.sjg", NULL, &g);
        if (st == SJ_OK) {
            parsed = true;
            char *text = NULL;
            st = sj_sjg_print(g, &text, NULL);
            if (st == SJ_OK) printed = true;
            else assert_null(text);
            sj_free(c, text);
        } else {
            assert_null(g);
        }
        sj_graph_destroy(g);
        sj_ctx_destroy(c);
        assert_int_equal(fa.live, 0);
    }
    assert_true(parsed && printed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_parses),
        cmocka_unit_test(test_random_is_the_documented_generator),
        cmocka_unit_test(test_examples_round_trip),
        cmocka_unit_test(test_float_values_bit_exact),
        cmocka_unit_test(test_names_survive_printing),
        cmocka_unit_test(test_onnx_models_round_trip),
        cmocka_unit_test(test_literals_print_in_place),
        cmocka_unit_test(test_model_load_with_npy_weights),
        cmocka_unit_test(test_error_messages),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_deep_nesting_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

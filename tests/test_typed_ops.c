/* Typed values on the host backend against the interpreter, with every
 * padded element, the arena and the outputs poisoned (NaN / -1 / true), at
 * extents 1, 7, 33, 37 and 64 in the 64 bucket: embedding lookups with ids
 * past either end of the table, positions from range, causal masks from
 * range/less_equal/where over [N, N], attention masks cast from int64, a
 * gather along the symbolic axis (clamped to the active extent), and the
 * casts, comparisons, logic and integer arithmetic in between. Exact
 * active-extent semantics: a request of 37 in the 64 bucket equals the
 * unpadded model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "shapejit/model.h"
#include "tests/host_harness.h"

#define TOL 2e-4

static const int64_t extents[] = {1, 7, 33, 37, 64};

static void check_sjg(const char *text) {
    sj_ctx *ctx;
    sj_device *dev;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    assert_int_equal(sj_host_device_create(ctx, NULL, &dev), SJ_OK);
    sj_graph *g = NULL;
    if (sj_sjg_parse(ctx, text, strlen(text), "typed.sjg", NULL, &g) != SJ_OK)
        fail_msg("parse: %s", sj_ctx_last_error(ctx));
    for (int fused = 0; fused < 2; fused++) {
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.fusion = fused;
        if (!h_check(dev, g, 64, extents, 5, &o, 0x1234 + (uint64_t)fused, TOL, "typed"))
            fail_msg("host and interpreter differ (fusion %d)", fused);
    }
    sj_graph_destroy(g);
    sj_device_destroy(dev);
    sj_ctx_destroy(ctx);
}

/* token + position embeddings, ids clamped into the tables */
static void test_embedding(void **state) {
    (void)state;
    check_sjg("graph emb(N) {\n"
              "  input ids: int64[N]\n"
              "  param tok: [5, 4] = random(seed=1)\n"
              "  param pos_table: [64, 4] = random(seed=2)\n"
              "  pos = range(dtype=int64, start=0, delta=1, shape=[N])\n"
              "  e = add(gather(tok, ids, axis=0), gather(pos_table, pos, axis=0))\n"
              "  output e\n"
              "}\n");
}

/* causal mask over [N, N] from positions, then masked softmax attention */
static void test_causal_attention(void **state) {
    (void)state;
    check_sjg("graph causal(N) {\n"
              "  input x: [N, 8]\n"
              "  pos = range(dtype=int64, start=0, delta=1, shape=[N])\n"
              "  q = reshape(pos, shape=[N, 1])\n"
              "  k = reshape(pos, shape=[1, N])\n"
              "  allowed = less_equal(k, q)\n"
              "  s = matmul(x, transpose(x, perm=[1, 0]))\n"
              "  neg = fill(dtype=float32, value=-inf, shape=[N, N])\n"
              "  p = softmax(where(allowed, s, neg), axis=1)\n"
              "  y = matmul(p, x)\n"
              "  output y\n"
              "  output allowed\n"
              "}\n");
}

/* an int64 attention mask: cast, not, where; a float mask by multiplication */
static void test_attention_mask(void **state) {
    (void)state;
    check_sjg("graph mask(N) {\n"
              "  input x: [N, 4]\n"
              "  input m: int64[N]\n"
              "  keep = cast(m, to=bool)\n"
              "  drop = reshape(not(keep), shape=[N, 1])\n"
              "  y = where(drop, -10000, x)\n"
              "  fm = reshape(cast(m, to=float32), shape=[N, 1])\n"
              "  z = mul(sub(1, fm), -3.5)\n"
              "  output y\n"
              "  output z\n"
              "}\n");
}

/* gather along the symbolic axis: indices are clamped to the active extent */
static void test_gather_symbolic_axis(void **state) {
    (void)state;
    check_sjg("graph gsym(N) {\n"
              "  input x: [N, 3]\n"
              "  input idx: int64[N]\n"
              "  g = gather(x, idx, axis=0)\n"
              "  output g\n"
              "}\n");
}

/* integer arithmetic, comparisons, logic and casts, as the interpreter */
static void test_int_ops(void **state) {
    (void)state;
    check_sjg("graph ints(N) {\n"
              "  input a: int64[N, 2]\n"
              "  input b: int32[N, 2]\n"
              "  input c: bool[N, 2]\n"
              "  input x: [N, 2]\n"
              "  param k: int64[2] = [3, -2]\n"
              "  bb = cast(b, to=int64)\n"
              "  s = add(mul(a, k), sub(bb, a))\n"
              "  d = div(a, bb)\n"
              "  r = mod(a, k)\n"
              "  mx = max(a, bb)\n"
              "  mn = min(neg(a), abs(bb))\n"
              "  lt = less(a, bb); gt = greater(a, bb); eq = equal(a, bb)\n"
              "  lg = or(and(lt, c), xor(gt, not(eq)))\n"
              "  fi = cast(mul(x, 3), to=int32)\n"
              "  fb = cast(x, to=bool)\n"
              "  lg2 = and(lg, fb)\n"
              "  isn = isnan(div(x, x))\n"
              "  isi = isinf(div(1, x))\n"
              "  special = or(isn, isi)\n"
              "  output s\n output d\n output r\n output mx\n output mn\n output lg2\n"
              "  output fi\n output special\n"
              "}\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_causal_attention),
        cmocka_unit_test(test_attention_mask),
        cmocka_unit_test(test_gather_symbolic_axis),
        cmocka_unit_test(test_int_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

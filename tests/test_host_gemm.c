/* The packed GEMM (runtime/host_code/host_gemm.c): the kernel alone at every code
 * level against a double-precision reference, with every element outside
 * the slice poisoned (NaN in A's and B's padding, a sentinel around C), odd
 * sizes across the MR/NR/KC/MC block edges, transposed operands, 16-bit
 * weights, row splits that must give the same bits, B packed once at load
 * (bitwise the per-call packing's result); then matmuls that
 * compile to it, against the interpreter through the poisoning harness, at
 * extents 1, bucket-min, bucket-max and between, for x86-64-v2, v3 (where
 * this CPU runs it) and native code, fp32 and bf16 weights. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/half.h"
#include "compile/llvm/llvm_impl.h"
#include "tests/host_harness.h"

#define S SJ_DIM_SYM

static int setup(void **state) { return h_fixture_setup(state, 0x243f6a8885a308d3ull); }

/* The levels this CPU runs natively (a higher one asked for runs the
 * highest it has, which the qemu runs of this program cover). */
static int max_level(void) { return sj__host_kernel_level(4); }

typedef struct gemm_case {
    int64_t m, n, k;
    bool ta, tb;       /* A stored [k, m] / B stored [n, k] */
    sj_precision prec; /* B's elements */
} gemm_case;

static const float SENTINEL = 12345.0f;

/* The GEMM's working memory, as a host kernel call gets it (device.h). */
static _Alignas(64) unsigned char scratch[SJ_HOST_SCRATCH_BYTES];

/* Whether got is A's row times B's column j in double, to within the
 * float32 rounding of a k-term sum (the row read with column stride a_cs,
 * B with row stride b_rs and column stride b_cs); *want gets the sum. */
static bool near_product(float got, const float *a_row, int64_t a_cs, const float *b, int64_t b_rs,
                         int64_t b_cs, int64_t j, int64_t k, double *want) {
    double sum = 0, mag = 0;
    for (int64_t p = 0; p < k; p++) {
        double t = (double)a_row[p * a_cs] * b[p * b_rs + j * b_cs];
        sum += t;
        mag += fabs(t);
    }
    *want = sum;
    return fabs(got - sum) <= 1e-5 * mag + 1e-6;
}

/* B packed once (sj__host_gemm_pack, at the level the CPU runs, in the
 * case's precision: the float32 values rounded as the policy stores them)
 * and read by sj__host_gemm_packed: the pack writes exactly its bytes, and
 * the product is bitwise the per-call packing's of the same stored weight
 * (same panels, same order of summation; 16-bit panels widened exactly),
 * sentinel around C untouched. */
static void check_packed(const gemm_case *c, int level, const float *a, int64_t a_rs, int64_t a_cs,
                         const float *b, int64_t b_rs, int64_t b_cs, const float *want, int64_t ldc) {
    int64_t m = c->m, n = c->n, k = c->k;
    int eff = sj__host_kernel_level(level);
    int64_t size = sj__host_gemm_element_bytes(c->prec);
    int64_t bytes = sj__host_gemm_pack_bytes(eff, c->prec, k, n);
    assert_true(bytes >= n * k * size);
    int64_t guard = 67;
    unsigned char *packed = malloc((size_t)(bytes + guard));
    memset(packed, 0xA5, (size_t)(bytes + guard));
    sj__host_gemm_pack(eff, c->prec, k, n, b, b_rs, b_cs, packed);
    for (int64_t i = bytes; i < bytes + guard; i++)
        if (packed[i] != 0xA5)
            fail_msg("level %d k=%lld n=%lld prec=%d: the pack wrote past its %lld bytes", eff,
                     (long long)k, (long long)n, c->prec, (long long)bytes);
    float *got = malloc((size_t)((m + 1) * ldc) * sizeof *got);
    for (int64_t i = 0; i < (m + 1) * ldc; i++) got[i] = SENTINEL;
    sj__host_gemm_packed(eff, c->prec, m, n, k, a, a_rs, a_cs, packed, got, ldc, scratch);
    for (int64_t i = 0; i < (m + 1) * ldc; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]))
            fail_msg("level %d m=%lld n=%lld k=%lld ta=%d tb=%d prec=%d: packed B gives C[%lld] = "
                     "%.9g, per-call packing %.9g",
                     eff, (long long)m, (long long)n, (long long)k, c->ta, c->tb, c->prec, (long long)i,
                     got[i], want[i]);
    free(packed);
    free(got);
}

/* Runs one case at one level; returns the largest error over the bound. */
static void run_case(const gemm_case *c, int level, uint64_t seed) {
    int64_t m = c->m, n = c->n, k = c->k;
    /* Padded storage: two more rows and columns than the slice, NaN. */
    int64_t ar = (c->ta ? k : m) + 2, ac = (c->ta ? m : k) + 3;
    int64_t br = (c->tb ? n : k) + 2, bc = (c->tb ? k : n) + 3;
    int64_t ldc = n + 5;
    float *a = malloc((size_t)(ar * ac) * sizeof *a), *bf = malloc((size_t)(br * bc) * sizeof *bf);
    uint16_t *bh = malloc((size_t)(br * bc) * sizeof *bh);
    float *cc = malloc((size_t)((m + 1) * ldc) * sizeof *cc), *split = malloc((size_t)((m + 1) * ldc) * sizeof *split);
    for (int64_t i = 0; i < ar * ac; i++) a[i] = NAN;
    for (int64_t i = 0; i < br * bc; i++) bf[i] = NAN;
    int64_t a_rs = c->ta ? 1 : ac, a_cs = c->ta ? ac : 1;
    int64_t b_rs = c->tb ? 1 : bc, b_cs = c->tb ? bc : 1;
    for (int64_t i = 0; i < m; i++)
        for (int64_t p = 0; p < k; p++) a[i * a_rs + p * a_cs] = h_uniform(&seed, -1, 1);
    for (int64_t p = 0; p < k; p++)
        for (int64_t j = 0; j < n; j++) {
            float v = h_uniform(&seed, -1, 1);
            /* the value the kernel sees: rounded to the weight's precision */
            if (c->prec == SJ_PRECISION_BF16) v = sj_bf16_to_f32(sj_f32_to_bf16(v));
            if (c->prec == SJ_PRECISION_FP16) v = sj_f16_to_f32(sj_f32_to_f16(v));
            bf[p * b_rs + j * b_cs] = v;
        }
    for (int64_t i = 0; i < br * bc; i++)
        bh[i] = c->prec == SJ_PRECISION_BF16 ? sj_f32_to_bf16(bf[i]) : sj_f32_to_f16(bf[i]);
    const void *b = c->prec == SJ_PRECISION_FP32 ? (const void *)bf : (const void *)bh;
    for (int64_t i = 0; i < (m + 1) * ldc; i++) cc[i] = split[i] = SENTINEL;
    sj__host_gemm(level, c->prec, m, n, k, a, a_rs, a_cs, b, b_rs, b_cs, cc, ldc, scratch);
    if (k > 0) check_packed(c, level, a, a_rs, a_cs, bf, b_rs, b_cs, cc, ldc);
    /* A stored transposed is always packed; stored by rows, a product a few
     * panels wide reads it in place: either way the same bits. */
    if (!c->ta && m > 0 && k > 0) {
        float *at = malloc((size_t)(k * m) * sizeof *at), *ct = malloc((size_t)((m + 1) * ldc) * sizeof *ct);
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) at[p * m + i] = a[i * a_rs + p];
        for (int64_t i = 0; i < (m + 1) * ldc; i++) ct[i] = SENTINEL;
        sj__host_gemm(level, c->prec, m, n, k, at, 1, m, b, b_rs, b_cs, ct, ldc, scratch);
        if (memcmp(ct, cc, (size_t)((m + 1) * ldc) * sizeof *ct))
            fail_msg("level %d m=%lld n=%lld k=%lld: A read in place and A packed give different bits",
                     level, (long long)m, (long long)n, (long long)k);
        free(at);
        free(ct);
    }
    /* The same rows in two launches, as a row split runs them. */
    int64_t r = m / 3 + 1 > m ? m : m / 3 + 1;
    sj__host_gemm(level, c->prec, r, n, k, a, a_rs, a_cs, b, b_rs, b_cs, split, ldc, scratch);
    sj__host_gemm(level, c->prec, m - r, n, k, a + r * a_rs, a_rs, a_cs, b, b_rs, b_cs, split + r * ldc, ldc,
                  scratch);
    for (int64_t i = 0; i < m + 1; i++)
        for (int64_t j = 0; j < ldc; j++) {
            float got = cc[i * ldc + j];
            if (i == m || j >= n) {
                if (got != SENTINEL)
                    fail_msg("level %d m=%lld n=%lld k=%lld: wrote C(%lld, %lld) outside the slice", level,
                             (long long)m, (long long)n, (long long)k, (long long)i, (long long)j);
                continue;
            }
            double want;
            if (!near_product(got, a + i * a_rs, a_cs, bf, b_rs, b_cs, j, k, &want))
                fail_msg("level %d m=%lld n=%lld k=%lld ta=%d tb=%d prec=%d: C(%lld, %lld) = %.9g, want %.9g",
                         level, (long long)m, (long long)n, (long long)k, c->ta, c->tb, c->prec,
                         (long long)i, (long long)j, got, want);
            if (memcmp(&got, &split[i * ldc + j], sizeof got))
                fail_msg("level %d m=%lld n=%lld k=%lld: row %lld differs when the rows are split at %lld",
                         level, (long long)m, (long long)n, (long long)k, (long long)i, (long long)r);
        }
    free(a);
    free(bf);
    free(bh);
    free(cc);
    free(split);
}

/* Sizes about every block edge: MR (4, 6, 12), NR (8, 16, 32) and half
 * of it (a last panel of exactly one vector: the _half kernel), KC 256,
 * MC 384; 1, 3, 17, 33 and 1000 as the odd sizes; 24 and 72
 * (MobileNetV3's) end in a masked vector, the second of a panel at 24 and
 * a panel's only one at 72, at AVX-512. */
static void test_kernel_levels(void **state) {
    (void)state;
    static const int64_t ms[] = {1, 5, 12, 13, 25, 390};
    static const int64_t ns[] = {1, 3, 8, 16, 17, 24, 33, 72, 1000};
    static const int64_t ks[] = {1, 3, 17, 257, 1000};
    uint64_t seed = 7;
    int top = max_level();
    for (int level = 2; level <= 4; level++) {
        if (level > top) {
            printf("level %d: not on this CPU (its request runs level %d, checked as such)\n", level, top);
        }
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                    /* the largest products once per level, not in every combination */
                    if (ms[mi] == 390 && ns[ni] * ks[ki] > 33 * 1000) continue;
                    gemm_case c = {ms[mi], ns[ni], ks[ki], false, false, SJ_PRECISION_FP32};
                    run_case(&c, level, seed++);
                }
        gemm_case big = {390, 1000, 300, false, false, SJ_PRECISION_FP32};
        run_case(&big, level, seed++);
    }
}

/* Transposed operands and 16-bit weights, at every level: rows of one
 * tile, of two (the few-tiles path, each panel streamed whole) and of the
 * blocked loop. */
static void test_kernel_layouts(void **state) {
    (void)state;
    uint64_t seed = 99;
    static const int64_t ms[] = {1, 8, 29};
    for (int level = 2; level <= 4; level++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++)
                    for (int prec = 0; prec < SJ_PRECISION_COUNT_; prec++) {
                        gemm_case c = {ms[mi], 45, 270, ta, tb, (sj_precision)prec};
                        run_case(&c, level, seed++);
                    }
}

/* A few cases at every level, for the runs under qemu's CPUs without
 * AVX-512 (cpu_portability.cmake): a level the CPU lacks must run the
 * highest it has, correctly, never fault. */
static void test_kernel_any_cpu(void **state) {
    (void)state;
    uint64_t seed = 5;
    static const gemm_case cases[] = {{13, 33, 257, false, false, SJ_PRECISION_FP32},
                                      {7, 19, 40, true, true, SJ_PRECISION_BF16},
                                      {5, 40, 30, false, true, SJ_PRECISION_FP16}};
    for (int level = 2; level <= 4; level++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], level, seed++);
}

/* A's rows all one row (row stride 0, as a broadcast or a size-1 dim
 * gives): every level, B packed per call and packed once, rows of one
 * tile, two and the blocked loop. The kernel's row stride 0 means a packed
 * tile, so such an A must be packed or read with a stride of its own. */
static void test_kernel_broadcast_rows(void **state) {
    (void)state;
    enum { K = 70, N_MAX = 100, M_MAX = 30 };
    static const int64_t ms[] = {1, 5, 30}, ns[] = {17, 100};
    float a[K], b[K * N_MAX], c[M_MAX * N_MAX];
    uint64_t seed = 11;
    for (int p = 0; p < K; p++) a[p] = h_uniform(&seed, -1, 1);
    for (int i = 0; i < K * N_MAX; i++) b[i] = h_uniform(&seed, -1, 1);
    for (int level = 2; level <= 4; level++)
        for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                for (int packed = 0; packed < 2; packed++) {
                    int64_t m = ms[mi], n = ns[ni];
                    int eff = sj__host_kernel_level(level);
                    void *panels = NULL;
                    if (packed) {
                        panels = malloc((size_t)sj__host_gemm_pack_bytes(eff, SJ_PRECISION_FP32, K, n));
                        sj__host_gemm_pack(eff, SJ_PRECISION_FP32, K, n, b, n, 1, panels);
                        sj__host_gemm_packed(eff, SJ_PRECISION_FP32, m, n, K, a, 0, 1, panels, c, n, scratch);
                    } else {
                        sj__host_gemm(level, SJ_PRECISION_FP32, m, n, K, a, 0, 1, b, n, 1, c, n, scratch);
                    }
                    free(panels);
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < n; j++) {
                            double want;
                            if (!near_product(c[i * n + j], a, 1, b, n, 1, j, K, &want))
                                fail_msg("level %d m=%lld n=%lld packed=%d: C(%lld, %lld) = %.9g, want %.9g",
                                         level, (long long)m, (long long)n, packed, (long long)i,
                                         (long long)j, c[i * n + j], want);
                        }
                }
}

/* An empty contraction: zeros, and nothing outside the slice. */
static void test_kernel_empty_k(void **state) {
    (void)state;
    float c[3 * 4];
    for (int i = 0; i < 12; i++) c[i] = SENTINEL;
    float a = NAN, b = NAN;
    sj__host_gemm(4, SJ_PRECISION_FP32, 2, 3, 0, &a, 1, 1, &b, 1, 1, c, 4, scratch);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) assert_true(c[i * 4 + j] == (i < 2 && j < 3 ? 0.0f : SENTINEL));
}

/* Whether the host code for g at E names the extern kernel `name`. */
static bool calls_extern(const sj_graph *g, int64_t E, const sj_compile_options *o, const char *name) {
    sj_artifact *a;
    assert_int_equal(sj_compile(g, E, o, &a), SJ_OK);
    sj_artifact_info info;
    sj_artifact_get_info(a, &info);
    bool yes = false;
    size_t len = strlen(name);
    for (const char *p = info.externs; p && (p = strstr(p, name)); p += len)
        if ((p == info.externs || p[-1] == ',') && (p[len] == ',' || p[len] == 0)) yes = true;
    sj_artifact_destroy(a);
    return yes;
}

/* Whether the host code for g at E calls the packed GEMM. */
static bool calls_gemm(const sj_graph *g, int64_t E, const sj_compile_options *o) {
    return calls_extern(g, E, o, "sj__host_gemm") || calls_extern(g, E, o, "sj__host_gemm_packed");
}

/* x [N, k] @ w [k, n] + bias, gelu: a linear layer of a model; with
 * transposed, w is stored [n, k] and transposed (an ONNX Gemm's transB). */
static void build_linear_as(fixture *f, int64_t k, int64_t n, bool transposed) {
    sj_graph *g;
    assert_int_equal(sj_graph_create(f->ctx, "N", &g), SJ_OK);
    sj_graph_destroy(f->g);
    f->g = g;
    sj_value x = input(f, "x", 2, (int64_t[]){S, k}), w;
    if (transposed) {
        assert_int_equal(sj_graph_transpose(g, param(f, "w", 2, (int64_t[]){n, k}), (int[]){1, 0}, &w),
                         SJ_OK);
    } else {
        w = param(f, "w", 2, (int64_t[]){k, n});
    }
    sj_value b = param(f, "b", 1, (int64_t[]){n}), y;
    assert_int_equal(sj_graph_matmul(g, x, w, &y), SJ_OK);
    assert_int_equal(sj_graph_binary(g, SJ_OP_ADD, y, b, &y), SJ_OK);
    assert_int_equal(sj_graph_unary(g, SJ_OP_GELU, y, &y), SJ_OK);
    assert_int_equal(sj_graph_output(g, y, "y"), SJ_OK);
}

static void build_linear(fixture *f, int64_t k, int64_t n) { build_linear_as(f, k, n, false); }

static void check_levels(fixture *f, int64_t E, const int64_t *ns, int n_ns, const char *what,
                         sj_attention_schedule attention) {
    static const char *const cpus[] = {"x86-64-v2", "x86-64-v3", NULL};
    for (size_t ci = 0; ci < sizeof cpus / sizeof cpus[0]; ci++) {
        if (cpus[ci] && !strcmp(cpus[ci], "x86-64-v3") && max_level() < 3) continue;
        for (int prec = 0; prec < 2; prec++) {
            sj_compile_options o;
            sj_compile_options_init(&o);
            o.cpu = cpus[ci];
            o.precision = prec ? SJ_PRECISION_BF16 : SJ_PRECISION_FP32;
            o.attention = attention;
            char msg[160];
            snprintf(msg, sizeof msg, "%s, bucket %lld, cpu %s, %s", what, (long long)E,
                     cpus[ci] ? cpus[ci] : "native", prec ? "bf16" : "fp32");
            if (!calls_gemm(f->g, E, &o)) fail_msg("%s: does not call the packed GEMM", msg);
            assert_true(h_check(f->dev, f->g, E, ns, n_ns, &o, f->seed + ci, 1e-4, msg));
        }
    }
}

/* Linear layers through the compiler: extents 1, bucket-min, bucket-max and
 * between, at odd widths and contractions. */
static void test_compiled_linear(void **state) {
    fixture *f = *state;
    static const int64_t shapes[][2] = {{64, 64}, {17, 1000}, {1000, 33}, {300, 65}};
    static const int64_t ns[] = {1, 33, 64, 47};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        build_linear(f, shapes[i][0], shapes[i][1]);
        char what[64];
        snprintf(what, sizeof what, "[N, %lld] @ [%lld, %lld]", (long long)shapes[i][0],
                 (long long)shapes[i][0], (long long)shapes[i][1]);
        check_levels(f, 64, ns, 4, what, SJ_ATTENTION_AUTO);
    }
}

/* Linear layers of few rows against a weight large enough to read packed,
 * stored as used or transposed: float32 and bf16 weights at x86-64-v3 and
 * native take the packed GEMM's panels (exact row counts, each panel
 * streamed whole; bf16 panels widened as they are read), x86-64-v2 the
 * in-place few-rows kernel or, transposed, dot products; every extent of
 * buckets 1, 2, 5 and 8 against the interpreter. The widths sit off every panel and k-block
 * edge (NR 8/16/32, KC 256). */
static void test_compiled_linear_few_rows(void **state) {
    fixture *f = *state;
    static const int64_t shapes[][2] = {{640, 520}, {300, 1001}};
    static const int64_t buckets[] = {1, 2, 5, 8};
    static const char *const cpus[] = {"x86-64-v2", "x86-64-v3", NULL};
    for (size_t i = 0; i < 2 * sizeof shapes / sizeof shapes[0]; i++) {
        bool transposed = i % 2;
        const int64_t *shape = shapes[i / 2];
        build_linear_as(f, shape[0], shape[1], transposed);
        for (size_t bi = 0; bi < sizeof buckets / sizeof buckets[0]; bi++) {
            int64_t E = buckets[bi], ns[8];
            for (int64_t n = 1; n <= E; n++) ns[n - 1] = n;
            for (size_t ci = 0; ci < sizeof cpus / sizeof cpus[0]; ci++) {
                int level = !cpus[ci] ? max_level() : !strcmp(cpus[ci], "x86-64-v3") ? 3 : 2;
                if (level > max_level()) continue;
                for (int prec = 0; prec < 2; prec++) {
                    sj_compile_options o;
                    sj_compile_options_init(&o);
                    o.cpu = cpus[ci];
                    o.precision = prec ? SJ_PRECISION_BF16 : SJ_PRECISION_FP32;
                    char msg[160];
                    snprintf(msg, sizeof msg, "[N, %lld] @ [%lld, %lld]%s, bucket %lld, cpu %s, %s",
                             (long long)shape[0], (long long)shape[0], (long long)shape[1],
                             transposed ? " (stored transposed)" : "", (long long)E,
                             cpus[ci] ? cpus[ci] : "native", prec ? "bf16" : "fp32");
                    bool want = level >= 3;
                    if (calls_extern(f->g, E, &o, "sj__host_gemm_packed") != want)
                        fail_msg("%s: %s the packed GEMM", msg, want ? "does not call" : "calls");
                    assert_true(h_check(f->dev, f->g, E, ns, (int)E, &o, f->seed + ci, 1e-4, msg));
                }
            }
        }
    }
}

/* Attention, unfused: scores x xT over the symbolic dim (B transposed, its
 * width the active extent) and softmax(scores) @ x (the contraction the
 * active extent). Padding keys must never enter a sum. */
/* A run on the caller's thread with a 256 KiB stack (musl's default is 128): the
 * GEMM packs into the device's scratch, not its stack (about 416 KiB,
 * which overflowed such a thread), and gives what the interpreter gives.
 * Against a library built with ASan the stack is 1 MiB: ASan keeps every
 * inlined microkernel variant's accumulators in slots of their own (gcc
 * -fstack-usage: 268 KB for the AVX-512 kernel's frame, against 432 B
 * without ASan), so only the uninstrumented build measures what a caller's
 * thread needs. */
#if defined(SJ_LIBRARY_SANITIZED)
#define SMALL_STACK (1024 * 1024)
#else
#define SMALL_STACK (256 * 1024)
#endif
typedef struct stack_run {
    sj_executable *exe;
    const sj_tensor *in;
    sj_tensor out[1];
    sj_status st;
} stack_run;

static void *run_on_small_stack(void *arg) {
    stack_run *r = arg;
    r->st = sj_executable_run(r->exe, 48, r->in, r->out);
    return NULL;
}

static void test_gemm_on_a_small_stack(void **state) {
    fixture *f = *state;
    build_linear(f, 384, 512);
    sj_compile_options o;
    sj_compile_options_init(&o);
    if (!calls_gemm(f->g, 64, &o)) fail_msg("the linear layer does not call the GEMM");
    sj_artifact *a;
    sj_executable *exe;
    assert_int_equal(sj_compile(f->g, 64, &o, &a), SJ_OK);
    assert_int_equal(sj_artifact_load(a, f->dev, f->g, &exe), SJ_OK);
    uint64_t seed = f->seed;
    sj_tensor in[1], want[1];
    h_inputs(f->g, 48, &seed, in);
    assert_int_equal(sj_interp_run(f->g, 48, in, want), SJ_OK);
    stack_run r = {.exe = exe, .in = in};
    pthread_attr_t attr;
    pthread_t t;
    assert_int_equal(pthread_attr_init(&attr), 0);
    assert_int_equal(pthread_attr_setstacksize(&attr, SMALL_STACK), 0);
    assert_int_equal(pthread_create(&t, &attr, run_on_small_stack, &r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&attr);
    if (r.st != SJ_OK) fail_msg("%s", sj_ctx_last_error(f->ctx));
    for (int64_t i = 0; i < sj_tensor_numel(&want[0]); i++)
        if (!(fabsf(r.out[0].data[i] - want[0].data[i]) <= 1e-4f * (1 + fabsf(want[0].data[i]))))
            fail_msg("element %lld: %g, the interpreter %g", (long long)i, r.out[0].data[i], want[0].data[i]);
    h_free_tensors(f->ctx, r.out, 1);
    h_free_tensors(f->ctx, want, 1);
    h_free_tensors(f->ctx, in, 1);
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
}

static void test_compiled_attention_unfused(void **state) {
    fixture *f = *state;
    sj_value x = input(f, "x", 2, (int64_t[]){S, 64}), xt, s, y;
    assert_int_equal(sj_graph_transpose(f->g, x, (int[]){1, 0}, &xt), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, x, xt, &s), SJ_OK);
    assert_int_equal(sj_graph_softmax(f->g, SJ_OP_SOFTMAX, s, -1, &s), SJ_OK);
    assert_int_equal(sj_graph_matmul(f->g, s, x, &y), SJ_OK);
    assert_int_equal(sj_graph_output(f->g, y, "y"), SJ_OK);
    static const int64_t ns[] = {1, 129, 256, 200};
    check_levels(f, 256, ns, 4, "softmax(x xT) x", SJ_ATTENTION_UNFUSED);
}

/* argv[1], when given, is a cmocka test filter (cpu_portability.cmake). */
int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_levels),
        cmocka_unit_test(test_kernel_any_cpu),
        cmocka_unit_test(test_kernel_layouts),
        cmocka_unit_test(test_kernel_empty_k),
        cmocka_unit_test(test_kernel_broadcast_rows),
        cmocka_unit_test_setup_teardown(test_compiled_linear, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_compiled_linear_few_rows, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_compiled_attention_unfused, setup, h_fixture_teardown),
        cmocka_unit_test_setup_teardown(test_gemm_on_a_small_stack, setup, h_fixture_teardown),
    };
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Host matmuls at the sizes people serve, against this machine's limits (a
 * program, not a test).
 *
 *   bench_gemm [--quick] [--threads T]
 *
 * First a probe of the core: the FMA peak of each x86-64 level this CPU
 * runs natively (a register-only multiply-add loop, 12 independent chains,
 * one thread) and the bandwidth of a streaming read of 512 MiB. Then, for
 * each of those levels (code compiled with --cpu x86-64-v2, x86-64-v3 and
 * native, so an AVX-512 machine times the lower levels' code too), linear
 * layers y = x @ w through sj_compile and sj_executable_run at
 * BERT-base (768 -> 3072, 3072 -> 768), Llama-7B MLP (4096 -> 11008) and
 * one matmul [37, 768] x [768, 3072] sizes: median time per run, GFLOP/s and
 * its share of the level's peak; beside them single-thread OpenBLAS on the
 * same product. The few-row steps (N = 1, a decode step, and 4 or 8 rows,
 * a small batch) are weight streaming: their figure is GB/s of weights
 * read, as a share of the measured bandwidth, with fp32 and bf16 weights.
 *
 * One thread figures use the thread's CPU time (a shared machine's other
 * load is not the code's cost); --threads T > 1 uses wall time. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_timing.h"
#include "compile/llvm/llvm_impl.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"
#include "shapejit/graph.h"
#include "shapejit/tensor.h"

typedef float vf16 __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
typedef float vf4 __attribute__((vector_size(16)));

#define CHAINS(X, VT) X(VT, 0) X(VT, 1) X(VT, 2) X(VT, 3) X(VT, 4) X(VT, 5) \
    X(VT, 6) X(VT, 7) X(VT, 8) X(VT, 9) X(VT, 10) X(VT, 11)
#define PEAK_DECL(VT, i) VT a##i = (VT){0} + (float)(i) * 1e-3f;
#define PEAK_STEP(VT, i) a##i = a##i * b + c;
#define PEAK_SUM(VT, i) +a##i[0]
/* GFLOP/s of ITER x 12 independent chains of VT multiply-adds (CPU time):
 * a*b+c contracts to FMA at the FMA levels (this file is built with
 * -ffp-contract=fast); the SSE level has a multiply and an add unit. The
 * empty asm keeps the chains in registers and the loop from folding. */
#define PEAK_FN(NAME, ATTR, VT, LANES)                                                            \
    ATTR static double NAME(long iter) {                                                          \
        CHAINS(PEAK_DECL, VT)                                                                     \
        VT b = (VT){0} + 0.999f, c = (VT){0} + 1e-4f;                                             \
        double t0 = bench_cpu_ns();                                                               \
        for (long i = 0; i < iter; i++) {                                                         \
            CHAINS(PEAK_STEP, VT)                                                                 \
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));    \
        }                                                                                         \
        double ns = bench_cpu_ns() - t0;                                                          \
        float s = 0 CHAINS(PEAK_SUM, VT);                                                         \
        if (s == 1234.5f) puts("");                                                               \
        return 12.0 * LANES * 2 * (double)iter / ns;                                              \
    }
PEAK_FN(peak_v4, __attribute__((target("avx512f"))), vf16, 16)
PEAK_FN(peak_v3, __attribute__((target("avx2,fma"))), vf8, 8)
PEAK_FN(peak_v2, , vf4, 4)

static double best_of(double (*fn)(long), long iter) {
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double g = fn(iter);
        if (g > best) best = g;
    }
    return best;
}

/* Bytes per ns of a summing read of p[0, n) with 8 independent 8-float
 * accumulators (AVX2 loads where the CPU has them, so the core's load
 * width does not cap the figure below what the kernels reach). */
#define READ_FN(NAME, ATTR)                                                                       \
    ATTR static double NAME(const float *p, size_t n) {                                          \
        vf8 acc[8] = {{0}};                                                                       \
        double t0 = bench_wall_ns();                                                              \
        for (size_t i = 0; i < n; i += 64)                                                        \
            for (int j = 0; j < 8; j++) {                                                         \
                vf8 v;                                                                            \
                memcpy(&v, p + i + 8 * j, sizeof v);                                              \
                acc[j] += v;                                                                      \
            }                                                                                     \
        double ns = bench_wall_ns() - t0;                                                         \
        vf8 s = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];             \
        if (s[0] == 1234.5f) puts("");                                                            \
        return (double)(n * sizeof(float)) / ns;                                                  \
    }
READ_FN(read_avx2, __attribute__((target("avx2"))))
READ_FN(read_sse, )

/* GB/s of a streaming read of 512 MiB (median of 5). */
static double read_bandwidth(bool avx2) {
    size_t n = (size_t)128 << 20;
    float *p = aligned_alloc(64, n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(i & 7);
    double t[5];
    for (int r = 0; r < 5; r++) t[r] = avx2 ? read_avx2(p, n) : read_sse(p, n);
    free(p);
    return bench_median(t, 5);
}

typedef struct level {
    const char *name, *cpu; /* cpu: --cpu for the compile, NULL = native */
    double peak;
} level;

static void die(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_gemm: %s: %s\n", what, sj_ctx_last_error(ctx));
    exit(1);
}

/* Median ns per run of g (one output) compiled with o at bucket n and run at
 * n on inputs of a fixed pattern; destroys g. */
static double time_graph(sj_ctx *ctx, sj_device *dev, sj_graph *g, int64_t n, const sj_compile_options *o,
                         bool wall, int reps) {
    sj_artifact *a;
    sj_executable *exe;
    if (sj_compile(g, n, o, &a) != SJ_OK) die(ctx, "compile");
    if (sj_artifact_load(a, dev, g, &exe) != SJ_OK) die(ctx, "load");
    int n_in = sj_graph_num_inputs(g);
    sj_tensor in[4], out;
    for (int i = 0; i < n_in; i++) {
        sj_value_desc d;
        sj_graph_input_desc(g, i, &d);
        sj_shape at = sj_shape_at(&d.shape, n);
        sj_tensor_alloc(ctx, at.rank, at.dims, &in[i]);
        for (int64_t j = 0; j < sj_tensor_numel(&in[i]); j++)
            in[i].data[j] = (float)((j * 7 + i) % 11) * 0.1f - 0.5f;
    }
    sj_value_desc od;
    sj_graph_output_desc(g, 0, &od);
    sj_shape os = sj_shape_at(&od.shape, n);
    sj_tensor_alloc(ctx, os.rank, os.dims, &out);
    if (sj_executable_run(exe, n, in, &out) != SJ_OK) die(ctx, "run");
    double t[16];
    for (int r = 0; r < reps; r++) {
        double t0 = wall ? bench_wall_ns() : bench_cpu_ns();
        sj_executable_run(exe, n, in, &out);
        t[r] = (wall ? bench_wall_ns() : bench_cpu_ns()) - t0;
    }
    for (int i = 0; i < n_in; i++) sj_tensor_free(ctx, &in[i]);
    sj_tensor_free(ctx, &out);
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
    sj_graph_destroy(g);
    return bench_median(t, reps);
}

/* Median ns per run of y = x @ w ([n, k] x [k, m]) compiled for lv at bucket
 * n, with weights in `prec`. */
static double time_linear(sj_ctx *ctx, sj_device *dev, const level *lv, int64_t n, int64_t k,
                          int64_t m, sj_precision prec, bool wall, int reps) {
    sj_graph *g;
    if (sj_graph_create(ctx, "N", &g) != SJ_OK) die(ctx, "graph");
    float *w = malloc((size_t)(k * m) * sizeof *w);
    for (int64_t i = 0; i < k * m; i++) w[i] = (float)(i % 13) * 0.01f - 0.06f;
    sj_value x, wv, y;
    sj_graph_input(g, "x", 2, (int64_t[]){SJ_DIM_SYM, k}, &x);
    sj_graph_param(g, "w", 2, (int64_t[]){k, m}, w, &wv);
    free(w);
    sj_graph_matmul(g, x, wv, &y);
    sj_graph_output(g, y, "y");
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.cpu = lv->cpu;
    o.precision = prec;
    return time_graph(ctx, dev, g, n, &o, wall, reps);
}

/* Median ns per run of softmax(q kT / 8) v over heads x [n, 64] inputs,
 * compiled for lv at bucket n under the attention schedule att. */
static double time_attention(sj_ctx *ctx, sj_device *dev, const level *lv, int64_t heads, int64_t n,
                             sj_attention_schedule att, bool wall, int reps) {
    sj_graph *g;
    if (sj_graph_create(ctx, "N", &g) != SJ_OK) die(ctx, "graph");
    const int64_t dims[3] = {heads, SJ_DIM_SYM, 64};
    sj_value q, k, v, kt, s, sc, p, y;
    float eighth = 0.125f;
    sj_graph_input(g, "q", 3, dims, &q);
    sj_graph_input(g, "k", 3, dims, &k);
    sj_graph_input(g, "v", 3, dims, &v);
    sj_graph_param(g, "scale", 0, NULL, &eighth, &sc);
    sj_graph_transpose(g, k, (int[]){0, 2, 1}, &kt);
    sj_graph_matmul(g, q, kt, &s);
    sj_graph_binary(g, SJ_OP_MUL, s, sc, &s);
    sj_graph_softmax(g, SJ_OP_SOFTMAX, s, -1, &p);
    sj_graph_matmul(g, p, v, &y);
    sj_graph_output(g, y, "y");
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.cpu = lv->cpu;
    o.attention = att;
    return time_graph(ctx, dev, g, n, &o, wall, reps);
}

static double time_openblas(int64_t n, int64_t k, int64_t m, int reps) {
    float *a = malloc((size_t)(n * k) * sizeof *a), *b = malloc((size_t)(k * m) * sizeof *b);
    float *c = malloc((size_t)(n * m) * sizeof *c);
    for (int64_t i = 0; i < n * k; i++) a[i] = (float)(i % 7) * 0.1f;
    for (int64_t i = 0; i < k * m; i++) b[i] = (float)(i % 13) * 0.01f;
    double t[16];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)k, 1, a, (int)k, b, (int)m, 0, c, (int)m);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_cpu_ns();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)k, 1, a, (int)k, b,
                    (int)m, 0, c, (int)m);
        t[r] = bench_cpu_ns() - t0;
    }
    free(a);
    free(b);
    free(c);
    return bench_median(t, reps);
}

static void cpu_name(char *out, size_t len) {
    snprintf(out, len, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) snprintf(out, len, "%s", p + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    fclose(f);
}

int main(int argc, char **argv) {
    bool quick = false;
    int threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gemm [--quick] [--threads T]\n");
            return 2;
        }
    }
    openblas_set_num_threads(1);
    bool v4 = sj__host_kernel_level(4) >= 4, v3 = sj__host_kernel_level(4) >= 3;
    char cpu[128];
    cpu_name(cpu, sizeof cpu);
    long iter = quick ? 20000000 : 100000000;
    level levels[3];
    int n_levels = 0;
    levels[n_levels++] = (level){"x86-64-v2", "x86-64-v2", best_of(peak_v2, iter)};
    if (v3) levels[n_levels++] = (level){"x86-64-v3", "x86-64-v3", best_of(peak_v3, iter)};
    if (v4) levels[n_levels++] = (level){"native (v4)", NULL, best_of(peak_v4, iter)};
    double bw = read_bandwidth(v3);
    printf("# %s; levels run natively:", cpu);
    for (int i = 0; i < n_levels; i++) printf(" %s", levels[i].name);
    if (!v4) printf(" (x86-64-v4 not on this CPU: not timed)");
    printf("\n# probe: FMA peak per core");
    for (int i = 0; i < n_levels; i++) printf("  %s %.1f GFLOP/s", levels[i].name, levels[i].peak);
    printf(";  streaming read %.1f GB/s\n", bw / 1e0);
    printf("# threads %d (%s time)\n", threads, threads > 1 ? "wall" : "CPU");

    sj_ctx *ctx;
    sj_device *dev;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_host_device_config cfg;
    sj_host_device_config_init(&cfg);
    cfg.threads = threads;
    if (sj_host_device_create_config(ctx, &cfg, &dev) != SJ_OK) die(ctx, "host device");
    bool wall = threads > 1;
    static const struct { const char *what; int64_t n, k, m; bool full; } shapes[] = {
        {"one matmul", 37, 768, 3072, false},
        {"BERT-base FFN up", 256, 768, 3072, false},
        {"BERT-base FFN down", 256, 3072, 768, false},
        {"BERT-base attention out", 64, 768, 768, false},
        {"Llama-7B MLP up", 128, 4096, 11008, false},
        {"Llama-7B MLP up (large)", 512, 4096, 11008, true},
        /* a conv as its GEMM: one 56 x 56 image's positions by 3 x 3 x 64
         * taps, 64 channels out (ResNet-18's layer 1): few columns, so the
         * A packing weighs as much as the products */
        {"ResNet-18 3x3 conv, 64 -> 64", 3136, 576, 64, false},
        {"ResNet-18 3x3 conv, 128 -> 128", 784, 1152, 128, false},
    };
    printf("| level | product | ms | GFLOP/s | of peak | OpenBLAS 1 thread GFLOP/s |\n|---|---|---|---|---|---|\n");
    for (int li = 0; li < n_levels; li++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            if (quick && shapes[s].full) continue;
            int64_t n = shapes[s].n, k = shapes[s].k, m = shapes[s].m;
            double flop = 2.0 * (double)n * (double)k * (double)m;
            int reps = flop > 1e10 ? 3 : 9;
            double ns = time_linear(ctx, dev, &levels[li], n, k, m, SJ_PRECISION_FP32, wall, reps);
            double blas = li == n_levels - 1 ? flop / time_openblas(n, k, m, reps) : 0;
            char bl[32] = "";
            if (blas > 0) snprintf(bl, sizeof bl, "%.1f", blas);
            printf("| %s | %s [%lld, %lld] x [%lld, %lld] | %.2f | %.1f | %.0f%% | %s |\n", levels[li].name,
                   shapes[s].what, (long long)n, (long long)k, (long long)k, (long long)m, ns / 1e6,
                   flop / ns, 100 * flop / ns / (levels[li].peak * threads), bl);
            fflush(stdout);
        }
    /* Few rows against a weight of 180 MB (far past the last-level cache):
     * a decode step and small batches, where the weight's stream is the
     * cost; GB/s of weights read, as a share of the measured bandwidth. */
    printf("\n| level | few rows (decode, small batch) | weights | ms | GB/s | of bandwidth |\n"
           "|---|---|---|---|---|---|\n");
    static const int64_t few_rows[] = {1, 4, 8};
    for (int li = 0; li < n_levels; li++)
        for (int prec = 0; prec < 2; prec++)
            for (size_t r = 0; r < sizeof few_rows / sizeof few_rows[0]; r++) {
                int64_t n = few_rows[r], k = 4096, m = 11008;
                sj_precision p = prec ? SJ_PRECISION_BF16 : SJ_PRECISION_FP32;
                double ns = time_linear(ctx, dev, &levels[li], n, k, m, p, true, 9);
                double bytes = (double)k * (double)m * (prec ? 2 : 4);
                printf("| %s | [%lld, %lld] x [%lld, %lld] | %s | %.2f | %.1f | %.0f%% |\n", levels[li].name,
                       (long long)n, (long long)k, (long long)k, (long long)m, prec ? "bf16" : "fp32",
                       ns / 1e6, bytes / ns, 100 * bytes / ns / bw);
                fflush(stdout);
            }
    printf("\n| level | attention, head 64 | fused ms | unfused ms | unfused GFLOP/s | default |\n|---|---|---|---|---|---|\n");
    static const int64_t att_shapes[][2] = {{1, 64}, {1, 300}, {1, 1024}, {12, 256}};
    for (int li = 0; li < n_levels; li++)
        for (size_t s = 0; s < sizeof att_shapes / sizeof att_shapes[0]; s++) {
            int64_t h = att_shapes[s][0], n = att_shapes[s][1];
            double f = time_attention(ctx, dev, &levels[li], h, n, SJ_ATTENTION_FUSED, wall, 9);
            double u = time_attention(ctx, dev, &levels[li], h, n, SJ_ATTENTION_UNFUSED, wall, 9);
            double d = time_attention(ctx, dev, &levels[li], h, n, SJ_ATTENTION_AUTO, wall, 9);
            double flop = 4.0 * (double)h * (double)n * (double)n * 64;
            printf("| %s | %lld x [%lld, 64] | %.3f | %.3f | %.1f | %.3f |\n", levels[li].name, (long long)h,
                   (long long)n, f / 1e6, u / 1e6, flop / u, d / 1e6);
            fflush(stdout);
        }
    sj_device_destroy(dev);
    sj_ctx_destroy(ctx);
    return 0;
}

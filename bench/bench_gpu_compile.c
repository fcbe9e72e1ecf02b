/* Cold GPU compile time per bucket (a program, not a test; needs no GPU).
 *
 *   bench_gpu_compile [--arch sm_80|sm_90] [--quick]
 *
 * The example FFN block (layernorm, x @ w1 + b1, gelu, gemm back, residual;
 * d = 64, hidden = 256), built with the graph builder, compiled by sj_compile
 * for every pow2 bucket 1..1024 (--quick: 1, 64, 1024) by both GPU paths:
 *   nvptx: lowering -> LLVM NVPTX IR -> O3 -> PTX -> cubin (nvJitLink)
 *   nvrtc: lowering -> CUDA C -> NVRTC -> PTX + cubin
 * Each figure is the median of 3 cold compiles (nothing is cached between
 * them) after one warm-up compile that pays the one-time library start-up;
 * "nvptx ptx" is the LLVM part alone (sj_emit_text to PTX, no cubin), which
 * shows how the NVPTX path's time splits between LLVM and ptxas/nvJitLink;
 * wall and process CPU time are both shown, since a loaded machine stretches
 * wall time. The host target is listed for reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_timing.h"
#include "shapejit/ext/compile.h"
#include "tests/gpu_graphs.h"

#define REPS 3

static double clock_ms(clockid_t id) { return bench_clock_ns(id) / 1e6; }

typedef struct figure {
    double wall_ms, cpu_ms;
    size_t code_bytes;
} figure;

static sj_ctx *g_ctx;

static void die(const char *what) {
    fprintf(stderr, "bench_gpu_compile: %s: %s\n", what, sj_ctx_last_error(g_ctx));
    exit(1);
}

/* target NVPTX with ptx_only: sj_emit_text to PTX (no cubin). */
static figure measure_as(const sj_graph *g, int64_t extent, sj_target target, const char *arch,
                         int ptx_only) {
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.target = target;
    o.arch = arch;
    double wall[REPS], cpu[REPS];
    figure f = {0};
    for (int r = 0; r < REPS; r++) {
        double w0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        if (ptx_only) {
            char *ptx;
            size_t len;
            if (sj_emit_text(g, extent, &o, SJ_EMIT_PTX, &ptx, &len) != SJ_OK) die("emit PTX");
            wall[r] = clock_ms(CLOCK_MONOTONIC) - w0;
            cpu[r] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
            f.code_bytes = len;
            sj_free(g_ctx, ptx);
            continue;
        }
        sj_artifact *a;
        if (sj_compile(g, extent, &o, &a) != SJ_OK) die("compile");
        wall[r] = clock_ms(CLOCK_MONOTONIC) - w0;
        cpu[r] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
        sj_artifact_info info;
        sj_artifact_get_info(a, &info);
        f.code_bytes = 0;
        for (int i = 0; i < info.n_code; i++) {
            sj_code_format fmt;
            const uint8_t *bytes;
            size_t len;
            if (sj_artifact_code(a, i, &fmt, &bytes, &len) == SJ_OK) f.code_bytes += len;
        }
        sj_artifact_destroy(a);
    }
    qsort(wall, REPS, sizeof wall[0], bench_cmp_double);
    qsort(cpu, REPS, sizeof cpu[0], bench_cmp_double);
    f.wall_ms = wall[REPS / 2];
    f.cpu_ms = cpu[REPS / 2];
    return f;
}

static figure measure(const sj_graph *g, int64_t extent, sj_target target, const char *arch) {
    return measure_as(g, extent, target, arch, 0);
}

int main(int argc, char **argv) {
    const char *arch = "sm_90";
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--arch") && i + 1 < argc) {
            arch = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_gpu_compile [--arch sm_80|sm_90] [--quick]\n");
            return 2;
        }
    }
    if (sj_ctx_create(NULL, &g_ctx) != SJ_OK) return 1;
    gg b = {.seed = 1};
    if (sj_graph_create(g_ctx, "N", &b.g) != SJ_OK) die("graph");
    gg_ffn_dims(&b, 64, 256);
    if (b.st != SJ_OK) die("building the FFN graph");

    static const sj_target targets[] = {SJ_TARGET_NVPTX, SJ_TARGET_NVRTC, SJ_TARGET_HOST};
    for (int t = 0; t < 3; t++) measure(b.g, 64, targets[t], arch); /* warm-up */

    int64_t buckets[16];
    int nb = 0;
    if (quick) {
        buckets[nb++] = 1, buckets[nb++] = 64, buckets[nb++] = 1024;
    } else {
        for (int64_t e = 1; e <= 1024; e *= 2) buckets[nb++] = e;
    }
    printf("FFN block d=64 h=256, arch %s, cold compile per bucket (median of %d)\n", arch, REPS);
    printf("%8s %7s | %21s | %21s | %21s | %9s | %14s\n", "bucket", "kernels",
           "nvptx ms (wall/cpu)", "nvptx ptx (wall/cpu)", "nvrtc ms (wall/cpu)", "nvrtc/", "host ms");
    printf("%8s %7s | %21s | %21s | %21s | %9s | %14s\n", "", "", "LLVM+nvJitLink", "LLVM only",
           "", "nvptx cpu", "(wall/cpu)");
    double sum[4][2] = {{0}};
    for (int i = 0; i < nb; i++) {
        int kernels = 0;
        sj_compile_options o;
        sj_compile_options_init(&o);
        if (sj_compile_kernel_count(b.g, buckets[i], &o, &kernels) != SJ_OK) die("kernel count");
        figure f[4];
        for (int t = 0; t < 3; t++) f[t] = measure(b.g, buckets[i], targets[t], arch);
        f[3] = measure_as(b.g, buckets[i], SJ_TARGET_NVPTX, arch, 1);
        for (int t = 0; t < 4; t++) {
            sum[t][0] += f[t].wall_ms;
            sum[t][1] += f[t].cpu_ms;
        }
        printf("%8lld %7d | %9.1f / %9.1f | %9.1f / %9.1f | %9.1f / %9.1f | %8.1fx | %6.1f / %5.1f\n",
               (long long)buckets[i], kernels, f[0].wall_ms, f[0].cpu_ms, f[3].wall_ms, f[3].cpu_ms,
               f[1].wall_ms, f[1].cpu_ms, f[1].cpu_ms / f[0].cpu_ms, f[2].wall_ms, f[2].cpu_ms);
    }
    printf("mean per bucket (wall / cpu ms): nvptx %.1f / %.1f (LLVM part %.1f / %.1f), "
           "nvrtc %.1f / %.1f, host %.1f / %.1f\n",
           sum[0][0] / nb, sum[0][1] / nb, sum[3][0] / nb, sum[3][1] / nb, sum[1][0] / nb,
           sum[1][1] / nb, sum[2][0] / nb, sum[2][1] / nb);
    sj_graph_destroy(b.g);
    sj_ctx_destroy(g_ctx);
    return 0;
}

/* Host backend benchmark (a program, not a test).
 *
 *   bench_host [MODEL_DIR] [--quick]
 *
 * For the example models (MODEL_DIR/{mlp,ffn,attention}.sjg, default
 * examples/models) at N in {1, 7, 64, 300, 1024}, compiled for the pow2
 * bucket holding N: cold compile ms, kernels after fusion, host time per run
 * (sj_executable_run: pad, launches, slice) and interpreter time per run.
 * Then kernel-only figures: fused elementwise and row kernels (softmax over
 * the innermost axis and over N) as a fraction of the bandwidth of a memcpy
 * of the same bytes (goal >= 50%), and matmul
 * GFLOP/s of the generated register-tiled kernel (the default) and of the
 * extern-kernel path (blas_min_work = 1: the kernel calls cblas_sgemm)
 * against single-threaded OpenBLAS called directly (goal >= 50% at
 * K, N >= 256); log and pow over [N, 4096] against the same work as one
 * libm call per element (what the kernels did before their inline IR). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"
#include "shapejit/model.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"
#include "bench/bench_timing.h"
#include "plan/artifact_impl.h"

static double now_s(void) { return bench_wall_ns() / 1e9; }

/* Median seconds of `reps` calls of fn(arg), after one warm-up call. */
static double median_time(void (*fn)(void *), void *arg, int reps) {
    double t[64];
    if (reps > 64) reps = 64;
    fn(arg);
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        fn(arg);
        t[i] = now_s() - t0;
    }
    return bench_median(t, reps);
}

static int64_t bucket_of(int64_t n) {
    int64_t e = 1;
    while (e < n) e *= 2;
    return e;
}

static void die(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_host: %s: %s\n", what, sj_ctx_last_error(ctx));
    exit(1);
}

/* ---- models ---- */

typedef struct run_args {
    sj_executable *exe;
    const sj_graph *g;
    int64_t n;
    sj_tensor *in, *out;
} run_args;

static void run_host(void *p) {
    run_args *a = p;
    sj_executable_run(a->exe, a->n, a->in, a->out);
}

static void run_interp(void *p) {
    run_args *a = p;
    sj_tensor out[4];
    if (sj_interp_run(a->g, a->n, a->in, out) != SJ_OK) return;
    for (int i = 0; i < sj_graph_num_outputs(a->g); i++) sj_tensor_free(sj_graph_ctx(a->g), &out[i]);
}

static void bench_model(sj_ctx *ctx, sj_device *dev, const char *dir, const char *name, bool quick) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.sjg", dir, name);
    sj_model_options mo;
    sj_model_options_init(&mo);
    sj_graph *g;
    if (sj_model_load(ctx, path, &mo, &g) != SJ_OK) die(ctx, path);
    static const int64_t ns[] = {1, 7, 64, 300, 1024};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i], E = bucket_of(n);
        sj_compile_options o;
        sj_compile_options_init(&o);
        double t0 = now_s();
        sj_artifact *a;
        if (sj_compile(g, E, &o, &a) != SJ_OK) die(ctx, "compile");
        double compile_ms = 1e3 * (now_s() - t0);
        sj_executable *exe;
        if (sj_artifact_load(a, dev, g, &exe) != SJ_OK) die(ctx, "load");
        sj_tensor in[4], out[4];
        for (int k = 0; k < sj_graph_num_inputs(g); k++) {
            sj_value_desc d;
            sj_graph_input_desc(g, k, &d);
            sj_shape at = sj_shape_at(&d.shape, n);
            sj_tensor_alloc(ctx, at.rank, at.dims, &in[k]);
            for (int64_t j = 0; j < sj_tensor_numel(&in[k]); j++) in[k].data[j] = (float)((j * 7919) % 200) / 100 - 1;
        }
        for (int k = 0; k < sj_graph_num_outputs(g); k++) {
            sj_value_desc d;
            sj_graph_output_desc(g, k, &d);
            sj_shape at = sj_shape_at(&d.shape, n);
            sj_tensor_alloc(ctx, at.rank, at.dims, &out[k]);
        }
        run_args ra = {exe, g, n, in, out};
        int reps = quick ? 5 : 21;
        double host = median_time(run_host, &ra, reps);
        double interp = median_time(run_interp, &ra, n >= 300 ? 3 : reps);
        sj_artifact_info info;
        sj_artifact_get_info(a, &info);
        printf("%-10s N=%-5lld bucket=%-5lld kernels=%-2d compile=%7.1f ms  host=%9.1f us  "
               "interp=%10.1f us  speedup=%6.1fx%s\n",
               name, (long long)n, (long long)E, info.n_kernels, compile_ms, host * 1e6,
               interp * 1e6, interp / host, info.externs[0] ? "  (extern: cblas_sgemm)" : "");
        for (int k = 0; k < sj_graph_num_inputs(g); k++) sj_tensor_free(ctx, &in[k]);
        for (int k = 0; k < sj_graph_num_outputs(g); k++) sj_tensor_free(ctx, &out[k]);
        sj_executable_destroy(exe);
        sj_artifact_destroy(a);
    }
    sj_graph_destroy(g);
}

/* ---- kernel-only measurements ---- */

typedef struct kernel_args {
    sj_device *dev;
    sj_kernel_handle k[8];
    int n_k;
    void *bufs[8][8];
    const int64_t *info[8];
    int64_t n;
} kernel_args;

static void run_kernels(void *p) {
    kernel_args *a = p;
    sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    for (int i = 0; i < a->n_k; i++) sj_device_launch(a->dev, a->k[i], &dims, a->bufs[i], a->info[i], a->n);
}

typedef struct loaded {
    sj_artifact *a;
    sj_module *m;
    float **slots;
    float *arena;
    kernel_args ka;
} loaded;

/* Compiles g at E and binds every slot to fresh memory (inputs/params filled). */
static void load_kernels(sj_ctx *ctx, sj_device *dev, const sj_graph *g, int64_t E,
                         const sj_compile_options *o, loaded *L) {
    if (sj_compile(g, E, o, &L->a) != SJ_OK) die(ctx, "compile");
    const sj_launch_plan *p = sj__artifact_plan(L->a);
    const uint8_t *code;
    size_t len;
    if (sj_artifact_find_code(L->a, SJ_CODE_HOST_OBJECT, &code, &len) != SJ_OK ||
        sj_device_load_module(dev, SJ_CODE_HOST_OBJECT, code, len, &L->m) != SJ_OK)
        die(ctx, "load module");
    L->slots = calloc((size_t)p->n_slots, sizeof *L->slots);
    L->arena = aligned_alloc(64, (size_t)p->arena_bytes + 64);
    for (int i = 0; i < p->n_slots; i++) {
        if (p->slots[i].kind == SJ_SLOT_ARENA) {
            L->slots[i] = L->arena + p->slots[i].offset / 4;
            continue;
        }
        size_t bytes = ((size_t)p->slots[i].bytes + 63) & ~(size_t)63;
        L->slots[i] = aligned_alloc(64, bytes);
        for (int64_t j = 0; j < p->slots[i].bytes / 4; j++) L->slots[i][j] = (float)(j % 17) * 0.125f - 1;
    }
    L->ka = (kernel_args){.dev = dev, .n = E, .n_k = p->n_launches};
    for (int l = 0; l < p->n_launches && l < 8; l++) {
        const sj_launch *la = &p->launches[l];
        sj_kernel_attrs at;
        if (sj_module_kernel(L->m, p->kernels[la->kernel].name, &L->ka.k[l], &at) != SJ_OK)
            die(ctx, "resolve");
        for (int i = 0; i < la->n_slots && i < 8; i++) L->ka.bufs[l][i] = L->slots[p->launch_slots[la->first_slot + i]];
        L->ka.info[l] = p->words + la->first_word;
    }
}

static void unload_kernels(loaded *L) {
    const sj_launch_plan *p = sj__artifact_plan(L->a);
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].kind != SJ_SLOT_ARENA) free(L->slots[i]);
    free(L->slots);
    free(L->arena);
    sj_module_destroy(L->m);
    sj_artifact_destroy(L->a);
}

typedef struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
} copy_args;

static void run_memcpy(void *p) {
    copy_args *c = p;
    memcpy(c->dst, c->src, c->bytes);
}

/* Bandwidth of a one-kernel graph over x [rows, cols] (reads x, writes y) vs
 * memcpy of the same bytes. */
static void bench_bandwidth(sj_ctx *ctx, sj_device *dev, const char *what, int which, int64_t rows,
                            int64_t cols) {
    sj_graph *g;
    sj_graph_create(ctx, "N", &g);
    sj_value x, y, t;
    sj_graph_input(g, "x", 2, (int64_t[]){SJ_DIM_SYM, cols}, &x);
    float *ones = malloc((size_t)cols * sizeof *ones);
    for (int64_t i = 0; i < cols; i++) ones[i] = 1.0f + (float)i / (float)cols;
    sj_value sc;
    sj_graph_param(g, "s", 1, (int64_t[]){cols}, ones, &sc);
    free(ones);
    if (which == 0) { /* y = relu(x * s + x) */
        sj_graph_binary(g, SJ_OP_MUL, x, sc, &t);
        sj_graph_binary(g, SJ_OP_ADD, t, x, &t);
        sj_graph_unary(g, SJ_OP_RELU, t, &y);
    } else if (which == 1) {
        sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 1, &y);
    } else if (which == 4) { /* over N: by columns (host_emit.c emit_row_by_columns) */
        sj_graph_softmax(g, SJ_OP_SOFTMAX, x, 0, &y);
    } else if (which == 2) {
        sj_graph_layernorm(g, x, sc, SJ_NO_VALUE, 1, 1e-5f, &y);
    } else {
        sj_graph_unary(g, SJ_OP_GELU, x, &y);
    }
    sj_graph_output(g, y, "y");
    sj_compile_options o;
    sj_compile_options_init(&o);
    loaded L;
    load_kernels(ctx, dev, g, rows, &o, &L);
    size_t bytes = (size_t)(rows * cols) * sizeof(float);
    copy_args c = {malloc(bytes), malloc(bytes), bytes};
    memset((void *)c.src, 1, bytes);
    /* Interleaved, best of each: both see the same machine load (a shared
     * machine otherwise skews one against the other). */
    double tk = 1e30, tm = 1e30;
    run_kernels(&L.ka);
    run_memcpy(&c);
    for (int i = 0; i < 25; i++) {
        double t0 = now_s();
        run_kernels(&L.ka);
        double t1 = now_s();
        run_memcpy(&c);
        double t2 = now_s();
        if (t1 - t0 < tk) tk = t1 - t0;
        if (t2 - t1 < tm) tm = t2 - t1;
    }
    /* memcpy reads and writes `bytes`; so does the kernel (x in, y out). */
    printf("%-28s [%lld, %lld]: kernel %7.2f GB/s, memcpy %7.2f GB/s -> %5.1f%% of memcpy (%d kernel)\n",
           what, (long long)rows, (long long)cols, 2.0 * (double)bytes / tk / 1e9,
           2.0 * (double)bytes / tm / 1e9, 100.0 * tm / tk, sj__artifact_plan(L.a)->n_launches);
    free(c.dst);
    free((void *)c.src);
    unload_kernels(&L);
    sj_graph_destroy(g);
}

/* ---- transcendental functions: inline IR vs a libm call per element ---- */

typedef struct libm_args {
    int which; /* 0: logf(x), 1: powf(x, p[j]) */
    const float *x, *p;
    float *y;
    int64_t rows, cols;
} libm_args;

/* What the kernels did before host_math.c had log and pow: one libm call per
 * element (their loops could not vectorise around the call). */
static void run_libm(void *q) {
    libm_args *a = q;
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t j = 0; j < a->cols; j++) {
            int64_t k = i * a->cols + j;
            a->y[k] = a->which == 0 ? logf(a->x[k]) : powf(a->x[k], a->p[j]);
        }
}

/* y = log(x) or y = pow(x, p) over x [rows, cols] in (0.01, 10), p [cols] in
 * [-3, 3): median kernel time against the same work as libm calls. */
static void bench_math(sj_ctx *ctx, sj_device *dev, int which, int64_t rows, int64_t cols) {
    sj_graph *g;
    sj_graph_create(ctx, "N", &g);
    sj_value x, pv, y;
    sj_graph_input(g, "x", 2, (int64_t[]){SJ_DIM_SYM, cols}, &x);
    float *p = malloc((size_t)cols * sizeof *p);
    for (int64_t j = 0; j < cols; j++) p[j] = -3.0f + 6.0f * (float)((j * 37) % cols) / (float)cols;
    sj_graph_param(g, "p", 1, (int64_t[]){cols}, p, &pv);
    if (which == 0) sj_graph_unary(g, SJ_OP_LOG, x, &y);
    else sj_graph_binary(g, SJ_OP_POW, x, pv, &y);
    sj_graph_output(g, y, "y");
    sj_compile_options o;
    sj_compile_options_init(&o);
    loaded L;
    load_kernels(ctx, dev, g, rows, &o, &L);
    const sj_launch_plan *plan = sj__artifact_plan(L.a);
    float *xs = NULL;
    for (int i = 0; i < plan->n_slots; i++) /* positive inputs: log's and pow's working range */
        if (plan->slots[i].kind == SJ_SLOT_INPUT) xs = L.slots[i];
    for (int64_t k = 0; k < rows * cols; k++) xs[k] = 0.01f + (float)((k * 7919) % 10007) * 1e-3f;
    libm_args la = {which, xs, p, malloc((size_t)(rows * cols) * sizeof(float)), rows, cols};
    /* Thread CPU time, interleaved: the machine may be shared, and time
     * spent descheduled is neither version's cost. */
    double tk[15], tl[15];
    run_kernels(&L.ka);
    run_libm(&la);
    for (int i = 0; i < 15; i++) {
        double t0 = bench_cpu_ns();
        run_kernels(&L.ka);
        double t1 = bench_cpu_ns();
        run_libm(&la);
        tk[i] = (t1 - t0) / 1e9;
        tl[i] = (bench_cpu_ns() - t1) / 1e9;
    }
    double mk = bench_median(tk, 15), ml = bench_median(tl, 15);
    printf("%-4s [%lld, %lld]: inline IR %8.3f ms, libm per element %8.3f ms (CPU time medians) -> %5.1fx\n",
           which == 0 ? "log" : "pow", (long long)rows, (long long)cols, mk * 1e3, ml * 1e3, ml / mk);
    free(la.y);
    free(p);
    unload_kernels(&L);
    sj_graph_destroy(g);
}

typedef struct blas_args {
    int m, n, k;
    const float *a, *b;
    float *c;
} blas_args;

static void run_blas(void *p) {
    blas_args *q = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, q->m, q->n, q->k, 1.0f, q->a, q->k, q->b,
                q->n, 0.0f, q->c, q->n);
}

static void bench_matmul(sj_ctx *ctx, sj_device *dev, int64_t m, int64_t k, int64_t n) {
    sj_graph *g;
    sj_graph_create(ctx, "N", &g);
    float *w = malloc((size_t)(k * n) * sizeof *w);
    for (int64_t i = 0; i < k * n; i++) w[i] = (float)(i % 13) * 0.01f;
    sj_value x, wv, y;
    sj_graph_input(g, "x", 2, (int64_t[]){SJ_DIM_SYM, k}, &x);
    sj_graph_param(g, "w", 2, (int64_t[]){k, n}, w, &wv);
    sj_graph_matmul(g, x, wv, &y);
    sj_graph_output(g, y, "y");
    double flop = 2.0 * (double)m * (double)n * (double)k;
    double gf[2];
    for (int mode = 0; mode < 2; mode++) {
        sj_compile_options o;
        sj_compile_options_init(&o);
        o.blas_min_work = mode == 0 ? 0 : 1;
        loaded L;
        load_kernels(ctx, dev, g, m, &o, &L);
        gf[mode] = flop / median_time(run_kernels, &L.ka, 9) / 1e9;
        unload_kernels(&L);
    }
    float *a = malloc((size_t)(m * k) * sizeof *a), *c = malloc((size_t)(m * n) * sizeof *c);
    for (int64_t i = 0; i < m * k; i++) a[i] = (float)(i % 7) * 0.1f;
    blas_args ba = {(int)m, (int)n, (int)k, a, w, c};
    double blas = flop / median_time(run_blas, &ba, 9) / 1e9;
    printf("matmul M=%-5lld K=%-5lld N=%-5lld generated %7.1f GFLOP/s (%5.1f%%), extern %7.1f "
           "GFLOP/s (%5.1f%%) via cblas_sgemm, OpenBLAS 1 thread %7.1f GFLOP/s\n",
           (long long)m, (long long)k, (long long)n, gf[0], 100 * gf[0] / blas, gf[1],
           100 * gf[1] / blas, blas);
    free(a);
    free(c);
    free(w);
    sj_graph_destroy(g);
}

int main(int argc, char **argv) {
    const char *dir = "examples/models";
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else dir = argv[i];
    }
    openblas_set_num_threads(1);
    sj_ctx *ctx;
    sj_device *dev;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    if (sj_host_device_create(ctx, NULL, &dev) != SJ_OK) die(ctx, "host device");
    printf("# models (pow2 buckets; host = sj_executable_run incl. padding and slicing)\n");
    bench_model(ctx, dev, dir, "mlp", quick);
    bench_model(ctx, dev, dir, "ffn", quick);
    bench_model(ctx, dev, dir, "attention", quick);
    printf("# fused kernels vs memcpy of the same bytes (goal >= 50%%)\n");
    int64_t rows = quick ? 1024 : 4096;
    bench_bandwidth(ctx, dev, "elementwise relu(x*s+x)", 0, rows, 1024);
    bench_bandwidth(ctx, dev, "elementwise gelu", 3, rows, 1024);
    bench_bandwidth(ctx, dev, "softmax rows", 1, rows, 1024);
    bench_bandwidth(ctx, dev, "softmax over N (axis 0)", 4, rows, 1024);
    bench_bandwidth(ctx, dev, "layernorm rows", 2, rows, 1024);
    printf("# log and pow: inline vectorisable IR vs a libm call per element (the code before)\n");
    bench_math(ctx, dev, 0, rows / 4, 4096);
    bench_math(ctx, dev, 1, rows / 4, 4096);
    printf("# matmul vs single-thread OpenBLAS sgemm (goal >= 50%% at K, N >= 256)\n");
    static const int64_t shapes[][3] = {{64, 64, 64},     {256, 256, 256}, {512, 256, 1024},
                                        {1024, 1024, 256}, {512, 512, 512}, {1024, 1024, 1024}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!quick || shapes[i][0] <= 512) bench_matmul(ctx, dev, shapes[i][0], shapes[i][1], shapes[i][2]);
    sj_device_destroy(dev);
    sj_ctx_destroy(ctx);
    return 0;
}

/* sj_gpu_check PACK_DIR OUT_DIR [MATMUL_DIR]: the GPU-machine half of
 * scripts/gpu-check.sh, built runtime-only (it compiles nothing: every
 * bucket comes from PACK_DIR/store.db, see tools/gpu_manifest.h). For each
 * GPU emitter (LLVM NVPTX, NVRTC): the ONNX node tests under PACK_DIR/onnx
 * on the GPU; every model case against the interpreter's outputs, eager and
 * replayed from the bucket's CUDA graph; host dispatch time per request
 * eager vs replayed and kernel time per bucket; a 4096 fp32 matmul's kernel
 * time (its inputs and results go to MATMUL_DIR for the torch comparison).
 * Writes OUT_DIR/gpu-check.json and OUT_DIR/summary.txt. Exit 0 when every
 * check passed, 1 when one failed, 77 without a GPU. */
#include <math.h>
#include <time.h>

#include "shapejit.h"
#include "tools/gpu_manifest.h"

#define TIMED_RUNS 200
#define MATMUL_RUNS 10
#define MAX_IO 16

#ifdef GPU_CHECK_ON_HOST
/* Built as sj_gpu_check_host in a full build: the same checks through the
 * host backend (compiling what the store lacks), so a CPU machine runs the
 * whole flow over a fresh pack (scripts/gpu-check.sh prepare does). */
static const char *const emitter_names[] = {"host"};
#define N_EMITTERS 1
#else
static const char *const emitter_names[] = {"nvptx", "nvrtc"};
#define N_EMITTERS 2
#endif

typedef struct checker {
    sj_ctx *ctx;
    const char *pack, *out, *matmul_dir;
    sj_store *store;
    sj_gpu_compiler *gc;
    sj_host_compiler *hc;
    sj_compiler comp; /* the backend under check */
    sj_device *dev;
    int emitter;
    FILE *json, *summary;
    bool first_case;
    int conf_passed, conf_failed, cases_passed, cases_failed;
    int total_failed;
    double matmul_kernel_ms[N_EMITTERS];
} checker;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A bucketed cache over this emitter's compiler and the pack's store. */
typedef struct cache {
    sj_ladder *ladder;
    sj_bucketed_cache *c;
} cache;

static sj_status cache_open(checker *k, const sj_graph *g, const char *spec, cache *out) {
    memset(out, 0, sizeof *out);
    sj_status st = sj_ladder_parse(k->ctx, spec, &out->ladder);
    if (st != SJ_OK) return st;
    sj_bucketed_cache_config cfg;
    sj_bucketed_cache_config_init(&cfg);
    return sj_bucketed_cache_create(g, out->ladder, &k->comp, k->store, &cfg, &out->c);
}

static void cache_close(cache *c) {
    sj_bucketed_cache_destroy(c->c);
    sj_ladder_destroy(c->ladder);
}

/* ---- ONNX node tests, each graph's bucket loaded from the store */

static sj_status conf_run(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                          sj_tensor *outputs) {
    checker *k = user;
    char spec[64];
    int64_t bucket = gpu_conformance_extent(g, extent);
    snprintf(spec, sizeof spec, "list:%lld", (long long)bucket);
    cache c;
    sj_status st = cache_open(k, g, spec, &c);
    void *exe = NULL;
    int64_t e;
    if (st == SJ_OK) st = sj_bucketed_cache_get_or_compile(c.c, bucket, &e, &exe);
    /* The runner hands over outputs to fill: allocated by the run. */
    for (int i = 0; st == SJ_OK && i < sj_graph_num_outputs(g); i++) outputs[i].data = NULL;
    if (st == SJ_OK) st = sj_executable_run_or_replay(exe, extent, inputs, outputs);
    cache_close(&c);
    return st;
}

static void conf_report(void *user, const sj_onnx_test_result *r) {
    checker *k = user;
    if (r->outcome == SJ_ONNX_TEST_PASSED) k->conf_passed++;
    if (r->outcome == SJ_ONNX_TEST_FAILED) {
        k->conf_failed++;
        fprintf(k->summary, "  FAIL %s onnx %s: %s\n", emitter_names[k->emitter], r->name,
                r->message);
    }
    if (r->outcome == SJ_ONNX_TEST_UNSUPPORTED) {
        k->conf_failed++; /* it passed on the host: the GPU run must too */
        fprintf(k->summary, "  FAIL %s onnx %s (unsupported here): %s\n", emitter_names[k->emitter],
                r->name, r->message);
    }
}

static void conformance(checker *k) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/onnx", k->pack);
    sj_onnx_backend b = {emitter_names[k->emitter], conf_run, NULL, k};
    sj_onnx_conformance_options o;
    sj_onnx_conformance_options_init(&o);
    o.report = conf_report;
    o.report_user = k;
    sj_onnx_conformance_summary s;
    if (sj_onnx_conformance_run(k->ctx, dir, &b, &o, &s) != SJ_OK) {
        fprintf(k->summary, "  FAIL %s onnx: %s\n", emitter_names[k->emitter],
                sj_ctx_last_error(k->ctx));
        k->conf_failed++;
    }
}

/* ---- model cases */

static bool close_enough(float got, float want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs((double)got - want) <= 1e-3 * (1.0 + fabs(want));
}

/* "" when equal, else what differs (into buf). */
static const char *compare(const sj_tensor *got, const sj_tensor *want, int n, char *buf,
                           size_t len) {
    for (int j = 0; j < n; j++) {
        int64_t m = sj_tensor_numel(&want[j]);
        if (got[j].rank != want[j].rank || sj_tensor_numel(&got[j]) != m) {
            snprintf(buf, len, "output %d has another shape", j);
            return buf;
        }
        for (int64_t i = 0; i < m; i++)
            if (!close_enough(got[j].data[i], want[j].data[i])) {
                snprintf(buf, len, "output %d element %lld is %g, the interpreter's %g", j,
                         (long long)i, got[j].data[i], want[j].data[i]);
                return buf;
            }
    }
    return "";
}

static void free_all(sj_ctx *ctx, sj_tensor *t, int n) {
    for (int i = 0; i < n; i++) sj_tensor_free(ctx, &t[i]);
}

typedef struct timing {
    double dispatch_us, kernel_us, wall_us;
} timing;

/* TIMED_RUNS runs of one kind with the device's timing on. */
static sj_status time_runs(checker *k, void *exe, int64_t rows, const sj_tensor *in, sj_tensor *out,
                           bool replay, timing *t) {
    sj_status st = sj_device_set_timing(k->dev, true);
    double t0 = now_ms();
    for (int r = 0; r < TIMED_RUNS && st == SJ_OK; r++)
        st = (replay ? sj_executable_replay : sj_executable_run)(exe, rows, in, out);
    double wall = now_ms() - t0;
    sj_device_timing dt = {0};
    if (st == SJ_OK) st = sj_device_timing_get(k->dev, &dt);
    sj_device_set_timing(k->dev, false);
    t->dispatch_us = (double)dt.dispatch_ns / 1e3 / TIMED_RUNS;
    t->kernel_us = (double)dt.kernel_ns / 1e3 / TIMED_RUNS;
    t->wall_us = wall * 1e3 / TIMED_RUNS;
    return st;
}

static void model_case(checker *k, const gpu_entry *e, const sj_graph *g, cache *c, int64_t rows) {
    sj_tensor in[MAX_IO] = {{0}}, want[MAX_IO] = {{0}}, eager[MAX_IO] = {{0}},
              replay[MAX_IO] = {{0}};
    int ni = sj_graph_num_inputs(g), no = sj_graph_num_outputs(g);
    char path[2048], why[512] = "";
    const char *diff = "";
    sj_status st = ni <= MAX_IO && no <= MAX_IO ? SJ_OK : SJ_E_UNSUPPORTED;
    for (int i = 0; i < ni && st == SJ_OK; i++) {
        snprintf(path, sizeof path, "%s/cases/%s/%lld/in%d.npy", k->pack, e->name, (long long)rows,
                 i);
        st = sj_npy_read(k->ctx, path, &in[i]);
    }
    for (int j = 0; j < no && st == SJ_OK; j++) {
        snprintf(path, sizeof path, "%s/cases/%s/%lld/want%d.npy", k->pack, e->name,
                 (long long)rows, j);
        st = sj_npy_read(k->ctx, path, &want[j]);
    }
    void *exe = NULL;
    int64_t bucket = 0;
    if (st == SJ_OK) st = sj_bucketed_cache_get_or_compile(c->c, rows, &bucket, &exe);
    if (st == SJ_OK) st = sj_executable_run(exe, rows, in, eager);
    /* The compilers capture at a bucket's first cache run; this check runs
     * the executable directly, so it captures here if nothing has. */
    if (st == SJ_OK && !sj_executable_has_capture(exe)) st = sj_executable_capture(exe);
    if (st == SJ_OK) st = sj_executable_replay(exe, rows, in, replay);
    if (st != SJ_OK) snprintf(why, sizeof why, "%s", sj_ctx_last_error(k->ctx));
    if (st == SJ_OK && *(diff = compare(eager, want, no, why, sizeof why))) st = SJ_E_INTERNAL;
    if (st == SJ_OK && *(diff = compare(replay, want, no, why, sizeof why))) {
        st = SJ_E_INTERNAL;
        memmove(why + 8, why, strlen(why) + 1 > sizeof why - 8 ? sizeof why - 8 : strlen(why) + 1);
        memcpy(why, "replay: ", 8);
    }
    timing te = {0}, tr = {0};
    /* Timed runs write into the outputs the checked runs allocated. */
    if (st == SJ_OK) st = time_runs(k, exe, rows, in, eager, false, &te);
    if (st == SJ_OK) st = time_runs(k, exe, rows, in, replay, true, &tr);
    if (st != SJ_OK && !why[0]) snprintf(why, sizeof why, "%s", sj_ctx_last_error(k->ctx));
    bool ok = st == SJ_OK;
    ok ? k->cases_passed++ : k->cases_failed++;
    if (!ok)
        fprintf(k->summary, "  FAIL %s %s rows %lld: %s\n", emitter_names[k->emitter], e->name,
                (long long)rows, why);
    fprintf(k->json,
            "%s\n    {\"emitter\": \"%s\", \"model\": \"%s\", \"rows\": %lld, \"bucket\": %lld, "
            "\"ok\": %s, \"eager_dispatch_us\": %.3f, \"replay_dispatch_us\": %.3f, "
            "\"eager_kernel_us\": %.3f, \"replay_kernel_us\": %.3f, \"eager_wall_us\": %.3f, "
            "\"replay_wall_us\": %.3f}",
            k->first_case ? "" : ",", emitter_names[k->emitter], e->name, (long long)rows,
            (long long)bucket, ok ? "true" : "false", te.dispatch_us, tr.dispatch_us, te.kernel_us,
            tr.kernel_us, te.wall_us, tr.wall_us);
    k->first_case = false;
    free_all(k->ctx, in, MAX_IO);
    free_all(k->ctx, want, MAX_IO);
    free_all(k->ctx, eager, MAX_IO);
    free_all(k->ctx, replay, MAX_IO);
}

#ifndef GPU_CHECK_ON_HOST
/* The large matmul: kernel time of replays; inputs and result for torch. */
static void matmul(checker *k, const gpu_entry *e, const sj_graph *g, cache *c) {
    int64_t rows = e->rows[0], bucket;
    sj_tensor in[2] = {{0}}, out[1] = {{0}};
    void *exe = NULL;
    sj_status st = sj_bucketed_cache_get_or_compile(c->c, rows, &bucket, &exe);
    for (int i = 0; i < 2 && st == SJ_OK; i++) st = gpu_random_input(k->ctx, g, i, rows, 7, &in[i]);
    if (st == SJ_OK && !sj_executable_has_capture(exe)) st = sj_executable_capture(exe);
    if (st == SJ_OK) st = sj_executable_replay(exe, rows, in, out); /* warm */
    timing t = {0};
    if (st == SJ_OK) {
        st = sj_device_set_timing(k->dev, true);
        for (int r = 0; r < MATMUL_RUNS && st == SJ_OK; r++)
            st = sj_executable_replay(exe, rows, in, out);
        sj_device_timing dt;
        if (st == SJ_OK) st = sj_device_timing_get(k->dev, &dt);
        sj_device_set_timing(k->dev, false);
        t.kernel_us = (double)dt.kernel_ns / 1e3 / MATMUL_RUNS;
    }
    char path[2048];
    if (st == SJ_OK && k->matmul_dir) {
        static const char *const names[] = {"a", "b"};
        for (int i = 0; i < 2 && st == SJ_OK; i++) {
            snprintf(path, sizeof path, "%s/%s.npy", k->matmul_dir, names[i]);
            if (k->emitter == 0) st = sj_npy_write(k->ctx, path, &in[i]);
        }
        snprintf(path, sizeof path, "%s/y_%s.npy", k->matmul_dir, emitter_names[k->emitter]);
        if (st == SJ_OK) st = sj_npy_write(k->ctx, path, &out[0]);
    }
    if (st != SJ_OK) {
        fprintf(k->summary, "  FAIL %s matmul: %s\n", emitter_names[k->emitter],
                sj_ctx_last_error(k->ctx));
        k->cases_failed++;
    }
    k->matmul_kernel_ms[k->emitter] = t.kernel_us / 1e3;
    free_all(k->ctx, in, 2);
    free_all(k->ctx, out, 1);
}
#endif

/* The backend of emitter t: its compiler table and the device it runs on. */
static sj_status backend_open(checker *k, int t) {
#ifdef GPU_CHECK_ON_HOST
    (void)t;
    sj_status st = sj_host_compiler_create(k->ctx, NULL, &k->hc);
    if (st != SJ_OK) return st;
    sj_host_compiler_table(k->hc, &k->comp);
    k->dev = sj_host_compiler_device(k->hc, 0);
    return SJ_OK;
#else
    sj_gpu_compiler_config cfg;
    sj_gpu_compiler_config_init(&cfg);
    cfg.options.target = t ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX;
    cfg.options.arch = GPU_PACK_ARCH;
    sj_status st = sj_gpu_compiler_create(k->ctx, &cfg, &k->gc);
    if (st != SJ_OK) return st;
    sj_gpu_compiler_table(k->gc, &k->comp);
    return sj_gpu_compiler_device(k->gc, &k->dev);
#endif
}

static void backend_close(checker *k) {
#ifdef GPU_CHECK_ON_HOST
    sj_host_compiler_destroy(k->hc);
#endif
    sj_gpu_compiler_destroy(k->gc);
    k->gc = NULL;
    k->hc = NULL;
    k->dev = NULL;
}

static void models(checker *k) {
    char path[1024], line[2048];
    snprintf(path, sizeof path, "%s/manifest.tsv", k->pack);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(k->summary, "  FAIL cannot read %s\n", path);
        k->cases_failed++;
        return;
    }
    while (fgets(line, sizeof line, f)) {
        gpu_entry e;
        if (gpu_entry_parse(line, &e) != 0) {
            fprintf(k->summary, "  FAIL bad manifest line: %s", line);
            k->cases_failed++;
            continue;
        }
        sj_graph *g = NULL;
        cache c = {0};
        sj_status st = gpu_entry_load(k->ctx, k->pack, &e, &g);
        if (st == SJ_OK) st = cache_open(k, g, e.ladder, &c);
        if (st != SJ_OK) {
            fprintf(k->summary, "  FAIL %s %s: %s\n", emitter_names[k->emitter], e.name,
                    sj_ctx_last_error(k->ctx));
            k->cases_failed++;
        } else if (!strcmp(e.kind, "matmul")) {
#ifndef GPU_CHECK_ON_HOST
            matmul(k, &e, g, &c); /* a GPU figure: not timed on the host */
#endif
        } else {
            for (int r = 0; r < e.n_rows; r++) model_case(k, &e, g, &c, e.rows[r]);
        }
        cache_close(&c);
        sj_graph_destroy(g);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: sj_gpu_check PACK_DIR OUT_DIR [MATMUL_DIR]\n");
        return 2;
    }
    checker k = {.pack = argv[1], .out = argv[2], .matmul_dir = argc > 3 ? argv[3] : NULL};
    if (sj_ctx_create(NULL, &k.ctx) != SJ_OK) return 1;
    sj_cuda_device_info info = {.name = "the host (sj_gpu_check_host)"};
#ifndef GPU_CHECK_ON_HOST
    if (sj_cuda_probe(k.ctx, NULL, &info) != SJ_OK) {
        fprintf(stderr, "sj_gpu_check: no GPU to check: %s\n", sj_ctx_last_error(k.ctx));
        sj_ctx_destroy(k.ctx);
        return 77;
    }
#endif
    char path[1024];
    sj_store_config sc;
    sj_store_config_init(&sc);
    snprintf(path, sizeof path, "%s/store.db", k.pack);
#ifdef GPU_CHECK_ON_HOST
    sc.path = NULL; /* host code is compiled into memory: the pack stays as built */
#else
    sc.path = path;
#endif
    if (sj_store_open(k.ctx, &sc, &k.store) != SJ_OK) {
        fprintf(stderr, "sj_gpu_check: %s\n", sj_ctx_last_error(k.ctx));
        return 1;
    }
    snprintf(path, sizeof path, "%s/gpu-check.json", k.out);
    k.json = fopen(path, "w");
    snprintf(path, sizeof path, "%s/summary.txt", k.out);
    k.summary = fopen(path, "w");
    if (!k.json || !k.summary) {
        fprintf(stderr, "sj_gpu_check: cannot write in %s\n", k.out);
        return 1;
    }
    fprintf(k.summary, "GPU: %s (sm_%d, %d SMs, driver %d); pack compiled for %s\n", info.name,
            info.sm, info.multiprocessors, info.driver_version, GPU_PACK_ARCH);
    fprintf(k.json, "{\"gpu\": \"%s\", \"sm\": %d, \"driver\": %d, \"cases\": [", info.name,
            info.sm, info.driver_version);
    k.first_case = true;
    int results[N_EMITTERS][4] = {{0}};
    for (int t = 0; t < N_EMITTERS; t++) {
        k.emitter = t;
        k.conf_passed = k.conf_failed = k.cases_passed = k.cases_failed = 0;
        if (backend_open(&k, t) != SJ_OK) {
            fprintf(k.summary, "  FAIL %s: %s\n", emitter_names[t], sj_ctx_last_error(k.ctx));
            k.total_failed++;
            backend_close(&k);
            continue;
        }
        double t0 = now_ms();
        conformance(&k);
        models(&k);
        backend_close(&k);
        results[t][0] = k.conf_passed, results[t][1] = k.conf_failed;
        results[t][2] = k.cases_passed, results[t][3] = k.cases_failed;
        k.total_failed += k.conf_failed + k.cases_failed;
        fprintf(
            k.summary,
            "%s: onnx node tests %d passed, %d failed; model cases %d passed, %d failed (%.1f s)\n",
            emitter_names[t], k.conf_passed, k.conf_failed, k.cases_passed, k.cases_failed,
            (now_ms() - t0) / 1e3);
    }
    fprintf(k.json, "\n  ],\n  \"emitters\": {");
    for (int t = 0; t < N_EMITTERS; t++)
        fprintf(k.json,
                "%s\"%s\": {\"onnx_passed\": %d, \"onnx_failed\": %d, \"cases_passed\": %d, "
                "\"cases_failed\": %d, \"matmul_kernel_ms\": %.4f}",
                t ? ", " : "", emitter_names[t], results[t][0], results[t][1], results[t][2],
                results[t][3], k.matmul_kernel_ms[t]);
    fprintf(k.json, "}\n}\n");
    fclose(k.json);
    fclose(k.summary);
    sj_store_close(k.store);
    sj_ctx_destroy(k.ctx);
    return k.total_failed ? 1 : 0;
}

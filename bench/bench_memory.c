/* Peak memory of a process that serves buckets (issue 21):
 *
 *   bench_memory                          -> the figures below, then their ratios
 *   bench_memory touch K [MAX_RESIDENT]   -> peak RSS after running the first K buckets
 *   bench_memory precompile MODEL SPEC    -> peak RSS of a host precompile (no store)
 *   bench_memory external DIR map|copy K  -> the same model as ONNX with its weights in
 *                                            DIR/weights.bin (external data), mapped or
 *                                            copied, after running the first K buckets
 *
 * The model is the two-matmul one: x [N,1024] @ w1 [1024,4096],
 * ReLU, @ w2 [4096,1024] (32 MiB of weights), ladder pow2:1:1024 (11
 * buckets), host backend, no store. Each figure is measured in a fresh
 * process (this program run again), as the peak resident set (VmHWM) the
 * kernel reports, so allocator caching and LLVM's transient compile memory
 * count as they would in a server. Goal: all 11 buckets touched within 1.3x
 * of one; a precompile of examples/models/attention.sjg with pow2:1:65536
 * under 1 GiB. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shapejit/engine.h"
#include "tests/onnx_external.h"

#define D_IN 1024
#define D_HID 4096

/* A "Name: N kB" line of /proc/self/status in MiB (VmHWM: the peak
 * resident set; RssAnon / RssFile: resident now, allocated / file pages). */
static double status_mib(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    unsigned long long kb = 0;
    size_t len = strlen(name);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, name, len) && line[len] == ':' && sscanf(line + len + 1, "%llu", &kb) == 1)
            break;
    fclose(f);
    return (double)kb / 1024.0;
}

static double peak_rss_mib(void) { return status_mib("VmHWM"); }

static int fail(sj_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_memory: %s: %s\n", what, sj_ctx_last_error(ctx));
    return 1;
}

/* Runs one request in each of the first k buckets of pow2:1:1024 (n = 1,
 * 2, 4, ...), so those k buckets hold their run memory. */
static int touch_buckets(sj_ctx *ctx, sj_engine *e, int k) {
    float *x = calloc((size_t)1024 * D_IN, sizeof *x);
    if (!x) return 1;
    for (int i = 0; i < k; i++) {
        int64_t n = (int64_t)1 << i;
        sj_named_tensor in[1] = {{"x", {.rank = 2, .dims = {n, D_IN}, .data = x}}}, out[1];
        if (sj_engine_run(e, in, 1, out, 1, NULL) != SJ_OK) {
            free(x);
            return fail(ctx, "run");
        }
        sj_tensor_free(ctx, &out[0].tensor);
    }
    free(x);
    return 0;
}

static sj_graph *two_matmul(sj_ctx *ctx) {
    float *w1 = malloc((size_t)D_IN * D_HID * sizeof *w1), *w2 = malloc((size_t)D_HID * D_IN * sizeof *w2);
    sj_graph *g = NULL;
    if (!w1 || !w2) goto done;
    for (size_t i = 0; i < (size_t)D_IN * D_HID; i++) {
        w1[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        w2[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    }
    int64_t xd[] = {SJ_DIM_SYM, D_IN}, d1[] = {D_IN, D_HID}, d2[] = {D_HID, D_IN};
    sj_value x, a, b, h, r, y;
    if (sj_graph_create(ctx, "N", &g) != SJ_OK || sj_graph_input(g, "x", 2, xd, &x) != SJ_OK ||
        sj_graph_param(g, "w1", 2, d1, w1, &a) != SJ_OK || sj_graph_param(g, "w2", 2, d2, w2, &b) != SJ_OK ||
        sj_graph_matmul(g, x, a, &h) != SJ_OK || sj_graph_unary(g, SJ_OP_RELU, h, &r) != SJ_OK ||
        sj_graph_matmul(g, r, b, &y) != SJ_OK || sj_graph_output(g, y, "y") != SJ_OK) {
        sj_graph_destroy(g);
        g = NULL;
    }
done:
    free(w1);
    free(w2); /* the graph holds its own copy */
    return g;
}

static int touch(int k, int max_resident) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_graph *g = two_matmul(ctx);
    if (!g) return fail(ctx, "build the model");
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:1024";
    cfg.max_resident_buckets = max_resident;
    sj_engine *e;
    if (sj_engine_open_graph(ctx, g, &cfg, &e) != SJ_OK) return fail(ctx, "open");
    if (touch_buckets(ctx, e, k) != 0) return 1;
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    printf("{\"buckets_touched\": %d, \"peak_rss_mib\": %.1f, \"weight_mib\": %.1f, "
           "\"run_mib\": %.1f, \"resident_buckets\": %d}\n",
           k, peak_rss_mib(), (double)st.weight_bytes / 1048576.0, (double)st.run_bytes / 1048576.0,
           st.buckets_resident);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return 0;
}

/* The two-matmul model written as ONNX into dir with its weights as
 * external data (w1 at 0, w2 at 16 MiB: both aligned, so mappable). */
static int write_external(const char *dir) {
    float *w1 = malloc((size_t)D_IN * D_HID * sizeof *w1), *w2 = malloc((size_t)D_HID * D_IN * sizeof *w2);
    if (!w1 || !w2) return 1;
    for (size_t i = 0; i < (size_t)D_IN * D_HID; i++) {
        w1[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        w2[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    }
    sj_test_mlp m = {.dir = dir, .in = D_IN, .hid = D_HID, .out = D_IN, .w1 = w1, .w2 = w2,
                     .off1 = 0, .off2 = (uint64_t)D_IN * D_HID * sizeof(float)};
    bool ok = sj_test_write_external_mlp(&m);
    free(w1);
    free(w2);
    if (!ok) perror("bench_memory: write the ONNX model");
    return ok ? 0 : 1;
}

static int external(const char *dir, bool copy, int k) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    char model[512];
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = "pow2:1:1024";
    cfg.model.copy_external_data = copy;
    sj_engine *e;
    if (sj_engine_open(ctx, model, &cfg, &e) != SJ_OK) return fail(ctx, "open");
    if (touch_buckets(ctx, e, k) != 0) return 1;
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    printf("{\"external\": \"%s\", \"buckets_touched\": %d, \"peak_rss_mib\": %.1f, "
           "\"rss_anon_mib\": %.1f, \"rss_file_mib\": %.1f, \"weight_mib\": %.1f, "
           "\"weight_mapped_mib\": %.1f}\n",
           copy ? "copy" : "map", k, peak_rss_mib(), status_mib("RssAnon"), status_mib("RssFile"),
           (double)st.weight_bytes / 1048576.0, (double)st.weight_mapped_bytes / 1048576.0);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return 0;
}

static int precompile(const char *model, const char *spec) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = spec;
    sj_engine *e;
    if (sj_engine_open(ctx, model, &cfg, &e) != SJ_OK) return fail(ctx, "open");
    if (sj_engine_precompile(e, 1, NULL, NULL) != SJ_OK) return fail(ctx, "precompile");
    sj_engine_stats st;
    sj_engine_stats_get(e, &st);
    printf("{\"precompile\": \"%s\", \"ladder\": \"%s\", \"buckets\": %d, \"peak_rss_mib\": %.1f, "
           "\"run_mib\": %.1f}\n",
           model, spec, st.buckets_ready, peak_rss_mib(), (double)st.run_bytes / 1048576.0);
    sj_engine_close(e);
    sj_ctx_destroy(ctx);
    return 0;
}

/* Runs this program again with args, reading the one JSON line it prints
 * and its peak_rss_mib. */
static int child(char *const args[], double *peak) {
    int fd[2];
    if (pipe(fd) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    close(fd[1]);
    char line[512] = "";
    FILE *f = fdopen(fd[0], "r");
    if (!f || !fgets(line, sizeof line, f)) line[0] = '\0';
    if (f) fclose(f);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !line[0]) return 1;
    fputs(line, stdout);
    const char *p = strstr(line, "\"peak_rss_mib\": ");
    *peak = p ? atof(p + 16) : NAN;
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "touch"))
        return touch(atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 0);
    if (argc == 4 && !strcmp(argv[1], "precompile")) return precompile(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "external") &&
        (!strcmp(argv[3], "map") || !strcmp(argv[3], "copy")))
        return external(argv[2], !strcmp(argv[3], "copy"), atoi(argv[4]));
    if (argc != 1) {
        fprintf(stderr,
                "usage: %s [touch K [MAX_RESIDENT] | precompile MODEL SPEC | external DIR map|copy K]\n",
                argv[0]);
        return 2;
    }
    double one, all, bounded;
    char *a1[] = {argv[0], "touch", "1", NULL}, *a11[] = {argv[0], "touch", "11", NULL},
         *ab[] = {argv[0], "touch", "11", "2", NULL};
    if (child(a1, &one) || child(a11, &all) || child(ab, &bounded)) {
        fprintf(stderr, "bench_memory: a measurement failed\n");
        return 1;
    }
    printf("{\"one_bucket_peak_rss_mib\": %.1f, \"all_buckets_peak_rss_mib\": %.1f, "
           "\"all_over_one\": %.2f, \"all_buckets_resident2_peak_rss_mib\": %.1f, \"goal\": 1.3}\n",
           one, all, all / one, bounded);
    /* The same weights as ONNX external data: mapped (file pages, shared
     * with any other process mapping the file) against read into memory. */
    char dir[] = "/tmp/bench_memory_XXXXXX";
    if (!mkdtemp(dir) || write_external(dir)) return 1;
    double map1, copy1, map11, copy11;
    char *m1[] = {argv[0], "external", dir, "map", "1", NULL},
         *c1[] = {argv[0], "external", dir, "copy", "1", NULL},
         *m11[] = {argv[0], "external", dir, "map", "11", NULL},
         *c11[] = {argv[0], "external", dir, "copy", "11", NULL};
    int bad = child(m1, &map1) || child(c1, &copy1) || child(m11, &map11) || child(c11, &copy11);
    char path[600];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/weights.bin", dir);
    unlink(path);
    rmdir(dir);
    if (bad) {
        fprintf(stderr, "bench_memory: an external-data measurement failed\n");
        return 1;
    }
    printf("{\"external_one_bucket_peak_rss_mib\": {\"map\": %.1f, \"copy\": %.1f}, "
           "\"external_all_buckets_peak_rss_mib\": {\"map\": %.1f, \"copy\": %.1f}}\n",
           map1, copy1, map11, copy11);
    return 0;
}

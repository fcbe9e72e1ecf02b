/* sj_gpu_pack SOURCE_DIR PACK_DIR [NODE_DIR]: the build-machine half of
 * scripts/gpu-check.sh (a full build; no GPU needed). Precompiles for sm_90,
 * with both GPU emitters (LLVM NVPTX and NVRTC), into PACK_DIR/store.db:
 * every ONNX node test graph under NODE_DIR (passing on the host: their names
 * go to PACK_DIR/conformance.txt), the example and test models at three
 * buckets each (with seeded inputs and the interpreter's outputs under
 * PACK_DIR/cases/), and a large fp32 matmul; writes PACK_DIR/manifest.tsv
 * (tools/gpu_manifest.h). Exit 0 when everything was packed. */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>

#include "shapejit.h"
#include "tools/gpu_manifest.h"

#define MATMUL_K 4096
#define MATMUL_ROWS 4096

typedef struct pack {
    sj_ctx *ctx;
    const char *dir;
    sj_store *store;
    sj_gpu_compiler *gc[2]; /* nvptx, nvrtc */
    FILE *manifest, *passed;
    int compiled, failed;
} pack;

static int fail(pack *p, const char *what) {
    fprintf(stderr, "gpu_pack: %s: %s\n", what, sj_ctx_last_error(p->ctx));
    p->failed++;
    return -1;
}

/* Every bucket of spec into the store, for both emitters: 0, -1 on a
 * failure (counted), or 1 when an emitter refuses the graph as
 * unsupported (integer and bool kernels: the GPU emitters take float32
 * only so far), which leaves the graph out of the pack. */
static int precompile(pack *p, const sj_graph *g, const char *spec) {
    sj_ladder *l;
    if (sj_ladder_parse(p->ctx, spec, &l) != SJ_OK) return fail(p, spec);
    int rc = 0;
    for (int t = 0; t < 2 && rc == 0; t++) {
        sj_compiler comp;
        sj_gpu_compiler_table(p->gc[t], &comp);
        sj_bucketed_cache_config cfg;
        sj_bucketed_cache_config_init(&cfg);
        sj_bucketed_cache *c;
        if (sj_bucketed_cache_create(g, l, &comp, p->store, &cfg, &c) != SJ_OK) {
            rc = fail(p, "cache");
            break;
        }
        sj_status st = sj_bucketed_cache_precompile_stored(c, 2, NULL, NULL);
        if (st == SJ_E_UNSUPPORTED)
            rc = 1;
        else if (st != SJ_OK)
            rc = fail(p, t ? "nvrtc precompile" : "nvptx precompile");
        sj_bucketed_cache_stats s;
        sj_bucketed_cache_stats_get(c, &s);
        p->compiled += (int)s.compiles;
        sj_bucketed_cache_destroy(c);
    }
    sj_ladder_destroy(l);
    return rc;
}

/* ---- conformance: the host backend answers; each graph run is also
 * precompiled for the GPU at the extent the GPU run will ask for. */

typedef struct conf_backend {
    pack *p;
    sj_onnx_backend host;
} conf_backend;

static sj_status conf_run(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                          sj_tensor *outputs) {
    conf_backend *cb = user;
    char spec[64];
    snprintf(spec, sizeof spec, "list:%lld", (long long)gpu_conformance_extent(g, extent));
    /* The failure's message is on the context already; a graph the GPU
     * emitters refuse counts as unsupported, and is not packed. */
    int rc = precompile(cb->p, g, spec);
    if (rc > 0) return SJ_E_UNSUPPORTED;
    if (rc < 0) return SJ_E_COMPILE;
    return cb->host.run(cb->host.user, g, extent, inputs, outputs);
}

static void conf_report(void *user, const sj_onnx_test_result *r) {
    pack *p = user;
    if (r->outcome == SJ_ONNX_TEST_PASSED) fprintf(p->passed, "%s\n", r->name);
    if (r->outcome == SJ_ONNX_TEST_FAILED) printf("  host fails %s: %s\n", r->name, r->message);
}

static int conformance(pack *p, const char *node_dir) {
    conf_backend cb = {p, {0}};
    if (sj_onnx_backend_host_create(p->ctx, &cb.host) != SJ_OK) return fail(p, "host backend");
    sj_onnx_backend b = {"gpu-pack", conf_run, NULL, &cb};
    sj_onnx_conformance_options o;
    sj_onnx_conformance_options_init(&o);
    o.report = conf_report;
    o.report_user = p;
    sj_onnx_conformance_summary s;
    sj_status st = sj_onnx_conformance_run(p->ctx, node_dir, &b, &o, &s);
    sj_onnx_backend_destroy(&cb.host);
    if (st != SJ_OK) return fail(p, node_dir);
    printf("conformance: %d pass on the host (packed), %d fail there, %d unsupported\n", s.passed,
           s.failed, s.unsupported);
    return 0;
}

/* ---- models */

static int mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out) != 0) rc = -1;
    return rc;
}

/* One model: copied in, precompiled, and for each size seeded inputs with
 * the interpreter's outputs. */
static int add_model(pack *p, const char *src, const char *name, const char *dynamic,
                     const char *fixed, const char *spec, const int64_t *rows, int n_rows) {
    const char *ext = strrchr(src, '.');
    gpu_entry e = {0};
    snprintf(e.kind, sizeof e.kind, "model");
    snprintf(e.name, sizeof e.name, "%s", name);
    snprintf(e.model, sizeof e.model, "models/%s%s", name, ext ? ext : "");
    snprintf(e.dynamic, sizeof e.dynamic, "%s", dynamic);
    snprintf(e.fixed, sizeof e.fixed, "%s", fixed);
    snprintf(e.ladder, sizeof e.ladder, "%s", spec);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", p->dir, e.model);
    if (copy_file(src, path) != 0) {
        fprintf(stderr, "gpu_pack: cannot copy %s to %s\n", src, path);
        return p->failed++, -1;
    }
    sj_graph *g;
    if (gpu_entry_load(p->ctx, p->dir, &e, &g) != SJ_OK) {
        /* Not packed, and said so: the log shows every model left out. */
        printf("  model %s left out: %s\n", name, sj_ctx_last_error(p->ctx));
        remove(path);
        return 0;
    }
    static const int64_t one[] = {1};
    if (!sj_graph_symbol(g)) spec = "list:1", rows = one, n_rows = 1;
    snprintf(e.ladder, sizeof e.ladder, "%s", spec);
    int rc = precompile(p, g, spec);
    for (int r = 0; r < n_rows && rc == 0; r++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/cases/%s/%lld", p->dir, name, (long long)rows[r]);
        if (mkdirs(dir) != 0) {
            rc = -1;
            break;
        }
        int ni = sj_graph_num_inputs(g), no = sj_graph_num_outputs(g);
        sj_tensor in[16] = {{0}}, out[16] = {{0}};
        if (ni > 16 || no > 16) {
            printf("  model %s left out: more than 16 inputs or outputs\n", name);
            break;
        }
        for (int i = 0; i < ni && rc == 0; i++) {
            if (gpu_random_input(p->ctx, g, i, rows[r], (uint64_t)rows[r], &in[i]) != SJ_OK)
                rc = fail(p, "inputs");
            snprintf(path, sizeof path, "%s/in%d.npy", dir, i);
            if (rc == 0 && sj_npy_write(p->ctx, path, &in[i]) != SJ_OK) rc = fail(p, path);
        }
        if (rc == 0 && sj_interp_run(g, rows[r], in, out) != SJ_OK) rc = fail(p, "interpreter");
        for (int j = 0; j < no && rc == 0; j++) {
            snprintf(path, sizeof path, "%s/want%d.npy", dir, j);
            if (sj_npy_write(p->ctx, path, &out[j]) != SJ_OK) rc = fail(p, path);
        }
        for (int i = 0; i < ni; i++) sj_tensor_free(p->ctx, &in[i]);
        for (int j = 0; j < no; j++) sj_tensor_free(p->ctx, &out[j]);
        e.rows[e.n_rows++] = rows[r];
    }
    sj_graph_destroy(g);
    if (rc > 0) { /* not packed, and said so, like a model that does not load */
        printf("  model %s left out: %s\n", name, sj_ctx_last_error(p->ctx));
        remove(path);
        return 0;
    }
    if (rc == 0) {
        fprintf(p->manifest, "model\t%s\t%s\t%s\t%s\t%s\t", e.name, e.model, e.dynamic, e.fixed,
                e.ladder);
        for (int r = 0; r < e.n_rows; r++)
            fprintf(p->manifest, "%s%lld", r ? "," : "", (long long)e.rows[r]);
        fprintf(p->manifest, "\n");
    }
    return rc;
}

static int add_models(pack *p, const char *source) {
    static const int64_t rows[] = {5, 20, 100};
    static const char *const examples[] = {"ffn", "mlp", "attention"};
    char src[2048];
    for (int i = 0; i < 3; i++) {
        snprintf(src, sizeof src, "%s/examples/models/%s.sjg", source, examples[i]);
        if (add_model(p, src, examples[i], "-", "-", "list:8,32,128", rows, 3) != 0) return -1;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/models", source);
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) return fprintf(stderr, "gpu_pack: cannot list %s\n", dir), p->failed++, -1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *f = names[i]->d_name;
        size_t len = strlen(f);
        if (rc == 0 && len > 5 && !strcmp(f + len - 5, ".onnx")) {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(len - 5), f);
            snprintf(src, sizeof src, "%s/%s", dir, f);
            /* batch_seq names two dims: serve over seq with batch 1, as the README shows. */
            bool two = !strcmp(name, "batch_seq");
            rc = add_model(p, src, name, two ? "seq" : "-", two ? "batch=1" : "-", "list:8,32,128",
                           rows, 3);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

static int add_matmul(pack *p) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/matmul.sjg", p->dir);
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "gpu_pack: cannot write %s\n", path), p->failed++, -1;
    fprintf(f,
            "# A large fp32 matmul, timed against torch.matmul by scripts/gpu-check.sh.\n"
            "graph matmul(n) {\n  input a: [n, %d]\n  input b: [%d, %d]\n"
            "  y = matmul(a, b)\n  output y\n}\n",
            MATMUL_K, MATMUL_K, MATMUL_K);
    if (fclose(f) != 0) return p->failed++, -1;
    gpu_entry e = {.kind = "matmul",
                   .name = "matmul",
                   .model = "models/matmul.sjg",
                   .dynamic = "-",
                   .fixed = "-"};
    snprintf(e.ladder, sizeof e.ladder, "list:%d", MATMUL_ROWS);
    sj_graph *g;
    if (gpu_entry_load(p->ctx, p->dir, &e, &g) != SJ_OK) return fail(p, path);
    int rc = precompile(p, g, e.ladder);
    sj_graph_destroy(g);
    if (rc > 0) return fail(p, "matmul precompile");
    if (rc == 0)
        fprintf(p->manifest, "matmul\tmatmul\tmodels/matmul.sjg\t-\t-\t%s\t%d\n", e.ladder,
                MATMUL_ROWS);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: sj_gpu_pack SOURCE_DIR PACK_DIR [ONNX_NODE_TEST_DIR]\n");
        return 2;
    }
    pack p = {.dir = argv[2]};
    char path[1024];
    if (sj_ctx_create(NULL, &p.ctx) != SJ_OK) return 1;
    snprintf(path, sizeof path, "%s/models", p.dir);
    if (mkdirs(path) != 0) return fprintf(stderr, "gpu_pack: cannot make %s\n", path), 1;
    sj_store_config sc;
    sj_store_config_init(&sc);
    snprintf(path, sizeof path, "%s/store.db", p.dir);
    sc.path = path;
    if (sj_store_open(p.ctx, &sc, &p.store) != SJ_OK) return fail(&p, path), 1;
    for (int t = 0; t < 2; t++) {
        sj_gpu_compiler_config cfg;
        sj_gpu_compiler_config_init(&cfg);
        cfg.options.target = t ? SJ_TARGET_NVRTC : SJ_TARGET_NVPTX;
        cfg.options.arch = GPU_PACK_ARCH;
        if (sj_gpu_compiler_create(p.ctx, &cfg, &p.gc[t]) != SJ_OK)
            return fail(&p, "gpu compiler"), 1;
    }
    snprintf(path, sizeof path, "%s/manifest.tsv", p.dir);
    p.manifest = fopen(path, "w");
    snprintf(path, sizeof path, "%s/conformance.txt", p.dir);
    p.passed = fopen(path, "w");
    if (!p.manifest || !p.passed)
        return fprintf(stderr, "gpu_pack: cannot write in %s\n", p.dir), 1;
    int rc = 0;
    if (argc == 4) rc = conformance(&p, argv[3]);
    if (rc == 0) rc = add_models(&p, argv[1]);
    if (rc == 0) rc = add_matmul(&p);
    if (fclose(p.manifest) != 0 || fclose(p.passed) != 0) rc = -1;
    printf("gpu_pack: %d artifacts compiled for %s (nvptx + nvrtc) into %s/store.db\n", p.compiled,
           GPU_PACK_ARCH, p.dir);
    for (int t = 0; t < 2; t++) sj_gpu_compiler_destroy(p.gc[t]);
    sj_store_close(p.store);
    sj_ctx_destroy(p.ctx);
    return rc == 0 && p.failed == 0 ? 0 : 1;
}

/* The host compiler behind the bucketed cache: results equal the
 * interpreter compiler's at extents across buckets (replayed and eager), a
 * warm restart over a store compiles nothing, and bad bytes, foreign
 * options, other CPUs and bad configurations are errors, never crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"

#include <ftw.h>
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/artifact.h"
#include "shapejit/ext/backends.h"
#include "shapejit/ext/interp.h"
#include "shapejit/model.h"
#include "shapejit/ext/runtime.h"
#include "core/core_impl.h"
#include "compile/llvm/llvm_impl.h"

static sj_ctx *ctx;
static sj_graph *g; /* examples/models/ffn.sjg: x [N, 64] -> y [N, 64] */
static sj_ladder *ladder;
static char dir[64], path[128];

static const int64_t keys[] = {1, 3, 4, 5, 15, 16, 17, 31, 40, 48};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int setup(void **state) {
    (void)state;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return -1;
    if (sj_model_load(ctx, SJ_SOURCE_DIR "/examples/models/ffn.sjg", NULL, &g) != SJ_OK) return -1;
    if (sj_ladder_parse(ctx, "list:4,16,48", &ladder) != SJ_OK) return -1;
    strcpy(dir, "/tmp/sj_test_hostc_XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(path, sizeof path, "%s/store.db", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    sj_ladder_destroy(ladder);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
    return 0;
}

/* Deterministic input rows for key n: row r is the same for every n, so
 * results at different extents can be compared row by row too. */
static float *make_input(int64_t n) {
    float *x = malloc((size_t)n * 64 * sizeof *x);
    for (int64_t i = 0; i < n * 64; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    return x;
}

static void run_key(sj_bucketed_cache *c, int64_t key, sj_tensor *out) {
    float *x = make_input(key);
    sj_cache_input in = {"x", x, 64, true};
    int64_t inner = 64, extent;
    memset(out, 0, sizeof *out);
    sj_status st = sj_bucketed_cache_run_padded(c, key, key, &in, 1, &inner, 1, out, 1, &extent);
    if (st != SJ_OK) printf("run at %lld: %s\n", (long long)key, sj_ctx_last_error(ctx));
    assert_int_equal(st, SJ_OK);
    assert_int_equal(out->dims[0], key);
    assert_int_equal(out->dims[1], 64);
    free(x);
}

static void assert_close(const sj_tensor *got, const sj_tensor *want, int64_t key) {
    int64_t n = sj_tensor_numel(want);
    assert_int_equal(sj_tensor_numel(got), n);
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got->data[i] - want->data[i]);
        if (!(d <= 1e-4 * (1.0 + fabs(want->data[i])))) {
            printf("key %lld element %lld: host %g, interp %g\n", (long long)key, (long long)i,
                   got->data[i], want->data[i]);
            fail();
        }
    }
}

static sj_bucketed_cache *host_cache(sj_host_compiler *hc, sj_store *store) {
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, ladder, &comp, store, NULL, &c), SJ_OK);
    return c;
}

/* Every key through host equals the interpreter compiler's result. */
static void assert_equals_interp(sj_bucketed_cache *host) {
    sj_compiler icomp;
    sj_interp_compiler(&icomp);
    sj_bucketed_cache *interp;
    assert_int_equal(sj_bucketed_cache_create(g, ladder, &icomp, NULL, NULL, &interp), SJ_OK);
    for (int k = 0; k < N_KEYS; k++) {
        sj_tensor got, want;
        run_key(host, keys[k], &got);
        run_key(interp, keys[k], &want);
        assert_close(&got, &want, keys[k]);
        sj_tensor_free(ctx, &got);
        sj_tensor_free(ctx, &want);
    }
    sj_bucketed_cache_destroy(interp);
}

static void compare_with_interp(bool replay) {
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.replay = replay;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_bucketed_cache *host = host_cache(hc, NULL);
    assert_equals_interp(host);
    /* Each bucket's executable was made once and captured only when asked. */
    assert_int_equal(sj_bucketed_cache_num_ready(host), 3);
    int64_t extent;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(host, 20, &extent, &exe), SJ_OK);
    assert_int_equal(extent, 48);
    assert_int_equal(sj_executable_has_capture(exe), replay);
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(host, &s);
    assert_int_equal(s.compiles, 3);
    sj_bucketed_cache_destroy(host);
    sj_host_compiler_destroy(hc);
}

static void test_replay_equals_interp(void **state) {
    (void)state;
    compare_with_interp(true);
}

static void test_eager_equals_interp(void **state) {
    (void)state;
    compare_with_interp(false);
}

static sj_store *open_store(void) {
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = path;
    sj_store *s;
    assert_int_equal(sj_store_open(ctx, &sc, &s), SJ_OK);
    return s;
}

static void test_warm_restart_compiles_nothing(void **state) {
    (void)state;
    sj_tensor cold[N_KEYS];
    {
        sj_store *store = open_store();
        sj_host_compiler *hc;
        assert_int_equal(sj_host_compiler_create(ctx, NULL, &hc), SJ_OK);
        sj_bucketed_cache *c = host_cache(hc, store);
        assert_int_equal(sj_bucketed_cache_precompile(c, 2, NULL, NULL), SJ_OK);
        for (int k = 0; k < N_KEYS; k++) run_key(c, keys[k], &cold[k]);
        sj_bucketed_cache_stats s;
        sj_bucketed_cache_stats_get(c, &s);
        assert_int_equal(s.compiles, 3);
        assert_int_equal(s.store_hits, 0);
        sj_bucketed_cache_destroy(c);
        sj_host_compiler_destroy(hc);
        sj_store_close(store);
    }
    /* A new compiler, store handle and cache: what a restarted process has. */
    sj_store *store = open_store();
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, NULL, &hc), SJ_OK);
    sj_bucketed_cache *c = host_cache(hc, store);
    for (int k = 0; k < N_KEYS; k++) {
        sj_tensor warm;
        run_key(c, keys[k], &warm);
        assert_int_equal(
            memcmp(warm.data, cold[k].data, (size_t)sj_tensor_numel(&warm) * sizeof(float)), 0);
        sj_tensor_free(ctx, &warm);
        sj_tensor_free(ctx, &cold[k]);
    }
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(c, &s);
    assert_int_equal(s.compiles, 0);
    assert_int_equal(s.store_hits, 3);
    assert_int_equal(s.corrupt, 0);
    sj_bucketed_cache_destroy(c);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
}

/* Another set of compile options is another key: a warm store for O3 is a
 * miss for O1. */
static void test_options_are_part_of_the_key(void **state) {
    (void)state;
    sj_store *store = open_store();
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.options.opt_level = 1;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_bucketed_cache *c = host_cache(hc, store);
    sj_tensor out;
    run_key(c, 2, &out);
    sj_tensor_free(ctx, &out);
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(c, &s);
    assert_int_equal(s.compiles, 1);
    sj_bucketed_cache_destroy(c);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
}

/* The options travel in the compiler table: a cache made with no config
 * compiles, and two option sets never share a store key. */
static void test_options_in_the_table(void **state) {
    (void)state;
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    sj_host_compiler *o3, *o1;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &o3), SJ_OK);
    hcfg.options.opt_level = 1;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &o1), SJ_OK);
    sj_compiler c3, c1;
    sj_host_compiler_table(o3, &c3);
    sj_host_compiler_table(o1, &c1);
    assert_true(c3.options_len > 0);
    sj_store_key k3, k1;
    sj_bucketed_cache_key(g, &c3, 4, &k3);
    sj_bucketed_cache_key(g, &c1, 4, &k1);
    assert_memory_not_equal(k3.options_hash, k1.options_hash, sizeof k3.options_hash);
    /* the emitter's revision is in the key: an older emitter's code misses */
    char want[64];
    snprintf(want, sizeof want, "codegen-%d", SJ_HOST_CODEGEN_REVISION);
    assert_non_null(strstr(k3.compiler_version, want));
    /* matmul tiles at every size are a schedule of their own */
    sj_host_compiler *tiled;
    hcfg.options.opt_level = 3;
    hcfg.options.matmul = SJ_MATMUL_TILED;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &tiled), SJ_OK);
    sj_compiler ct;
    sj_host_compiler_table(tiled, &ct);
    sj_store_key kt;
    sj_bucketed_cache_key(g, &ct, 4, &kt);
    assert_memory_not_equal(k3.options_hash, kt.options_hash, sizeof k3.options_hash);
    sj_host_compiler_destroy(tiled);
    sj_bucketed_cache *c;
    assert_int_equal(sj_bucketed_cache_create(g, ladder, &c1, NULL, NULL, &c), SJ_OK);
    int64_t extent;
    void *exe;
    assert_int_equal(sj_bucketed_cache_get_or_compile(c, 3, &extent, &exe), SJ_OK);
    sj_bucketed_cache_destroy(c);
    sj_host_compiler_destroy(o3);
    sj_host_compiler_destroy(o1);
}

static void test_bad_bytes_are_errors(void **state) {
    (void)state;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, NULL, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    void *art;
    size_t len;
    assert_int_equal(comp.compile(comp.ctx, g, 4, &art, &len), SJ_OK);
    void *exe = NULL;
    /* Another extent than the artifact's. */
    assert_int_equal(comp.load(comp.ctx, g, 16, art, len, &exe), SJ_E_MISMATCH);
    /* Truncated, flipped, and garbage bytes. */
    assert_int_equal(comp.load(comp.ctx, g, 4, art, len / 2, &exe), SJ_E_CORRUPT);
    ((uint8_t *)art)[len / 3] ^= 0x40;
    assert_int_equal(comp.load(comp.ctx, g, 4, art, len, &exe), SJ_E_CORRUPT);
    assert_int_not_equal(comp.load(comp.ctx, g, 4, "not an artifact", 15, &exe), SJ_OK);
    assert_null(exe);
    sj_free(ctx, art);
    /* The interpreter's bytes are not a host artifact. */
    sj_compiler icomp;
    sj_interp_compiler(&icomp);
    assert_int_equal(icomp.compile(icomp.ctx, g, 4, &art, &len), SJ_OK);
    assert_int_not_equal(comp.load(comp.ctx, g, 4, art, len, &exe), SJ_OK);
    sj_free(ctx, art);
    sj_host_compiler_destroy(hc);
}

/* Code built for a CPU feature this machine lacks is refused at load. */
static void test_missing_cpu_feature_refused(void **state) {
    (void)state;
    static const char *candidates[] = {"avx512f", "avx512vp2intersect", "amx-tile", "avx512fp16"};
    char *host = LLVMGetHostCPUFeatures();
    const char *absent = NULL;
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && !absent; i++) {
        char neg[64];
        snprintf(neg, sizeof neg, "-%s", candidates[i]);
        for (char *p = strstr(host, neg); p && !absent; p = strstr(p + 1, neg))
            if ((p[strlen(neg)] == ',' || !p[strlen(neg)]) && (p == host || p[-1] == ','))
                absent = candidates[i];
    }
    LLVMDisposeMessage(host);
    if (!absent) SJ_SKIP("this CPU has every candidate feature, so none can be missing");
    char features[64];
    snprintf(features, sizeof features, "+%s", absent);
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.options.features = features;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    /* The key names the feature (with any the compiler implied beside it). */
    assert_non_null(strstr(comp.target_features, features));
    void *art, *exe = NULL;
    size_t len;
    assert_int_equal(comp.compile(comp.ctx, g, 4, &art, &len), SJ_OK);
    assert_int_equal(comp.load(comp.ctx, g, 4, art, len, &exe), SJ_E_MISMATCH);
    assert_non_null(strstr(sj_ctx_last_error(ctx), absent));
    assert_null(exe);
    sj_free(ctx, art);
    sj_host_compiler_destroy(hc);
}

/* +avx512f on a CPU model without AVX-512 (x86-64-v3 here, so it holds on
 * any host) used to reach LLVM as given and abort the process in codegen
 * ("ZMM registers are not supported without EVEX512"). It compiles now, with
 * the implied +evex512 recorded in the artifact and the key. */
static void test_avx512_feature_on_cpu_without_it(void **state) {
    (void)state;
    sj_compile_options o;
    sj_compile_options_init(&o);
    o.cpu = "x86-64-v3";
    o.features = "+avx512f";
    sj_artifact *a = NULL;
    assert_int_equal(sj_compile(g, 16, &o, &a), SJ_OK);
    sj_artifact_info info;
    sj_artifact_get_info(a, &info);
    assert_string_equal(info.cpu, "x86-64-v3");
    /* The level's own features, then the named one and what it implies. */
    assert_non_null(strstr(info.features, "+avx2,"));
    assert_non_null(strstr(info.features, ",+avx512f,+evex512"));
    sj_artifact_destroy(a);

    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.options.cpu = "x86-64-v3";
    hcfg.options.features = "+avx512bw,-evex512"; /* an explicit choice is kept */
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    assert_non_null(strstr(comp.target_features, ",+avx512bw"));
    assert_null(strstr(comp.target_features, "evex512"));
    sj_host_compiler_destroy(hc);
}

/* Names LLVM does not know are refused with a message, before any code. */
static void test_unknown_cpu_or_feature_refused(void **state) {
    (void)state;
    static const struct {
        const char *cpu, *features, *message;
    } bad[] = {
        {NULL, "+notafeature", "'notafeature' is not one LLVM"},
        {NULL, "+avx2,+avx9000", "'avx9000' is not one LLVM"},
        {NULL, "avx2", "must be +NAME or -NAME"},
        {NULL, "+avx2,,+fma", "must be +NAME or -NAME"},
        {NULL, "+", "must be +NAME or -NAME"},
        {"pentium9", NULL, "CPU 'pentium9' is not one LLVM"},
        /* CPUs LLVM knows but without 64-bit mode: LLVM aborted the
         * process compiling for them (issue 29 item 2) */
        {"i386", NULL, "CPU 'i386' has no 64-bit mode"},
        {"pentium4", NULL, "CPU 'pentium4' has no 64-bit mode"},
        {"athlon-xp", NULL, "CPU 'athlon-xp' has no 64-bit mode"},
        {"lakemont", NULL, "CPU 'lakemont' has no 64-bit mode"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sj_host_compiler_config hcfg;
        sj_host_compiler_config_init(&hcfg);
        hcfg.options.cpu = bad[i].cpu;
        hcfg.options.features = bad[i].features;
        sj_host_compiler *hc = (sj_host_compiler *)&hcfg;
        assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_E_INVALID_ARG);
        assert_null(hc);
        assert_non_null(strstr(sj_ctx_last_error(ctx), bad[i].message));

        sj_artifact *a = NULL;
        assert_int_equal(sj_compile(g, 4, &hcfg.options, &a), SJ_E_INVALID_ARG);
        assert_non_null(strstr(sj_ctx_last_error(ctx), bad[i].message));
        assert_null(a);
    }
}

/* ---- CPU levels: a store filled for portable levels serves every host. */

#define V2_FEATURES "+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+cx16,+sahf,+popcnt,+crc32,+sse3,+sse4.1,+sse4.2,+ssse3"

static bool host_has(const char *feature) {
    char *host = LLVMGetHostCPUFeatures();
    char want[64];
    snprintf(want, sizeof want, "+%s", feature);
    bool yes = false;
    for (char *p = strstr(host, want); p && !yes; p = strstr(p + 1, want))
        yes = (p == host || p[-1] == ',') && (p[strlen(want)] == ',' || !p[strlen(want)]);
    LLVMDisposeMessage(host);
    return yes;
}

static sj_store *open_store_at(const char *file) {
    sj_store_config sc;
    sj_store_config_init(&sc);
    sc.path = file;
    sj_store *s;
    assert_int_equal(sj_store_open(ctx, &sc, &s), SJ_OK);
    return s;
}

/* Fills `file` with every bucket for each level, as a build machine would
 * (stored only, nothing loaded: a level the host lacks is fine). */
static void precompile_levels(const char *file, const char *const *levels, int n) {
    sj_store *store = open_store_at(file);
    for (int i = 0; i < n; i++) {
        sj_host_compiler_config hcfg;
        sj_host_compiler_config_init(&hcfg);
        hcfg.options.cpu = levels[i];
        sj_host_compiler *hc;
        assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
        sj_compiler comp;
        sj_host_compiler_table(hc, &comp);
        assert_string_equal(comp.target_cpu, levels[i]);
        sj_bucketed_cache *c = host_cache(hc, store);
        assert_int_equal(sj_bucketed_cache_precompile_stored(c, 2, NULL, NULL), SJ_OK);
        sj_bucketed_cache_destroy(c);
        sj_host_compiler_destroy(hc);
    }
    sj_store_close(store);
}

/* A native cache over the level store, on a host whose features are
 * host_features (NULL: this one's): which target each bucket came from. */
static void serve_from_levels(const char *file, const char *host_features, const char *want_target,
                              uint64_t want_compiles) {
    sj_store *store = open_store_at(file);
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.host_features = host_features;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_bucketed_cache *c = host_cache(hc, store);
    assert_equals_interp(c);
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(c, &s);
    assert_int_equal(s.compiles, want_compiles);
    assert_int_equal(s.fallback_hits, want_compiles ? 0 : 3);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    for (int i = 0; i < 3; i++)
        assert_string_equal(sj_bucketed_cache_bucket_target(c, i), want_target ? want_target : comp.target_cpu);
    sj_bucketed_cache_destroy(c);
    sj_host_compiler_destroy(hc);
    sj_store_close(store);
}

static void test_levels_serve_without_compiles(void **state) {
    (void)state;
    char file[160];
    snprintf(file, sizeof file, "%s/levels.db", dir);
    static const char *const levels[] = {"x86-64-v2", "x86-64-v3"};
    precompile_levels(file, levels, 2);
    /* This host takes the highest level it can run: v3 where it has AVX2,
     * FMA and the rest of v3, else v2. */
    bool v3 = host_has("avx2") && host_has("fma") && host_has("bmi2") && host_has("movbe");
    serve_from_levels(file, NULL, v3 ? "x86-64-v3" : "x86-64-v2", 0);
    /* A host without AVX2 (modelled through the host features the choice
     * reads) takes only the v2 artifacts. */
    serve_from_levels(file, V2_FEATURES, "x86-64-v2", 0);
    /* A host below every stored level compiles for itself. */
    serve_from_levels(file, "+cmov,+cx8,+sse,+sse2", NULL, 3);
}

/* A level the host lacks is refused at load, naming what is missing, and a
 * level that it has loads. Holds either way on any CPU; the run under qemu
 * (tests/cpu_portability.cmake) takes the refusing branch for v4. */
static void test_level_above_host_refused(void **state) {
    (void)state;
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.options.cpu = "x86-64-v4";
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    sj_compiler comp;
    sj_host_compiler_table(hc, &comp);
    void *art, *exe = NULL;
    size_t len;
    assert_int_equal(comp.compile(comp.ctx, g, 4, &art, &len), SJ_OK);
    sj_status st = comp.load(comp.ctx, g, 4, art, len, &exe);
    if (host_has("avx512f") && host_has("avx512bw") && host_has("avx512vl") && host_has("evex512")) {
        assert_int_equal(st, SJ_OK);
        comp.destroy(comp.ctx, exe);
    } else {
        assert_int_equal(st, SJ_E_MISMATCH);
        assert_non_null(strstr(sj_ctx_last_error(ctx), "avx512"));
        assert_null(exe);
    }
    sj_free(ctx, art);
    sj_host_compiler_destroy(hc);

    hcfg.options.cpu = "x86-64-v9";
    hc = (sj_host_compiler *)&hcfg;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "CPU 'x86-64-v9'"));
    assert_null(hc);
}

static void test_bad_config(void **state) {
    (void)state;
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    sj_host_compiler *hc = (sj_host_compiler *)&hcfg;
    hcfg.devices = 0;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_E_INVALID_ARG);
    assert_null(hc);
    hcfg.devices = 1;
    hcfg.options.target = SJ_TARGET_NVPTX;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "not the host"));
    sj_host_compiler_destroy(NULL);
    assert_int_equal(sj_host_compiler_num_devices(NULL), 0);
}

/* Several workers over several devices: every result right. */
typedef struct worker {
    sj_bucketed_cache *c;
    int first;
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 24; i++) {
        int64_t key = keys[(w->first + i * 7) % N_KEYS];
        float *x = make_input(key);
        sj_cache_input in = {"x", x, 64, true};
        int64_t inner = 64;
        sj_tensor out = {0}, want = {0};
        sj_tensor xin;
        int64_t dims[2] = {key, 64};
        sj_status st =
            sj_bucketed_cache_run_padded(w->c, key, key, &in, 1, &inner, 1, &out, 1, NULL);
        if (st == SJ_OK && sj_tensor_alloc(ctx, 2, dims, &xin) == SJ_OK) {
            memcpy(xin.data, x, (size_t)key * 64 * sizeof *x);
            if (sj_interp_run(g, key, &xin, &want) != SJ_OK) w->bad++;
            for (int64_t k = 0; k < key * 64 && want.data; k++)
                if (fabs((double)out.data[k] - want.data[k]) > 1e-4 * (1.0 + fabs(want.data[k]))) {
                    w->bad++;
                    break;
                }
            sj_tensor_free(ctx, &xin);
        } else {
            w->bad++;
        }
        sj_tensor_free(ctx, &out);
        sj_tensor_free(ctx, &want);
        free(x);
    }
    return NULL;
}

/* examples/models/mlp.sjg ends in 10 logits, fewer than a vector of
 * floats at every level: at a few rows the matmul takes those columns as
 * one masked vector (lowered to masked moves on AVX2 and AVX-512, lane by
 * lane below that). The levels this host runs, buckets of 1 and 8 rows
 * and one of 64 (the tiled path), at row counts inside each, against the
 * interpreter; natively also under the tiled matmul schedule, which takes
 * the small buckets' rows in register tiles too. */
static void mlp_rows(sj_bucketed_cache *c, int64_t n, sj_tensor *out) {
    float *x = malloc((size_t)n * 32 * sizeof *x);
    for (int64_t i = 0; i < n * 32; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    sj_cache_input in = {"x", x, 32, true};
    int64_t inner = 10;
    memset(out, 0, sizeof *out);
    sj_status st = sj_bucketed_cache_run_padded(c, n, n, &in, 1, &inner, 1, out, 1, NULL);
    if (st != SJ_OK) printf("mlp at %lld: %s\n", (long long)n, sj_ctx_last_error(ctx));
    assert_int_equal(st, SJ_OK);
    free(x);
}

static void test_narrow_outputs_at_every_level(void **state) {
    (void)state;
    sj_graph *mlp;
    sj_ladder *lad;
    assert_int_equal(sj_model_load(ctx, SJ_SOURCE_DIR "/examples/models/mlp.sjg", NULL, &mlp), SJ_OK);
    assert_int_equal(sj_ladder_parse(ctx, "list:1,8,64", &lad), SJ_OK);
    sj_compiler icomp;
    sj_interp_compiler(&icomp);
    sj_bucketed_cache *interp;
    assert_int_equal(sj_bucketed_cache_create(mlp, lad, &icomp, NULL, NULL, &interp), SJ_OK);
    /* v3 where native is AVX-512 (below that, native is the AVX2 case;
     * and under qemu every level's compile is emulated, so none twice) */
    bool v3 = host_has("avx2") && host_has("fma") && host_has("bmi2") && host_has("movbe") &&
              host_has("avx512f");
    const char *levels[] = {NULL, "x86-64-v2", v3 ? "x86-64-v3" : NULL, NULL};
    static const int64_t rows[] = {1, 2, 3, 5, 7, 8, 13, 64};
    for (int l = 0; l < 4; l++) {
        if (l > 0 && l < 3 && !levels[l]) continue;
        sj_host_compiler_config hcfg;
        sj_host_compiler_config_init(&hcfg);
        hcfg.options.cpu = levels[l];
        if (l == 3) hcfg.options.matmul = SJ_MATMUL_TILED;
        sj_host_compiler *hc;
        assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
        sj_compiler comp;
        sj_host_compiler_table(hc, &comp);
        sj_bucketed_cache *host;
        assert_int_equal(sj_bucketed_cache_create(mlp, lad, &comp, NULL, NULL, &host), SJ_OK);
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            sj_tensor got, want;
            mlp_rows(host, rows[i], &got);
            mlp_rows(interp, rows[i], &want);
            assert_int_equal(sj_tensor_numel(&got), rows[i] * 10);
            for (int64_t k = 0; k < rows[i] * 10; k++)
                if (!(fabs((double)got.data[k] - want.data[k]) <= 1e-4 * (1.0 + fabs(want.data[k]))))
                    fail_msg("%s, %lld rows, element %lld: host %g, interp %g",
                             l == 3 ? "native, tiled" : levels[l] ? levels[l] : "native", (long long)rows[i], (long long)k,
                             got.data[k], want.data[k]);
            sj_tensor_free(ctx, &got);
            sj_tensor_free(ctx, &want);
        }
        sj_bucketed_cache_destroy(host);
        sj_host_compiler_destroy(hc);
    }
    sj_bucketed_cache_destroy(interp);
    sj_ladder_destroy(lad);
    sj_graph_destroy(mlp);
}

static void test_workers_over_devices(void **state) {
    (void)state;
    sj_host_compiler_config hcfg;
    sj_host_compiler_config_init(&hcfg);
    hcfg.devices = 3;
    sj_host_compiler *hc;
    assert_int_equal(sj_host_compiler_create(ctx, &hcfg, &hc), SJ_OK);
    assert_int_equal(sj_host_compiler_num_devices(hc), 3);
    assert_non_null(sj_host_compiler_device(hc, 2));
    assert_null(sj_host_compiler_device(hc, 3));
    sj_bucketed_cache *c = host_cache(hc, NULL);
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){c, i, 0};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].bad, 0);
    }
    sj_bucketed_cache_stats s;
    sj_bucketed_cache_stats_get(c, &s);
    assert_int_equal(s.compiles, 3);
    /* the three executables went to the three devices, one each */
    int on_device[3] = {0, 0, 0}, ready = 0;
    for (int i = 0; i < sj_bucketed_cache_num_buckets(c); i++) {
        int64_t hi;
        bool is_ready;
        assert_int_equal(sj_bucketed_cache_bucket(c, i, NULL, &hi, &is_ready), SJ_OK);
        if (!is_ready) continue;
        ready++;
        int64_t extent;
        void *exe;
        assert_int_equal(sj_bucketed_cache_get_or_compile(c, hi, &extent, &exe), SJ_OK);
        sj_device *dev = sj_executable_device(exe);
        for (int d = 0; d < 3; d++)
            if (dev == sj_host_compiler_device(hc, d)) on_device[d]++;
    }
    assert_int_equal(ready, 3);
    for (int d = 0; d < 3; d++)
        if (on_device[d] != 1) fail_msg("device %d holds %d executables, expected 1", d, on_device[d]);
    sj_bucketed_cache_destroy(c);
    sj_host_compiler_destroy(hc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_equals_interp),
        cmocka_unit_test(test_eager_equals_interp),
        cmocka_unit_test(test_warm_restart_compiles_nothing),
        cmocka_unit_test(test_options_are_part_of_the_key),
        cmocka_unit_test(test_options_in_the_table),
        cmocka_unit_test(test_bad_bytes_are_errors),
        cmocka_unit_test(test_missing_cpu_feature_refused),
        cmocka_unit_test(test_avx512_feature_on_cpu_without_it),
        cmocka_unit_test(test_unknown_cpu_or_feature_refused),
        cmocka_unit_test(test_levels_serve_without_compiles),
        cmocka_unit_test(test_level_above_host_refused),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_workers_over_devices),
        cmocka_unit_test(test_narrow_outputs_at_every_level),
    };
    return sj_run_tests(tests, setup, teardown);
}

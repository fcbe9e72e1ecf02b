/* ONNX models nobody here wrote the tests for (tools/gen_models.py builds
 * them: MLPs, transformer FFNs with a decomposed layer norm and erf-GELU,
 * classifier heads, attention over a dynamic sequence), checked against
 * onnxruntime's outputs at extents 1..64 through the interpreter, the host
 * backend (a bucket per extent, and one bucket run at every extent below it)
 * and the bucketed cache; then truncated and corrupted model bytes, wrong
 * input shapes and extents.
 *
 * Also a helper for tests/models.cmake: `test_models --compare WANT_DIR
 * GOT_DIR` compares every .npy in WANT_DIR with GOT_DIR's (exit 0 / 1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/interp.h"
#include "shapejit/model.h"
#include "shapejit/ext/runtime.h"

#define DATA SJ_SOURCE_DIR "/tests/data/models"
#define RTOL 1e-3
#define ATOL 1e-5
#define MAX_IO 4

typedef struct model_case {
    const char *name;
    const char *dynamic_name;  /* --dynamic */
    const char *dynamic_input; /* --dynamic-axis INPUT:AXIS */
    int dynamic_axis;
} model_case;

static const model_case MODELS[] = {
    {"mlp_matmul", NULL, NULL, 0},
    {"mlp_gemm", NULL, NULL, 0},
    {"ffn_decomposed_ln_op13", NULL, NULL, 0},
    {"ffn_decomposed_ln_op18", NULL, NULL, 0},
    {"ffn_layernorm_op17", NULL, NULL, 0},
    {"classifier_op13", NULL, NULL, 0},
    {"classifier_op18", NULL, NULL, 0},
    {"attention_2d", NULL, NULL, 0},
    {"attention_batch1_op17", NULL, NULL, 0},
    {"two_inputs", NULL, NULL, 0},
    {"seq_pooling", NULL, NULL, 0},
    {"gram_gemm", NULL, NULL, 0},
    {"mlp_ir3", NULL, NULL, 0},
    {"constant_attrs", NULL, NULL, 0},
    {"layernorm_over_seq_op17", NULL, NULL, 0},
    {"mlp_static", NULL, "x", 0},
};
#define N_MODELS ((int)(sizeof MODELS / sizeof MODELS[0]))

static const int64_t SIZES[] = {1, 3, 8, 17, 64};
#define N_SIZES ((int)(sizeof SIZES / sizeof SIZES[0]))

/* ---- comparison ---- */

/* 1 when got matches want in shape and within |got - want| <= ATOL + RTOL |want|;
 * otherwise prints the first difference under `what`. */
static int close_within(const sj_tensor *got, const sj_tensor *want, const char *what, double atol,
                        double rtol, bool report);
static int close_enough(const sj_tensor *got, const sj_tensor *want, const char *what) {
    return close_within(got, want, what, ATOL, RTOL, false);
}

/* close_enough with the given tolerances; report prints the largest
 * absolute error and the same relative to the output's largest magnitude
 * (an element-wise relative error is dominated by values near zero). */
static int close_within(const sj_tensor *got, const sj_tensor *want, const char *what, double atol,
                        double rtol, bool report) {
    if (got->rank != want->rank) {
        printf("%s: rank %d, want %d\n", what, got->rank, want->rank);
        return 0;
    }
    for (int i = 0; i < got->rank; i++)
        if (got->dims[i] != want->dims[i]) {
            printf("%s: dim %d is %lld, want %lld\n", what, i, (long long)got->dims[i],
                   (long long)want->dims[i]);
            return 0;
        }
    int64_t n = sj_tensor_numel(want);
    double max_abs = 0, max_want = 0;
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        double g = got->data[i], w = want->data[i], d = fabs(g - w);
        if (d > max_abs || isnan(d)) max_abs = d;
        if (fabs(w) > max_want) max_want = fabs(w);
        if (ok && !(d <= atol + rtol * fabs(w))) {
            printf("%s: element %lld is %.9g, want %.9g\n", what, (long long)i, g, w);
            ok = 0;
            if (!report) return 0;
        }
    }
    if (report)
        printf("%s: max abs error %.3g, max rel error %.3g (of the largest |value| %.3g)\n", what,
               max_abs, max_want > 0 ? max_abs / max_want : max_abs, max_want);
    return ok;
}

/* ---- one model at one size ---- */

typedef struct loaded {
    sj_graph *g;
    int n_in, n_out;
    sj_tensor in[MAX_IO], want[MAX_IO];
    int64_t size;
} loaded;

static sj_graph *load_model(sj_ctx *ctx, const model_case *m) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.onnx", DATA, m->name);
    sj_model_options o;
    sj_model_options_init(&o);
    o.dynamic_name = m->dynamic_name;
    o.dynamic_input = m->dynamic_input;
    o.dynamic_axis = m->dynamic_axis;
    sj_graph *g = NULL;
    sj_status st = sj_model_load(ctx, path, &o, &g);
    if (st != SJ_OK) printf("%s: %s\n", path, sj_ctx_last_error(ctx));
    assert_int_equal(st, SJ_OK);
    return g;
}

/* Reads inputs (declaration order) and expected outputs of model m at size. */
static void read_data(sj_ctx *ctx, const model_case *m, sj_graph *g, int64_t size, loaded *L) {
    memset(L, 0, sizeof *L);
    L->g = g;
    L->size = size;
    L->n_in = sj_graph_num_inputs(g);
    L->n_out = sj_graph_num_outputs(g);
    assert_true(L->n_in <= MAX_IO && L->n_out <= MAX_IO);
    char path[512];
    for (int i = 0; i < L->n_in + L->n_out; i++) {
        sj_value_desc d;
        bool is_in = i < L->n_in;
        if (is_in)
            assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
        else
            assert_int_equal(sj_graph_output_desc(g, i - L->n_in, &d), SJ_OK);
        snprintf(path, sizeof path, "%s/%s/%lld/%s/%s.npy", DATA, m->name, (long long)size,
                 is_in ? "in" : "out", d.name);
        sj_tensor *t = is_in ? &L->in[i] : &L->want[i - L->n_in];
        sj_status st = sj_npy_read(ctx, path, t);
        if (st != SJ_OK) printf("%s\n", sj_ctx_last_error(ctx));
        assert_int_equal(st, SJ_OK);
    }
}

static void free_data(sj_ctx *ctx, loaded *L) {
    for (int i = 0; i < L->n_in; i++) sj_tensor_free(ctx, &L->in[i]);
    for (int i = 0; i < L->n_out; i++) sj_tensor_free(ctx, &L->want[i]);
}

/* Compares outputs with L's expected ones, frees them; 1 when all match. */
static int check_outputs(sj_ctx *ctx, const loaded *L, sj_tensor *got, const char *model,
                         const char *how) {
    int ok = 1;
    for (int o = 0; o < L->n_out; o++) {
        sj_value_desc d;
        assert_int_equal(sj_graph_output_desc(L->g, o, &d), SJ_OK);
        char what[256];
        snprintf(what, sizeof what, "%s %s extent %lld output '%s'", model, how,
                 (long long)L->size, d.name);
        ok &= close_enough(&got[o], &L->want[o], what);
        sj_tensor_free(ctx, &got[o]);
    }
    return ok;
}

static int64_t pow2_at_least(int64_t n) {
    int64_t e = 1;
    while (e < n) e *= 2;
    return e;
}

typedef struct fixture {
    sj_ctx *ctx;
    sj_device *dev;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    if (sj_host_device_create(f->ctx, NULL, &f->dev) != SJ_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sj_device_destroy(f->dev);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

/* ---- correctness against onnxruntime ---- */

static void test_interp_matches_onnxruntime(void **state) {
    fixture *f = *state;
    int failures = 0;
    for (int m = 0; m < N_MODELS; m++) {
        sj_graph *g = load_model(f->ctx, &MODELS[m]);
        for (int s = 0; s < N_SIZES; s++) {
            loaded L;
            read_data(f->ctx, &MODELS[m], g, SIZES[s], &L);
            sj_tensor got[MAX_IO] = {{0}};
            sj_status st = sj_interp_run(g, SIZES[s], L.in, got);
            if (st != SJ_OK) {
                printf("%s interp extent %lld: %s\n", MODELS[m].name, (long long)SIZES[s],
                       sj_ctx_last_error(f->ctx));
                failures++;
            } else {
                failures += !check_outputs(f->ctx, &L, got, MODELS[m].name, "interp");
            }
            free_data(f->ctx, &L);
        }
        sj_graph_destroy(g);
    }
    assert_int_equal(failures, 0);
}

/* Compiles g for the host at `extent` and loads it; NULL (message printed)
 * on failure. */
static sj_executable *host_exe_opts(fixture *f, const sj_graph *g, int64_t extent,
                                    const sj_compile_options *o, const char *model) {
    sj_artifact *a = NULL;
    sj_executable *exe = NULL;
    sj_status st = sj_compile(g, extent, o, &a);
    if (st == SJ_OK) st = sj_artifact_load(a, f->dev, g, &exe);
    if (st != SJ_OK)
        printf("%s host compile/load at extent %lld: %s\n", model, (long long)extent,
               sj_ctx_last_error(f->ctx));
    sj_artifact_destroy(a);
    return exe;
}

static sj_executable *host_exe(fixture *f, const sj_graph *g, int64_t extent, const char *model) {
    return host_exe_opts(f, g, extent, NULL, model);
}

static int host_run_check(fixture *f, sj_executable *exe, loaded *L, const char *model,
                          const char *how) {
    sj_tensor got[MAX_IO] = {{0}};
    sj_status st = sj_executable_run(exe, L->size, L->in, got);
    if (st != SJ_OK) {
        printf("%s %s extent %lld: %s\n", model, how, (long long)L->size,
               sj_ctx_last_error(f->ctx));
        return 0;
    }
    return check_outputs(f->ctx, L, got, model, how);
}

/* Each size in the pow2 bucket that holds it (3 runs in bucket 4, 17 in 32). */
static void test_host_bucket_per_size(void **state) {
    fixture *f = *state;
    int failures = 0;
    for (int m = 0; m < N_MODELS; m++) {
        sj_graph *g = load_model(f->ctx, &MODELS[m]);
        for (int s = 0; s < N_SIZES; s++) {
            sj_executable *exe = host_exe(f, g, pow2_at_least(SIZES[s]), MODELS[m].name);
            if (!exe) {
                failures++;
                continue;
            }
            loaded L;
            read_data(f->ctx, &MODELS[m], g, SIZES[s], &L);
            failures += !host_run_check(f, exe, &L, MODELS[m].name, "host bucket");
            free_data(f->ctx, &L);
            sj_executable_destroy(exe);
        }
        sj_graph_destroy(g);
    }
    assert_int_equal(failures, 0);
}

/* The optional BLAS path: with blas_min_work 1 every matmul of every model
 * calls OpenBLAS's cblas_sgemm from the JIT code, which must then find the
 * symbol in the process (it once did not: the binaries were linked
 * --as-needed and dropped libopenblas). Fused and unfused. */
static void test_host_blas_matmuls(void **state) {
    fixture *f = *state;
    int failures = 0;
    for (int m = 0; m < N_MODELS; m++) {
        sj_graph *g = load_model(f->ctx, &MODELS[m]);
        for (int fused = 0; fused < 2; fused++) {
            sj_compile_options o;
            sj_compile_options_init(&o);
            o.blas_min_work = 1;
            o.fusion = fused;
            sj_executable *exe = host_exe_opts(f, g, 32, &o, MODELS[m].name);
            if (!exe) {
                failures++;
                continue;
            }
            loaded L;
            read_data(f->ctx, &MODELS[m], g, 17, &L);
            failures += !host_run_check(f, exe, &L, MODELS[m].name,
                                        fused ? "host blas" : "host blas unfused");
            free_data(f->ctx, &L);
            sj_executable_destroy(exe);
        }
        sj_graph_destroy(g);
    }
    assert_int_equal(failures, 0);
}

/* One executable per model compiled at 64 runs the onnxruntime data at
 * every size (up and down, so a run cannot lean on what the previous one
 * left), then every extent 1..64 against the interpreter on seeded inputs in
 * [-2, 2); one at 128 runs a stride of 65..128. The padding rows (and, for
 * attention, padding columns of the scores) must never reach a result; the
 * data sizes are a few points and padding bugs hide at the others. */
static int host_vs_interp_random(fixture *f, sj_graph *g, sj_executable *exe, int64_t n,
                                 uint64_t *seed, const char *model, const char *how) {
    loaded L = {.g = g, .size = n, .n_in = sj_graph_num_inputs(g), .n_out = sj_graph_num_outputs(g)};
    for (int i = 0; i < L.n_in; i++) {
        sj_value_desc d;
        assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
        sj_shape at = sj_shape_at(&d.shape, n);
        assert_int_equal(sj_tensor_alloc(f->ctx, at.rank, at.dims, &L.in[i]), SJ_OK);
        for (int64_t k = 0; k < sj_tensor_numel(&L.in[i]); k++) {
            *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
            L.in[i].data[k] = (float)((double)(*seed >> 40) / (1 << 24) * 4.0 - 2.0);
        }
    }
    sj_status st = sj_interp_run(g, n, L.in, L.want);
    if (st != SJ_OK)
        printf("%s interp %lld: %s\n", model, (long long)n, sj_ctx_last_error(f->ctx));
    assert_int_equal(st, SJ_OK);
    int ok = host_run_check(f, exe, &L, model, how);
    free_data(f->ctx, &L);
    return ok;
}

static void test_host_one_bucket_every_extent(void **state) {
    fixture *f = *state;
    static const int order[] = {4, 0, 3, 1, 2, 0, 4};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int failures = 0;
    for (int m = 0; m < N_MODELS && failures < 5; m++) {
        sj_graph *g = load_model(f->ctx, &MODELS[m]);
        sj_executable *exe = host_exe(f, g, 64, MODELS[m].name);
        if (!exe) {
            failures++;
        } else {
            for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
                loaded L;
                read_data(f->ctx, &MODELS[m], g, SIZES[order[k]], &L);
                failures += !host_run_check(f, exe, &L, MODELS[m].name, "host bucket 64");
                free_data(f->ctx, &L);
            }
            for (int64_t n = 1; n <= 64; n++)
                failures += !host_vs_interp_random(f, g, exe, n, &seed, MODELS[m].name,
                                                   "host bucket 64 vs interp");
            sj_executable_destroy(exe);
        }
        exe = host_exe(f, g, 128, MODELS[m].name);
        if (!exe) {
            failures++;
        } else {
            for (int64_t n = 65; n <= 128; n += 21)
                failures += !host_vs_interp_random(f, g, exe, n, &seed, MODELS[m].name,
                                                   "host bucket 128 vs interp");
            sj_executable_destroy(exe);
        }
        sj_graph_destroy(g);
    }
    assert_int_equal(failures, 0);
}

/* Through the bucketed cache (interpreter compiler, pow2 ladder 1..64) with
 * run_padded_mixed: inputs whose first dim is the symbolic one are padded,
 * the others passed whole. Models whose symbolic dim is not a leading one
 * (attention_batch1_op17: [1, seq, 24]) are outside what run_padded takes. */
static void test_cache_interp(void **state) {
    fixture *f = *state;
    sj_ladder *ladder;
    assert_int_equal(sj_ladder_pow2(f->ctx, 1, 64, &ladder), SJ_OK);
    sj_compiler comp;
    sj_interp_compiler(&comp);
    int failures = 0, ran = 0;
    for (int m = 0; m < N_MODELS; m++) {
        sj_graph *g = load_model(f->ctx, &MODELS[m]);
        int n_in = sj_graph_num_inputs(g), n_out = sj_graph_num_outputs(g);
        sj_value_desc d;
        bool leading = true;
        for (int i = 0; i < n_in; i++) {
            assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
            for (int k = 1; k < d.shape.rank; k++) leading &= d.shape.dims[k] != SJ_DIM_SYM;
        }
        if (!leading) {
            sj_graph_destroy(g);
            continue;
        }
        int64_t inners[MAX_IO] = {0};
        for (int o = 0; o < n_out; o++) {
            assert_int_equal(sj_graph_output_desc(g, o, &d), SJ_OK);
            bool sym_first = d.shape.rank > 0 && d.shape.dims[0] == SJ_DIM_SYM;
            bool sym_else = false;
            inners[o] = 1;
            for (int k = 1; k < d.shape.rank; k++) {
                sym_else |= d.shape.dims[k] == SJ_DIM_SYM;
                inners[o] *= d.shape.dims[k];
            }
            if (!sym_first || sym_else) inners[o] = 0;
        }
        sj_bucketed_cache *c;
        assert_int_equal(sj_bucketed_cache_create(g, ladder, &comp, NULL, NULL, &c), SJ_OK);
        for (int s = 0; s < N_SIZES; s++) {
            loaded L;
            read_data(f->ctx, &MODELS[m], g, SIZES[s], &L);
            sj_cache_input ci[MAX_IO];
            for (int i = 0; i < n_in; i++) {
                assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
                bool pad = d.shape.rank > 0 && d.shape.dims[0] == SJ_DIM_SYM;
                ci[i] = (sj_cache_input){d.name, L.in[i].data,
                                         pad ? sj_tensor_numel(&L.in[i]) / SIZES[s] : 0, pad};
            }
            sj_tensor got[MAX_IO] = {{0}};
            int64_t extent = 0;
            sj_status st = sj_bucketed_cache_run_padded_mixed(c, SIZES[s], SIZES[s], ci, n_in,
                                                              inners, n_out, got, n_out, &extent);
            if (st != SJ_OK) {
                printf("%s cache extent %lld: %s\n", MODELS[m].name, (long long)SIZES[s],
                       sj_ctx_last_error(f->ctx));
                failures++;
            } else {
                assert_int_equal(extent, pow2_at_least(SIZES[s]));
                failures += !check_outputs(f->ctx, &L, got, MODELS[m].name, "cache");
                ran++;
            }
            free_data(f->ctx, &L);
        }
        sj_bucketed_cache_stats stats;
        sj_bucketed_cache_stats_get(c, &stats);
        assert_int_equal(stats.compiles, N_SIZES);
        sj_bucketed_cache_destroy(c);
        sj_graph_destroy(g);
    }
    sj_ladder_destroy(ladder);
    assert_int_equal(failures, 0);
    assert_true(ran >= 8 * N_SIZES);
}

/* ---- bad models ---- */

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

/* A graph that loaded from damaged bytes must still be one the interpreter
 * either runs or refuses with a message. */
static void run_if_loaded(fixture *f, sj_graph *g) {
    int n_in = sj_graph_num_inputs(g);
    sj_tensor in[MAX_IO] = {{0}}, out[MAX_IO] = {{0}};
    if (n_in > MAX_IO || sj_graph_num_outputs(g) > MAX_IO) return;
    bool ok = true;
    for (int i = 0; i < n_in && ok; i++) {
        sj_value_desc d;
        assert_int_equal(sj_graph_input_desc(g, i, &d), SJ_OK);
        sj_shape at = sj_shape_at(&d.shape, 3);
        int64_t n = sj_shape_numel(&d.shape, 3);
        ok = n >= 0 && n <= (1 << 20) && sj_tensor_alloc(f->ctx, at.rank, at.dims, &in[i]) == SJ_OK;
    }
    if (ok && sj_interp_run(g, 3, in, out) == SJ_OK)
        for (int o = 0; o < sj_graph_num_outputs(g); o++) sj_tensor_free(f->ctx, &out[o]);
    for (int i = 0; i < n_in; i++) sj_tensor_free(f->ctx, &in[i]);
}

/* Every model truncated at many lengths: an error with the file name, never
 * a crash (ASan watches the reads). */
static void test_truncated_models(void **state) {
    fixture *f = *state;
    for (int m = 0; m < N_MODELS; m++) {
        char path[512], name[64];
        snprintf(path, sizeof path, "%s/%s.onnx", DATA, MODELS[m].name);
        snprintf(name, sizeof name, "%s.onnx", MODELS[m].name);
        size_t len;
        uint8_t *bytes = slurp(path, &len);
        sj_model_options o;
        sj_model_options_init(&o);
        o.dynamic_input = MODELS[m].dynamic_input;
        o.dynamic_axis = MODELS[m].dynamic_axis;
        size_t step = len / 97 + 1;
        for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : step)) {
            sj_graph *g = NULL;
            sj_status st = sj_onnx_load_mem(f->ctx, bytes, cut, name, &o, &g);
            if (st == SJ_OK) {
                /* a cut on a field boundary can still be a well-formed model
                 * (protobuf has no length prefix); it must then be usable */
                run_if_loaded(f, g);
                sj_graph_destroy(g);
                continue;
            }
            const char *msg = sj_ctx_last_error(f->ctx);
            if (!strstr(msg, name)) printf("cut %zu of %s: '%s'\n", cut, name, msg);
            assert_non_null(strstr(msg, name));
        }
        free(bytes);
    }
}

/* Seeded single-byte corruptions: load fails cleanly or gives a usable graph. */
static void test_corrupted_models(void **state) {
    fixture *f = *state;
    uint64_t seed = 0x243f6a8885a308d3ull;
    for (int m = 0; m < N_MODELS; m++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s.onnx", DATA, MODELS[m].name);
        size_t len;
        uint8_t *bytes = slurp(path, &len);
        uint8_t *copy = malloc(len);
        sj_model_options o;
        sj_model_options_init(&o);
        o.dynamic_input = MODELS[m].dynamic_input;
        o.dynamic_axis = MODELS[m].dynamic_axis;
        for (int k = 0; k < 150; k++) {
            memcpy(copy, bytes, len);
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % len;
            static const uint8_t vals[] = {0x00, 0xff, 0x80, 0x7f, 0x01};
            copy[at] = (seed >> 20) & 1 ? vals[(seed >> 24) % 5] : (uint8_t)(copy[at] ^ (1u << ((seed >> 28) & 7)));
            sj_graph *g = NULL;
            if (sj_onnx_load_mem(f->ctx, copy, len, "corrupt.onnx", &o, &g) == SJ_OK) {
                run_if_loaded(f, g);
                sj_graph_destroy(g);
            } else {
                assert_true(strlen(sj_ctx_last_error(f->ctx)) > 0);
            }
        }
        free(copy);
        free(bytes);
    }
}

static void expect_load_error(fixture *f, const char *model, const sj_model_options *o,
                              sj_status want, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.onnx", DATA, model);
    sj_graph *g = NULL;
    sj_status st = sj_model_load(f->ctx, path, o, &g);
    const char *msg = st == SJ_OK ? "(loaded)" : sj_ctx_last_error(f->ctx);
    if (st != want || !strstr(msg, needle))
        printf("%s: status %s, message '%s'; want %s and '%s'\n", model, sj_status_str(st), msg,
               sj_status_str(want), needle);
    assert_int_equal(st, want);
    assert_non_null(strstr(msg, needle));
    assert_null(g);
}

/* Models shapejit cannot take as given, and options that do not fit. */
static void test_dynamic_dim_choice_errors(void **state) {
    fixture *f = *state;
    sj_model_options o;
    sj_model_options_init(&o);
    expect_load_error(f, "batch_seq", &o, SJ_E_UNSUPPORTED, "choose one (--dynamic NAME)");
    o.dynamic_name = "seq";
    expect_load_error(f, "batch_seq", &o, SJ_E_UNSUPPORTED, "'batch'");
    o.dynamic_name = "time";
    expect_load_error(f, "mlp_matmul", &o, SJ_E_NOT_FOUND, "'time'");
    sj_model_options_init(&o);
    o.dynamic_input = "y";
    expect_load_error(f, "mlp_static", &o, SJ_E_NOT_FOUND, "no input named 'y'");
    o.dynamic_input = "x";
    o.dynamic_axis = 2;
    expect_load_error(f, "mlp_static", &o, SJ_E_INVALID_ARG, "dynamic axis 2");
}

/* Without --dynamic-axis a model with no dim_param is a fixed-shape graph:
 * it runs at its declared size only, here checked against the first 4 rows
 * of the extent-8 data (rows are independent in an MLP). */
static void test_static_model_without_dynamic_axis(void **state) {
    fixture *f = *state;
    model_case fixed = {"mlp_static", NULL, NULL, 0};
    sj_graph *g = load_model(f->ctx, &fixed);
    assert_null(sj_graph_symbol(g));
    loaded L;
    read_data(f->ctx, &MODELS[N_MODELS - 1], g, 8, &L); /* mlp_static is last */
    L.in[0].dims[0] = 4;
    L.want[0].dims[0] = 4;
    sj_tensor got[MAX_IO] = {{0}};
    assert_int_equal(sj_interp_run(g, 0, L.in, got), SJ_OK);
    assert_true(check_outputs(f->ctx, &L, got, "mlp_static", "fixed"));
    sj_executable *exe = host_exe(f, g, 1, "mlp_static");
    assert_non_null(exe);
    L.size = 1;
    assert_true(host_run_check(f, exe, &L, "mlp_static", "host fixed"));
    sj_executable_destroy(exe);
    free_data(f->ctx, &L);
    sj_graph_destroy(g);
}

/* ---- bad inputs at run time ---- */

static void test_bad_input_shapes(void **state) {
    fixture *f = *state;
    sj_graph *g = load_model(f->ctx, &MODELS[7]); /* attention_2d: x [seq, 16] */
    loaded L;
    read_data(f->ctx, &MODELS[7], g, 8, &L);
    sj_tensor got[MAX_IO] = {{0}};
    sj_executable *exe = host_exe(f, g, 8, "attention_2d");
    assert_non_null(exe);

    /* extent disagrees with the input's rows */
    assert_int_equal(sj_interp_run(g, 7, L.in, got), SJ_E_SHAPE);
    printf("interp: %s\n", sj_ctx_last_error(f->ctx));
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "input x"));
    assert_int_equal(sj_executable_run(exe, 7, L.in, got), SJ_E_SHAPE);
    printf("host: %s\n", sj_ctx_last_error(f->ctx));
    assert_non_null(strstr(sj_ctx_last_error(f->ctx), "x"));
    assert_null(got[0].data);

    /* wrong feature count */
    sj_tensor bad = L.in[0];
    bad.dims[0] = 4;
    bad.dims[1] = 32;
    assert_int_equal(sj_interp_run(g, 4, &bad, got), SJ_E_SHAPE);
    assert_int_equal(sj_executable_run(exe, 4, &bad, got), SJ_E_SHAPE);
    /* wrong rank */
    bad.rank = 3;
    bad.dims[0] = 8;
    bad.dims[1] = 1;
    bad.dims[2] = 16;
    assert_int_equal(sj_interp_run(g, 8, &bad, got), SJ_E_SHAPE);
    assert_int_equal(sj_executable_run(exe, 8, &bad, got), SJ_E_SHAPE);

    /* extent 0, and past the bucket */
    bad = L.in[0];
    bad.dims[0] = 0;
    assert_int_not_equal(sj_interp_run(g, 0, &bad, got), SJ_OK);
    assert_int_not_equal(sj_executable_run(exe, 0, &bad, got), SJ_OK);
    bad.dims[0] = 9;
    assert_int_equal(sj_executable_run(exe, 9, &bad, got), SJ_E_OUT_OF_RANGE);
    /* an extent past SJ_MAX_EXTENT is refused before anything is allocated */
    bad.dims[0] = SJ_MAX_EXTENT + 1;
    assert_int_not_equal(sj_interp_run(g, SJ_MAX_EXTENT + 1, &bad, got), SJ_OK);
    assert_int_not_equal(sj_compile(g, SJ_MAX_EXTENT + 1, NULL, &(sj_artifact *){NULL}), SJ_OK);
    for (int o = 0; o < L.n_out; o++) assert_null(got[o].data);

    sj_executable_destroy(exe);
    free_data(f->ctx, &L);
    sj_graph_destroy(g);
}

/* ---- `--compare WANT GOT` for the CLI tests ---- */

static int compare_dirs(const char *want_dir, const char *got_dir, double atol, double rtol,
                        bool report) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    DIR *d = opendir(want_dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", want_dir);
        sj_ctx_destroy(ctx);
        return 1;
    }
    int bad = 0, n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".npy")) continue;
        char wp[1024], gp[1024];
        snprintf(wp, sizeof wp, "%s/%s", want_dir, e->d_name);
        snprintf(gp, sizeof gp, "%s/%s", got_dir, e->d_name);
        sj_tensor w, g;
        if (sj_npy_read(ctx, wp, &w) != SJ_OK) {
            fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));
            bad++;
            continue;
        }
        if (sj_npy_read(ctx, gp, &g) != SJ_OK) {
            fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));
            bad++;
        } else {
            bad += !close_within(&g, &w, gp, atol, rtol, report);
            sj_tensor_free(ctx, &g);
        }
        sj_tensor_free(ctx, &w);
        n++;
    }
    closedir(d);
    sj_ctx_destroy(ctx);
    if (n == 0) fprintf(stderr, "no .npy files in %s\n", want_dir);
    return bad || n == 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--compare")) return compare_dirs(argv[2], argv[3], ATOL, RTOL, false);
    /* --compare-tol ATOL RTOL WANT GOT: other tolerances (a precision
     * policy's), printing the largest errors found. */
    if (argc == 6 && !strcmp(argv[1], "--compare-tol")) {
        char *e1, *e2;
        double atol = strtod(argv[2], &e1), rtol = strtod(argv[3], &e2);
        if (*e1 || *e2 || !(atol >= 0) || !(rtol >= 0)) {
            fprintf(stderr, "--compare-tol: tolerances must be numbers >= 0\n");
            return 2;
        }
        return compare_dirs(argv[4], argv[5], atol, rtol, true);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_interp_matches_onnxruntime, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_bucket_per_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_one_bucket_every_extent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_host_blas_matmuls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_interp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_models, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_dim_choice_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_static_model_without_dynamic_axis, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input_shapes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

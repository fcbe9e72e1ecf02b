/* Host kernel threads: the host device's split of row-parallel kernels
 * (runtime/host_device.c, host_pool.c) and the emitted row entries
 * (compile/llvm/host_emit.c, compile/lower/row_split.c).
 *
 * Native kernels that record which thread computed each row check the
 * split rules (whole 16-row blocks, a minimum of work per thread, small
 * extents on the caller, kernels without a row entry on the caller) eagerly
 * and through capture/replay. Compiled models (the examples, ONNX layers
 * with attention and layernorm, models that reduce over the symbolic dim,
 * and the exported BERT, GPT-2, Llama and encoder layer) run at threads
 * 2..4 bit-identical to threads 1, eagerly and replayed, with every padding
 * row (NaN, or -1 for the exporters' int64 ids and masks), the arena and the
 * outputs poisoned; threads 1 matches the interpreter. A launch too small to
 * repay waking a sleeping worker leaves it asleep (the caller runs its
 * parts), one right after a woken launch is shared with the worker still
 * awake. Bad configurations and an artifact of the previous format are
 * refused with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "core/core_impl.h"
#include "core/hash.h"
#include "shapejit/engine.h"
#include "shapejit/model.h"
#include "tests/host_harness.h"

#define MODELS_DIR SJ_SOURCE_DIR "/tests/data/models"
#define EXAMPLES_DIR SJ_SOURCE_DIR "/examples/models"
#define REAL_DIR SJ_SOURCE_DIR "/tests/data/real_models"
#define ROWS 1024

/* ---- native kernels: y[i] = 2 x[i] + 1, recording who computed row i ---- */

static pthread_t owner[ROWS];
static void *scratch_of[ROWS]; /* the scratch the call that computed row i got */
static int64_t part_of[ROWS]; /* the first row of the call that computed row i */
static int hits[ROWS];
static int whole_calls;
/* "helped": the call holding row 0 waits (at most help_wait_ms) until
 * another thread has computed a part, so a test sees the workers take
 * parts, or that none did. */
static atomic_bool helped;
static int help_wait_ms = 2000;

/* Also touches both ends of its scratch (ASan sees one short of
 * SJ_HOST_SCRATCH_BYTES) and records it. */
static void rows_fn(void *const *b, const int64_t *info, int64_t n, int64_t begin, int64_t end,
                    void *scratch) {
    float *y = b[0];
    const float *x = b[1];
    assert_true(scratch && (uintptr_t)scratch % 64 == 0);
    ((char *)scratch)[0] = 1;
    ((char *)scratch)[SJ_HOST_SCRATCH_BYTES - 1] = 1;
    for (int64_t i = begin; i < end; i++) {
        y[i] = 2 * x[i] + 1;
        owner[i] = pthread_self();
        scratch_of[i] = scratch;
        part_of[i] = begin;
        hits[i]++;
    }
}

static pthread_t part0_thread;

static void helped_rows_fn(void *const *b, const int64_t *info, int64_t n, int64_t begin,
                           int64_t end, void *scratch) {
    if (begin == 0) {
        part0_thread = pthread_self();
        for (int i = 0; i < help_wait_ms && !atomic_load(&helped); i++) usleep(1000);
    } else {
        while (!part0_thread) usleep(100);
        if (!pthread_equal(pthread_self(), part0_thread)) atomic_store(&helped, true);
    }
    rows_fn(b, info, n, begin, end, scratch);
}

static void whole_fn(void *const *b, const int64_t *info, int64_t n, void *scratch) {
    whole_calls++;
    rows_fn(b, info, n, 0, n, scratch);
}

static const sj_native_kernel table[] = {
    {"row", whole_fn, rows_fn, 1u << 20},  /* worth splitting at 32 rows */
    {"cheap", whole_fn, rows_fn, 1},       /* never worth it at ROWS */
    {"single", whole_fn, NULL, 0},         /* no row entry */
    {"helped", whole_fn, helped_rows_fn, 1u << 20},
    /* 4M operations at ROWS: 4 parts on 2 threads, but each thread's share
     * (about 42 us at the device's prior pace) does not repay a wake-up. */
    {"modest", whole_fn, helped_rows_fn, 1u << 12},
};

typedef struct native {
    sj_ctx *ctx;
    sj_device *dev;
    sj_module *m;
    float *x, *y;
    void *bufs[2];
} native;

/* wake_share_work 1: sleeping workers woken for every split ("helped"
 * needs them); 0: as the device learns it. */
static void native_open(native *t, int threads, uint64_t wake_share_work) {
    assert_int_equal(sj_ctx_create(NULL, &t->ctx), SJ_OK);
    sj_host_device_config cfg;
    sj_host_device_config_init(&cfg);
    cfg.threads = threads;
    cfg.wake_share_work = wake_share_work;
    assert_int_equal(sj_host_device_create_config(t->ctx, &cfg, &t->dev), SJ_OK);
    assert_int_equal(sj_device_load_module(t->dev, SJ_CODE_HOST_NATIVE, table, sizeof table, &t->m),
                     SJ_OK);
    assert_int_equal(sj_device_alloc(t->dev, ROWS * sizeof(float), (void **)&t->x), SJ_OK);
    assert_int_equal(sj_device_alloc(t->dev, ROWS * sizeof(float), (void **)&t->y), SJ_OK);
    for (int i = 0; i < ROWS; i++) t->x[i] = (float)i;
    t->bufs[0] = t->y;
    t->bufs[1] = t->x;
}

static void native_close(native *t) {
    sj_module_destroy(t->m);
    sj_device_destroy(t->dev);
    sj_ctx_destroy(t->ctx);
}

static void clear_rows(void) {
    memset(hits, 0, sizeof hits);
    memset(owner, 0, sizeof owner);
    memset(scratch_of, 0, sizeof scratch_of);
    memset(part_of, 0, sizeof part_of);
    whole_calls = 0;
}

/* Every row of [0, n) computed once, each call's rows by one thread; the
 * calls' row bounds in *bounds; returns their count. */
static int parts_of(const native *t, int64_t n, int64_t *bounds) {
    int parts = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(hits[i], 1);
        assert_true(t->y[i] == 2.0f * (float)i + 1);
        if (i == 0 || part_of[i] != part_of[i - 1]) bounds[parts++] = i;
        else assert_true(pthread_equal(owner[i], owner[i - 1]));
    }
    for (int64_t i = n; i < ROWS; i++) assert_int_equal(hits[i], 0);
    /* each thread its own scratch: the same one for its rows, never another's */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < i; j++)
            assert_true(pthread_equal(owner[i], owner[j]) == (scratch_of[i] == scratch_of[j]));
    bounds[parts] = n;
    return parts;
}

static int launch(native *t, const char *name, int64_t n, int64_t *bounds) {
    sj_kernel_handle k;
    sj_kernel_attrs at;
    assert_int_equal(sj_module_kernel(t->m, name, &k, &at), SJ_OK);
    sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    clear_rows();
    assert_int_equal(sj_device_launch(t->dev, k, &dims, t->bufs, NULL, n), SJ_OK);
    return parts_of(t, n, bounds);
}

static void test_split_rules(void **state) {
    (void)state;
    native t;
    native_open(&t, 4, 1);
    int64_t b[SJ_HOST_MAX_THREADS + 1];
    sj_kernel_handle k;
    sj_kernel_attrs at;
    assert_int_equal(sj_module_kernel(t.m, "row", &k, &at), SJ_OK);
    assert_int_equal(at.row_work, 1u << 20);
    assert_int_equal(sj_module_kernel(t.m, "single", &k, &at), SJ_OK);
    assert_int_equal(at.row_work, 0);

    /* Small extents stay whole on the caller. */
    assert_int_equal(launch(&t, "row", 1, b), 1);
    assert_int_equal(whole_calls, 1);
    assert_true(pthread_equal(owner[0], pthread_self()));
    assert_int_equal(launch(&t, "row", 31, b), 1);
    assert_int_equal(whole_calls, 1);

    /* Two blocks: two parts. */
    assert_int_equal(launch(&t, "row", 32, b), 2);
    assert_int_equal(whole_calls, 0);
    assert_int_equal(b[1], 16);

    /* Six blocks, up to two parts per thread: a part per block, the last
     * taking the rest. */
    assert_int_equal(launch(&t, "row", 100, b), 6);
    int64_t want100[] = {0, 16, 32, 48, 64, 80, 100};
    for (int i = 0; i <= 6; i++) assert_int_equal(b[i], want100[i]);

    assert_int_equal(launch(&t, "row", ROWS, b), 8);
    for (int i = 0; i <= 8; i++) assert_int_equal(b[i], i * ROWS / 8);

    /* The workers take parts (the call holding row 0 waits for one). */
    atomic_store(&helped, false);
    part0_thread = 0;
    assert_int_equal(launch(&t, "helped", ROWS, b), 8);
    assert_true(atomic_load(&helped));

    /* Too little work per thread, or no row entry: the caller alone. */
    assert_int_equal(launch(&t, "cheap", ROWS, b), 1);
    assert_int_equal(whole_calls, 1);
    assert_int_equal(launch(&t, "single", ROWS, b), 1);
    assert_int_equal(whole_calls, 1);
    native_close(&t);

    /* One thread: never split. */
    native_open(&t, 1, 1);
    assert_int_equal(launch(&t, "row", ROWS, b), 1);
    assert_int_equal(whole_calls, 1);
    native_close(&t);
}

static void test_replay_splits(void **state) {
    (void)state;
    native t;
    native_open(&t, 2, 1);
    sj_kernel_handle row, single;
    sj_kernel_attrs at;
    assert_int_equal(sj_module_kernel(t.m, "row", &row, &at), SJ_OK);
    assert_int_equal(sj_module_kernel(t.m, "single", &single, &at), SJ_OK);
    sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    assert_int_equal(sj_device_begin_capture(t.dev), SJ_OK);
    assert_int_equal(sj_device_launch(t.dev, row, &dims, t.bufs, NULL, 0), SJ_OK);
    sj_graph_handle g;
    assert_int_equal(sj_device_end_capture(t.dev, &g), SJ_OK);
    int64_t b[SJ_HOST_MAX_THREADS + 1];
    for (int64_t n = 1; n <= ROWS; n = n * 3 + 1) {
        clear_rows();
        assert_int_equal(sj_device_replay(t.dev, g, n), SJ_OK);
        int parts = parts_of(&t, n, b), blocks = (int)(n / 16);
        int want = blocks < 2 ? 1 : blocks < 4 ? blocks : 4; /* two per thread */
        assert_int_equal(parts, want);
        assert_int_equal(whole_calls, want == 1);
        for (int p = 1; p < parts; p++) assert_int_equal(b[p], 16 * (blocks * p / parts));
    }
    sj_device_destroy_graph(t.dev, g);
    native_close(&t);
}

/* A launch posts to the workers awake but wakes the sleeping ones only
 * when a thread's share repays a wake-up (tens to hundreds of us; waking
 * for every split made ffn at N=64 slower on two threads than on one):
 * "modest" splits into 4 parts that the caller runs alone while the worker
 * sleeps; right after a launch that woke it, the worker (still awake)
 * takes a part of it; with wake_share_work 1, every split wakes it. */
static void test_small_launches_leave_sleepers(void **state) {
    (void)state;
    native t;
    int64_t b[SJ_HOST_MAX_THREADS + 1];
    native_open(&t, 2, 0);
    usleep(200000); /* the worker spins 50 us, then sleeps */
    help_wait_ms = 100;
    atomic_store(&helped, false);
    part0_thread = 0;
    assert_int_equal(launch(&t, "modest", ROWS, b), 4);
    assert_false(atomic_load(&helped));
    for (int i = 0; i < ROWS; i++) assert_true(pthread_equal(owner[i], pthread_self()));

    help_wait_ms = 2000;
    atomic_store(&helped, false);
    part0_thread = 0;
    assert_int_equal(launch(&t, "helped", ROWS, b), 4); /* 2^29 per thread: worth a wake-up */
    assert_true(atomic_load(&helped));
    atomic_store(&helped, false);
    part0_thread = 0;
    assert_int_equal(launch(&t, "modest", ROWS, b), 4); /* the worker is awake still */
    assert_true(atomic_load(&helped));
    native_close(&t);

    native_open(&t, 2, 1);
    usleep(200000);
    atomic_store(&helped, false);
    part0_thread = 0;
    assert_int_equal(launch(&t, "modest", ROWS, b), 4);
    assert_true(atomic_load(&helped));
    native_close(&t);
}

static void test_bad_tables_and_configs(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_host_device_config cfg;
    sj_host_device_config_init(&cfg);
    assert_int_equal(cfg.threads, 1);
    sj_device *dev = NULL;
    int bad[] = {0, -1, SJ_HOST_MAX_THREADS + 1};
    for (int i = 0; i < 3; i++) {
        cfg.threads = bad[i];
        assert_int_equal(sj_host_device_create_config(ctx, &cfg, &dev), SJ_E_INVALID_ARG);
        assert_null(dev);
        assert_non_null(strstr(sj_ctx_last_error(ctx), "threads"));
    }
    assert_int_equal(sj_host_device_create_config(ctx, NULL, &dev), SJ_E_INVALID_ARG);

    cfg.threads = 3;
    assert_int_equal(sj_host_device_create_config(ctx, &cfg, &dev), SJ_OK);
    sj_native_kernel no_work[] = {{"k", whole_fn, rows_fn, 0}};
    sj_native_kernel no_rows[] = {{"k", whole_fn, NULL, 5}};
    sj_module *m = NULL;
    assert_int_equal(sj_device_load_module(dev, SJ_CODE_HOST_NATIVE, no_work, sizeof no_work, &m),
                     SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "row entry but no row work"));
    assert_int_equal(sj_device_load_module(dev, SJ_CODE_HOST_NATIVE, no_rows, sizeof no_rows, &m),
                     SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "row work but no row entry"));
    sj_device_destroy(dev);

    /* The engine: host takes 1..256 (0 = 1); other backends one thread. */
    sj_engine_config ec;
    sj_engine_config_init(&ec);
    sj_engine *e = NULL;
    ec.threads = SJ_HOST_MAX_THREADS + 1;
    assert_int_equal(sj_engine_open(ctx, EXAMPLES_DIR "/mlp.sjg", &ec, &e), SJ_E_INVALID_ARG);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "threads 257 outside 0..256"));
    ec.threads = -2;
    assert_int_equal(sj_engine_open(ctx, EXAMPLES_DIR "/mlp.sjg", &ec, &e), SJ_E_INVALID_ARG);
    ec.threads = 2;
    ec.backend = "interp";
    assert_int_equal(sj_engine_open(ctx, EXAMPLES_DIR "/mlp.sjg", &ec, &e), SJ_E_UNSUPPORTED);
    assert_non_null(strstr(sj_ctx_last_error(ctx), "threads 2 is for backend host, not interp"));
    assert_null(e);
    sj_ctx_destroy(ctx);
}

/* An artifact of format 2 (host code calling the attention kernel without
 * a row range) is refused, never loaded: the store recompiles it. */
static void test_previous_format_refused(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_model_options mo;
    sj_model_options_init(&mo);
    sj_graph *g;
    assert_int_equal(sj_model_load(ctx, EXAMPLES_DIR "/mlp.sjg", &mo, &g), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    sj_artifact *a;
    assert_int_equal(sj_compile(g, 64, &o, &a), SJ_OK);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(sj_artifact_serialize(a, &bytes, &len), SJ_OK);
    sj_artifact *back = NULL;
    assert_int_equal(sj_artifact_deserialize(ctx, bytes, len, &back), SJ_OK);
    sj_artifact_destroy(back);
    back = NULL;
    uint32_t old = SJ_ARTIFACT_FORMAT_VERSION - 1;
    memcpy(bytes + 8, &old, sizeof old); /* after the magic, little-endian */
    uint64_t sum = sj__fnv1a(SJ_FNV_OFFSET, bytes, len - 8);
    memcpy(bytes + len - 8, &sum, sizeof sum);
    assert_int_equal(sj_artifact_deserialize(ctx, bytes, len, &back), SJ_E_UNSUPPORTED);
    assert_null(back);
    char want[64];
    snprintf(want, sizeof want, "format version %u, this build reads %u", (unsigned)old,
             (unsigned)SJ_ARTIFACT_FORMAT_VERSION);
    assert_non_null(strstr(sj_ctx_last_error(ctx), want));
    sj_free(ctx, bytes);
    sj_artifact_destroy(a);
    sj_graph_destroy(g);
    sj_ctx_destroy(ctx);
}

/* ---- compiled models ---- */

typedef struct model_case {
    const char *path;
    int64_t extent;
    bool row_kernels;    /* has row-parallel kernels */
    bool single_kernels; /* has kernels that must run on one thread */
    bool exported;       /* tools/export_models.py: [batch, seq], batch 1 */
    bool slices;         /* has row-parallel kernels whose rows are whole slices (split_step 1) */
} model_case;

static const model_case MODELS[] = {
    {EXAMPLES_DIR "/mlp.sjg", 1024, true, false, false, false},
    {EXAMPLES_DIR "/ffn.sjg", 1024, true, false, false, false},
    /* Buckets too small to split rows split columns: of few-row matmuls
     * (8), of GEMMs reading packed weights (16, 24). */
    {EXAMPLES_DIR "/ffn.sjg", 8, true, false, false, false},
    {EXAMPLES_DIR "/ffn.sjg", 16, true, false, false, false},
    {EXAMPLES_DIR "/ffn.sjg", 24, true, false, false, false},
    /* Few rows against weights large enough to read packed: the GEMM's
     * panels split over the threads, whole panels each, at 1 to 8 rows. */
    {MODELS_DIR "/wide_linear.sjg", 1, true, false, false, false},
    {MODELS_DIR "/wide_linear.sjg", 5, true, false, false, false},
    {MODELS_DIR "/wide_linear.sjg", 8, true, false, false, false},
    {EXAMPLES_DIR "/attention.sjg", 1024, true, false, false, false}, /* fused attention at 1024 */
    {EXAMPLES_DIR "/attention.sjg", 256, true, false, false, false},  /* unfused: scores, softmax over keys */
    {MODELS_DIR "/attention_batch1_op17.onnx", 1024, true, false, false, false}, /* multi-head */
    {MODELS_DIR "/ffn_layernorm_op17.onnx", 512, true, false, false, false},
    {MODELS_DIR "/classifier_op13.onnx", 512, true, true, false, false}, /* pools over N, then a head */
    {MODELS_DIR "/layernorm_over_seq_op17.onnx", 512, false, true, false, false}, /* normalises over N */
    {MODELS_DIR "/seq_pooling.onnx", 512, true, false, false, false}, /* softmax over N: split by column */
    /* Position tables cap these at 64 tokens. */
    {REAL_DIR "/bert_dynamo/model.onnx", 64, true, true, true, false},  /* padding mask, pooler */
    {REAL_DIR "/gpt2_dynamo/model.onnx", 64, true, false, true, false},  /* causal */
    {REAL_DIR "/llama_dynamo/model.onnx", 64, true, false, true, false}, /* RMSNorm, rotary */
    {REAL_DIR "/tel_prenorm_gelu_dynamo/model.onnx", 512, true, false, true, false},
    /* Convs over a dynamic batch: each image a GEMM of constant rows, its
     * images split over threads (whole slices), the narrow layers' GEMMs
     * (8 or 16 channels, under two panels) too; in a bucket of one image
     * the GEMMs split their columns (output channels) in panels. */
    {REAL_DIR "/resnet18_dynamo/model.onnx", 8, true, false, false, true},
    {REAL_DIR "/mobilenetv3_small_dynamo/model.onnx", 4, true, false, false, true},
    {REAL_DIR "/mobilenetv3_small_dynamo/model.onnx", 1, true, false, false, true},
};

/* Kernels of a's code with a row entry, and without; *slices: those of the
 * first whose rows are whole slices. */
static void count_kernels(sj_device *dev, const sj_artifact *a, int *rows, int *single,
                          int *slices) {
    const uint8_t *code;
    size_t len;
    assert_int_equal(sj_artifact_find_code(a, SJ_CODE_HOST_OBJECT, &code, &len), SJ_OK);
    sj_module *m;
    assert_int_equal(sj_device_load_module(dev, SJ_CODE_HOST_OBJECT, code, len, &m), SJ_OK);
    const sj_launch_plan *p = sj__artifact_plan(a);
    *rows = *single = *slices = 0;
    for (int i = 0; i < p->n_kernels; i++) {
        sj_kernel_handle k;
        sj_kernel_attrs at;
        assert_int_equal(sj_module_kernel(m, p->kernels[i].name, &k, &at), SJ_OK);
        if (at.row_work) (*rows)++;
        else (*single)++;
        if (at.row_work && at.split_step == 1) (*slices)++;
    }
    sj_module_destroy(m);
}

static bool same_bits(const sj_graph *g, const sj_tensor *x, const sj_tensor *y, const char *what) {
    for (int o = 0; o < g->n_outputs; o++) {
        size_t bytes = (size_t)sj_tensor_numel(&x[o]) * sj_dtype_size(x[o].dtype);
        if (sj_tensor_numel(&x[o]) != sj_tensor_numel(&y[o]) || memcmp(x[o].bytes, y[o].bytes, bytes)) {
            printf("%s: output %d differs from threads 1\n", what, o);
            return false;
        }
    }
    return true;
}

static void check_model(sj_ctx *ctx, const model_case *mc, sj_device **devs) {
    sj_graph *g = NULL;
    if (mc->exported) g = h_load_exported(ctx, mc->path);
    else assert_int_equal(sj_model_load(ctx, mc->path, NULL, &g), SJ_OK);
    sj_compile_options o;
    sj_compile_options_init(&o);
    sj_artifact *a;
    assert_int_equal(sj_compile(g, mc->extent, &o, &a), SJ_OK);
    int rows, single, slices;
    count_kernels(devs[0], a, &rows, &single, &slices);
    /* a batch of images splits at any image, not in blocks of 16 */
    if (mc->slices) assert_true(slices > 0);
    if ((rows > 0) != mc->row_kernels || (single > 0) != mc->single_kernels)
        printf("%s at %lld: %d row-parallel kernels, %d single\n", mc->path, (long long)mc->extent,
               rows, single);
    assert_int_equal(rows > 0, mc->row_kernels);
    assert_int_equal(single > 0, mc->single_kernels);
    sj_executable *exe[4], *sub[4] = {NULL};
    for (int t = 0; t < 4; t++) {
        assert_int_equal(sj_artifact_load(a, devs[t], g, &exe[t]), SJ_OK);
        assert_int_equal(sj_executable_capture(exe[t]), SJ_OK);
    }
    /* Replays in sub-batches (plan.h's sub_rows, which lowering sets for
     * large images only; these are small): forced to 3 rows, so a last
     * sub-batch is shorter, the runs of launches that compute whole
     * slices take 3 images at a time, split over the threads, and the
     * bits are the whole batch's. */
    sj_launch_plan *plan = (sj_launch_plan *)sj__artifact_plan(a);
    int64_t compiled_rows = plan->sub_rows;
    for (int t = 0; t < 4 && mc->slices; t++) {
        plan->sub_rows = 3;
        assert_int_equal(sj_artifact_load(a, devs[t], g, &sub[t]), SJ_OK);
        assert_int_equal(sj_executable_capture(sub[t]), SJ_OK);
    }
    plan->sub_rows = compiled_rows;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    const int64_t ns[] = {1, 7, 16, 17, 33, 64, 300, mc->extent - 1, mc->extent};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int64_t n = ns[i];
        if (n < 1 || n > mc->extent) continue; /* extent 1 has no extent - 1 */
        char what[400];
        snprintf(what, sizeof what, "%s at E=%lld, n=%lld", mc->path, (long long)mc->extent,
                 (long long)n);
        sj_tensor in[8] = {0}, want[8] = {0}, one[8] = {0};
        h_inputs(g, n, &seed, in);
        assert_int_equal(sj_interp_run(g, n, in, want), SJ_OK);
        assert_int_equal(h_run(devs[0], a, g, n, in, one), SJ_OK);
        assert_true(h_compare(g, one, want, 1e-3, what));
        for (int t = 0; t < 4; t++) {
            sj_tensor got[8] = {0}, replayed[8] = {0};
            if (t > 0) {
                assert_int_equal(h_run(devs[t], a, g, n, in, got), SJ_OK);
                assert_true(same_bits(g, one, got, what));
                h_free_tensors(ctx, got, g->n_outputs);
            }
            assert_int_equal(sj_executable_replay(exe[t], n, in, replayed), SJ_OK);
            assert_true(same_bits(g, one, replayed, what));
            h_free_tensors(ctx, replayed, g->n_outputs);
            if (!sub[t]) continue;
            assert_int_equal(sj_executable_replay(sub[t], n, in, replayed), SJ_OK);
            assert_true(same_bits(g, one, replayed, what));
            h_free_tensors(ctx, replayed, g->n_outputs);
        }
        h_free_tensors(ctx, in, g->n_inputs);
        h_free_tensors(ctx, want, g->n_outputs);
        h_free_tensors(ctx, one, g->n_outputs);
    }
    for (int t = 0; t < 4; t++) {
        sj_executable_destroy(exe[t]);
        sj_executable_destroy(sub[t]);
    }
    sj_artifact_destroy(a);
    /* Kernels that reduce over N beside split ones, on four threads, against
     * the interpreter directly. */
    if (mc->single_kernels) {
        const int64_t ns4[] = {1, mc->extent > 100 ? 100 : mc->extent - 1, mc->extent};
        assert_true(h_check(devs[3], g, mc->extent, ns4, 3, &o, seed, 1e-3, mc->path));
    }
    sj_graph_destroy(g);
}

static void test_models_bit_identical(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_device *devs[4];
    for (int t = 0; t < 4; t++) {
        sj_host_device_config cfg;
        sj_host_device_config_init(&cfg);
        cfg.threads = t + 1;
        cfg.min_part_work = 1;   /* every launch of 32 rows (or 2 slices) or more splits */
        cfg.wake_share_work = 1; /* ... and wakes the workers */
        assert_int_equal(sj_host_device_create_config(ctx, &cfg, &devs[t]), SJ_OK);
    }
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++) check_model(ctx, &MODELS[i], devs);
    for (int t = 0; t < 4; t++) sj_device_destroy(devs[t]);
    sj_ctx_destroy(ctx);
}

/* The engine with threads 2 answers as with 1, bit for bit. */
static void test_engine_threads(void **state) {
    (void)state;
    sj_ctx *ctx;
    assert_int_equal(sj_ctx_create(NULL, &ctx), SJ_OK);
    sj_engine *e[2];
    for (int i = 0; i < 2; i++) {
        sj_engine_config ec;
        sj_engine_config_init(&ec);
        ec.threads = i + 1;
        ec.ladder = "pow2:1:512";
        assert_int_equal(sj_engine_open(ctx, EXAMPLES_DIR "/ffn.sjg", &ec, &e[i]), SJ_OK);
    }
    uint64_t seed = 7;
    for (int64_t n = 1; n <= 512; n = n * 4 + 3) {
        sj_tensor x;
        assert_int_equal(sj_tensor_alloc(ctx, 2, (int64_t[]){n, 64}, &x), SJ_OK);
        for (int64_t j = 0; j < n * 64; j++) x.data[j] = h_uniform(&seed, -2, 2);
        sj_named_tensor in[] = {{"x", x}}, out[2][1];
        for (int i = 0; i < 2; i++) assert_int_equal(sj_engine_run(e[i], in, 1, out[i], 1, NULL), SJ_OK);
        assert_int_equal(sj_tensor_numel(&out[0][0].tensor), n * 64);
        assert_memory_equal(out[0][0].tensor.data, out[1][0].tensor.data, (size_t)n * 64 * 4);
        for (int i = 0; i < 2; i++) sj_tensor_free(ctx, &out[i][0].tensor);
        sj_tensor_free(ctx, &x);
    }
    for (int i = 0; i < 2; i++) sj_engine_close(e[i]);
    sj_ctx_destroy(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_rules),
        cmocka_unit_test(test_replay_splits),
        cmocka_unit_test(test_small_launches_leave_sleepers),
        cmocka_unit_test(test_bad_tables_and_configs),
        cmocka_unit_test(test_previous_format_refused),
        cmocka_unit_test(test_models_bit_identical),
        cmocka_unit_test(test_engine_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The interpreter backend behind the compiler table. Artifact layout:
 * "SJIA", format version (u32), extent (i64), graph hash (32 bytes);
 * little-endian. */
#include "shapejit/ext/bucketed_cache.h"
#include "shapejit/ext/interp.h"

#include "backends/backend_registry.h"
#include "core/core_impl.h"

#include <stdatomic.h>
#include <string.h>

#define INTERP_ARTIFACT_VERSION 1u
#define INTERP_ARTIFACT_BYTES (4 + 4 + 8 + 32)

typedef struct interp_exe {
    sj_ctx *ctx;
    const sj_graph *g;
    sj_graph *rounded; /* a narrowing policy's graph (sj_graph_apply_precision), owned */
    int64_t extent;
    /* Read by stats while a run may be counting. */
    _Atomic uint64_t runs, rows;
} interp_exe;

/* The table's ctx points at one of these: the policy its executables apply. */
static const sj_precision policies[SJ_PRECISION_COUNT_] = {SJ_PRECISION_FP32, SJ_PRECISION_BF16,
                                                           SJ_PRECISION_FP16};
/* Options bytes for the key: none at fp32 (keys as before the policy). */
static const char *const policy_options[SJ_PRECISION_COUNT_] = {"", "SJIPbf16", "SJIPfp16"};

static sj_status interp_compile(void *self, const sj_graph *g, int64_t extent, void **artifact,
                                size_t *len) {
    (void)self;
    sj_ctx *ctx = sj_graph_ctx(g);
    uint8_t *a = sj_alloc(ctx, INTERP_ARTIFACT_BYTES);
    if (!a) return sj_fail(ctx, SJ_E_NOMEM, "interp compiler: out of memory");
    memcpy(a, "SJIA", 4);
    for (int i = 0; i < 4; i++) a[4 + i] = (uint8_t)(INTERP_ARTIFACT_VERSION >> (8 * i));
    for (int i = 0; i < 8; i++) a[8 + i] = (uint8_t)((uint64_t)extent >> (8 * i));
    sj_graph_hash(g, a + 16);
    *artifact = a;
    *len = INTERP_ARTIFACT_BYTES;
    return SJ_OK;
}

static sj_status interp_load(void *self, const sj_graph *g, int64_t extent, const void *artifact,
                             size_t len, void **exe) {
    sj_precision p = self ? *(const sj_precision *)self : SJ_PRECISION_FP32;
    sj_ctx *ctx = sj_graph_ctx(g);
    const uint8_t *a = artifact;
    if (len != INTERP_ARTIFACT_BYTES || memcmp(a, "SJIA", 4) != 0)
        return sj_fail(ctx, SJ_E_PARSE, "interp artifact: %zu bytes without the SJIA header", len);
    uint32_t version = 0;
    uint64_t ext = 0;
    for (int i = 0; i < 4; i++) version |= (uint32_t)a[4 + i] << (8 * i);
    for (int i = 0; i < 8; i++) ext |= (uint64_t)a[8 + i] << (8 * i);
    uint8_t h[32];
    sj_graph_hash(g, h);
    if (version != INTERP_ARTIFACT_VERSION)
        return sj_fail(ctx, SJ_E_MISMATCH, "interp artifact: format version %u, expected %u", version,
                       INTERP_ARTIFACT_VERSION);
    if ((int64_t)ext != extent || memcmp(h, a + 16, 32) != 0)
        return sj_fail(ctx, SJ_E_MISMATCH, "interp artifact: made for another graph or extent (%lld, wanted %lld)",
                       (long long)ext, (long long)extent);
    interp_exe *e = sj_calloc(ctx, 1, sizeof *e);
    if (!e) return sj_fail(ctx, SJ_E_NOMEM, "interp compiler: out of memory");
    e->ctx = ctx;
    e->g = g;
    e->extent = extent;
    if (p != SJ_PRECISION_FP32) {
        sj_status st = sj_graph_apply_precision(g, p, &e->rounded);
        if (st != SJ_OK) {
            sj_free(ctx, e);
            return st;
        }
        e->g = e->rounded;
    }
    *exe = e;
    return SJ_OK;
}

static sj_status interp_run(void *self, void *exe, int64_t active, const sj_tensor *inputs,
                            sj_tensor *outputs) {
    (void)self;
    interp_exe *e = exe;
    if (active < 1 || active > e->extent)
        return sj_fail(e->ctx, SJ_E_OUT_OF_RANGE, "interp executable: active extent %lld outside 1..%lld",
                       (long long)active, (long long)e->extent);
    SJ_TRY(sj_interp_run(e->g, active, inputs, outputs));
    atomic_fetch_add(&e->runs, 1);
    atomic_fetch_add(&e->rows, (uint64_t)active);
    return SJ_OK;
}

/* The interpreter holds no run memory between runs; its work is the
 * active rows it is given (it never sees the bucket's padding). */
static void interp_memory(void *self, void *exe, sj_executable_memory_info *out) {
    (void)self;
    interp_exe *e = exe;
    memset(out, 0, sizeof *out);
    out->runs = atomic_load(&e->runs);
    out->rows_requested = out->rows_computed = atomic_load(&e->rows);
}

static void interp_destroy(void *self, void *exe) {
    (void)self;
    interp_exe *e = exe;
    if (!e) return;
    sj_graph_destroy(e->rounded);
    sj_free(e->ctx, e);
}

void sj_interp_compiler(sj_compiler *out) {
    memset(out, 0, sizeof *out);
    out->target_triple = "interp";
    out->target_cpu = "";
    out->target_features = "";
    out->artifact_version = INTERP_ARTIFACT_VERSION;
    out->compiler_version = "interp-" SJ_VERSION_STRING;
    out->compile = interp_compile;
    out->load = interp_load;
    out->run = interp_run;
    out->destroy = interp_destroy;
    out->memory = interp_memory;
}

sj_status sj_interp_compiler_precision(sj_precision p, sj_compiler *out) {
    if (!sj_precision_name(p)) return SJ_E_INVALID_ARG;
    sj_interp_compiler(out);
    out->ctx = (void *)&policies[p];
    out->options = policy_options[p];
    out->options_len = strlen(policy_options[p]);
    return SJ_OK;
}

/* The registry's interp row: no state, nothing to close. */
sj_status sj__backend_interp_open(sj_ctx *ctx, const sj__backend_params *p, sj__backend *out) {
    if (sj_interp_compiler_precision(p->precision, &out->comp) != SJ_OK)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "backend interp: precision %d unknown",
                       (int)p->precision);
    return SJ_OK;
}

/* The executable half of the host and GPU compilers (artifact_exe.h). */
#include "backends/artifact_exe.h"

#include "core/core_impl.h"
#include "shapejit/ext/artifact.h"

#include <string.h>

static void exe_trim(void *self, void *exe) {
    (void)self;
    sj_executable_trim(exe);
}

static void exe_memory(void *self, void *exe, sj_executable_memory_info *out) {
    (void)self;
    sj_executable_memory(exe, out);
}

/* From the launch plan in the bytes: what a load would hold once it runs. */
static sj_status exe_estimate(void *self, const sj_graph *g, const void *artifact, size_t len,
                              sj_executable_memory_info *out) {
    (void)self;
    memset(out, 0, sizeof *out);
    sj_artifact *a;
    SJ_TRY(sj_artifact_deserialize(sj_graph_ctx(g), artifact, len, &a));
    sj_artifact_info in;
    sj_artifact_get_info(a, &in);
    out->weight_bytes = (uint64_t)in.weight_bytes;
    out->arena_bytes = (uint64_t)in.arena_bytes;
    out->io_bytes = (uint64_t)in.io_bytes;
    out->run_bytes = (uint64_t)in.run_bytes;
    out->estimated = true;
    sj_artifact_destroy(a);
    return SJ_OK;
}

/* The artifact's code parts as the store takes them (the same fields). */
static sj_status exe_parts(void *self, const sj_graph *g, const void *artifact, size_t len,
                           sj_store_part **parts, int *n_parts) {
    (void)self;
    sj_ctx *ctx = sj_graph_ctx(g);
    *parts = NULL;
    *n_parts = 0;
    sj_artifact_part *ap;
    int n;
    SJ_TRY(sj_artifact_code_parts(ctx, artifact, len, &ap, &n));
    sj_store_part *sp = n ? sj_alloc(ctx, (size_t)n * sizeof *sp) : NULL;
    if (n && !sp) {
        sj_free(ctx, ap);
        return sj_fail(ctx, SJ_E_NOMEM, "artifact parts: out of memory");
    }
    for (int i = 0; i < n; i++) {
        sp[i].offset = ap[i].offset;
        sp[i].len = ap[i].len;
        memcpy(sp[i].key, ap[i].key, sizeof sp[i].key);
    }
    sj_free(ctx, ap);
    *parts = sp;
    *n_parts = n;
    return SJ_OK;
}

static void exe_destroy(void *self, void *exe) {
    (void)self;
    sj_executable_destroy(exe);
}

void sj__artifact_exe_ops(sj_compiler *out) {
    out->trim = exe_trim;
    out->memory = exe_memory;
    out->estimate = exe_estimate;
    out->parts = exe_parts;
    out->destroy = exe_destroy;
}

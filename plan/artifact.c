/* Artifact ownership, inspection, the host compatibility check and loading. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "plan/artifact_impl.h"
#include "plan/plan.h"

sj_status sj__artifact_new(sj_ctx *ctx, sj_artifact **out) {
    sj_artifact *a = sj_calloc(ctx, 1, sizeof *a);
    if (!a) return sj_fail(ctx, SJ_E_NOMEM, "artifact: out of memory");
    a->ctx = ctx;
    a->format_version = SJ_ARTIFACT_FORMAT_VERSION;
    char **fields[] = {&a->target, &a->triple, &a->cpu, &a->features,
                       &a->shapejit_version, &a->llvm_version, &a->externs, &a->tuning};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (sj__artifact_set_string(a, fields[i], "") != SJ_OK) {
            sj_artifact_destroy(a);
            return SJ_E_NOMEM;
        }
    }
    *out = a;
    return SJ_OK;
}

sj_status sj__artifact_set_string(sj_artifact *a, char **field, const char *s) {
    char *c = sj_strdup(a->ctx, s);
    if (!c) return sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory");
    sj_free(a->ctx, *field);
    *field = c;
    return SJ_OK;
}

sj_status sj__artifact_add_code(sj_artifact *a, sj_code_format fmt, const void *bytes, size_t len) {
    sj_code_blob *nc = sj_realloc(a->ctx, a->code, (size_t)(a->n_code + 1) * sizeof *nc);
    if (!nc) return sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory");
    a->code = nc;
    uint8_t *copy = sj_alloc(a->ctx, len ? len : 1);
    if (!copy) return sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory for %zu code bytes", len);
    memcpy(copy, bytes, len);
    a->code[a->n_code++] = (sj_code_blob){fmt, copy, len};
    return SJ_OK;
}

const sj_launch_plan *sj__artifact_plan(const sj_artifact *a) { return &a->plan; }

sj_status sj_artifact_set_tuning(sj_artifact *a, const char *record) {
    if (!a || !record) return sj_fail(a ? a->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (strlen(record) >= (1u << 16))
        return sj_fail(a->ctx, SJ_E_INVALID_ARG, "artifact: tuning record of %zu bytes (at most 65535)",
                       strlen(record));
    return sj__artifact_set_string(a, &a->tuning, record);
}

void sj_artifact_destroy(sj_artifact *a) {
    if (!a) return;
    sj_ctx *ctx = a->ctx;
    char *fields[] = {a->target, a->triple, a->cpu, a->features,
                      a->shapejit_version, a->llvm_version, a->externs, a->tuning};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) sj_free(ctx, fields[i]);
    for (int i = 0; i < a->n_code; i++) sj_free(ctx, a->code[i].bytes);
    sj_free(ctx, a->code);
    sj__plan_free(ctx, &a->plan);
    sj_free(ctx, a);
}

void sj_artifact_get_info(const sj_artifact *a, sj_artifact_info *out) {
    *out = (sj_artifact_info){
        .format_version = a->format_version, .target = a->target, .triple = a->triple,
        .cpu = a->cpu, .features = a->features, .shapejit_version = a->shapejit_version,
        .llvm_version = a->llvm_version, .externs = a->externs, .tuning = a->tuning,
        .options_hash = a->options_hash,
        .extent = a->plan.extent, .n_kernels = a->plan.n_kernels,
        .n_launches = a->plan.n_launches, .n_code = a->n_code};
    memcpy(out->graph_hash, a->graph_hash, sizeof a->graph_hash);
    sj_plan_memory m;
    sj__plan_memory_get(&a->plan, &m);
    out->arena_bytes = m.arena_bytes;
    out->io_bytes = m.io_bytes;
    out->run_bytes = m.arena_bytes > INT64_MAX - m.io_bytes - m.table_bytes
                         ? INT64_MAX
                         : m.arena_bytes + m.io_bytes + m.table_bytes;
    out->weight_bytes = m.weight_bytes;
}

sj_status sj_artifact_code(const sj_artifact *a, int i, sj_code_format *fmt, const uint8_t **bytes,
                           size_t *len) {
    if (i < 0 || i >= a->n_code)
        return sj_fail(a->ctx, SJ_E_INVALID_ARG, "artifact: code blob %d of %d", i, a->n_code);
    *fmt = a->code[i].format;
    *bytes = a->code[i].bytes;
    *len = a->code[i].len;
    return SJ_OK;
}

sj_status sj_artifact_find_code(const sj_artifact *a, sj_code_format fmt, const uint8_t **bytes,
                                size_t *len) {
    for (int i = 0; i < a->n_code; i++)
        if (a->code[i].format == fmt) {
            *bytes = a->code[i].bytes;
            *len = a->code[i].len;
            return SJ_OK;
        }
    return sj_fail(a->ctx, SJ_E_NOT_FOUND, "artifact: no code of format %d", (int)fmt);
}

/* The artifact's representation, shared by the compiler (which fills it) and
 * the (de)serialiser. Not installed. */
#ifndef SJ_ARTIFACT_IMPL_H
#define SJ_ARTIFACT_IMPL_H

#include "shapejit/ext/artifact.h"
#include "core/core_impl.h"
#include "plan/plan.h"

typedef struct sj_code_blob {
    sj_code_format format;
    uint8_t *bytes;
    size_t len;
} sj_code_blob;

/* Where the compile that made an artifact spent its time, filled by
 * sj_compile (lower) and the emitter (the rest; 0 where it measures none).
 * In memory only, never serialised: a stored artifact's compile was
 * another process's. */
typedef struct sj_compile_times {
    uint64_t lower_ns, emit_ns, optimise_ns, codegen_ns;
    /* Kernel objects compiled, and taken from sj_compile_options.objects. */
    uint64_t objects_compiled, objects_found;
} sj_compile_times;

struct sj_artifact {
    sj_ctx *ctx;
    uint32_t format_version;
    char *target, *triple, *cpu, *features, *shapejit_version, *llvm_version, *externs;
    char *tuning; /* what precompile --tune timed and chose; "" = not tuned */
    uint8_t graph_hash[32];
    uint64_t options_hash;
    sj_launch_plan plan; /* owned */
    int n_code;
    sj_code_blob *code;
    sj_compile_times times;
};

/* An empty artifact (every string ""), for the compiler to fill. */
sj_status sj__artifact_new(sj_ctx *ctx, sj_artifact **out);
/* Replaces *field with a copy of s. */
sj_status sj__artifact_set_string(sj_artifact *a, char **field, const char *s);
/* Appends a copy of the bytes as a code blob. */
sj_status sj__artifact_add_code(sj_artifact *a, sj_code_format fmt, const void *bytes, size_t len);
/* The launch plan (borrowed). */
const sj_launch_plan *sj__artifact_plan(const sj_artifact *a);

#endif

/* Kernel object names (kernel_objects.h). */
#include "backends/kernel_objects.h"

#include "core/core_impl.h"
#include "core/hash.h"
#include "plan/artifact_impl.h"
#include "plan/code_bundle.h"
#include "shapejit/ext/artifact.h"

#include <llvm-c/blake3.h>
#include <string.h>

static void put_u64(llvm_blake3_hasher *h, uint64_t v) {
    uint8_t b[8];
    sj__put_le(b, v, 8);
    llvm_blake3_hasher_update(h, b, sizeof b);
}

/* With its length first, so no two sequences of fields hash alike. */
static void put_bytes(llvm_blake3_hasher *h, const void *p, size_t n) {
    put_u64(h, n);
    if (n) llvm_blake3_hasher_update(h, p, n);
}

static void put_string(llvm_blake3_hasher *h, const char *s) { put_bytes(h, s, s ? strlen(s) : 0); }

void sj__kernel_object_name(const sj_compiler *comp, const uint8_t code[32], uint8_t name[32]) {
    static const char tag[] = "shapejit-kernel-object-2";
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, tag, sizeof tag - 1);
    put_string(&h, comp->target_triple);
    put_string(&h, comp->target_cpu);
    put_string(&h, comp->target_features);
    put_string(&h, comp->compiler_version);
    put_u64(&h, comp->artifact_version);
    put_bytes(&h, comp->options, comp->options_len);
    put_bytes(&h, code, 32);
    llvm_blake3_hasher_finalize(&h, name, 32);
}

static bool has_code_key(const sj_kernel_desc *k) {
    for (size_t i = 0; i < sizeof k->code; i++)
        if (k->code[i]) return true;
    return false;
}

sj_status sj__kernel_object_names(const sj_compiler *comp, sj_ctx *ctx, const void *artifact,
                                 size_t len, uint8_t (**names)[32], int *n) {
    *names = NULL;
    *n = 0;
    sj_artifact *a;
    SJ_TRY(sj_artifact_deserialize(ctx, artifact, len, &a));
    const sj_launch_plan *plan = sj__artifact_plan(a);
    const sj_code_blob *c = a->n_code == 1 ? &a->code[0] : NULL;
    int objects = 0;
    sj_status st = SJ_OK;
    if (c && c->format == SJ_CODE_HOST_OBJECT && sj__code_bundle_is(c->bytes, c->len)) {
        sj_code_piece *pieces = NULL;
        st = sj__code_bundle_parse(ctx, c->bytes, c->len, &pieces, &objects);
        sj_free(ctx, pieces);
    }
    /* Every object must have its key: names are matched to parts by order. */
    for (int i = 0; i < plan->n_kernels && objects > 0; i++)
        if (!has_code_key(&plan->kernels[i])) objects = 0;
    if (st == SJ_OK && objects > 0 && objects == plan->n_kernels) {
        uint8_t (*out)[32] = sj_alloc(ctx, (size_t)objects * sizeof *out);
        if (!out) {
            st = sj_fail(ctx, SJ_E_NOMEM, "kernel object names: out of memory");
        } else {
            for (int i = 0; i < objects; i++) sj__kernel_object_name(comp, plan->kernels[i].code, out[i]);
            *names = out;
            *n = objects;
        }
    }
    sj_artifact_destroy(a);
    return st;
}

/* Whether a host artifact can run on this machine: its architecture and
 * every CPU feature it was built for, against what LLVM reports for the
 * host. A runtime question (loading), so it lives here, not with the
 * artifact format in plan. */
#include <stdio.h>
#include <string.h>

#include "plan/artifact_impl.h"
#include "runtime/host_code/host_code.h"
#include "runtime/cpu_features.h"
#include "runtime/runtime_only.h"

#ifndef SJ_RUNTIME_ONLY
static size_t arch_len(const char *triple) {
    const char *dash = strchr(triple, '-');
    return dash ? (size_t)(dash - triple) : strlen(triple);
}
#endif

sj_status sj_artifact_check_host(const sj_artifact *a) {
    sj_ctx *ctx = a->ctx;
    if (strcmp(a->target, "host"))
        return sj_fail(ctx, SJ_E_MISMATCH, "artifact: built for target '%s', not the host", a->target);
#ifdef SJ_RUNTIME_ONLY
    /* No host code loads here, so no host artifact fits this machine. */
    return sj_fail(ctx, SJ_E_UNSUPPORTED, "artifact: %s", SJ_RUNTIME_ONLY_NO_HOST_CODE);
#else
    char *triple, *cpu, *features;
    SJ_TRY(sj__llvm_host_info(ctx, &triple, &cpu, &features));
    sj_status st = SJ_OK;
    size_t al = arch_len(a->triple);
    if (al != arch_len(triple) || memcmp(a->triple, triple, al)) {
        st = sj_fail(ctx, SJ_E_MISMATCH, "artifact: built for %s, this machine is %s", a->triple, triple);
    } else if (!strchr(a->features, '+') && strcmp(a->cpu, cpu)) {
        /* Built for a named CPU's own features, which LLVM does not list:
         * only that CPU is known to have them. */
        st = sj_fail(ctx, SJ_E_MISMATCH,
                     "artifact: built for CPU %s (its own features, not listed); this machine is %s",
                     a->cpu, cpu);
    } else {
        /* Name every missing feature, so the message says what to rebuild for. */
        char missing[512];
        int n_missing = sj__cpu_features_missing(a->features, features, missing, sizeof missing);
        if (n_missing)
            st = sj_fail(ctx, SJ_E_MISMATCH,
                         "artifact: built for CPU %s with %d feature(s) this %s lacks: %s", a->cpu,
                         n_missing, cpu, missing);
    }
    sj_free(ctx, triple);
    sj_free(ctx, cpu);
    sj_free(ctx, features);
    return st;
#endif
}

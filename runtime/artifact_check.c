/* Whether a host artifact can run on this machine: its architecture and
 * every CPU feature it was built for, against what LLVM reports for the
 * host. A runtime question (loading), so it lives here, not with the
 * artifact format in jit/artifact. */
#include <stdio.h>
#include <string.h>

#include "jit/artifact/artifact_impl.h"
#include "jit/llvm/llvm_impl.h"

/* Whether the comma-separated LLVM feature list `list` enables `feat`
 * (given without its sign, length n). */
static bool has_feature(const char *list, const char *feat, size_t n) {
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n + 1 && p[0] == '+' && !memcmp(p + 1, feat, n)) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

static size_t arch_len(const char *triple) {
    const char *dash = strchr(triple, '-');
    return dash ? (size_t)(dash - triple) : strlen(triple);
}

sj_status sj_artifact_check_host(const sj_artifact *a) {
    sj_ctx *ctx = a->ctx;
    if (strcmp(a->target, "host"))
        return sj_fail(ctx, SJ_E_MISMATCH, "artifact: built for target '%s', not the host", a->target);
    char *triple, *cpu, *features;
    SJ_TRY(sj_llvm_host_info(ctx, &triple, &cpu, &features));
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
        char missing[512] = "";
        size_t used = 0;
        int n_missing = 0;
        for (const char *p = a->features; *p;) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            if (len > 1 && p[0] == '+' && !has_feature(features, p + 1, len - 1)) {
                n_missing++;
                int w = snprintf(missing + used, sizeof missing - used, "%s%.*s", used ? " " : "",
                                 (int)(len - 1), p + 1);
                if (w > 0 && (size_t)w < sizeof missing - used) used += (size_t)w;
            }
            if (!end) break;
            p = end + 1;
        }
        if (n_missing)
            st = sj_fail(ctx, SJ_E_MISMATCH,
                         "artifact: built for CPU %s with %d feature(s) this %s lacks: %s", a->cpu,
                         n_missing, cpu, missing);
    }
    sj_free(ctx, triple);
    sj_free(ctx, cpu);
    sj_free(ctx, features);
    return st;
}

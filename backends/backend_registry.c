/* The backend rows and the checks every backend shares: the name, and the
 * options a backend does not take. A build without compilers keeps the
 * host's row with the reason it is absent. */
#include "backends/backend_registry.h"

#include "core/core_impl.h"
#include "runtime/runtime_only.h"

#include <stdio.h>
#include <string.h>

#define HOST_TAKES                                                                                 \
    (SJ__BACKEND_TAKES_CPU | SJ__BACKEND_TAKES_THREADS | SJ__BACKEND_TAKES_TUNE |                  \
     SJ__BACKEND_TAKES_NATIVE_AFTER | SJ__BACKEND_TAKES_TIERED)

static const sj__backend_row rows[] = {
#ifdef SJ_RUNTIME_ONLY
    {"host", HOST_TAKES, NULL, SJ_RUNTIME_ONLY_NO_HOST_CODE},
#else
    {"host", HOST_TAKES, sj__backend_host_open, NULL},
#endif
    {"interp", 0, sj__backend_interp_open, NULL},
    {"cuda", SJ__BACKEND_TAKES_GPU, sj__backend_cuda_open, NULL},
};
#define N_ROWS (sizeof rows / sizeof rows[0])

/* "host, interp or cuda": every row, built or not, so a typo's message
 * lists what the project knows. */
static void names(char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_ROWS && used < cap; i++) {
        const char *sep = i == 0 ? "" : i + 1 == N_ROWS ? " or " : ", ";
        int n = snprintf(buf + used, cap - used, "%s%s", sep, rows[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}

/* The first row that takes an option, for "is for backend X". */
static const char *taker(unsigned option) {
    for (size_t i = 0; i < N_ROWS; i++)
        if (rows[i].takes & option) return rows[i].name;
    return "none";
}

/* An option set for a backend that does not take it, in the order a reader
 * of a config would look: the GPU's, the CPU, native_after, tiered, tune,
 * threads. */
static sj_status check_takes(sj_ctx *ctx, const sj__backend_row *r, const sj__backend_params *p) {
    if ((p->gpu_emit || p->arch || p->cuda_driver) && !(r->takes & SJ__BACKEND_TAKES_GPU))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s '%s' is for backend %s, not %s",
                       p->gpu_emit ? "gpu_emit" : p->arch ? "arch" : "cuda_driver",
                       p->gpu_emit ? p->gpu_emit : p->arch ? p->arch : p->cuda_driver,
                       taker(SJ__BACKEND_TAKES_GPU), r->name);
    if (p->cpu && !(r->takes & SJ__BACKEND_TAKES_CPU))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "cpu '%s' is for backend %s, not %s", p->cpu,
                       taker(SJ__BACKEND_TAKES_CPU), r->name);
    if (p->native_after > 0 && !(r->takes & SJ__BACKEND_TAKES_NATIVE_AFTER))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "native_after %d is for backend %s, not %s",
                       p->native_after, taker(SJ__BACKEND_TAKES_NATIVE_AFTER), r->name);
    if (p->tiered && !(r->takes & SJ__BACKEND_TAKES_TIERED))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tiered is for backend %s, not %s",
                       taker(SJ__BACKEND_TAKES_TIERED), r->name);
    if (p->tune && !(r->takes & SJ__BACKEND_TAKES_TUNE))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "tune is for backend %s, not %s",
                       taker(SJ__BACKEND_TAKES_TUNE), r->name);
    /* More threads on a backend that does not split kernels would be a
     * promise it does not keep. */
    if (p->threads > 1 && !(r->takes & SJ__BACKEND_TAKES_THREADS))
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "threads %d is for backend %s, not %s", p->threads,
                       taker(SJ__BACKEND_TAKES_THREADS), r->name);
    return SJ_OK;
}

sj_status sj__backend_open(sj_ctx *ctx, const char *name, const sj__backend_params *p,
                           sj__backend *out) {
    memset(out, 0, sizeof *out);
    if (!name) name = "host";
    const sj__backend_row *r = NULL;
    for (size_t i = 0; i < N_ROWS && !r; i++)
        if (!strcmp(rows[i].name, name)) r = &rows[i];
    if (!r) {
        char known[64];
        names(known, sizeof known);
        return sj_fail(ctx, SJ_E_INVALID_ARG, "backend '%s' is not %s", name, known);
    }
    /* Options first: a misplaced one is reported before anything is made. */
    SJ_TRY(check_takes(ctx, r, p));
    if (!r->open) return sj_fail(ctx, SJ_E_UNSUPPORTED, "backend %s: %s", r->name, r->absent);
    snprintf(out->target, sizeof out->target, "%s", r->name);
    sj_status st = r->open(ctx, p, out);
    if (st != SJ_OK) memset(out, 0, sizeof *out);
    return st;
}

void sj__backend_close(sj__backend *b) {
    if (b->close) b->close(b->owner);
    memset(b, 0, sizeof *b);
}

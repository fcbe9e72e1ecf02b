/* Loading an artifact onto a device (apart from the rest of the artifact code
 * so programs that only read or write artifacts do not pull in the runtime). */
#include <stdio.h>
#include <string.h>

#include "plan/artifact_impl.h"
#include "runtime/host_code/host_code.h"
#include "runtime/executable_create.h"

#ifndef SJ_RUNTIME_ONLY
/* Every extern the host code calls must be one this build links. */
static sj_status check_externs(const sj_artifact *a) {
    char name[128];
    for (const char *p = a->externs; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        if (!sj__host_extern_symbol(name))
            return sj_fail(a->ctx, SJ_E_UNSUPPORTED,
                           "artifact: code calls extern '%s', which this build does not provide", name);
        if (!end) break;
        p = end + 1;
    }
    return SJ_OK;
}
#endif

sj_status sj_artifact_load(const sj_artifact *a, sj_device *dev, const sj_graph *g,
                           sj_executable **out) {
    sj_ctx *ctx = a->ctx;
    uint8_t h[32];
    sj_graph_hash(g, h);
    if (memcmp(h, a->graph_hash, sizeof h))
        return sj_fail(ctx, SJ_E_MISMATCH, "artifact: compiled from another graph (hash differs)");
    const uint8_t *code = NULL;
    size_t len = 0;
    sj_code_format fmt;
    if (!strcmp(sj_device_name(dev), "host")) {
        /* A runtime-only build refuses every host artifact here. */
        SJ_TRY(sj_artifact_check_host(a));
#ifndef SJ_RUNTIME_ONLY
        SJ_TRY(check_externs(a));
#endif
        fmt = SJ_CODE_HOST_OBJECT;
        SJ_TRY(sj_artifact_find_code(a, fmt, &code, &len));
    } else {
        /* GPUs: SASS when the device runs its arch, else PTX the driver can
         * JIT (the device refuses a cubin of another arch with SJ_E_MISMATCH). */
        if (sj_artifact_find_code(a, SJ_CODE_CUBIN, &code, &len) == SJ_OK) {
            sj_status st = sj__executable_create(dev, &a->plan, SJ_CODE_CUBIN, code, len, g, out);
            if (st != SJ_E_MISMATCH || sj_artifact_find_code(a, SJ_CODE_PTX, &code, &len) != SJ_OK)
                return st;
        }
        fmt = SJ_CODE_PTX;
        SJ_TRY(sj_artifact_find_code(a, fmt, &code, &len));
    }
    return sj__executable_create(dev, &a->plan, fmt, code, len, g, out);
}

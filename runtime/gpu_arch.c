/* GPU arch names, shared by the compile paths and the runtime-only loader
 * (no LLVM, no NVRTC here: both builds have it). */
#include <string.h>

#include "runtime/gpu_arch.h"

sj_status sj__gpu_parse_arch(sj_ctx *ctx, const char *arch, int *sm) {
    if (!arch || strcmp(arch, "sm_90") == 0) {
        *sm = 90;
        return SJ_OK;
    }
    if (strcmp(arch, "sm_80") == 0) {
        *sm = 80;
        return SJ_OK;
    }
    return sj_fail(ctx, SJ_E_UNSUPPORTED, "gpu: arch '%s' not supported (sm_80, sm_90)", arch);
}

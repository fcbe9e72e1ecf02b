/* Ownership and log helpers shared by the NVRTC and nvJitLink wrappers. */
#include <string.h>

#include "compile/gpu/nvrtc_impl.h"

void sj__gpu_code_free(sj_ctx *ctx, sj_gpu_code *code) {
    if (!code) return;
    sj_free(ctx, code->ptx);
    sj_free(ctx, code->cubin);
    memset(code, 0, sizeof *code);
}

/* Error messages hold about 1 KiB; the first diagnostics are the ones that
 * explain a failure, so the head of the log is kept and the cut is marked. */
void sj__gpu_log_head(const char *log, char *buf, size_t len) {
    if (len == 0) return;
    if (!log) log = "";
    while (*log == '\n' || *log == ' ') log++;
    size_t n = strlen(log);
    while (n > 0 && (log[n - 1] == '\n' || log[n - 1] == ' ' || log[n - 1] == '\r')) n--;
    static const char cut[] = " [log truncated]";
    if (n < len) {
        memcpy(buf, log, n);
        buf[n] = '\0';
        return;
    }
    size_t keep = len > sizeof cut ? len - sizeof cut : 0;
    memcpy(buf, log, keep);
    memcpy(buf + keep, cut, len - keep - 1);
    buf[len - 1] = '\0';
}

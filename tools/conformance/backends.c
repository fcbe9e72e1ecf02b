/* Backends for the conformance runner: the reference interpreter and the
 * LLVM host compiler + host device (a runtime-only build has no compiler,
 * so there the host backend refuses and the interpreter runs alone). */
#include "formats/onnx/onnx_impl.h"
#include "tools/conformance/conformance.h"
#include "shapejit/ext/artifact.h"
#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"
#include "shapejit/ext/runtime.h"

static sj_status interp_run(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                            sj_tensor *outputs) {
    (void)user;
    return sj_interp_run(g, extent, inputs, outputs);
}

sj_onnx_backend sj_onnx_backend_interp(void) {
    sj_onnx_backend b = {"interp", interp_run, NULL, NULL};
    return b;
}

#ifdef SJ_RUNTIME_ONLY
sj_status sj_onnx_backend_host_create(sj_ctx *ctx, sj_onnx_backend *out) {
    *out = (sj_onnx_backend){0};
    return sj_fail(ctx, SJ_E_UNSUPPORTED,
                   "host backend: this runtime-only build (SJ_COMPILERS=OFF) compiles nothing; "
                   "run the node tests on the interpreter (--backend interp) or on a full build");
}
#else
typedef struct host_backend {
    sj_ctx *ctx;
    sj_device *dev;
} host_backend;

/* Strictly above `extent`, so the buffers always hold padded rows. */
static int64_t bucket_above(int64_t extent) {
    int64_t b = 1;
    while (b <= extent && b < SJ_MAX_EXTENT) b *= 2;
    return b > extent ? b : extent;
}

static sj_status host_run(void *user, const sj_graph *g, int64_t extent, const sj_tensor *inputs,
                          sj_tensor *outputs) {
    host_backend *h = user;
    int64_t bucket = sj_graph_symbol(g) ? bucket_above(extent) : extent;
    sj_compile_options o;
    sj_compile_options_init(&o);
    sj_artifact *a;
    SJ_TRY(sj_compile(g, bucket, &o, &a));
    sj_executable *exe;
    sj_status st = sj_artifact_load(a, h->dev, g, &exe);
    if (st == SJ_OK) {
        for (int i = 0; i < sj_graph_num_outputs(g); i++) outputs[i].data = NULL;
        st = sj_executable_run(exe, extent, inputs, outputs);
        sj_executable_destroy(exe);
    }
    sj_artifact_destroy(a);
    return st;
}

static void host_destroy(void *user) {
    host_backend *h = user;
    sj_device_destroy(h->dev);
    sj_free(h->ctx, h);
}

sj_status sj_onnx_backend_host_create(sj_ctx *ctx, sj_onnx_backend *out) {
    *out = (sj_onnx_backend){0};
    host_backend *h = sj_calloc(ctx, 1, sizeof *h);
    if (!h) return sj_fail(ctx, SJ_E_NOMEM, "host backend: out of memory");
    h->ctx = ctx;
    sj_status st = sj_host_device_create(ctx, NULL, &h->dev);
    if (st != SJ_OK) {
        sj_free(ctx, h);
        return st;
    }
    *out = (sj_onnx_backend){"host", host_run, host_destroy, h};
    return SJ_OK;
}
#endif

void sj_onnx_backend_destroy(sj_onnx_backend *b) {
    if (b && b->destroy) b->destroy(b->user);
    if (b) *b = (sj_onnx_backend){0};
}

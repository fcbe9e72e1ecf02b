/* ONNX ModelProto bytes through the loader (protobuf unpack, the nesting
 * scan, every op mapping), with default model options. */
#include "fuzz/fuzz_common.h"
#include "shapejit/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sj_ctx *ctx = fuzz_ctx();
    sj_model_options o;
    sj_model_options_init(&o);
    sj_graph *g = NULL;
    sj_status st = sj_onnx_load_mem(ctx, data, size, "fuzz.onnx", &o, &g);
    fuzz_check_message(st);
    if (st == SJ_OK && !g) abort();
    sj_graph_destroy(g);
    return 0;
}

/* A serialized onnx.TensorProto (the node tests' .pb files). */
#include "fuzz/fuzz_common.h"
#include "shapejit/ext/onnx.h"
#include "shapejit/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sj_ctx *ctx = fuzz_ctx();
    sj_tensor t;
    sj_status st = sj_onnx_tensor_read_mem(ctx, data, size, "fuzz.pb", &t);
    fuzz_check_message(st);
    if (st == SJ_OK) sj_tensor_free(ctx, &t);
    return 0;
}

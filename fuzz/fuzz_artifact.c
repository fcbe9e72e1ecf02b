/* The artifact decoder: what deserializes must serialize back to the same
 * bytes (the format has one encoding per artifact). */
#include "fuzz/fuzz_common.h"
#include "shapejit/ext/artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sj_ctx *ctx = fuzz_ctx();
    sj_artifact *a = NULL;
    sj_status st = sj_artifact_deserialize(ctx, data, size, &a);
    fuzz_check_message(st);
    if (st != SJ_OK) return 0;
    sj_artifact_info info;
    sj_artifact_get_info(a, &info);
    uint8_t *out = NULL;
    size_t len = 0;
    if (sj_artifact_serialize(a, &out, &len) != SJ_OK) abort();
    if (len != size || memcmp(out, data, size) != 0) abort();
    sj_free(ctx, out);
    sj_artifact_destroy(a);
    return 0;
}

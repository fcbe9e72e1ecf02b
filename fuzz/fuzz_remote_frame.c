/* A value fetched from the remote tier: the frame check with and without a
 * fleet secret. The first 32 bytes of the input are the key it was asked
 * for; content located by a passing check must lie inside the value. */
#include "fuzz/fuzz_common.h"
#include "store/remote_tier_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < SJ_REMOTE_KEY_SIZE) return 0;
    static sj_remote_trust open_tier, keyed_tier;
    static int ready;
    if (!ready) {
        sj__remote_trust_init(&open_tier, NULL);
        sj__remote_trust_init(&keyed_tier, "fuzz secret");
        ready = 1;
    }
    const uint8_t *key = data, *frame = data + SJ_REMOTE_KEY_SIZE;
    size_t n = size - SJ_REMOTE_KEY_SIZE;
    const sj_remote_trust *tiers[2] = {&open_tier, &keyed_tier};
    for (int i = 0; i < 2; i++) {
        size_t off = (size_t)-1, len = (size_t)-1;
        const char *why = sj__remote_frame_check(tiers[i], key, frame, n, &off, &len);
        if (!why && (off > n || len > n - off)) abort();
        if (why && !why[0]) abort();
    }
    return 0;
}

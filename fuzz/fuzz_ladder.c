/* Ladder specs (pow2:MIN:MAX, geo:MIN:MAX:RATIO, list:E1,...): a parsed
 * ladder is ascending, within SJ_MAX_EXTENT, finds each extent in its own
 * bucket, and formats to a spec that parses to the same extents. */
#include "fuzz/fuzz_common.h"
#include "shapejit/ladder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sj_ctx *ctx = fuzz_ctx();
    char *spec = fuzz_cstr(data, size);
    sj_ladder *l = NULL;
    sj_status st = sj_ladder_parse(ctx, spec, &l);
    fuzz_check_message(st);
    free(spec);
    if (st != SJ_OK) return 0;
    int n = sj_ladder_num_buckets(l);
    if (n < 1 || n > SJ_LADDER_MAX_BUCKETS) abort();
    for (int i = 0; i < n; i++) {
        int64_t e = sj_ladder_extent(l, i);
        if (e < 1 || e > SJ_MAX_EXTENT || (i && e <= sj_ladder_extent(l, i - 1))) abort();
        int b;
        if (sj_ladder_bucket_for(l, e, &b) != SJ_OK || b != i) abort();
    }
    static char canon[SJ_LADDER_MAX_BUCKETS * 12 + 64];
    sj_ladder_format(l, canon, sizeof canon);
    sj_ladder *again = NULL;
    if (sj_ladder_parse(ctx, canon, &again) != SJ_OK || sj_ladder_num_buckets(again) != n) abort();
    for (int i = 0; i < n; i++)
        if (sj_ladder_extent(again, i) != sj_ladder_extent(l, i)) abort();
    sj_ladder_destroy(again);
    sj_ladder_destroy(l);
    return 0;
}

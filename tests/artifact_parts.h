/* The code parts two artifacts share (sj_artifact_code_parts): how many of
 * a's parts have the key of one of b's, checking that those hold the same
 * bytes. For the tests of shared kernel code (test_code_share.c,
 * test_cuda_share.c). Header-only, static; include after <cmocka.h>. */
#ifndef SJ_TESTS_ARTIFACT_PARTS_H
#define SJ_TESTS_ARTIFACT_PARTS_H

#include <string.h>

#include "shapejit/ext/artifact.h"

/* *n_a: how many parts a has. */
static inline int tp_shared_parts(sj_ctx *ctx, const sj_artifact *a, const sj_artifact *b, int *n_a) {
    uint8_t *ba, *bb;
    size_t la, lb;
    sj_artifact_part *pa, *pb;
    int na, nb, same = 0;
    assert_int_equal(sj_artifact_serialize(a, &ba, &la), SJ_OK);
    assert_int_equal(sj_artifact_serialize(b, &bb, &lb), SJ_OK);
    assert_int_equal(sj_artifact_code_parts(ctx, ba, la, &pa, &na), SJ_OK);
    assert_int_equal(sj_artifact_code_parts(ctx, bb, lb, &pb, &nb), SJ_OK);
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (!memcmp(pa[i].key, pb[j].key, 32)) {
                assert_int_equal(pa[i].len, pb[j].len);
                assert_memory_equal(ba + pa[i].offset, bb + pb[j].offset, pa[i].len);
                same++;
            }
    *n_a = na;
    sj_free(ctx, pa);
    sj_free(ctx, pb);
    sj_free(ctx, ba);
    sj_free(ctx, bb);
    return same;
}

#endif

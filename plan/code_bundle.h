/* Several modules as one code blob: one per distinct kernel (host object
 * files, PTX, cubins), so a kernel whose code is the same in several
 * buckets (or models) is the same bytes in each artifact, the store keeps
 * those bytes once and a device loads them once (issue #33). Not installed.
 *
 *   const uint8_t *objs[] = {o0, o1}; size_t lens[] = {n0, n1};
 *   uint8_t *blob; size_t len;
 *   sj__code_bundle_pack(ctx, objs, lens, 2, &blob, &len);
 *   sj_code_piece *pieces; int n;
 *   if (sj__code_bundle_parse(ctx, blob, len, &pieces, &n) == SJ_OK)  // pieces[i]: offset, len
 *       ...; sj_free(ctx, pieces);
 *
 * Layout (little-endian): "SJOBJS01", u32 count, then count times (u64
 * length, bytes). A bare ELF object (what SJ_CODE_HOST_OBJECT held before)
 * or a whole PTX module or cubin (what a GPU blob held before) is not a
 * bundle: sj__code_bundle_is tells them apart by the magic. */
#ifndef SJ_PLAN_CODE_BUNDLE_H
#define SJ_PLAN_CODE_BUNDLE_H

#include "core/core_impl.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SJ_CODE_BUNDLE_MAX 65536 /* objects in one bundle: more is damage */

typedef struct sj_code_piece {
    size_t offset, len; /* one object's bytes within the bundle */
} sj_code_piece;

/* Whether bytes start as a bundle. */
bool sj__code_bundle_is(const void *bytes, size_t len);
/* *out (sj_alloc'ed) holds the n objects in order; n >= 1, each len >= 1. */
sj_status sj__code_bundle_pack(sj_ctx *ctx, const uint8_t *const *objs, const size_t *lens, int n,
                              uint8_t **out, size_t *len);
/* The objects of a bundle, every length checked against the bytes that
 * remain (SJ_E_CORRUPT naming the object and the numbers otherwise); *pieces
 * is sj_alloc'ed. */
sj_status sj__code_bundle_parse(sj_ctx *ctx, const void *bytes, size_t len, sj_code_piece **pieces,
                               int *n);

#endif

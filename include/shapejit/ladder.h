/* shapejit/ladder.h — bucket ladders: how the symbolic dim's range is split.
 *
 *   sj_ladder *l;
 *   if (sj_ladder_parse(ctx, "pow2:8:256", &l) != SJ_OK)        // or sj_ladder_pow2(ctx, 8, 256, &l)
 *       fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));
 *   int b;
 *   if (sj_ladder_bucket_for(l, 17, &b) == SJ_OK)
 *       printf("17 runs at extent %lld\n", (long long)sj_ladder_extent(l, b));   // 32
 *   sj_ladder_destroy(l);
 *
 * A ladder is an ascending list of extents E0 < E1 < ... < E(B-1). Bucket i
 * holds the keys (E(i-1), Ei] (bucket 0 holds [1, E0]) and is compiled at
 * its upper bound Ei, so a request of N rows pays for at most Ei rows.
 *
 *   pow2:MIN:MAX       extents MIN rounded up to a power of two, doubling up
 *                      to the first power of two >= MAX. pow2:8:256 gives
 *                      [1,8] [9,16] [17,32] ... [129,256]. Padding waste is
 *                      at most 2x in every bucket but the first.
 *   geo:MIN:MAX:RATIO  MIN, then each extent at most RATIO times the last
 *                      (at least one more), the last one MAX. Waste < RATIO
 *                      above the first bucket.
 *   list:E1,E2,...     the given extents: ascending, positive.
 *   ranges:L1-H1,L2-H2,...  explicit buckets [Li, Hi], ascending and not
 *                      overlapping, with gaps allowed and the first Li
 *                      possibly above 1 (ranges:1-8,17-64 leaves 9..16 out):
 *                      a key in a gap or below L1 is in no bucket, so it is
 *                      SJ_E_OUT_OF_RANGE, or a one-off where the cache
 *                      allows those. Bucket i is compiled at Hi.
 *
 * Every extent is at most SJ_MAX_EXTENT and a ladder has at most
 * SJ_LADDER_MAX_BUCKETS buckets. A ladder is immutable after creation, so
 * any number of threads may look keys up at once. It keeps a pointer to its
 * context for error messages; destroy it before the context.
 */
#ifndef SHAPEJIT_LADDER_H
#define SHAPEJIT_LADDER_H

#include "shapejit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SJ_LADDER_MAX_BUCKETS 4096

typedef enum sj_ladder_kind { SJ_LADDER_POW2, SJ_LADDER_GEO, SJ_LADDER_LIST, SJ_LADDER_RANGES } sj_ladder_kind;

typedef struct sj_ladder sj_ladder;

/* Invalid bounds (min < 1, min > max, max > SJ_MAX_EXTENT, ratio <= 1 or not
 * finite, a list that is empty, not ascending or not positive) are
 * SJ_E_INVALID_ARG with a message naming the bad value. */
SJ_API sj_status sj_ladder_pow2(sj_ctx *ctx, int64_t min, int64_t max, sj_ladder **out);
SJ_API sj_status sj_ladder_geo(sj_ctx *ctx, int64_t min, int64_t max, double ratio, sj_ladder **out);
SJ_API sj_status sj_ladder_list(sj_ctx *ctx, const int64_t *extents, int n, sj_ladder **out);
/* Bucket i holds [lo[i], hi[i]]: lo[i] <= hi[i], lo[i] > hi[i-1]. */
SJ_API sj_status sj_ladder_ranges(sj_ctx *ctx, const int64_t *lo, const int64_t *hi, int n,
                                  sj_ladder **out);
/* A SPEC as above. Malformed text is SJ_E_PARSE naming the spec and the
 * field; well-formed but invalid values are SJ_E_INVALID_ARG. */
SJ_API sj_status sj_ladder_parse(sj_ctx *ctx, const char *spec, sj_ladder **out);
SJ_API void sj_ladder_destroy(sj_ladder *l);

SJ_API sj_ladder_kind sj_ladder_get_kind(const sj_ladder *l);
SJ_API int sj_ladder_num_buckets(const sj_ladder *l);
/* Upper bound (the compile extent) and first key of bucket i. */
SJ_API int64_t sj_ladder_extent(const sj_ladder *l, int i);
SJ_API int64_t sj_ladder_lower(const sj_ladder *l, int i);
/* The largest key any bucket holds. */
SJ_API int64_t sj_ladder_max(const sj_ladder *l);

/* Binary search; -1 when key is outside every bucket. No message, no lock:
 * the hit path uses it. */
SJ_API int sj_ladder_find(const sj_ladder *l, int64_t key);
/* The same, but an outside key is SJ_E_OUT_OF_RANGE with a message. */
SJ_API sj_status sj_ladder_bucket_for(const sj_ladder *l, int64_t key, int *index);

/* Padding for a request of `key` rows of `inner` elements each: the
 * elements computed (bucket extent * inner) and the real ones (key * inner).
 * SJ_E_OUT_OF_RANGE when no bucket holds key. */
SJ_API sj_status sj_ladder_padding(const sj_ladder *l, int64_t key, int64_t inner, int64_t *padded,
                                   int64_t *real);
/* Worst padded/real ratio over every bucket except the first (whose waste
 * depends on how small requests get): 2 for pow2, < RATIO for geo. 1 for a
 * one-bucket ladder. */
SJ_API double sj_ladder_max_waste(const sj_ladder *l);

/* The canonical spec: "pow2:8:256", "geo:1:1000:1.5", "list:1,8,64". */
SJ_API void sj_ladder_format(const sj_ladder *l, char *buf, size_t len);

/* Ladders fitted to traffic.
 *
 *   sj_ladder_cost m = {.a = 20, .b = 0.9, .c = 0.01};   // us: fixed, per row, per padded row
 *   sj_ladder *fit;
 *   sj_ladder_fit_result r;
 *   sj_ladder_fit(ctx, sizes, n, &m, 4, 0, &fit, &r);    // 4 buckets, no memory bound
 *
 * A cost model says what a request of n rows costs in a bucket compiled at
 * extent E, cost(n, E) = a + b*n + c*E + d*n*E + e*n^2 (any unit: `shapejit
 * ladder fit` measures microseconds on the machine; e is attention's n x n
 * scores), and what a bucket at E holds,
 * memory(E) = m0 + m1*E + m2*E^2 bytes. Every coefficient is finite and
 * >= 0. */
typedef struct sj_ladder_cost {
    double a, b, c, d, e;
    double m0, m1, m2;
} sj_ladder_cost;
typedef struct sj_ladder_fit_result {
    double expected_cost; /* mean cost per request of the trace */
    double memory_bytes;  /* summed over the buckets */
    int buckets;
    int candidates; /* extents the search chose among (the fit only) */
} sj_ladder_fit_result;
SJ_API double sj_ladder_cost_at(const sj_ladder_cost *m, int64_t n, int64_t extent);
SJ_API double sj_ladder_memory_at(const sj_ladder_cost *m, int64_t extent);
/* The list ladder of at most k buckets (fewer when the trace has fewer
 * distinct sizes, or when fewer cost less; the search chooses among the
 * distinct sizes, thinned to 512 evenly spaced quantiles when there are
 * more) whose expected cost over sizes is least, its buckets' memory summed within memory_budget bytes (0: no
 * bound); the top bucket holds the largest size. Extents are sizes of the
 * trace. Errors (SJ_E_INVALID_ARG, naming the value): an empty trace, a
 * size outside 1..SJ_MAX_EXTENT, k outside 1..SJ_LADDER_MAX_BUCKETS, a
 * negative or non-finite coefficient or budget, a budget below what the
 * one bucket that holds the largest size needs, and a model whose costs
 * overflow a double on the trace (SJ_E_OUT_OF_RANGE). */
SJ_API sj_status sj_ladder_fit(sj_ctx *ctx, const int64_t *sizes, size_t n, const sj_ladder_cost *m, int k,
                               double memory_budget, sj_ladder **out, sj_ladder_fit_result *result);
/* The same figures for a given ladder; a size no bucket holds is
 * SJ_E_OUT_OF_RANGE. */
SJ_API sj_status sj_ladder_expected(sj_ctx *ctx, const sj_ladder *l, const int64_t *sizes, size_t n,
                                    const sj_ladder_cost *m, sj_ladder_fit_result *out);

#ifdef __cplusplus
}
#endif
#endif

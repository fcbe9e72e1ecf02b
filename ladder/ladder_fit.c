/* Ladders fitted to traffic (shapejit/ladder.h, sj_ladder_fit): the K
 * extents that minimise a cost model's expected cost over a trace, within a
 * memory budget.
 *
 * Candidate extents are the trace's distinct sizes (a bucket compiled above
 * the largest size it holds only costs more), thinned to evenly spaced
 * quantiles when there are more than FIT_MAX_CANDIDATES. With sizes sorted,
 * a bucket is a run of consecutive candidates, so the best ladder is a
 * shortest path: best[k][j] is the cheapest way to cover the first j
 * candidates with k buckets, the last compiled at candidate j. The cost of
 * a bucket over a run of sizes is O(1) from prefix counts, sums and sums of
 * squares, since the model is a polynomial of degree 2 in n. The memory budget enters as a Lagrange price
 * per byte, found by bisection: the cheapest ladder within the budget that
 * this search finds (a ladder between two prices may be missed; the result
 * is always within the budget). */
#include "core/core_impl.h"
#include "shapejit/ladder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { FIT_MAX_CANDIDATES = 512, FIT_BISECTIONS = 48 };

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

double sj_ladder_cost_at(const sj_ladder_cost *m, int64_t n, int64_t extent) {
    double N = (double)n, E = (double)extent;
    return m->a + m->b * N + m->c * E + m->d * N * E + m->e * N * N;
}

double sj_ladder_memory_at(const sj_ladder_cost *m, int64_t extent) {
    double E = (double)extent;
    return m->m0 + m->m1 * E + m->m2 * E * E;
}

sj_status sj_ladder_expected(sj_ctx *ctx, const sj_ladder *l, const int64_t *sizes, size_t n,
                             const sj_ladder_cost *m, sj_ladder_fit_result *out) {
    if (!ctx || !l || !m || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    memset(out, 0, sizeof *out);
    if (n == 0 || !sizes) return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder cost: the trace is empty");
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        int b;
        SJ_TRY(sj_ladder_bucket_for(l, sizes[i], &b));
        total += sj_ladder_cost_at(m, sizes[i], sj_ladder_extent(l, b));
    }
    out->expected_cost = total / (double)n;
    for (int b = 0; b < sj_ladder_num_buckets(l); b++) out->memory_bytes += sj_ladder_memory_at(m, sj_ladder_extent(l, b));
    out->buckets = sj_ladder_num_buckets(l);
    return SJ_OK;
}

/* The trace reduced to candidates: cand[0..M) ascending; cnt[j], sum[j],
 * sq[j] prefix counts, sums and sums of squares of the sizes <= cand[j-1]
 * (all 0 at j = 0). */
typedef struct fit_problem {
    int M;
    int64_t *cand;
    double *cnt, *sum, *sq;
    const sj_ladder_cost *m;
} fit_problem;

/* Cost of one bucket at cand[j-1] holding the sizes in (cand[i-1], cand[j-1]]. */
static double segment(const fit_problem *p, int i, int j) {
    double E = (double)p->cand[j - 1], c = p->cnt[j] - p->cnt[i], s = p->sum[j] - p->sum[i],
           q = p->sq[j] - p->sq[i];
    return c * (p->m->a + p->m->c * E) + s * (p->m->b + p->m->d * E) + q * p->m->e;
}

/* The cheapest ladder of at most k buckets under price `lambda` per byte:
 * its extents into ext (ascending), count returned (0 when every ladder's
 * cost overflows); *cost and *mem its model cost (sum over the trace) and
 * memory. best and from hold (k + 1) * (M + 1) entries. */
static int solve(const fit_problem *p, int k, double lambda, double *best, int *from, int64_t *ext,
                 double *cost, double *mem) {
    int M = p->M, W = M + 1;
    for (int x = 0; x < (k + 1) * W; x++) best[x] = INFINITY;
    best[0] = 0;
    for (int b = 1; b <= k; b++)
        for (int j = 1; j <= M; j++) {
            double price = lambda > 0 ? lambda * sj_ladder_memory_at(p->m, p->cand[j - 1]) : 0, top = INFINITY;
            int arg = -1;
            for (int i = b - 1; i < j; i++) {
                double v = best[(b - 1) * W + i];
                if (v == INFINITY) continue;
                v += segment(p, i, j) + price;
                if (v < top) {
                    top = v;
                    arg = i;
                }
            }
            best[b * W + j] = top;
            from[b * W + j] = arg;
        }
    int kb = 1;
    for (int b = 2; b <= k; b++)
        if (best[b * W + M] < best[kb * W + M]) kb = b;
    int n = 0;
    *cost = *mem = 0;
    if (!isfinite(best[kb * W + M])) return 0;
    for (int b = kb, j = M; b > 0; b--) {
        int i = from[b * W + j];
        ext[kb - 1 - n] = p->cand[j - 1];
        *cost += segment(p, i, j);
        *mem += sj_ladder_memory_at(p->m, p->cand[j - 1]);
        n++;
        j = i;
    }
    return n;
}

/* Distinct sizes, thinned to FIT_MAX_CANDIDATES quantiles (always keeping
 * the largest, which the top bucket must hold). */
static sj_status candidates(sj_ctx *ctx, const int64_t *sorted, size_t n, fit_problem *p) {
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || sorted[i] != sorted[i - 1]) distinct++;
    int M = distinct > FIT_MAX_CANDIDATES ? FIT_MAX_CANDIDATES : (int)distinct;
    p->M = M;
    p->cand = sj_calloc(ctx, (size_t)M, sizeof *p->cand);
    p->cnt = sj_calloc(ctx, (size_t)M + 1, sizeof *p->cnt);
    p->sum = sj_calloc(ctx, (size_t)M + 1, sizeof *p->sum);
    p->sq = sj_calloc(ctx, (size_t)M + 1, sizeof *p->sq);
    if (!p->cand || !p->cnt || !p->sum || !p->sq) return sj_fail(ctx, SJ_E_NOMEM, "ladder fit: out of memory");
    if ((size_t)M == distinct) {
        for (size_t i = 0, j = 0; i < n; i++)
            if (i == 0 || sorted[i] != sorted[i - 1]) p->cand[j++] = sorted[i];
    } else {
        for (int j = 0; j < M; j++) p->cand[j] = sorted[(size_t)((double)(j + 1) / M * (double)(n - 1))];
        /* quantiles may repeat a size: keep each once, ascending */
        int w = 0;
        for (int j = 0; j < M; j++)
            if (w == 0 || p->cand[j] != p->cand[w - 1]) p->cand[w++] = p->cand[j];
        p->M = M = w;
    }
    size_t i = 0;
    for (int j = 0; j < M; j++) {
        p->cnt[j + 1] = p->cnt[j];
        p->sum[j + 1] = p->sum[j];
        p->sq[j + 1] = p->sq[j];
        for (; i < n && sorted[i] <= p->cand[j]; i++) {
            double v = (double)sorted[i];
            p->cnt[j + 1] += 1;
            p->sum[j + 1] += v;
            p->sq[j + 1] += v * v;
        }
    }
    return SJ_OK;
}

static bool model_ok(const sj_ladder_cost *m) {
    const double v[] = {m->a, m->b, m->c, m->d, m->e, m->m0, m->m1, m->m2};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i]) || v[i] < 0) return false;
    return true;
}

sj_status sj_ladder_fit(sj_ctx *ctx, const int64_t *sizes, size_t n, const sj_ladder_cost *m, int k,
                        double memory_budget, sj_ladder **out, sj_ladder_fit_result *res) {
    if (!ctx || !m || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (res) memset(res, 0, sizeof *res);
    if (n == 0 || !sizes) return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder fit: the trace is empty");
    if (k < 1 || k > SJ_LADDER_MAX_BUCKETS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder fit: %d buckets asked for; 1..%d allowed", k,
                       SJ_LADDER_MAX_BUCKETS);
    if (!model_ok(m))
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "ladder fit: the cost model's coefficients must be finite and >= 0");
    if (!(memory_budget >= 0) || !isfinite(memory_budget))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder fit: memory budget must be >= 0 (0: none)");
    for (size_t i = 0; i < n; i++)
        if (sizes[i] < 1 || sizes[i] > SJ_MAX_EXTENT)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder fit: size #%zu (%lld) is outside 1..%lld", i + 1,
                           (long long)sizes[i], (long long)SJ_MAX_EXTENT);
    int64_t *sorted = sj_alloc(ctx, n * sizeof *sorted);
    if (!sorted) return sj_fail(ctx, SJ_E_NOMEM, "ladder fit: out of memory for %zu sizes", n);
    memcpy(sorted, sizes, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_i64);
    fit_problem p = {.m = m};
    sj_status st = candidates(ctx, sorted, n, &p);
    sj_free(ctx, sorted);
    int kk = k < p.M ? k : p.M;
    size_t cells = (size_t)(kk + 1) * (size_t)(p.M + 1);
    double *best = st == SJ_OK ? sj_alloc(ctx, cells * sizeof *best) : NULL;
    int *from = st == SJ_OK ? sj_alloc(ctx, cells * sizeof *from) : NULL;
    int64_t *ext = st == SJ_OK ? sj_alloc(ctx, (size_t)kk * sizeof *ext) : NULL;
    if (st == SJ_OK && (!best || !from || !ext)) st = sj_fail(ctx, SJ_E_NOMEM, "ladder fit: out of memory");
    double cost = 0, mem = 0;
    int nb = 0;
    if (st == SJ_OK) {
        double floor_mem = sj_ladder_memory_at(m, p.cand[p.M - 1]);
        if (memory_budget > 0 && floor_mem > memory_budget)
            st = sj_fail(ctx, SJ_E_INVALID_ARG,
                         "ladder fit: the largest size (%lld) alone needs %.0f bytes in its bucket, more "
                         "than the budget of %.0f",
                         (long long)p.cand[p.M - 1], floor_mem, memory_budget);
    }
    if (st == SJ_OK) {
        nb = solve(&p, kk, 0, best, from, ext, &cost, &mem);
        if (nb == 0)
            st = sj_fail(ctx, SJ_E_OUT_OF_RANGE, "ladder fit: the cost model overflows over this trace "
                                                 "(coefficients too large for its sizes)");
    }
    if (st == SJ_OK) {
        if (memory_budget > 0 && mem > memory_budget) {
            /* The price per byte at which the ladder fits: lo is too cheap
             * (over budget), hi dear enough (one bucket at the top fits). */
            double lo = 0, hi = 1, c2, m2;
            for (;;) {
                if (solve(&p, kk, hi, best, from, ext, &c2, &m2) == 0) m2 = INFINITY;
                if (m2 <= memory_budget || hi > 1e200) break;
                lo = hi;
                hi *= 16;
            }
            for (int it = 0; it < FIT_BISECTIONS; it++) {
                double mid = 0.5 * (lo + hi);
                if (solve(&p, kk, mid, best, from, ext, &c2, &m2) == 0) m2 = INFINITY;
                if (m2 > memory_budget) lo = mid;
                else hi = mid;
            }
            nb = solve(&p, kk, hi, best, from, ext, &cost, &mem);
            if (nb == 0 || mem > memory_budget)
                st = sj_fail(ctx, SJ_E_OUT_OF_RANGE, "ladder fit: no ladder found within the memory budget "
                                                     "(the cost model overflows at the prices tried)");
        }
    }
    if (st == SJ_OK) st = sj_ladder_list(ctx, ext, nb, out);
    if (st == SJ_OK && res) {
        res->expected_cost = cost / (double)n;
        res->memory_bytes = mem;
        res->buckets = nb;
        res->candidates = p.M;
    }
    sj_free(ctx, best);
    sj_free(ctx, from);
    sj_free(ctx, ext);
    sj_free(ctx, p.cand);
    sj_free(ctx, p.cnt);
    sj_free(ctx, p.sum);
    sj_free(ctx, p.sq);
    return st;
}

/* Ladders: the extent list, its builders, the spec parser and the lookup. */
#include "shapejit/ladder.h"

#include "core/core_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sj_ladder {
    sj_ctx *ctx;
    sj_ladder_kind kind;
    int64_t min, max; /* as given (pow2, geo) */
    double ratio;     /* geo */
    int n;
    int64_t *extents; /* ascending upper bounds */
    int64_t *lowers;  /* ranges: each bucket's lower bound; NULL = the extent before + 1 */
};

static int64_t next_pow2(int64_t v) {
    int64_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

/* Callers initialise the pointer they pass as out: at -O3 GCC inlines this
 * and warns (-Werror) that it may be used uninitialised on the error path. */
static sj_status ladder_new(sj_ctx *ctx, sj_ladder_kind kind, int n, sj_ladder **out) {
    sj_ladder *l = sj_calloc(ctx, 1, sizeof *l);
    if (!l) return sj_fail(ctx, SJ_E_NOMEM, "ladder: out of memory");
    l->extents = sj_calloc(ctx, (size_t)n, sizeof *l->extents);
    if (!l->extents) {
        sj_free(ctx, l);
        return sj_fail(ctx, SJ_E_NOMEM, "ladder: out of memory");
    }
    l->ctx = ctx;
    l->kind = kind;
    l->n = n;
    *out = l;
    return SJ_OK;
}

static sj_status check_bounds(sj_ctx *ctx, const char *what, int64_t min, int64_t max) {
    if (min < 1) return sj_fail(ctx, SJ_E_INVALID_ARG, "%s ladder: MIN %lld must be >= 1", what, (long long)min);
    if (max > SJ_MAX_EXTENT)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s ladder: MAX %lld is above the largest extent %lld",
                       what, (long long)max, (long long)SJ_MAX_EXTENT);
    if (min > max)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s ladder: MIN %lld is greater than MAX %lld", what,
                       (long long)min, (long long)max);
    return SJ_OK;
}

sj_status sj_ladder_pow2(sj_ctx *ctx, int64_t min, int64_t max, sj_ladder **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    SJ_TRY(check_bounds(ctx, "pow2", min, max));
    int64_t lo = next_pow2(min), hi = next_pow2(max);
    if (hi > SJ_MAX_EXTENT)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "pow2 ladder: MAX %lld rounds up to %lld, above the largest extent %lld",
                       (long long)max, (long long)hi, (long long)SJ_MAX_EXTENT);
    int n = 0;
    for (int64_t e = lo; e <= hi; e <<= 1) n++;
    sj_ladder *l = NULL;
    SJ_TRY(ladder_new(ctx, SJ_LADDER_POW2, n, &l));
    int i = 0;
    for (int64_t e = lo; e <= hi; e <<= 1) l->extents[i++] = e;
    l->min = min;
    l->max = max;
    *out = l;
    return SJ_OK;
}

/* The next geometric extent after e: floor(e * ratio), at least e + 1, at
 * most max. */
static int64_t geo_next(int64_t e, double ratio, int64_t max) {
    double next = floor((double)e * ratio);
    if (next >= (double)max) return max;
    int64_t n = (int64_t)next;
    return n > e ? n : e + 1;
}

sj_status sj_ladder_geo(sj_ctx *ctx, int64_t min, int64_t max, double ratio, sj_ladder **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    SJ_TRY(check_bounds(ctx, "geo", min, max));
    if (!isfinite(ratio) || ratio <= 1.0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "geo ladder: RATIO %g must be a finite number > 1", ratio);
    int n = 1;
    for (int64_t e = min; e < max; e = geo_next(e, ratio, max)) {
        if (++n > SJ_LADDER_MAX_BUCKETS)
            return sj_fail(ctx, SJ_E_INVALID_ARG,
                           "geo ladder: %lld..%lld at ratio %g needs more than %d buckets; raise RATIO",
                           (long long)min, (long long)max, ratio, SJ_LADDER_MAX_BUCKETS);
    }
    sj_ladder *l = NULL;
    SJ_TRY(ladder_new(ctx, SJ_LADDER_GEO, n, &l));
    int i = 0;
    for (int64_t e = min;; e = geo_next(e, ratio, max)) {
        l->extents[i++] = e;
        if (e >= max) break;
    }
    l->min = min;
    l->max = max;
    l->ratio = ratio;
    *out = l;
    return SJ_OK;
}

sj_status sj_ladder_list(sj_ctx *ctx, const int64_t *extents, int n, sj_ladder **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (n < 1 || !extents) return sj_fail(ctx, SJ_E_INVALID_ARG, "list ladder: no extents given");
    if (n > SJ_LADDER_MAX_BUCKETS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "list ladder: %d extents, at most %d allowed", n,
                       SJ_LADDER_MAX_BUCKETS);
    for (int i = 0; i < n; i++) {
        if (extents[i] < 1)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "list ladder: extent #%d (%lld) must be >= 1", i + 1,
                           (long long)extents[i]);
        if (extents[i] > SJ_MAX_EXTENT)
            return sj_fail(ctx, SJ_E_INVALID_ARG,
                           "list ladder: extent #%d (%lld) is above the largest extent %lld", i + 1,
                           (long long)extents[i], (long long)SJ_MAX_EXTENT);
        if (i > 0 && extents[i] <= extents[i - 1])
            return sj_fail(ctx, SJ_E_INVALID_ARG,
                           "list ladder: extent #%d (%lld) is not greater than the one before (%lld); "
                           "extents must be strictly ascending",
                           i + 1, (long long)extents[i], (long long)extents[i - 1]);
    }
    sj_ladder *l = NULL;
    SJ_TRY(ladder_new(ctx, SJ_LADDER_LIST, n, &l));
    memcpy(l->extents, extents, (size_t)n * sizeof *extents);
    l->min = extents[0];
    l->max = extents[n - 1];
    *out = l;
    return SJ_OK;
}

sj_status sj_ladder_ranges(sj_ctx *ctx, const int64_t *lo, const int64_t *hi, int n, sj_ladder **out) {
    if (!ctx || !out) return SJ_E_INVALID_ARG;
    *out = NULL;
    if (n < 1 || !lo || !hi) return sj_fail(ctx, SJ_E_INVALID_ARG, "ranges ladder: no ranges given");
    if (n > SJ_LADDER_MAX_BUCKETS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "ranges ladder: %d ranges, at most %d allowed", n,
                       SJ_LADDER_MAX_BUCKETS);
    for (int i = 0; i < n; i++) {
        if (lo[i] < 1)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "ranges ladder: range #%d starts at %lld; it must be >= 1",
                           i + 1, (long long)lo[i]);
        if (hi[i] > SJ_MAX_EXTENT)
            return sj_fail(ctx, SJ_E_INVALID_ARG,
                           "ranges ladder: range #%d ends at %lld, above the largest extent %lld", i + 1,
                           (long long)hi[i], (long long)SJ_MAX_EXTENT);
        if (lo[i] > hi[i])
            return sj_fail(ctx, SJ_E_INVALID_ARG, "ranges ladder: range #%d (%lld-%lld) is empty", i + 1,
                           (long long)lo[i], (long long)hi[i]);
        if (i > 0 && lo[i] <= hi[i - 1])
            return sj_fail(ctx, SJ_E_INVALID_ARG,
                           "ranges ladder: range #%d (%lld-%lld) overlaps or precedes the one before "
                           "(%lld-%lld); ranges must ascend without overlap",
                           i + 1, (long long)lo[i], (long long)hi[i], (long long)lo[i - 1],
                           (long long)hi[i - 1]);
    }
    sj_ladder *l = NULL;
    SJ_TRY(ladder_new(ctx, SJ_LADDER_RANGES, n, &l));
    l->lowers = sj_calloc(ctx, (size_t)n, sizeof *l->lowers);
    if (!l->lowers) {
        sj_ladder_destroy(l);
        return sj_fail(ctx, SJ_E_NOMEM, "ladder: out of memory");
    }
    memcpy(l->extents, hi, (size_t)n * sizeof *hi);
    memcpy(l->lowers, lo, (size_t)n * sizeof *lo);
    l->min = lo[0];
    l->max = hi[n - 1];
    *out = l;
    return SJ_OK;
}

void sj_ladder_destroy(sj_ladder *l) {
    if (!l) return;
    sj_free(l->ctx, l->lowers);
    sj_free(l->ctx, l->extents);
    sj_free(l->ctx, l);
}

/* --- spec parsing --- */

/* Parses a positive decimal integer ending at one of `ends` (or the string's
 * end); advances *p past it. */
static sj_status parse_int(sj_ctx *ctx, const char *spec, const char **p, const char *field,
                           int64_t *out) {
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return sj_fail(ctx, SJ_E_PARSE, "ladder spec '%s': %s at column %d: expected a number", spec,
                       field, (int)(s - spec) + 1);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || v > SJ_MAX_EXTENT)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder spec '%s': %s %.*s is above the largest extent %lld",
                       spec, field, (int)(end - s), s, (long long)SJ_MAX_EXTENT);
    *out = v;
    *p = end;
    return SJ_OK;
}

static sj_status expect_char(sj_ctx *ctx, const char *spec, const char **p, char c,
                             const char *after) {
    if (**p != c) {
        if (c == '\0')
            return sj_fail(ctx, SJ_E_PARSE, "ladder spec '%s': unexpected '%s' after %s", spec, *p, after);
        return sj_fail(ctx, SJ_E_PARSE, "ladder spec '%s': expected '%c' after %s at column %d", spec, c,
                       after, (int)(*p - spec) + 1);
    }
    if (c) (*p)++;
    return SJ_OK;
}

static sj_status parse_list(sj_ctx *ctx, const char *spec, const char *p, sj_ladder **out) {
    int64_t vals[SJ_LADDER_MAX_BUCKETS];
    int n = 0;
    for (;;) {
        if (n == SJ_LADDER_MAX_BUCKETS)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder spec '%s': more than %d extents", spec,
                           SJ_LADDER_MAX_BUCKETS);
        char field[32];
        snprintf(field, sizeof field, "extent #%d", n + 1);
        SJ_TRY(parse_int(ctx, spec, &p, field, &vals[n]));
        n++;
        if (*p == '\0') break;
        SJ_TRY(expect_char(ctx, spec, &p, ',', field));
    }
    return sj_ladder_list(ctx, vals, n, out);
}

/* "L1-H1,L2-H2,..." */
static sj_status parse_ranges(sj_ctx *ctx, const char *spec, const char *p, sj_ladder **out) {
    int64_t lo[SJ_LADDER_MAX_BUCKETS], hi[SJ_LADDER_MAX_BUCKETS];
    int n = 0;
    for (;;) {
        if (n == SJ_LADDER_MAX_BUCKETS)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder spec '%s': more than %d ranges", spec,
                           SJ_LADDER_MAX_BUCKETS);
        char field[48];
        snprintf(field, sizeof field, "range #%d's start", n + 1);
        SJ_TRY(parse_int(ctx, spec, &p, field, &lo[n]));
        SJ_TRY(expect_char(ctx, spec, &p, '-', field));
        snprintf(field, sizeof field, "range #%d's end", n + 1);
        SJ_TRY(parse_int(ctx, spec, &p, field, &hi[n]));
        n++;
        if (*p == '\0') break;
        SJ_TRY(expect_char(ctx, spec, &p, ',', field));
    }
    return sj_ladder_ranges(ctx, lo, hi, n, out);
}

/* "MIN:MAX" followed by `after` ('\0' = the end of the spec). */
static sj_status parse_min_max(sj_ctx *ctx, const char *spec, const char **p, char after,
                               int64_t *min, int64_t *max) {
    SJ_TRY(parse_int(ctx, spec, p, "MIN", min));
    SJ_TRY(expect_char(ctx, spec, p, ':', "MIN"));
    SJ_TRY(parse_int(ctx, spec, p, "MAX", max));
    return expect_char(ctx, spec, p, after, "MAX");
}

sj_status sj_ladder_parse(sj_ctx *ctx, const char *spec, sj_ladder **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (!spec) return sj_fail(ctx, SJ_E_INVALID_ARG, "ladder spec: none given");
    const char *p;
    int64_t min, max;
    if (strncmp(spec, "pow2:", 5) == 0) {
        p = spec + 5;
        SJ_TRY(parse_min_max(ctx, spec, &p, '\0', &min, &max));
        return sj_ladder_pow2(ctx, min, max, out);
    }
    if (strncmp(spec, "geo:", 4) == 0) {
        p = spec + 4;
        SJ_TRY(parse_min_max(ctx, spec, &p, ':', &min, &max));
        char *end;
        errno = 0;
        double ratio = strtod(p, &end);
        if (end == p || errno == ERANGE)
            return sj_fail(ctx, SJ_E_PARSE, "ladder spec '%s': RATIO at column %d: expected a number", spec,
                           (int)(p - spec) + 1);
        p = end;
        SJ_TRY(expect_char(ctx, spec, &p, '\0', "RATIO"));
        return sj_ladder_geo(ctx, min, max, ratio, out);
    }
    if (strncmp(spec, "list:", 5) == 0) return parse_list(ctx, spec, spec + 5, out);
    if (strncmp(spec, "ranges:", 7) == 0) return parse_ranges(ctx, spec, spec + 7, out);
    return sj_fail(ctx, SJ_E_PARSE,
                   "ladder spec '%s': expected pow2:MIN:MAX, geo:MIN:MAX:RATIO, list:E1,E2,... or "
                   "ranges:L1-H1,L2-H2,...",
                   spec);
}

/* --- queries --- */

sj_ladder_kind sj_ladder_get_kind(const sj_ladder *l) { return l->kind; }
int sj_ladder_num_buckets(const sj_ladder *l) { return l->n; }
int64_t sj_ladder_extent(const sj_ladder *l, int i) { return i >= 0 && i < l->n ? l->extents[i] : -1; }
int64_t sj_ladder_lower(const sj_ladder *l, int i) {
    if (i < 0 || i >= l->n) return -1;
    if (l->lowers) return l->lowers[i];
    return i == 0 ? 1 : l->extents[i - 1] + 1;
}
int64_t sj_ladder_max(const sj_ladder *l) { return l->extents[l->n - 1]; }

int sj_ladder_find(const sj_ladder *l, int64_t key) {
    if (key < 1 || key > l->extents[l->n - 1]) return -1;
    int lo = 0, hi = l->n - 1; /* the first extent >= key lies in [lo, hi] */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (l->extents[mid] >= key)
            hi = mid;
        else
            lo = mid + 1;
    }
    return l->lowers && key < l->lowers[lo] ? -1 : lo; /* in a gap, or below the first range */
}

sj_status sj_ladder_bucket_for(const sj_ladder *l, int64_t key, int *index) {
    int i = sj_ladder_find(l, key);
    if (i < 0 && l->lowers && key >= 1 && key <= l->extents[l->n - 1]) {
        int next = 0;
        while (l->extents[next] < key) next++;
        if (next == 0)
            return sj_fail(l->ctx, SJ_E_OUT_OF_RANGE, "key %lld is below the ladder's first bucket [%lld, %lld]",
                           (long long)key, (long long)l->lowers[0], (long long)l->extents[0]);
        return sj_fail(l->ctx, SJ_E_OUT_OF_RANGE,
                       "key %lld falls in the gap between buckets [%lld, %lld] and [%lld, %lld]",
                       (long long)key, (long long)l->lowers[next - 1], (long long)l->extents[next - 1],
                       (long long)l->lowers[next], (long long)l->extents[next]);
    }
    if (i < 0)
        return sj_fail(l->ctx, SJ_E_OUT_OF_RANGE, "key %lld is outside every bucket of the ladder [1, %lld]",
                       (long long)key, (long long)l->extents[l->n - 1]);
    *index = i;
    return SJ_OK;
}

sj_status sj_ladder_padding(const sj_ladder *l, int64_t key, int64_t inner, int64_t *padded,
                            int64_t *real) {
    int i;
    SJ_TRY(sj_ladder_bucket_for(l, key, &i));
    if (inner < 0 || sj_mul_overflow_i64(l->extents[i], inner, padded) ||
        sj_mul_overflow_i64(key, inner, real))
        return sj_fail(l->ctx, SJ_E_INVALID_ARG, "ladder padding: inner size %lld is invalid or too large",
                       (long long)inner);
    return SJ_OK;
}

double sj_ladder_max_waste(const sj_ladder *l) {
    double worst = 1.0;
    for (int i = 1; i < l->n; i++) {
        double w = (double)l->extents[i] / (double)sj_ladder_lower(l, i);
        if (w > worst) worst = w;
    }
    return worst;
}

void sj_ladder_format(const sj_ladder *l, char *buf, size_t len) {
    if (!len) return;
    switch (l->kind) {
    case SJ_LADDER_POW2:
        snprintf(buf, len, "pow2:%lld:%lld", (long long)l->min, (long long)l->max);
        return;
    case SJ_LADDER_GEO: {
        /* The fewest digits (from 15) that read back as the same double: the
         * usual ratios (1.5, 1.25) print as typed, and any other ratio still
         * parses to the same ladder. */
        char r[32];
        for (int digits = 15; digits <= 17; digits++) {
            snprintf(r, sizeof r, "%.*g", digits, l->ratio);
            if (strtod(r, NULL) == l->ratio) break;
        }
        snprintf(buf, len, "geo:%lld:%lld:%s", (long long)l->min, (long long)l->max, r);
        return;
    }
    case SJ_LADDER_LIST: break;
    case SJ_LADDER_RANGES: {
        size_t used = (size_t)snprintf(buf, len, "ranges:");
        for (int i = 0; i < l->n && used < len; i++)
            used += (size_t)snprintf(buf + used, len - used, i ? ",%lld-%lld" : "%lld-%lld",
                                     (long long)l->lowers[i], (long long)l->extents[i]);
        return;
    }
    }
    size_t used = (size_t)snprintf(buf, len, "list:");
    for (int i = 0; i < l->n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, i ? ",%lld" : "%lld", (long long)l->extents[i]);
}

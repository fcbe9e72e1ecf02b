/* Shape utilities: specialising at an extent, element counts, printing. */
#include "ir/graph_impl.h"

#include <stdio.h>
#include <string.h>

bool sj_dim_is_sym(int64_t d) { return d < 0; }
/* SJ_DIM_AFFINE's fields, negated without overflow for any int64. */
int64_t sj_dim_factor(int64_t d) { return d < 0 ? (int64_t)((0 - (uint64_t)d) & ((1u << 21) - 1)) : 0; }
int64_t sj_dim_offset(int64_t d) { return d < 0 ? (int64_t)((0 - (uint64_t)d) >> 21) : 0; }
int64_t sj_dim_at(int64_t d, int64_t n) { return d < 0 ? sj_dim_factor(d) * n + sj_dim_offset(d) : d; }

/* A decimal integer filling [s, end): false for anything else. */
static bool whole(const char *s, const char *end, int64_t *out) {
    if (s == end || end - s > 18) return false;
    int64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

sj_status sj_dim_parse(const char *text, const char *sym, int64_t *out) {
    if (!text || !out) return SJ_E_INVALID_ARG;
    const char *end = text + strlen(text);
    int64_t k = 1, c = 0;
    if (whole(text, end, out)) return *out >= 1 ? SJ_OK : SJ_E_PARSE;
    if (!sym || !sym[0]) return SJ_E_PARSE;
    const char *star = strchr(text, '*');
    if (star && !whole(text, star, &k)) return SJ_E_PARSE;
    const char *name = star ? star + 1 : text;
    size_t len = strlen(sym);
    if (strncmp(name, sym, len)) return SJ_E_PARSE;
    const char *rest = name + len;
    if (*rest && (*rest != '+' || !whole(rest + 1, end, &c))) return SJ_E_PARSE;
    if (k < 1 || k > SJ_MAX_SYM_FACTOR || c > SJ_MAX_SYM_OFFSET) return SJ_E_PARSE;
    *out = SJ_DIM_AFFINE(k, c);
    return SJ_OK;
}

sj_shape sj_shape_at(const sj_shape *s, int64_t extent) {
    sj_shape r = *s;
    for (int i = 0; i < r.rank; i++)
        r.dims[i] = sj_dim_at(r.dims[i], extent);
    return r;
}

int64_t sj_shape_numel(const sj_shape *s, int64_t extent) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        int64_t d;
        if (sj_mul_overflow_i64(sj_dim_factor(s->dims[i]), extent, &d)) return -1;
        d += sj_dim_offset(s->dims[i]);
        if (!sj_dim_is_sym(s->dims[i])) d = s->dims[i];
        if (d < 0 || sj_mul_overflow_i64(n, d, &n) || n > SJ_MAX_ELEMENTS) return -1;
    }
    return n;
}

void sj_dim_format(int64_t d, const char *sym, char *buf, size_t len) {
    int64_t k = sj_dim_factor(d), c = sj_dim_offset(d);
    if (!sj_dim_is_sym(d)) snprintf(buf, len, "%lld", (long long)d);
    else if (k == 1 && !c) snprintf(buf, len, "%s", sym ? sym : "?");
    else if (!c) snprintf(buf, len, "%lld*%s", (long long)k, sym ? sym : "?");
    else if (k == 1) snprintf(buf, len, "%s+%lld", sym ? sym : "?", (long long)c);
    else snprintf(buf, len, "%lld*%s+%lld", (long long)k, sym ? sym : "?", (long long)c);
}

void sj_shape_format(const sj_shape *s, const char *sym, char *buf, size_t len) {
    if (!len) return;
    size_t used = 0;
    buf[0] = '\0';
    /* snprintf returns what it would have written; clamp so a short buffer
     * ends truncated instead of overrunning. */
#define SJ_APPEND(...)                                                                             \
    do {                                                                                           \
        if (used < len) {                                                                          \
            int w = snprintf(buf + used, len - used, __VA_ARGS__);                                 \
            used = w < 0 ? len : used + (size_t)w;                                                 \
        }                                                                                          \
    } while (0)
    SJ_APPEND("[");
    for (int i = 0; i < s->rank; i++) {
        if (i) SJ_APPEND(", ");
        char dim[96];
        sj_dim_format(s->dims[i], sym, dim, sizeof dim);
        SJ_APPEND("%s", dim);
    }
    SJ_APPEND("]");
#undef SJ_APPEND
}

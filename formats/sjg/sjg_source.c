/* Where a .sjg param's weights come from: an inline list, fill(v),
 * random(seed=, scale=) or npy("file") next to the graph. */
#include "formats/sjg/sjg_parse_impl.h"
#include "core/hash.h"
#include "shapejit/tensor.h"

#include <stdio.h>
#include <string.h>

/* Documented in docs/sjg.md; the printer writes the values out, so changing
 * this only changes what old texts mean, never a printed graph. */
static void random_fill(uint64_t seed, double scale, float *out, int64_t n) {
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(sj__splitmix64(&state) >> 40) / 16777216.0;
        out[i] = (float)(scale * (2.0 * u - 1.0));
    }
}

static sj_status alloc_weights(sjg_parser *p, const sjg_token *at, const char *param,
                               int64_t numel, bool generated, float **data) {
    if (generated && numel > SJG_MAX_GENERATED_ELEMENTS)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE,
                           "param %s would have %lld generated elements, over the limit of 2^28 "
                           "(is a dim mistyped?)",
                           param, (long long)numel);
    *data = sj_alloc(p->ctx, (size_t)numel * sizeof(float));
    if (!*data)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_NOMEM,
                           "out of memory for the %lld elements of param %s", (long long)numel, param);
    return SJ_OK;
}

/* An inline value list [v, v, ...] of a param of numel elements: room for
 * value n (at token t), the ',' or ']' after it, and the closing count. */
static sj_status list_room(sjg_parser *p, const char *param, const sjg_token *t, int64_t n, int64_t numel) {
    if (n < numel) return SJ_OK;
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_SHAPE, "param %s has more than the %lld values its shape holds",
                       param, (long long)numel);
}

static sj_status list_separator(sjg_parser *p, const char *param) {
    if (sjg_is_punct(sjg_cur(p), ',')) {
        p->pos++;
        return SJ_OK;
    }
    if (sjg_is_punct(sjg_cur(p), ']')) return SJ_OK;
    return sjg_fail_at(p->ctx, sjg_at(p, sjg_cur(p)), SJ_E_PARSE,
                       "expected ',' or ']' in the values of param %s, found %s", param,
                       sjg_describe(p, sjg_cur(p)));
}

static sj_status list_close(sjg_parser *p, const char *param, int64_t n, int64_t numel) {
    if (n != numel)
        return sjg_fail_at(p->ctx, sjg_at(p, sjg_cur(p)), SJ_E_SHAPE,
                           "param %s has %lld values but its shape holds %lld", param, (long long)n,
                           (long long)numel);
    p->pos++; /* ] */
    return SJ_OK;
}

static sj_status parse_inline(sjg_parser *p, const char *param, int64_t numel, float **data) {
    const sjg_token *open = sjg_cur(p);
    p->pos++; /* [ */
    SJ_TRY(alloc_weights(p, open, param, numel, false, data));
    int64_t n = 0;
    while (!sjg_is_punct(sjg_cur(p), ']')) {
        const sjg_token *t = sjg_cur(p);
        sjg_number num;
        float v;
        SJ_TRY(sjg_parse_number(p, &num, "in the param's values"));
        SJ_TRY(sjg_number_float(p, &num, &v));
        SJ_TRY(list_room(p, param, t, n, numel));
        (*data)[n++] = v;
        SJ_TRY(list_separator(p, param));
    }
    return list_close(p, param, n, numel);
}

static sj_status parse_fill(sjg_parser *p, const char *param, int64_t numel, float **data) {
    const sjg_token *at = sjg_cur(p);
    p->pos += 2; /* fill ( */
    sjg_number num;
    float v;
    SJ_TRY(sjg_parse_number(p, &num, "in fill(...)"));
    SJ_TRY(sjg_number_float(p, &num, &v));
    SJ_TRY(sjg_expect(p, ')', "after the value of fill"));
    SJ_TRY(alloc_weights(p, at, param, numel, true, data));
    for (int64_t i = 0; i < numel; i++) (*data)[i] = v;
    return SJ_OK;
}

static sj_status parse_random(sjg_parser *p, const char *param, int64_t numel, float **data) {
    const sjg_token *at = sjg_cur(p);
    p->pos += 2; /* random ( */
    sjg_kwarg kw[SJG_MAX_KWARGS];
    int n_kw = 0;
    SJ_TRY(sjg_parse_kwargs(p, kw, &n_kw, "random"));
    p->pos++; /* ) */
    int64_t seed = -1;
    float scale = 1.0f;
    for (int i = 0; i < n_kw; i++) {
        const sjg_kwarg *k = &kw[i];
        if (sjg_is_word(p, k->key, "seed") && k->kind == SJG_ATTR_NUMBER) {
            SJ_TRY(sjg_number_int(p, &k->num, &seed));
            if (seed < 0)
                return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE, "seed must be >= 0");
        } else if (sjg_is_word(p, k->key, "scale") && k->kind == SJG_ATTR_NUMBER) {
            SJ_TRY(sjg_number_float(p, &k->num, &scale));
        } else {
            return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE,
                               "random takes seed=INTEGER and scale=NUMBER, found '%.*s'",
                               (int)k->key->len, p->text + k->key->start);
        }
    }
    if (seed < 0)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_PARSE,
                           "random needs seed= (so the weights are reproducible)");
    SJ_TRY(alloc_weights(p, at, param, numel, true, data));
    random_fill((uint64_t)seed, scale, *data, numel);
    return SJ_OK;
}

/* npy("file") whose dtype must be `want`. */
static sj_status parse_npy(sjg_parser *p, const char *param, const sj_shape *shape, sj_dtype want,
                           float **data, sj_dtype *got_dtype) {
    const sjg_token *at = sjg_cur(p);
    p->pos += 2; /* npy ( */
    const sjg_token *ft = sjg_cur(p);
    if (ft->kind != SJG_STRING)
        return sjg_fail_at(p->ctx, sjg_at(p, ft), SJ_E_PARSE,
                           "expected a quoted file name in npy(...), found %s", sjg_describe(p, ft));
    char *file;
    SJ_TRY(sjg_string_value(p->ctx, p->file, p->text, ft, &file));
    p->pos++;
    sj_status st = sjg_expect(p, ')', "after the file name of npy");
    char *path = NULL;
    if (st == SJ_OK) {
        bool relative = file[0] != '/' && p->base_dir && p->base_dir[0];
        size_t n = strlen(file) + (relative ? strlen(p->base_dir) + 1 : 0) + 1;
        path = sj_alloc(p->ctx, n);
        if (!path) st = sj_fail(p->ctx, SJ_E_NOMEM, "%s: out of memory", p->file);
        else if (relative) snprintf(path, n, "%s/%s", p->base_dir, file);
        else snprintf(path, n, "%s", file);
    }
    sj_tensor t;
    memset(&t, 0, sizeof t);
    if (st == SJ_OK) {
        st = sj_npy_read(p->ctx, path, &t);
        if (st != SJ_OK) sj__error_prefix(p->ctx, "%s:%d:%d: weights of param %s", p->file, at->line, at->col, param);
    }
    if (st == SJ_OK && t.dtype != want)
        st = sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE, "%s holds %s elements but param %s is %s",
                         path, sj_dtype_name(t.dtype), param, sj_dtype_name(want));
    if (st == SJ_OK) {
        bool same = t.rank == shape->rank;
        for (int i = 0; same && i < t.rank; i++) same = t.dims[i] == shape->dims[i];
        if (!same) {
            sj_shape got = {.rank = t.rank};
            memcpy(got.dims, t.dims, sizeof got.dims);
            char want_s[96], got_s[96];
            sj_shape_format(shape, NULL, want_s, sizeof want_s);
            sj_shape_format(&got, NULL, got_s, sizeof got_s);
            st = sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE,
                             "%s holds shape %s but param %s is declared %s", path, got_s, param,
                             want_s);
        }
    }
    if (st == SJ_OK) {
        *got_dtype = t.dtype;
        *data = t.data; /* handed over */
        t.data = NULL;
    }
    sj_tensor_free(p->ctx, &t);
    sj_free(p->ctx, path);
    sj_free(p->ctx, file);
    return st;
}

sj_status sjg_parse_source(sjg_parser *p, const char *param, const sj_shape *shape, float **data) {
    *data = NULL;
    int64_t numel = sj_shape_numel(shape, 1);
    const sjg_token *t = sjg_cur(p);
    sj_status st;
    if (sjg_is_punct(t, '[')) {
        st = parse_inline(p, param, numel, data);
    } else if (t->kind == SJG_IDENT && sjg_is_punct(sjg_peek(p, 1), '(') &&
               (sjg_is_word(p, t, "fill") || sjg_is_word(p, t, "random") ||
                sjg_is_word(p, t, "npy"))) {
        st = sjg_is_word(p, t, "fill")     ? parse_fill(p, param, numel, data)
             : sjg_is_word(p, t, "random") ? parse_random(p, param, numel, data)
                                           : parse_npy(p, param, shape, SJ_F32, data, &(sj_dtype){0});
    } else {
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                           "expected the values of param %s: [v, ...], fill(v), random(seed=S, "
                           "scale=X) or npy(\"file.npy\"), found %s",
                           param, sjg_describe(p, t));
    }
    if (st != SJ_OK) {
        sj_free(p->ctx, *data);
        *data = NULL;
    }
    return st;
}

/* ---- int64, int32 and bool params: inline integers, fill or npy ---- */

static void put_int(sj_dtype t, void *data, int64_t i, int64_t v) {
    if (t == SJ_I64) ((int64_t *)data)[i] = v;
    else if (t == SJ_I32) ((int32_t *)data)[i] = (int32_t)v;
    else ((uint8_t *)data)[i] = (uint8_t)v;
}

/* An integer of t's range (bool: 0 or 1). */
static sj_status parse_int_value(sjg_parser *p, sj_dtype t, const char *param, int64_t *out) {
    const sjg_token *at = sjg_cur(p);
    sjg_number num;
    SJ_TRY(sjg_parse_number(p, &num, "in the param's values"));
    SJ_TRY(sjg_number_int(p, &num, out));
    bool ok = t == SJ_I64 || (t == SJ_I32 && *out >= INT32_MIN && *out <= INT32_MAX) ||
              (t == SJ_BOOL && (*out == 0 || *out == 1));
    if (!ok)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_PARSE, "param %s: %lld is not a %s value",
                           param, (long long)*out, sj_dtype_name(t));
    return SJ_OK;
}

static sj_status parse_typed(sjg_parser *p, const char *param, sj_dtype t, const sj_shape *shape,
                             void **data) {
    int64_t numel = sj_shape_numel(shape, 1);
    const sjg_token *at = sjg_cur(p);
    bool fill = t != SJ_F32 && at->kind == SJG_IDENT && sjg_is_word(p, at, "fill") &&
                sjg_is_punct(sjg_peek(p, 1), '(');
    bool npy = at->kind == SJG_IDENT && sjg_is_word(p, at, "npy") && sjg_is_punct(sjg_peek(p, 1), '(');
    if (!sjg_is_punct(at, '[') && !fill && !npy)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_PARSE,
                           "expected the values of %s param %s: [v, ...], fill(v) or "
                           "npy(\"file.npy\"), found %s",
                           sj_dtype_name(t), param, sjg_describe(p, at));
    if (fill && numel > SJG_MAX_GENERATED_ELEMENTS)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE,
                           "param %s would have %lld generated elements, over the limit of 2^28",
                           param, (long long)numel);
    if (!(*data = sj_calloc(p->ctx, numel ? (size_t)numel : 1, sj_dtype_size(t))))
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_NOMEM, "out of memory for param %s", param);
    if (fill) {
        int64_t v;
        p->pos += 2;
        SJ_TRY(parse_int_value(p, t, param, &v));
        SJ_TRY(sjg_expect(p, ')', "after the value of fill"));
        for (int64_t i = 0; i < numel; i++) put_int(t, *data, i, v);
        return SJ_OK;
    }
    if (npy) {
        sj_free(p->ctx, *data);
        *data = NULL;
        float *raw = NULL;
        sj_dtype got;
        SJ_TRY(parse_npy(p, param, shape, t, &raw, &got));
        *data = raw;
        return SJ_OK;
    }
    p->pos++; /* [ */
    int64_t n = 0;
    while (!sjg_is_punct(sjg_cur(p), ']')) {
        const sjg_token *vt = sjg_cur(p);
        int64_t v;
        SJ_TRY(parse_int_value(p, t, param, &v));
        SJ_TRY(list_room(p, param, vt, n, numel));
        put_int(t, *data, n++, v);
        SJ_TRY(list_separator(p, param));
    }
    return list_close(p, param, n, numel);
}

sj_status sjg_parse_typed_source(sjg_parser *p, const char *param, sj_dtype dtype,
                                 const sj_shape *shape, void **data) {
    if (dtype == SJ_F32) return sjg_parse_source(p, param, shape, (float **)data);
    *data = NULL;
    sj_status st = parse_typed(p, param, dtype, shape, data);
    if (st != SJ_OK) {
        sj_free(p->ctx, *data);
        *data = NULL;
    }
    return st;
}

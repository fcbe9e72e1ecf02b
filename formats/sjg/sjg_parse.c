/* .sjg parser: statements, expressions and op calls, built straight into an
 * sj_graph through the public builder (so the text gets exactly the
 * builder's shape checks, with the builder's message behind file:line:col). */
#include "formats/sjg/sjg_parse_impl.h"
#include "core/array.h"
#include "shapejit/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- token helpers ---- */

bool sjg_is_word(const sjg_parser *p, const sjg_token *t, const char *word) {
    size_t n = strlen(word);
    return t->kind == SJG_IDENT && t->len == n && !memcmp(p->text + t->start, word, n);
}

const char *sjg_describe(sjg_parser *p, const sjg_token *t) {
    switch (t->kind) {
    case SJG_EOF: return "end of file";
    case SJG_PUNCT: snprintf(p->desc, sizeof p->desc, "'%c'", t->ch); break;
    case SJG_NUMBER: snprintf(p->desc, sizeof p->desc, "number %.*s", (int)(t->len < 40 ? t->len : 40), p->text + t->start); break;
    case SJG_STRING: snprintf(p->desc, sizeof p->desc, "string %.*s", (int)(t->len < 40 ? t->len : 40), p->text + t->start); break;
    case SJG_IDENT: snprintf(p->desc, sizeof p->desc, "'%.*s'", (int)(t->len < 40 ? t->len : 40), p->text + t->start); break;
    }
    return p->desc;
}

sj_status sjg_expect(sjg_parser *p, char c, const char *context) {
    const sjg_token *t = sjg_cur(p);
    if (sjg_is_punct(t, c)) {
        p->pos++;
        return SJ_OK;
    }
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "expected '%c' %s, found %s", c, context,
                       sjg_describe(p, t));
}

static char *tok_text(sjg_parser *p, const sjg_token *t) {
    char *s = sj_alloc(p->ctx, t->len + 1);
    if (s) {
        memcpy(s, p->text + t->start, t->len);
        s[t->len] = '\0';
    }
    return s;
}

/* ---- numbers ---- */

sj_status sjg_parse_number(sjg_parser *p, sjg_number *out, const char *context) {
    out->neg = false;
    if (sjg_is_punct(sjg_cur(p), '-')) {
        out->neg = true;
        p->pos++;
    }
    const sjg_token *t = sjg_cur(p);
    if (t->kind != SJG_NUMBER && !sjg_is_word(p, t, "inf") && !sjg_is_word(p, t, "nan"))
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "expected a number %s, found %s",
                           context, sjg_describe(p, t));
    out->tok = t;
    p->pos++;
    return SJ_OK;
}

sj_status sjg_number_float(sjg_parser *p, const sjg_number *n, float *out) {
    const sjg_token *t = n->tok;
    float v;
    if (t->kind == SJG_IDENT) {
        v = sjg_is_word(p, t, "inf") ? INFINITY : NAN;
    } else {
        char buf[64];
        if (t->len >= sizeof buf)
            return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "number has more than %zu characters",
                               sizeof buf - 1);
        memcpy(buf, p->text + t->start, t->len);
        buf[t->len] = '\0';
        /* strtof, not strtod + cast: one correct rounding keeps %.9g
         * printing and parsing bit-exact. */
        v = strtof(buf, NULL);
        if (isinf(v))
            return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                               "number %s is beyond the float32 range (write inf if meant)", buf);
    }
    *out = n->neg ? -v : v;
    return SJ_OK;
}

sj_status sjg_number_int(sjg_parser *p, const sjg_number *n, int64_t *out) {
    const sjg_token *t = n->tok;
    if (t->kind != SJG_NUMBER || !t->is_int)
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "expected an integer, found %s",
                           sjg_describe(p, t));
    int64_t v = 0;
    for (uint32_t i = 0; i < t->len; i++)
        if (sj_mul_overflow_i64(v, 10, &v) ||
            __builtin_add_overflow(v, p->text[t->start + i] - '0', &v))
            return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "integer %.*s is too large",
                               (int)t->len, p->text + t->start);
    *out = n->neg ? -v : v;
    return SJ_OK;
}

/* ---- names ---- */

/* A name is an identifier that is not reserved, or a quoted string. */
static sj_status parse_name(sjg_parser *p, const char *what, char **out) {
    const sjg_token *t = sjg_cur(p);
    *out = NULL;
    if (t->kind == SJG_STRING) {
        SJ_TRY(sjg_string_value(p->ctx, p->file, p->text, t, out));
        if (!**out) {
            sj_free(p->ctx, *out);
            *out = NULL;
            return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "%s cannot be empty", what);
        }
    } else if (t->kind == SJG_IDENT) {
        *out = tok_text(p, t);
        if (!*out) return sj_fail(p->ctx, SJ_E_NOMEM, "%s: out of memory", p->file);
        if (sjg_is_reserved(*out)) {
            sj_status st = sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                                       "'%s' is a reserved word; write \"%s\" to use it as %s",
                                       *out, *out, what);
            sj_free(p->ctx, *out);
            *out = NULL;
            return st;
        }
    } else {
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "expected %s, found %s", what,
                           sjg_describe(p, t));
    }
    p->pos++;
    return SJ_OK;
}

static bool is_name_tok(const sjg_token *t) { return t->kind == SJG_IDENT || t->kind == SJG_STRING; }

/* Where `name` gets defined after the current position, if it does: for
 * the "defined later" hint (a value must be defined before it is used,
 * which is also why a text graph cannot contain a cycle). */
static const sjg_token *later_definition(sjg_parser *p, const char *name) {
    int depth = 0;
    /* Any definition in the text is a later one (or the current statement's
     * own name): earlier ones are already in the name table. */
    for (int i = 0; i < p->n_toks - 1; i++) {
        const sjg_token *t = &p->toks[i];
        if (t->kind == SJG_PUNCT) {
            if (t->ch == '(' || t->ch == '[') depth++;
            if (t->ch == ')' || t->ch == ']') depth--;
            continue;
        }
        if (depth != 0 || !is_name_tok(t)) continue;
        const sjg_token *prev = i > 0 ? &p->toks[i - 1] : NULL;
        bool defines = sjg_is_punct(&p->toks[i + 1], '=') ||
                       (prev && (sjg_is_word(p, prev, "input") || sjg_is_word(p, prev, "param")));
        if (!defines || (prev && sjg_is_word(p, prev, "output"))) continue;
        char *s = NULL;
        if (t->kind == SJG_STRING) {
            if (sjg_string_value(p->ctx, p->file, p->text, t, &s) != SJ_OK) continue;
        } else {
            s = tok_text(p, t);
        }
        bool same = s && !strcmp(s, name);
        sj_free(p->ctx, s);
        if (same) return t;
    }
    return NULL;
}

static sj_status lookup(sjg_parser *p, const sjg_token *t, const char *name, sj_value *out) {
    int d = sjg_names_get(&p->names, name);
    if (d >= 0) {
        *out = p->defs[d].value;
        return SJ_OK;
    }
    const sjg_token *later = later_definition(p, name);
    if (later)
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                           "'%s' is used before its definition at %d:%d (a value must be defined "
                           "before use, so a graph cannot refer to itself in a cycle)",
                           name, later->line, later->col);
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_NOT_FOUND, "undefined name '%s'", name);
}

static sj_status check_new_name(sjg_parser *p, const sjg_token *t, const char *name) {
    int d = sjg_names_get(&p->names, name);
    if (d < 0) return SJ_OK;
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                       "'%s' is already defined at %d:%d (each name is assigned once; use a new "
                       "name)",
                       name, p->defs[d].line, p->defs[d].col);
}

static sj_status define(sjg_parser *p, const sjg_token *t, const char *name, sj_value v) {
    if (!sj__array_reserve(p->ctx, (void **)&p->defs, &p->cap_defs, (size_t)p->n_defs + 1,
                          sizeof *p->defs))
        return sj_fail(p->ctx, SJ_E_NOMEM, "%s: out of memory", p->file);
    p->defs[p->n_defs] = (sjg_def){v, t->line, t->col};
    SJ_TRY(sjg_names_put(&p->names, name, p->n_defs));
    p->n_defs++;
    return SJ_OK;
}

/* ---- shapes and keyword arguments ---- */

static bool is_dim_name(sjg_parser *p, const sjg_token *t) {
    return is_name_tok(t) && !sjg_is_word(p, t, "inf") && !sjg_is_word(p, t, "nan");
}

/* The symbolic dim's name at the cursor, consumed; an error names what else
 * is there. */
static sj_status parse_sym_name(sjg_parser *p) {
    const sjg_token *t = sjg_cur(p);
    char *name = NULL;
    if (t->kind == SJG_STRING) {
        SJ_TRY(sjg_string_value(p->ctx, p->file, p->text, t, &name));
    } else if (!(name = tok_text(p, t))) {
        return sj_fail(p->ctx, SJ_E_NOMEM, "%s: out of memory", p->file);
    }
    sj_status st = SJ_OK;
    if (!p->sym)
        st = sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                         "'%s' is not a dim: this graph has no symbolic dim (declare one: "
                         "graph NAME(%s) { ... })",
                         name, name);
    else if (strcmp(name, p->sym) != 0)
        st = sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                         "unknown dim '%s' (the graph's symbolic dim is '%s')", name, p->sym);
    sj_free(p->ctx, name);
    SJ_TRY(st);
    p->pos++;
    return SJ_OK;
}

/* `+ C` after the symbolic dim, if there: *c the constant part. */
static sj_status parse_sym_offset(sjg_parser *p, int64_t *c) {
    *c = 0;
    if (!sjg_is_punct(sjg_cur(p), '+')) return SJ_OK;
    p->pos++;
    const sjg_token *t = sjg_cur(p);
    sjg_number n;
    SJ_TRY(sjg_parse_number(p, &n, "after the symbolic dim's '+'"));
    SJ_TRY(sjg_number_int(p, &n, c));
    if (*c < 0 || *c > SJ_MAX_SYM_OFFSET)
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_SHAPE,
                           "the constant part %lld of a symbolic dim is outside 0..%lld", (long long)*c,
                           (long long)SJ_MAX_SYM_OFFSET);
    return SJ_OK;
}

/* One entry of a shape or a `shape=`/`axes=`/`perm=` list: an integer
 * (maybe negative; the list's user checks the range), or the symbolic dim
 * in an affine form (`N`, `4*N`, `N+1`, `2*N+3`), reported through *is_sym
 * with *out its SJ_DIM_AFFINE encoding (-1 is a valid axis, so no value can
 * mark it). */
static sj_status parse_list_item(sjg_parser *p, int64_t *out, bool *is_sym) {
    const sjg_token *t = sjg_cur(p);
    *is_sym = false;
    int64_t k = 1, c;
    if (!is_dim_name(p, t)) {
        sjg_number n;
        SJ_TRY(sjg_parse_number(p, &n, "or the symbolic dim in a list"));
        SJ_TRY(sjg_number_int(p, &n, out));
        if (!sjg_is_punct(sjg_cur(p), '*')) return SJ_OK;
        p->pos++;
        k = *out;
        if (!is_dim_name(p, sjg_cur(p)))
            return sjg_fail_at(p->ctx, sjg_at(p, sjg_cur(p)), SJ_E_PARSE,
                               "expected the symbolic dim after '%lld*', found %s", (long long)k,
                               sjg_describe(p, sjg_cur(p)));
        if (k < 1 || k > SJ_MAX_SYM_FACTOR)
            return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_SHAPE,
                               "the factor %lld of a symbolic dim is outside 1..%lld", (long long)k,
                               (long long)SJ_MAX_SYM_FACTOR);
    }
    SJ_TRY(parse_sym_name(p));
    SJ_TRY(parse_sym_offset(p, &c));
    *out = SJ_DIM_AFFINE(k, c);
    *is_sym = true;
    return SJ_OK;
}

static sj_status parse_list(sjg_parser *p, int64_t *items, int *n_items, uint32_t *sym_mask,
                            const char *context) {
    const sjg_token *open = sjg_cur(p);
    SJ_TRY(sjg_expect(p, '[', context));
    *n_items = 0;
    *sym_mask = 0;
    while (!sjg_is_punct(sjg_cur(p), ']')) {
        if (*n_items == SJ_MAX_RANK)
            return sjg_fail_at(p->ctx, sjg_at(p, open), SJ_E_PARSE,
                               "more than %d entries (tensors have at most %d dims)", SJ_MAX_RANK,
                               SJ_MAX_RANK);
        bool is_sym;
        SJ_TRY(parse_list_item(p, &items[*n_items], &is_sym));
        if (is_sym) *sym_mask |= 1u << *n_items;
        (*n_items)++;
        if (sjg_is_punct(sjg_cur(p), ',')) {
            p->pos++;
        } else if (!sjg_is_punct(sjg_cur(p), ']')) {
            return sjg_fail_at(p->ctx, sjg_at(p, sjg_cur(p)), SJ_E_PARSE,
                               "expected ',' or ']' in a list, found %s", sjg_describe(p, sjg_cur(p)));
        }
    }
    p->pos++;
    return SJ_OK;
}

/* Dims from a parsed list: the symbolic dim where marked, else constants
 * that must be >= 1 and within the element limit. */
static sj_status list_to_shape(sjg_parser *p, const sjg_token *at, const int64_t *items, int n,
                               uint32_t sym_mask, bool allow_sym, const char *what, sj_shape *s) {
    s->rank = n;
    for (int i = 0; i < n; i++) {
        if (sym_mask & (1u << i)) {
            if (!allow_sym)
                return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE,
                                   "%s cannot use the symbolic dim '%s' (weights have a fixed shape)",
                                   what, p->sym);
            s->dims[i] = items[i];
        } else if (items[i] < 1) {
            return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE,
                               "dim %d of %s is %lld; dims must be >= 1", i, what,
                               (long long)items[i]);
        } else if (items[i] > SJ_MAX_ELEMENTS) {
            return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE,
                               "dim %d of %s is %lld, over the limit of 2^40 elements", i, what,
                               (long long)items[i]);
        } else {
            s->dims[i] = items[i];
        }
    }
    if (sj_shape_numel(s, 1) < 0)
        return sjg_fail_at(p->ctx, sjg_at(p, at), SJ_E_SHAPE, "%s has more than 2^40 elements",
                           what);
    return SJ_OK;
}

static sj_status parse_shape(sjg_parser *p, sj_shape *s, bool allow_sym, const char *what) {
    const sjg_token *open = sjg_cur(p);
    int64_t items[SJ_MAX_RANK];
    int n;
    uint32_t sym_mask;
    SJ_TRY(parse_list(p, items, &n, &sym_mask, "to open a shape"));
    return list_to_shape(p, open, items, n, sym_mask, allow_sym, what, s);
}

sj_status sjg_parse_kwargs(sjg_parser *p, sjg_kwarg *kw, int *n_kw, const char *context) {
    while (!sjg_is_punct(sjg_cur(p), ')')) {
        const sjg_token *key = sjg_cur(p);
        if (key->kind != SJG_IDENT || !sjg_is_punct(sjg_peek(p, 1), '='))
            return sjg_fail_at(p->ctx, sjg_at(p, key), SJ_E_PARSE,
                               "expected an attribute (name=value) in %s, found %s", context,
                               sjg_describe(p, key));
        for (int i = 0; i < *n_kw; i++)
            if (kw[i].key->len == key->len &&
                !memcmp(p->text + kw[i].key->start, p->text + key->start, key->len))
                return sjg_fail_at(p->ctx, sjg_at(p, key), SJ_E_PARSE,
                                   "attribute '%.*s' given twice in %s", (int)key->len,
                                   p->text + key->start, context);
        if (*n_kw == SJG_MAX_KWARGS)
            return sjg_fail_at(p->ctx, sjg_at(p, key), SJ_E_PARSE, "too many attributes in %s",
                               context);
        sjg_kwarg *k = &kw[(*n_kw)++];
        memset(k, 0, sizeof *k);
        k->key = key;
        p->pos += 2;
        const sjg_token *v = sjg_cur(p);
        if (sjg_is_word(p, v, "true") || sjg_is_word(p, v, "false")) {
            k->kind = SJG_ATTR_BOOL;
            k->b = sjg_is_word(p, v, "true");
            p->pos++;
        } else if (v->kind == SJG_IDENT) { /* an element type: to=int64 */
            k->kind = SJG_ATTR_WORD;
            k->word = v;
            p->pos++;
        } else if (sjg_is_punct(v, '[')) {
            k->kind = SJG_ATTR_LIST;
            SJ_TRY(parse_list(p, k->items, &k->n_items, &k->sym_mask, "to open a list"));
        } else {
            k->kind = SJG_ATTR_NUMBER;
            SJ_TRY(sjg_parse_number(p, &k->num, "(or true, false, [list]) as attribute value"));
        }
        if (sjg_is_punct(sjg_cur(p), ',')) {
            p->pos++;
        } else if (!sjg_is_punct(sjg_cur(p), ')')) {
            return sjg_fail_at(p->ctx, sjg_at(p, sjg_cur(p)), SJ_E_PARSE,
                               "expected ')' after arguments of %s, found %s", context,
                               sjg_describe(p, sjg_cur(p)));
        }
    }
    return SJ_OK;
}

/* ---- op calls ---- */

typedef struct call_args {
    sjg_where op_at;
    const char *op_name;
    int n_pos;
    sj_value pos[3];
    bool none[3];
    sjg_kwarg kw[SJG_MAX_KWARGS];
    int n_kw;
    bool entered; /* counted in p->depth */
} call_args;

static sjg_kwarg *find_kw(sjg_parser *p, call_args *a, const char *name) {
    for (int i = 0; i < a->n_kw; i++)
        if (sjg_is_word(p, a->kw[i].key, name)) {
            a->kw[i].used = true;
            return &a->kw[i];
        }
    return NULL;
}

static sj_status kw_float(sjg_parser *p, call_args *a, const char *name, float dflt, float *out) {
    sjg_kwarg *k = find_kw(p, a, name);
    *out = dflt;
    if (!k) return SJ_OK;
    if (k->kind != SJG_ATTR_NUMBER)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE, "%s of %s must be a number", name,
                           a->op_name);
    return sjg_number_float(p, &k->num, out);
}

static sj_status kw_bool(sjg_parser *p, call_args *a, const char *name, bool *out) {
    sjg_kwarg *k = find_kw(p, a, name);
    *out = false;
    if (!k) return SJ_OK;
    if (k->kind != SJG_ATTR_BOOL)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE, "%s of %s must be true or false",
                           name, a->op_name);
    *out = k->b;
    return SJ_OK;
}

/* An integer keyword counting dims (an axis, batch_dims): within
 * +-SJ_MAX_RANK, dflt when absent. */
static sj_status kw_dim_count(sjg_parser *p, call_args *a, const char *name, int dflt, int *out) {
    sjg_kwarg *k = find_kw(p, a, name);
    *out = dflt;
    if (!k) return SJ_OK;
    int64_t v;
    if (k->kind != SJG_ATTR_NUMBER)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE, "%s of %s must be an integer", name,
                           a->op_name);
    SJ_TRY(sjg_number_int(p, &k->num, &v));
    if (v < -SJ_MAX_RANK || v >= SJ_MAX_RANK)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_SHAPE, "%s %lld of %s is out of range",
                           name, (long long)v, a->op_name);
    *out = (int)v;
    return SJ_OK;
}

static sj_status kw_axis(sjg_parser *p, call_args *a, int *out) {
    return kw_dim_count(p, a, "axis", -1, out);
}

/* axes= / perm=: small ints, never the symbolic dim. */
static sj_status kw_int_list(sjg_parser *p, call_args *a, const char *name, int *items, int *n,
                             bool *given) {
    sjg_kwarg *k = find_kw(p, a, name);
    *given = k != NULL;
    *n = 0;
    if (!k) return SJ_OK;
    if (k->kind != SJG_ATTR_LIST)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE, "%s of %s must be a list [...]",
                           name, a->op_name);
    for (int i = 0; i < k->n_items; i++) {
        if ((k->sym_mask & (1u << i)) || k->items[i] < -SJ_MAX_RANK || k->items[i] >= SJ_MAX_RANK)
            return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_SHAPE,
                               "entry %d of %s of %s is not an axis", i, name, a->op_name);
        items[i] = (int)k->items[i];
    }
    *n = k->n_items;
    return SJ_OK;
}

/* An element type written as a word (to=int64, dtype=bool). */
static sj_status word_dtype(sjg_parser *p, const sjg_token *t, sj_dtype *out) {
    char name[16];
    if (t->len < sizeof name) {
        memcpy(name, p->text + t->start, t->len);
        name[t->len] = '\0';
        if (sj_dtype_from_name(name, out) == SJ_OK) return SJ_OK;
    }
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                       "'%.*s' is not an element type (float32, int64, int32 or bool)",
                       (int)t->len, p->text + t->start);
}

static sj_status kw_dtype(sjg_parser *p, call_args *a, const char *name, sj_dtype *out) {
    sjg_kwarg *k = find_kw(p, a, name);
    if (!k || k->kind != SJG_ATTR_WORD)
        return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "%s needs %s=TYPE (e.g. %s=int64)",
                           a->op_name, name, name);
    return word_dtype(p, k->word, out);
}

/* A number attribute read exactly: integers as integers, others as float. */
static sj_status kw_double(sjg_parser *p, call_args *a, const char *name, double dflt,
                           double *out) {
    sjg_kwarg *k = find_kw(p, a, name);
    *out = dflt;
    if (!k) return SJ_OK;
    if (k->kind != SJG_ATTR_NUMBER)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE, "%s of %s must be a number", name,
                           a->op_name);
    int64_t i;
    if (k->num.tok->kind == SJG_NUMBER && k->num.tok->is_int && sjg_number_int(p, &k->num, &i) == SJ_OK) {
        *out = (double)i;
        return SJ_OK;
    }
    float f;
    SJ_TRY(sjg_number_float(p, &k->num, &f));
    *out = f;
    return SJ_OK;
}

static sj_status kw_shape(sjg_parser *p, call_args *a, sj_shape *s) {
    sjg_kwarg *k = find_kw(p, a, "shape");
    if (!k || k->kind != SJG_ATTR_LIST)
        return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "%s needs shape=[...]", a->op_name);
    char what[32];
    snprintf(what, sizeof what, "shape= of %s", a->op_name);
    return list_to_shape(p, k->key, k->items, k->n_items, k->sym_mask, true, what, s);
}

/* start= / start_n= / step= of slice: one integer per axis. */
static sj_status kw_i64_list(sjg_parser *p, call_args *a, const char *name, int rank,
                             int64_t dflt, int64_t *items) {
    sjg_kwarg *k = find_kw(p, a, name);
    for (int i = 0; i < rank; i++) items[i] = dflt;
    if (!k) return SJ_OK;
    if (k->kind != SJG_ATTR_LIST || k->sym_mask || k->n_items != rank)
        return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE,
                           "%s of %s must be a list of %d integers", name, a->op_name, rank);
    for (int i = 0; i < rank; i++) items[i] = k->items[i];
    return SJ_OK;
}

static sj_status check_arity(sjg_parser *p, call_args *a, int min, int max) {
    if (a->n_pos < min || a->n_pos > max) {
        if (min == max)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "%s takes %d operand%s, got %d",
                               a->op_name, min, min == 1 ? "" : "s", a->n_pos);
        return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "%s takes %d to %d operands, got %d",
                           a->op_name, min, max, a->n_pos);
    }
    /* 'none' stands only for an optional operand (gemm's c, layernorm's
     * scale and bias), which are the ones past the required minimum. */
    for (int i = 0; i < min; i++)
        if (a->none[i])
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "operand %d of %s cannot be none",
                               i + 1, a->op_name);
    return SJ_OK;
}

static sj_status check_kwargs_used(sjg_parser *p, call_args *a, const char *known) {
    for (int i = 0; i < a->n_kw; i++)
        if (!a->kw[i].used)
            return sjg_fail_at(p->ctx, sjg_at(p, a->kw[i].key), SJ_E_PARSE,
                               "%s has no attribute '%.*s' (%s)", a->op_name, (int)a->kw[i].key->len,
                               p->text + a->kw[i].key->start, known);
    return SJ_OK;
}

static sj_value opt(const call_args *a, int i) {
    return i < a->n_pos && !a->none[i] ? a->pos[i] : SJ_NO_VALUE;
}

/* A builder failure (a shape mismatch, mostly) keeps the builder's message
 * and gains the op's position in front. */
static sj_status built(sjg_parser *p, const call_args *a, sj_status st) {
    return sjg_located(p->ctx, a->op_at, st);
}

/* Builds the node for op from parsed arguments. */
static sj_status build_op(sjg_parser *p, sj_op op, call_args *a, sj_value *out) {
    sj_graph *g = p->g;
    if (op == SJ_OP_LEAKY_RELU) {
        float alpha;
        SJ_TRY(check_arity(p, a, 1, 1));
        SJ_TRY(kw_float(p, a, "alpha", 0.01f, &alpha));
        SJ_TRY(check_kwargs_used(p, a, "it takes alpha"));
        return built(p, a, sj_graph_leaky_relu(g, a->pos[0], alpha, out));
    }
    if (op == SJ_OP_CAST) {
        sj_dtype to;
        SJ_TRY(check_arity(p, a, 1, 1));
        SJ_TRY(kw_dtype(p, a, "to", &to));
        SJ_TRY(check_kwargs_used(p, a, "it takes to"));
        return built(p, a, sj_graph_cast(g, a->pos[0], to, out));
    }
    if (sj_op_is_unary(op)) {
        SJ_TRY(check_arity(p, a, 1, 1));
        SJ_TRY(check_kwargs_used(p, a, "it takes none"));
        return built(p, a, sj_graph_unary(g, op, a->pos[0], out));
    }
    if (sj_op_is_binary(op)) {
        SJ_TRY(check_arity(p, a, 2, 2));
        SJ_TRY(check_kwargs_used(p, a, "it takes none"));
        return built(p, a, sj_graph_binary(g, op, a->pos[0], a->pos[1], out));
    }
    if (sj_op_is_reduce(op)) {
        int axes[SJ_MAX_RANK], n;
        bool given, keepdims;
        SJ_TRY(check_arity(p, a, 1, 1));
        SJ_TRY(kw_int_list(p, a, "axes", axes, &n, &given));
        SJ_TRY(kw_bool(p, a, "keepdims", &keepdims));
        SJ_TRY(check_kwargs_used(p, a, "it takes axes, keepdims"));
        if (given && n == 0)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE,
                               "axes=[] of %s is empty (leave axes out to reduce every axis)",
                               a->op_name);
        return built(p, a, sj_graph_reduce(g, op, a->pos[0], n, axes, keepdims, out));
    }
    switch (op) {
    case SJ_OP_MATMUL:
        SJ_TRY(check_arity(p, a, 2, 2));
        SJ_TRY(check_kwargs_used(p, a, "it takes none"));
        return built(p, a, sj_graph_matmul(g, a->pos[0], a->pos[1], out));
    case SJ_OP_GEMM: {
        float alpha, beta;
        bool ta, tb;
        SJ_TRY(check_arity(p, a, 2, 3));
        SJ_TRY(kw_float(p, a, "alpha", 1.0f, &alpha));
        SJ_TRY(kw_float(p, a, "beta", 1.0f, &beta));
        SJ_TRY(kw_bool(p, a, "trans_a", &ta));
        SJ_TRY(kw_bool(p, a, "trans_b", &tb));
        SJ_TRY(check_kwargs_used(p, a, "it takes alpha, beta, trans_a, trans_b"));
        return built(p, a, sj_graph_gemm(g, a->pos[0], a->pos[1], opt(a, 2), alpha, beta, ta, tb, out));
    }
    case SJ_OP_SOFTMAX:
    case SJ_OP_LOG_SOFTMAX: {
        int axis;
        SJ_TRY(check_arity(p, a, 1, 1));
        SJ_TRY(kw_axis(p, a, &axis));
        SJ_TRY(check_kwargs_used(p, a, "it takes axis"));
        return built(p, a, sj_graph_softmax(g, op, a->pos[0], axis, out));
    }
    case SJ_OP_LAYERNORM: {
        int axis;
        float eps;
        SJ_TRY(check_arity(p, a, 1, 3));
        SJ_TRY(kw_axis(p, a, &axis));
        SJ_TRY(kw_float(p, a, "epsilon", 1e-5f, &eps));
        SJ_TRY(check_kwargs_used(p, a, "it takes axis, epsilon"));
        return built(p, a, sj_graph_layernorm(g, a->pos[0], opt(a, 1), opt(a, 2), axis, eps, out));
    }
    case SJ_OP_TRANSPOSE: {
        int perm[SJ_MAX_RANK], n;
        bool given;
        SJ_TRY(check_arity(p, a, 1, 1));
        SJ_TRY(kw_int_list(p, a, "perm", perm, &n, &given));
        SJ_TRY(check_kwargs_used(p, a, "it takes perm"));
        sj_value_desc d;
        SJ_TRY(sj_graph_value_desc(g, a->pos[0], &d));
        if (!given) { /* numpy's default: reverse the axes */
            n = d.shape.rank;
            for (int i = 0; i < n; i++) perm[i] = n - 1 - i;
        }
        if (n != d.shape.rank)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_SHAPE,
                               "perm of transpose has %d entries but the operand has rank %d", n,
                               d.shape.rank);
        return built(p, a, sj_graph_transpose(g, a->pos[0], perm, out));
    }
    case SJ_OP_RESHAPE: {
        SJ_TRY(check_arity(p, a, 1, 1));
        sjg_kwarg *k = find_kw(p, a, "shape");
        SJ_TRY(check_kwargs_used(p, a, "it takes shape"));
        if (!k || k->kind != SJG_ATTR_LIST)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE,
                               "reshape needs shape=[...] (e.g. shape=[N, 4, 16])");
        sj_shape s;
        SJ_TRY(list_to_shape(p, k->key, k->items, k->n_items, k->sym_mask, true,
                             "shape= of reshape", &s));
        return built(p, a, sj_graph_reshape(g, a->pos[0], s.rank, s.dims, out));
    }
    case SJ_OP_WHERE:
        SJ_TRY(check_arity(p, a, 3, 3));
        SJ_TRY(check_kwargs_used(p, a, "it takes none"));
        return built(p, a, sj_graph_where(g, a->pos[0], a->pos[1], a->pos[2], out));
    case SJ_OP_EXPAND:
    case SJ_OP_SLICE: {
        SJ_TRY(check_arity(p, a, 1, 1));
        sjg_kwarg *k = find_kw(p, a, "shape");
        if (!k || k->kind != SJG_ATTR_LIST)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "%s needs shape=[...]", a->op_name);
        sj_shape s;
        SJ_TRY(list_to_shape(p, k->key, k->items, k->n_items, k->sym_mask, true, "shape=", &s));
        if (op == SJ_OP_EXPAND) {
            SJ_TRY(check_kwargs_used(p, a, "it takes shape"));
            return built(p, a, sj_graph_expand(g, a->pos[0], s.rank, s.dims, out));
        }
        int64_t start[SJ_MAX_RANK], start_n[SJ_MAX_RANK], step[SJ_MAX_RANK];
        SJ_TRY(kw_i64_list(p, a, "start", s.rank, 0, start));
        SJ_TRY(kw_i64_list(p, a, "start_n", s.rank, 0, start_n));
        SJ_TRY(kw_i64_list(p, a, "step", s.rank, 1, step));
        SJ_TRY(check_kwargs_used(p, a, "it takes start, start_n, step, shape"));
        sj_value_desc d;
        SJ_TRY(sj_graph_value_desc(g, a->pos[0], &d));
        if (d.shape.rank != s.rank)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_SHAPE,
                               "shape of slice has %d dims but the operand has rank %d", s.rank,
                               d.shape.rank);
        sj_slice_axis axes[SJ_MAX_RANK];
        for (int i = 0; i < s.rank; i++) axes[i] = (sj_slice_axis){start[i], start_n[i], step[i], s.dims[i]};
        return built(p, a, sj_graph_slice(g, a->pos[0], axes, out));
    }
    case SJ_OP_GATHER:
    case SJ_OP_CONCAT:
    case SJ_OP_GATHER_ELEMENTS: {
        int axis;
        SJ_TRY(check_arity(p, a, 2, 2));
        SJ_TRY(kw_axis(p, a, &axis));
        SJ_TRY(check_kwargs_used(p, a, "it takes axis"));
        if (op == SJ_OP_GATHER) return built(p, a, sj_graph_gather(g, a->pos[0], a->pos[1], axis, out));
        if (op == SJ_OP_GATHER_ELEMENTS)
            return built(p, a, sj_graph_gather_elements(g, a->pos[0], a->pos[1], axis, out));
        return built(p, a, sj_graph_concat(g, a->pos[0], a->pos[1], axis, out));
    }
    case SJ_OP_GATHER_ND: {
        int batch_dims;
        SJ_TRY(check_arity(p, a, 2, 2));
        SJ_TRY(kw_dim_count(p, a, "batch_dims", 0, &batch_dims));
        SJ_TRY(check_kwargs_used(p, a, "it takes batch_dims"));
        return built(p, a, sj_graph_gather_nd(g, a->pos[0], a->pos[1], batch_dims, out));
    }
    case SJ_OP_RANGE:
    case SJ_OP_FILL: {
        sj_dtype t;
        sj_shape s;
        double x, y;
        SJ_TRY(check_arity(p, a, 0, 0));
        SJ_TRY(kw_dtype(p, a, "dtype", &t));
        SJ_TRY(kw_shape(p, a, &s));
        if (op == SJ_OP_FILL) {
            SJ_TRY(kw_double(p, a, "value", 0, &x));
            SJ_TRY(check_kwargs_used(p, a, "it takes dtype, value, shape"));
            return built(p, a, sj_graph_fill(g, t, x, s.rank, s.dims, out));
        }
        double xn;
        SJ_TRY(kw_double(p, a, "start", 0, &x));
        SJ_TRY(kw_double(p, a, "start_n", 0, &xn));
        SJ_TRY(kw_double(p, a, "delta", 1, &y));
        SJ_TRY(check_kwargs_used(p, a, "it takes dtype, start, start_n, delta, shape"));
        if (s.rank != 1)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_SHAPE, "range has one dim, not %d", s.rank);
        if (xn != (double)(int64_t)xn || fabs(xn) > (double)SJ_MAX_SYM_FACTOR)
            return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE,
                               "range: start_n %g is not an integer within +-%lld", xn,
                               (long long)SJ_MAX_SYM_FACTOR);
        return built(p, a, sj_graph_range_from_n(g, t, x, (int64_t)xn, y, s.dims[0], out));
    }
    case SJ_OP_TRILU: {
        bool upper = true;
        int64_t kv = 0;
        SJ_TRY(check_arity(p, a, 1, 1));
        sjg_kwarg *k = find_kw(p, a, "k");
        if (k) {
            if (k->kind != SJG_ATTR_NUMBER)
                return sjg_fail_at(p->ctx, sjg_at(p, k->key), SJ_E_PARSE,
                                   "k of trilu must be an integer");
            SJ_TRY(sjg_number_int(p, &k->num, &kv));
        }
        if (find_kw(p, a, "upper")) SJ_TRY(kw_bool(p, a, "upper", &upper));
        SJ_TRY(check_kwargs_used(p, a, "it takes k, upper"));
        return built(p, a, sj_graph_trilu(g, a->pos[0], upper, kv, out));
    }
    default:
        return sjg_fail_at(p->ctx, a->op_at, SJ_E_PARSE, "'%s' is a statement, not an op",
                           a->op_name);
    }
}

static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), row[40];
    if (la >= 40 || lb >= 40) return 99;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static sj_status unknown_op(sjg_parser *p, const sjg_token *t, const char *name) {
    const char *best = NULL;
    size_t best_d = 3;
    for (int op = SJ_OP_NEG; op < SJ_OP_COUNT_; op++) {
        size_t d = edit_distance(name, sj_op_name((sj_op)op));
        if (d < best_d) best_d = d, best = sj_op_name((sj_op)op);
    }
    if (best)
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "unknown op '%s' (did you mean '%s'?)",
                           name, best);
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "unknown op '%s' (docs/sjg.md lists the ops)",
                       name);
}

static sj_status parse_expr(sjg_parser *p, sj_value *out);

/* After `name(`: operands, then key=value attributes, then ')'. */
static sj_status parse_call(sjg_parser *p, sj_value *out) {
    const sjg_token *op_tok = sjg_cur(p);
    char *name = tok_text(p, op_tok);
    if (!name) return sj_fail(p->ctx, SJ_E_NOMEM, "%s: out of memory", p->file);
    call_args a;
    memset(&a, 0, sizeof a);
    a.op_at = sjg_at(p, op_tok);
    a.op_name = name;
    sj_op op;
    sj_status st = SJ_OK;
    if (sj_op_from_name(name, &op) != SJ_OK) {
        st = unknown_op(p, op_tok, name);
        goto done;
    }
    if (op == SJ_OP_INPUT || op == SJ_OP_PARAM) {
        st = sjg_fail_at(p->ctx, a.op_at, SJ_E_PARSE,
                         "'%s' is a statement, not an op (write: %s NAME: [dims]%s)", name, name,
                         op == SJ_OP_PARAM ? " = ..." : "");
        goto done;
    }
    if (p->depth >= SJG_MAX_NESTING) {
        st = sjg_fail_at(p->ctx, a.op_at, SJ_E_PARSE,
                         "expressions nested too deeply (more than %d op calls inside each other)",
                         SJG_MAX_NESTING);
        goto done;
    }
    p->depth++;
    a.entered = true;
    p->pos += 2; /* name ( */
    while (!sjg_is_punct(sjg_cur(p), ')')) {
        const sjg_token *t = sjg_cur(p);
        if (t->kind == SJG_IDENT && sjg_is_punct(sjg_peek(p, 1), '=')) {
            st = sjg_parse_kwargs(p, a.kw, &a.n_kw, name);
            if (st != SJ_OK) goto done;
            break;
        }
        if (a.n_pos == 3) {
            st = sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE, "too many operands for %s", name);
            goto done;
        }
        if (sjg_is_word(p, t, "none")) {
            a.none[a.n_pos] = true;
            a.pos[a.n_pos++] = SJ_NO_VALUE;
            p->pos++;
        } else {
            st = parse_expr(p, &a.pos[a.n_pos++]);
            if (st != SJ_OK) goto done;
        }
        if (sjg_is_punct(sjg_cur(p), ',')) {
            p->pos++;
        } else if (!sjg_is_punct(sjg_cur(p), ')')) {
            st = sjg_fail_at(p->ctx, sjg_at(p, sjg_cur(p)), SJ_E_PARSE,
                             "expected ')' after arguments of %s, found %s", name,
                             sjg_describe(p, sjg_cur(p)));
            goto done;
        }
    }
    p->pos++; /* ) */
    st = build_op(p, op, &a, out);
done:
    if (a.entered) p->depth--;
    sj_free(p->ctx, name);
    return st;
}

/* A bare number operand becomes a rank-0 param. Params must be named; the
 * name "lit@LINE:COL" is unique per literal and cannot be written without
 * quotes, so it never collides with a name the author chose. */
static sj_status parse_scalar(sjg_parser *p, sj_value *out) {
    const sjg_token *t = sjg_cur(p);
    sjg_number n;
    float v;
    SJ_TRY(sjg_parse_number(p, &n, "as operand"));
    SJ_TRY(sjg_number_float(p, &n, &v));
    char name[48];
    snprintf(name, sizeof name, "lit@%d:%d", t->line, t->col);
    return sjg_located(p->ctx, sjg_at(p, t), sj_graph_param(p->g, name, 0, NULL, &v, out));
}

static sj_status parse_expr(sjg_parser *p, sj_value *out) {
    const sjg_token *t = sjg_cur(p);
    if (t->kind == SJG_IDENT && sjg_is_punct(sjg_peek(p, 1), '(')) return parse_call(p, out);
    if (t->kind == SJG_NUMBER || sjg_is_punct(t, '-') || sjg_is_word(p, t, "inf") ||
        sjg_is_word(p, t, "nan"))
        return parse_scalar(p, out);
    if (sjg_is_word(p, t, "none"))
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                           "'none' is only allowed for an optional operand");
    char *name;
    SJ_TRY(parse_name(p, "an operand (a name, op(...) or a number)", &name));
    sj_status st = lookup(p, t, name, out);
    sj_free(p->ctx, name);
    return st;
}

/* ---- statements ---- */

/* `int64[N, 4]`: an element type in front of a shape; float32 without. */
static sj_status parse_type(sjg_parser *p, sj_dtype *t) {
    *t = SJ_F32;
    const sjg_token *w = sjg_cur(p);
    if (w->kind != SJG_IDENT || !sjg_is_punct(sjg_peek(p, 1), '[')) return SJ_OK;
    SJ_TRY(word_dtype(p, w, t));
    p->pos++;
    return SJ_OK;
}

static sj_status parse_input(sjg_parser *p) {
    p->pos++;
    const sjg_token *nt = sjg_cur(p);
    char *name;
    SJ_TRY(parse_name(p, "an input name", &name));
    sj_shape s;
    sj_value v;
    sj_status st = check_new_name(p, nt, name);
    sj_dtype t = SJ_F32;
    if (st == SJ_OK) st = sjg_expect(p, ':', "after the input's name");
    if (st == SJ_OK) st = parse_type(p, &t);
    if (st == SJ_OK) st = parse_shape(p, &s, true, "an input");
    if (st == SJ_OK)
        st = sjg_located(p->ctx, sjg_at(p, nt),
                         sj_graph_input_typed(p->g, name, t, s.rank, s.dims, &v));
    if (st == SJ_OK) st = define(p, nt, name, v);
    sj_free(p->ctx, name);
    return st;
}

static sj_status parse_param(sjg_parser *p) {
    p->pos++;
    const sjg_token *nt = sjg_cur(p);
    char *name;
    SJ_TRY(parse_name(p, "a param name", &name));
    sj_shape s;
    sj_value v;
    void *data = NULL;
    sj_dtype t = SJ_F32;
    sj_status st = check_new_name(p, nt, name);
    if (st == SJ_OK) st = sjg_expect(p, ':', "after the param's name");
    if (st == SJ_OK) st = parse_type(p, &t);
    if (st == SJ_OK) st = parse_shape(p, &s, false, "a param");
    if (st == SJ_OK) st = sjg_expect(p, '=', "before the param's values");
    if (st == SJ_OK) st = sjg_parse_typed_source(p, name, t, &s, &data);
    if (st == SJ_OK)
        st = sjg_located(p->ctx, sjg_at(p, nt),
                         sj_graph_param_typed(p->g, name, t, s.rank, s.dims, data, &v));
    if (st == SJ_OK) st = define(p, nt, name, v);
    sj_free(p->ctx, data);
    sj_free(p->ctx, name);
    return st;
}

static sj_status parse_output(sjg_parser *p) {
    p->pos++;
    const sjg_token *nt = sjg_cur(p);
    char *name;
    SJ_TRY(parse_name(p, "an output name", &name));
    sj_value v;
    sj_status st;
    if (sjg_is_punct(sjg_cur(p), '=')) {
        p->pos++;
        st = parse_expr(p, &v);
    } else {
        st = lookup(p, nt, name, &v);
    }
    if (st == SJ_OK) st = sjg_located(p->ctx, sjg_at(p, nt), sj_graph_output(p->g, v, name));
    sj_free(p->ctx, name);
    return st;
}

static sj_status parse_assignment(sjg_parser *p) {
    const sjg_token *nt = sjg_cur(p);
    char *name;
    SJ_TRY(parse_name(p, "a value name", &name));
    sj_value v;
    sj_status st = check_new_name(p, nt, name);
    if (st == SJ_OK) st = sjg_expect(p, '=', "after a value name (NAME = op(...))");
    if (st == SJ_OK) {
        const sjg_token *t = sjg_cur(p);
        if (!(t->kind == SJG_IDENT && sjg_is_punct(sjg_peek(p, 1), '(')))
            st = sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                             "expected an op call after '%s =', found %s (a value has one name; a "
                             "constant is declared with param)",
                             name, sjg_describe(p, t));
    }
    if (st == SJ_OK) st = parse_call(p, &v);
    if (st == SJ_OK)
        st = sjg_located(p->ctx, sjg_at(p, nt), sj_graph_set_name(p->g, v, name));
    if (st == SJ_OK) st = define(p, nt, name, v);
    sj_free(p->ctx, name);
    return st;
}

static sj_status parse_statement(sjg_parser *p) {
    const sjg_token *t = sjg_cur(p);
    if (sjg_is_punct(t, ';')) {
        p->pos++;
        return SJ_OK;
    }
    if (sjg_is_word(p, t, "input")) return parse_input(p);
    if (sjg_is_word(p, t, "param")) return parse_param(p);
    if (sjg_is_word(p, t, "output")) return parse_output(p);
    if (is_name_tok(t) && sjg_is_punct(sjg_peek(p, 1), '=')) return parse_assignment(p);
    if (t->kind == SJG_EOF)
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                           "expected '}' to close the graph, found end of file");
    return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                       "expected a statement (input, param, output or NAME = op(...)), found %s",
                       sjg_describe(p, t));
}

/* graph [NAME] [(SYM)] { statements } */
static sj_status parse_graph(sjg_parser *p) {
    const sjg_token *t = sjg_cur(p);
    if (!sjg_is_word(p, t, "graph"))
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                           "expected 'graph' at the start of a .sjg file, found %s",
                           sjg_describe(p, t));
    p->pos++;
    if (is_name_tok(sjg_cur(p))) {
        char *label; /* a label for the reader; the library keeps no graph name */
        SJ_TRY(parse_name(p, "the graph's name", &label));
        sj_free(p->ctx, label);
    }
    if (sjg_is_punct(sjg_cur(p), '(')) {
        p->pos++;
        if (!sjg_is_punct(sjg_cur(p), ')'))
            SJ_TRY(parse_name(p, "the symbolic dim's name", &p->sym));
        SJ_TRY(sjg_expect(p, ')', "after the symbolic dim's name"));
    }
    SJ_TRY(sjg_expect(p, '{', "to open the graph's body"));
    sj_status st = sj_graph_create(p->ctx, p->sym, &p->g);
    if (st != SJ_OK) return st;
    while (!sjg_is_punct(sjg_cur(p), '}')) SJ_TRY(parse_statement(p));
    p->pos++;
    t = sjg_cur(p);
    if (t->kind != SJG_EOF)
        return sjg_fail_at(p->ctx, sjg_at(p, t), SJ_E_PARSE,
                           "expected end of file after the graph's closing '}', found %s",
                           sjg_describe(p, t));
    return SJ_OK;
}

sj_status sj_sjg_parse(sj_ctx *ctx, const char *text, size_t len, const char *filename,
                       const char *base_dir, sj_graph **out) {
    if (!ctx || !out || (!text && len))
        return sj_fail(ctx, SJ_E_INVALID_ARG, "sj_sjg_parse: NULL argument");
    *out = NULL;
    sjg_parser p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.file = filename ? filename : "<sjg>";
    p.base_dir = base_dir;
    p.text = text ? text : "";
    sjg_names_init(&p.names, ctx);
    sj_status st = sjg_lex(ctx, p.file, p.text, len, &p.toks, &p.n_toks);
    if (st == SJ_OK) st = parse_graph(&p);
    if (st == SJ_OK) {
        *out = p.g;
        p.g = NULL;
    }
    sj_graph_destroy(p.g);
    sjg_names_free(&p.names);
    sj_free(ctx, p.defs);
    sj_free(ctx, p.sym);
    sj_free(ctx, p.toks);
    return st;
}

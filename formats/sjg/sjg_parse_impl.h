/* The .sjg parser's state and the helpers its two halves share: statements
 * and op calls (sjg_parse.c), param weight sources (sjg_source.c).
 * Not installed. */
#ifndef SJ_SJG_PARSE_IMPL_H
#define SJ_SJG_PARSE_IMPL_H

#include "formats/sjg/sjg_impl.h"

/* Generated weights (fill, random) above this many elements are refused as
 * a likely typo rather than allocated: 2^28 floats = 1 GiB. */
#define SJG_MAX_GENERATED_ELEMENTS ((int64_t)1 << 28)

/* Op calls nest by recursion (one C stack frame of ~1 KiB each); deeper
 * nesting than any real model is refused so a hostile file cannot overflow
 * the stack of a host thread, even a small one. */
#define SJG_MAX_NESTING 100

typedef struct sjg_def {
    sj_value value;
    int line, col;
} sjg_def;

typedef struct sjg_parser {
    sj_ctx *ctx;
    const char *file, *base_dir, *text;
    sjg_token *toks;
    int n_toks, pos;
    int depth; /* op calls open around the current token */
    sj_graph *g;
    char *sym; /* the symbolic dim's name; NULL when the graph has none */
    sjg_names names; /* value name -> index into defs */
    sjg_def *defs;
    int n_defs;
    size_t cap_defs;
    char desc[96]; /* scratch for describing a token in a message */
} sjg_parser;

/* A number as written: an optional '-' and a NUMBER token, or inf / nan. */
typedef struct sjg_number {
    const sjg_token *tok;
    bool neg;
} sjg_number;

/* One `key=value` argument; lists hold ints or the symbolic dim. */
typedef enum sjg_attr_kind { SJG_ATTR_NUMBER, SJG_ATTR_BOOL, SJG_ATTR_LIST, SJG_ATTR_WORD } sjg_attr_kind;

typedef struct sjg_kwarg {
    const sjg_token *key;
    sjg_attr_kind kind;
    sjg_number num;
    bool b;
    const sjg_token *word; /* SJG_ATTR_WORD */
    int n_items;
    int64_t items[SJ_MAX_RANK];
    uint32_t sym_mask; /* bit i: item i is the symbolic dim's name */
    bool used;
} sjg_kwarg;

#define SJG_MAX_KWARGS 8

static inline const sjg_token *sjg_cur(const sjg_parser *p) { return &p->toks[p->pos]; }
static inline const sjg_token *sjg_peek(const sjg_parser *p, int k) {
    int i = p->pos + k;
    return &p->toks[i < p->n_toks ? i : p->n_toks - 1];
}
static inline bool sjg_is_punct(const sjg_token *t, char c) {
    return t->kind == SJG_PUNCT && t->ch == c;
}
static inline sjg_where sjg_at(const sjg_parser *p, const sjg_token *t) {
    return (sjg_where){p->file, t->line, t->col};
}
bool sjg_is_word(const sjg_parser *p, const sjg_token *t, const char *word);
/* "'foo'", "number 12", "end of file", ... for "found ..." in messages. */
const char *sjg_describe(sjg_parser *p, const sjg_token *t);
sj_status sjg_expect(sjg_parser *p, char c, const char *context);

sj_status sjg_parse_number(sjg_parser *p, sjg_number *out, const char *context);
sj_status sjg_number_float(sjg_parser *p, const sjg_number *n, float *out);
sj_status sjg_number_int(sjg_parser *p, const sjg_number *n, int64_t *out);

/* Parses `key=value, ...` up to (not including) ')'. */
sj_status sjg_parse_kwargs(sjg_parser *p, sjg_kwarg *kw, int *n_kw, const char *context);

/* After '=' of `param NAME: shape = ...`: fills *data (sj_alloc'ed, numel
 * floats) from an inline list, fill(v), random(seed=, scale=) or npy("f"). */
sj_status sjg_parse_source(sjg_parser *p, const char *param, const sj_shape *shape, float **data);
/* The same for a param of any element type (int64/int32/bool take inline
 * integers, fill(v) or npy of that dtype). */
sj_status sjg_parse_typed_source(sjg_parser *p, const char *param, sj_dtype dtype,
                                 const sj_shape *shape, void **data);

#endif

/* The .sjg text format's private pieces: tokens, the lexer, a name table
 * shared by parser and printer, and the spellings both must agree on.
 * Grammar: docs/sjg.md. Not installed. */
#ifndef SJ_SJG_IMPL_H
#define SJ_SJG_IMPL_H

#include "ir/graph_impl.h"
#include "core/name_index.h"

#include <stdarg.h>

typedef enum sjg_tok_kind {
    SJG_EOF,
    SJG_IDENT,  /* [A-Za-z_][A-Za-z0-9_.]* */
    SJG_STRING, /* "..." with \" \\ \n \t \xHH escapes */
    SJG_NUMBER, /* unsigned decimal: 12, 0.5, 1e-5, .25 */
    SJG_PUNCT   /* one of ( ) [ ] { } , : = ; - */
} sjg_tok_kind;

typedef struct sjg_token {
    sjg_tok_kind kind;
    uint32_t start, len; /* byte range in the text (a string token includes its quotes) */
    int line, col;       /* 1-based; col counts bytes */
    char ch;             /* SJG_PUNCT: the character */
    bool is_int;         /* SJG_NUMBER: digits only */
} sjg_token;

/* Where a message points: "file:line:col: ". */
typedef struct sjg_where {
    const char *file;
    int line, col;
} sjg_where;

/* Formats "<file>:<line>:<col>: <message>" as the context's error. */
sj_status sjg_fail_at(sj_ctx *ctx, sjg_where w, sj_status st, const char *fmt, ...)
    SJ_PRINTF(4, 5);
/* Returns st; on failure the message already set (a graph builder's,
 * mostly) gains "file:line:col: " in front. */
sj_status sjg_located(sj_ctx *ctx, sjg_where w, sj_status st);

/* Splits the whole text into tokens (ending with one SJG_EOF); comments
 * (# to end of line) and whitespace are dropped. *toks is sj_alloc'ed. */
sj_status sjg_lex(sj_ctx *ctx, const char *file, const char *text, size_t len, sjg_token **toks,
                  int *n_toks);

/* Decodes a string token's contents into a new sj_alloc'ed string. Fails on
 * an escape that makes a NUL byte (names and paths are C strings). */
sj_status sjg_string_value(sj_ctx *ctx, const char *file, const char *text, const sjg_token *t,
                           char **out);

/* Words the grammar gives a meaning; a value with such a name is printed
 * quoted. */
bool sjg_is_reserved(const char *word);
/* True when `s` can be written bare (an identifier that is not reserved). */
bool sjg_is_plain_name(const char *s);

/* String -> int map with owned keys: value names while parsing, printed
 * names while printing. The pairs live here (id i = the i-th put); core's
 * name index finds them. Must not be copied after init (the index points
 * back at it). */
typedef struct sjg_name {
    char *key;
    int val;
} sjg_name;

typedef struct sjg_names {
    sj_ctx *ctx;
    sjg_name *items;
    size_t count, cap;
    sj_name_index ix;
} sjg_names;

void sjg_names_init(sjg_names *m, sj_ctx *ctx);
void sjg_names_free(sjg_names *m);
/* Returns the value stored for key, or -1. */
int sjg_names_get(const sjg_names *m, const char *key);
/* Stores key -> val (key copied). SJ_E_NOMEM on failure. The key must not be present. */
sj_status sjg_names_put(sjg_names *m, const char *key, int val);

#endif

/* .sjg lexer: text -> tokens with line:col, and the string-literal decoder. */
#include "formats/sjg/sjg_impl.h"
#include "core/array.h"

#include <stdio.h>
#include <string.h>

static const char *const reserved_words[] = {"graph", "input", "param", "output", "none",
                                             "true",  "false", "inf",   "nan"};

bool sjg_is_reserved(const char *word) {
    for (size_t i = 0; i < sizeof reserved_words / sizeof reserved_words[0]; i++)
        if (!strcmp(word, reserved_words[i])) return true;
    return false;
}

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool ident_char(char c) { return ident_start(c) || is_digit(c) || c == '.'; }

bool sjg_is_plain_name(const char *s) {
    if (!ident_start(s[0])) return false;
    for (const char *p = s + 1; *p; p++)
        if (!ident_char(*p)) return false;
    return !sjg_is_reserved(s);
}

sj_status sjg_fail_at(sj_ctx *ctx, sjg_where w, sj_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sj_fail(ctx, st, "%s:%d:%d: %s", w.file, w.line, w.col, msg);
}

sj_status sjg_located(sj_ctx *ctx, sjg_where w, sj_status st) {
    if (st != SJ_OK) sj__error_prefix(ctx, "%s:%d:%d", w.file, w.line, w.col);
    return st;
}

typedef struct lexer {
    sj_ctx *ctx;
    const char *file, *text;
    size_t len, pos;
    int line;
    size_t line_start;
    sjg_token *toks;
    int n;
    size_t cap;
} lexer;

static sj_status push(lexer *lx, sjg_token t) {
    if (lx->n == INT32_MAX ||
        !sj__array_reserve(lx->ctx, (void **)&lx->toks, &lx->cap, (size_t)lx->n + 1, sizeof t))
        return sj_fail(lx->ctx, SJ_E_NOMEM, "%s: out of memory while reading", lx->file);
    lx->toks[lx->n++] = t;
    return SJ_OK;
}

static sjg_where here(const lexer *lx, size_t pos) {
    return (sjg_where){lx->file, lx->line, (int)(pos - lx->line_start) + 1};
}

static sj_status lex_number(lexer *lx, sjg_token *t) {
    const char *s = lx->text;
    size_t p = lx->pos;
    bool digits = false;
    t->is_int = true;
    while (p < lx->len && is_digit(s[p])) p++, digits = true;
    if (p < lx->len && s[p] == '.') {
        t->is_int = false;
        p++;
        while (p < lx->len && is_digit(s[p])) p++, digits = true;
    }
    if (!digits) return sjg_fail_at(lx->ctx, here(lx, lx->pos), SJ_E_PARSE, "expected a digit after '.'");
    if (p < lx->len && (s[p] == 'e' || s[p] == 'E')) {
        t->is_int = false;
        p++;
        if (p < lx->len && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= lx->len || !is_digit(s[p]))
            return sjg_fail_at(lx->ctx, here(lx, p), SJ_E_PARSE, "expected the exponent's digits");
        while (p < lx->len && is_digit(s[p])) p++;
    }
    if (p < lx->len && ident_char(s[p]))
        return sjg_fail_at(lx->ctx, here(lx, p), SJ_E_PARSE,
                           "unexpected '%c' after a number (names cannot start with a digit)", s[p]);
    t->kind = SJG_NUMBER;
    t->len = (uint32_t)(p - lx->pos);
    lx->pos = p;
    return SJ_OK;
}

static sj_status lex_string(lexer *lx, sjg_token *t) {
    size_t p = lx->pos + 1;
    while (p < lx->len && lx->text[p] != '"') {
        if (lx->text[p] == '\n') break;
        if (lx->text[p] == '\\' && p + 1 < lx->len && lx->text[p + 1] != '\n') p++;
        p++;
    }
    if (p >= lx->len || lx->text[p] != '"')
        return sjg_fail_at(lx->ctx, here(lx, lx->pos), SJ_E_PARSE,
                           "unterminated string (a string ends with '\"' on the same line)");
    t->kind = SJG_STRING;
    t->len = (uint32_t)(p + 1 - lx->pos);
    lx->pos = p + 1;
    return SJ_OK;
}

sj_status sjg_lex(sj_ctx *ctx, const char *file, const char *text, size_t len, sjg_token **toks,
                  int *n_toks) {
    *toks = NULL;
    *n_toks = 0;
    /* Token offsets are 32-bit; a graph text over 4 GiB is not a text. */
    if (len >= UINT32_MAX) return sj_fail(ctx, SJ_E_PARSE, "%s: text is too large (%zu bytes)", file, len);
    lexer lx = {ctx, file, text, len, 0, 1, 0, NULL, 0, 0};
    sj_status st = SJ_OK;
    for (;;) {
        while (lx.pos < len) {
            char c = text[lx.pos];
            if (c == '\n') {
                lx.pos++;
                lx.line++;
                lx.line_start = lx.pos;
            } else if (c == ' ' || c == '\t' || c == '\r') {
                lx.pos++;
            } else if (c == '#') {
                while (lx.pos < len && text[lx.pos] != '\n') lx.pos++;
            } else {
                break;
            }
        }
        sjg_token t = {.start = (uint32_t)lx.pos, .line = lx.line,
                       .col = (int)(lx.pos - lx.line_start) + 1};
        if (lx.pos >= len) {
            t.kind = SJG_EOF;
            st = push(&lx, t);
            break;
        }
        char c = text[lx.pos];
        if (ident_start(c)) {
            size_t p = lx.pos;
            while (p < len && ident_char(text[p])) p++;
            t.kind = SJG_IDENT;
            t.len = (uint32_t)(p - lx.pos);
            lx.pos = p;
        } else if (is_digit(c) || c == '.') {
            st = lex_number(&lx, &t);
        } else if (c == '"') {
            st = lex_string(&lx, &t);
        } else if (c && strchr("()[]{},:=;-*+", c)) { /* strchr finds a NUL too */
            t.kind = SJG_PUNCT;
            t.ch = c;
            t.len = 1;
            lx.pos++;
        } else if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) {
            st = sjg_fail_at(ctx, here(&lx, lx.pos), SJ_E_PARSE, "unexpected character '%c'", c);
        } else {
            st = sjg_fail_at(ctx, here(&lx, lx.pos), SJ_E_PARSE,
                             "unexpected byte 0x%02x (outside strings and comments only ASCII is "
                             "allowed)",
                             (unsigned char)c);
        }
        if (st != SJ_OK) break;
        st = push(&lx, t);
        if (st != SJ_OK) break;
    }
    if (st != SJ_OK) {
        sj_free(ctx, lx.toks);
        return st;
    }
    *toks = lx.toks;
    *n_toks = lx.n;
    return SJ_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

sj_status sjg_string_value(sj_ctx *ctx, const char *file, const char *text, const sjg_token *t,
                           char **out) {
    *out = NULL;
    const char *s = text + t->start + 1;
    size_t n = t->len - 2;
    char *buf = sj_alloc(ctx, n + 1);
    if (!buf) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", file);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\') {
            buf[o++] = c;
            continue;
        }
        sjg_where w = {file, t->line, t->col + 1 + (int)i};
        char e = s[++i];
        int hi, lo;
        switch (e) {
        case '"': buf[o++] = '"'; break;
        case '\\': buf[o++] = '\\'; break;
        case 'n': buf[o++] = '\n'; break;
        case 't': buf[o++] = '\t'; break;
        case 'x':
            if (i + 2 >= n || (hi = hex_digit(s[i + 1])) < 0 || (lo = hex_digit(s[i + 2])) < 0) {
                sj_free(ctx, buf);
                return sjg_fail_at(ctx, w, SJ_E_PARSE, "expected two hex digits after \\x");
            }
            if (hi == 0 && lo == 0) {
                sj_free(ctx, buf);
                return sjg_fail_at(ctx, w, SJ_E_PARSE, "\\x00 is not allowed in a string");
            }
            buf[o++] = (char)(hi * 16 + lo);
            i += 2;
            break;
        default:
            sj_free(ctx, buf);
            return sjg_fail_at(ctx, w, SJ_E_PARSE,
                               "unknown escape '\\%c' (known: \\\" \\\\ \\n \\t \\xHH)", e);
        }
    }
    buf[o] = '\0';
    *out = buf;
    return SJ_OK;
}

/* .npy files (format versions 1.0-3.0): float32, int64, int32 and bool,
 * little-endian, C order.
 * The header is parsed strictly: a Python dict literal with exactly the keys
 * descr, fortran_order and shape, and a payload whose size the shape fully
 * explains. Anything else is refused with the file and the field named. */
#include "ir/graph_impl.h"
#include "shapejit/tensor.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads '<f4' payloads in place and assumes a little-endian host"
#endif

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_PREAMBLE_V1 10 /* magic, 2 version bytes, uint16 header length */
#define NPY_PREAMBLE_V2 12 /* ... uint32 header length */
/* No real writer produces a header this long for a rank <= 4 float array;
 * the cap keeps a lying length field from making us allocate gigabytes. */
#define NPY_MAX_HEADER_LEN (1u << 20)

typedef struct npy_header {
    size_t data_offset; /* bytes before the payload */
    int rank;
    int64_t dims[SJ_MAX_RANK];
    int64_t payload_bytes;
    sj_dtype dtype;
} npy_header;

/* The descr strings shapejit reads and writes, by sj_dtype. numpy writes
 * '|b1' for bool and '<i8' / '<i4' for the little-endian ints. */
static const char *const npy_descr[SJ_DTYPE_COUNT_] = {
    [SJ_F32] = "<f4", [SJ_I64] = "<i8", [SJ_I32] = "<i4", [SJ_BOOL] = "|b1"};

typedef struct dict_cursor {
    const char *p, *end;
} dict_cursor;

static void skip_space(dict_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(dict_cursor *c, char ch) {
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A Python string literal in single or double quotes, without escapes
 * (none of the values we accept needs one). */
static bool read_str(dict_cursor *c, char *buf, size_t cap) {
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap) return false;
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    buf[n] = '\0';
    return true;
}

static bool read_word(dict_cursor *c, const char *word) {
    skip_space(c);
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return false;
    const char *after = c->p + n;
    if (after < c->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                           (*after >= '0' && *after <= '9') || *after == '_'))
        return false;
    c->p = after;
    return true;
}

/* "(3, 4)", "(5,)", "()"; Python 2 writers may append L to each int. */
static sj_status read_shape(sj_ctx *ctx, const char *what, dict_cursor *c, npy_header *h) {
    if (!eat(c, '(')) return sj_fail(ctx, SJ_E_PARSE, "%s: header field 'shape' is not a tuple", what);
    h->rank = 0;
    bool trailing_comma = false;
    for (;;) {
        if (eat(c, ')')) break;
        skip_space(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return sj_fail(ctx, SJ_E_PARSE,
                           "%s: header field 'shape' holds something other than a "
                           "non-negative integer",
                           what);
        int64_t d = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (sj_mul_overflow_i64(d, 10, &d) || __builtin_add_overflow(d, *c->p - '0', &d) ||
                d > SJ_MAX_ELEMENTS)
                return sj_fail(ctx, SJ_E_PARSE, "%s: header field 'shape' has a dim over %lld", what,
                               (long long)SJ_MAX_ELEMENTS);
            c->p++;
        }
        if (c->p < c->end && *c->p == 'L') c->p++;
        if (h->rank == SJ_MAX_RANK)
            return sj_fail(ctx, SJ_E_PARSE, "%s: header field 'shape' has more than %d dims", what,
                           SJ_MAX_RANK);
        h->dims[h->rank++] = d;
        trailing_comma = false;
        if (eat(c, ')')) break;
        if (!eat(c, ','))
            return sj_fail(ctx, SJ_E_PARSE, "%s: header field 'shape': expected ',' or ')'", what);
        trailing_comma = true;
    }
    /* In Python "(5)" is the int 5, not a tuple; numpy refuses it too. */
    if (h->rank == 1 && !trailing_comma)
        return sj_fail(ctx, SJ_E_PARSE,
                       "%s: header field 'shape' is not a tuple (one dim is written (5,))", what);
    return SJ_OK;
}

static sj_status parse_dict(sj_ctx *ctx, const char *what, const char *text, size_t len,
                            npy_header *h) {
    dict_cursor c = {text, text + len};
    bool seen_descr = false, seen_order = false, seen_shape = false;
    if (!eat(&c, '{')) return sj_fail(ctx, SJ_E_PARSE, "%s: header is not a dict literal", what);
    for (;;) {
        if (eat(&c, '}')) break;
        char key[32];
        if (!read_str(&c, key, sizeof key))
            return sj_fail(ctx, SJ_E_PARSE, "%s: header: expected a quoted key", what);
        if (!eat(&c, ':'))
            return sj_fail(ctx, SJ_E_PARSE, "%s: header: expected ':' after key '%s'", what, key);
        if (!strcmp(key, "descr")) {
            char descr[32];
            if (seen_descr) return sj_fail(ctx, SJ_E_PARSE, "%s: header: key 'descr' repeated", what);
            seen_descr = true;
            if (!read_str(&c, descr, sizeof descr))
                return sj_fail(ctx, SJ_E_PARSE, "%s: header field 'descr' is not a dtype string",
                               what);
            int t = 0;
            while (t < SJ_DTYPE_COUNT_ && strcmp(descr, npy_descr[t]) != 0) t++;
            if (t == SJ_DTYPE_COUNT_)
                return sj_fail(ctx, SJ_E_PARSE,
                               "%s: header field 'descr' is '%s'; supported are '<f4' (float32), "
                               "'<i8' (int64), '<i4' (int32) and '|b1' (bool), little-endian",
                               what, descr);
            h->dtype = (sj_dtype)t;
        } else if (!strcmp(key, "fortran_order")) {
            if (seen_order)
                return sj_fail(ctx, SJ_E_PARSE, "%s: header: key 'fortran_order' repeated", what);
            seen_order = true;
            if (read_word(&c, "True"))
                return sj_fail(ctx, SJ_E_PARSE,
                               "%s: header field 'fortran_order' is True; only C order is "
                               "supported",
                               what);
            if (!read_word(&c, "False"))
                return sj_fail(ctx, SJ_E_PARSE,
                               "%s: header field 'fortran_order' is neither True nor False", what);
        } else if (!strcmp(key, "shape")) {
            if (seen_shape) return sj_fail(ctx, SJ_E_PARSE, "%s: header: key 'shape' repeated", what);
            seen_shape = true;
            SJ_TRY(read_shape(ctx, what, &c, h));
        } else {
            return sj_fail(ctx, SJ_E_PARSE, "%s: header has unknown key '%s'", what, key);
        }
        if (eat(&c, '}')) break;
        if (!eat(&c, ','))
            return sj_fail(ctx, SJ_E_PARSE, "%s: header: expected ',' or '}' after field '%s'", what,
                           key);
    }
    skip_space(&c);
    if (c.p != c.end)
        return sj_fail(ctx, SJ_E_PARSE, "%s: header has bytes after the dict", what);
    if (!seen_descr || !seen_order || !seen_shape)
        return sj_fail(ctx, SJ_E_PARSE, "%s: header lacks field '%s'", what,
                       !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
    int64_t numel = 1;
    for (int i = 0; i < h->rank; i++)
        if (sj_mul_overflow_i64(numel, h->dims[i], &numel) || numel > SJ_MAX_ELEMENTS)
            return sj_fail(ctx, SJ_E_PARSE, "%s: header field 'shape' has over %lld elements", what,
                           (long long)SJ_MAX_ELEMENTS);
    h->payload_bytes = numel * (int64_t)sj_dtype_size(h->dtype);
    return SJ_OK;
}

/* Reads the preamble from the first `avail` bytes; *need is set to the
 * bytes the full header occupies (so a file reader knows how much to read). */
static sj_status parse_preamble(sj_ctx *ctx, const char *what, const uint8_t *b, size_t avail,
                                size_t *need) {
    if (avail < NPY_PREAMBLE_V1 || memcmp(b, NPY_MAGIC, NPY_MAGIC_LEN) != 0)
        return sj_fail(ctx, SJ_E_PARSE, "%s: not an .npy file (magic \\x93NUMPY missing)", what);
    uint8_t major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0)
        return sj_fail(ctx, SJ_E_PARSE, "%s: version %u.%u is not supported (1.0-3.0 are)", what,
                       major, minor);
    size_t pre = major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    if (avail < pre) return sj_fail(ctx, SJ_E_PARSE, "%s: truncated in the preamble", what);
    uint32_t hlen = major == 1 ? (uint32_t)b[8] | (uint32_t)b[9] << 8
                               : (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 |
                                     (uint32_t)b[11] << 24;
    if (hlen > NPY_MAX_HEADER_LEN)
        return sj_fail(ctx, SJ_E_PARSE, "%s: header length %u is implausible", what, hlen);
    *need = pre + hlen;
    return SJ_OK;
}

static sj_status parse_header(sj_ctx *ctx, const char *what, const uint8_t *b, size_t avail,
                              npy_header *h) {
    size_t need = 0;
    SJ_TRY(parse_preamble(ctx, what, b, avail, &need));
    if (avail < need) return sj_fail(ctx, SJ_E_PARSE, "%s: truncated in the header", what);
    size_t pre = b[6] == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    const char *text = (const char *)b + pre;
    size_t len = need - pre;
    if (len == 0 || text[len - 1] != '\n')
        return sj_fail(ctx, SJ_E_PARSE, "%s: header does not end in a newline", what);
    if (memchr(text, '\0', len))
        return sj_fail(ctx, SJ_E_PARSE, "%s: header contains a NUL byte", what);
    memset(h, 0, sizeof *h);
    SJ_TRY(parse_dict(ctx, what, text, len, h));
    h->data_offset = need;
    return SJ_OK;
}

static sj_status payload_size_check(sj_ctx *ctx, const char *what, const npy_header *h,
                                    uint64_t have) {
    if (have == (uint64_t)h->payload_bytes) return SJ_OK;
    char shape[96];
    sj_shape s = {.rank = h->rank};
    memcpy(s.dims, h->dims, sizeof s.dims);
    sj_shape_format(&s, NULL, shape, sizeof shape);
    return sj_fail(ctx, SJ_E_PARSE, "%s: payload is %llu bytes but header field 'shape' %s needs %lld%s",
                   what, (unsigned long long)have, shape, (long long)h->payload_bytes,
                   have < (uint64_t)h->payload_bytes ? " (truncated file)" : " (header lies)");
}

/* A bool payload holds only 0 and 1 (numpy never writes anything else):
 * the kernels test the byte as it is. */
static sj_status check_bools(sj_ctx *ctx, const char *what, sj_tensor *t) {
    if (t->dtype != SJ_BOOL) return SJ_OK;
    int64_t n = sj_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (t->b8[i] > 1) {
            unsigned bad = t->b8[i];
            sj_tensor_free(ctx, t);
            return sj_fail(ctx, SJ_E_PARSE, "%s: bool element %lld is %u, not 0 or 1", what,
                           (long long)i, bad);
        }
    return SJ_OK;
}

sj_status sj_npy_read_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *what,
                          sj_tensor *out) {
    if (!ctx || !out || (!bytes && len)) return sj_fail(ctx, SJ_E_INVALID_ARG, "sj_npy_read_mem: NULL argument");
    memset(out, 0, sizeof *out);
    if (!what) what = "<npy bytes>";
    npy_header h;
    SJ_TRY(parse_header(ctx, what, bytes, len, &h));
    SJ_TRY(payload_size_check(ctx, what, &h, len - h.data_offset));
    SJ_TRY(sj_tensor_alloc_typed(ctx, h.dtype, h.rank, h.dims, out));
    memcpy(out->bytes, (const uint8_t *)bytes + h.data_offset, (size_t)h.payload_bytes);
    return check_bools(ctx, what, out);
}

sj_status sj_npy_read(sj_ctx *ctx, const char *path, sj_tensor *out) {
    if (!ctx || !path || !out) return sj_fail(ctx, SJ_E_INVALID_ARG, "sj_npy_read: NULL argument");
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return sj_fail(ctx, SJ_E_IO, "%s: cannot open: %s", path, strerror(errno));
    sj_status st = SJ_OK;
    uint8_t *head = NULL;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = sj_fail(ctx, SJ_E_IO, "%s: not a regular file", path);
        goto done;
    }
    uint8_t pre[NPY_PREAMBLE_V2];
    size_t got = fread(pre, 1, sizeof pre, f);
    size_t need = 0;
    st = parse_preamble(ctx, path, pre, got, &need);
    if (st != SJ_OK) goto done;
    if ((uint64_t)sb.st_size < need) {
        st = sj_fail(ctx, SJ_E_PARSE, "%s: truncated in the header", path);
        goto done;
    }
    head = sj_alloc(ctx, need);
    if (!head) {
        st = sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory reading the header", path);
        goto done;
    }
    memcpy(head, pre, got < need ? got : need);
    if (got < need && fread(head + got, 1, need - got, f) != need - got) {
        st = sj_fail(ctx, SJ_E_IO, "%s: read failed in the header", path);
        goto done;
    }
    npy_header h;
    st = parse_header(ctx, path, head, need, &h);
    if (st != SJ_OK) goto done;
    st = payload_size_check(ctx, path, &h, (uint64_t)sb.st_size - need);
    if (st != SJ_OK) goto done;
    st = sj_tensor_alloc_typed(ctx, h.dtype, h.rank, h.dims, out);
    if (st != SJ_OK) goto done;
    if (fseek(f, (long)need, SEEK_SET) != 0 ||
        fread(out->bytes, 1, (size_t)h.payload_bytes, f) != (size_t)h.payload_bytes) {
        sj_tensor_free(ctx, out);
        st = sj_fail(ctx, SJ_E_IO, "%s: read failed in the payload (file changed while reading?)",
                     path);
    } else {
        st = check_bools(ctx, path, out);
    }
done:
    sj_free(ctx, head);
    fclose(f);
    return st;
}

/* Header padded with spaces so the payload starts 64-byte aligned, as numpy
 * itself writes it. Returns the total header bytes (preamble included). */
static size_t format_header(const sj_tensor *t, char *buf, size_t cap) {
    char shape[128];
    int n = 0;
    n += snprintf(shape + n, sizeof shape - (size_t)n, "(");
    for (int i = 0; i < t->rank; i++)
        n += snprintf(shape + n, sizeof shape - (size_t)n, "%lld%s", (long long)t->dims[i],
                      t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
    snprintf(shape + n, sizeof shape - (size_t)n, ")");
    char dict[192];
    int dlen = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                        npy_descr[t->dtype], shape);
    size_t total = NPY_PREAMBLE_V1 + (size_t)dlen + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap) return 0;
    size_t hlen = total - NPY_PREAMBLE_V1;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + NPY_PREAMBLE_V1, dict, (size_t)dlen);
    memset(buf + NPY_PREAMBLE_V1 + dlen, ' ', hlen - (size_t)dlen - 1);
    buf[total - 1] = '\n';
    return total;
}

sj_status sj_npy_write(sj_ctx *ctx, const char *path, const sj_tensor *t) {
    if (!ctx || !path || !t) return sj_fail(ctx, SJ_E_INVALID_ARG, "sj_npy_write: NULL argument");
    if (t->rank < 0 || t->rank > SJ_MAX_RANK)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: tensor rank %d is outside 0..%d", path, t->rank,
                       SJ_MAX_RANK);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: tensor dim %d is negative (%lld)", path, i,
                           (long long)t->dims[i]);
    int64_t numel = sj_tensor_numel(t);
    if (numel < 0 || numel > SJ_MAX_ELEMENTS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: tensor has too many elements", path);
    if (numel > 0 && !t->data)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: tensor has no data", path);
    if ((int)t->dtype < 0 || t->dtype >= SJ_DTYPE_COUNT_)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: tensor has element type %d", path, (int)t->dtype);
    size_t es = sj_dtype_size(t->dtype);
    char header[256];
    size_t hlen = format_header(t, header, sizeof header);
    if (!hlen) return sj_fail(ctx, SJ_E_INTERNAL, "%s: npy header does not fit", path);

    size_t plen = strlen(path);
    char *tmp = sj_alloc(ctx, plen + 32);
    if (!tmp) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        sj_status st = sj_fail(ctx, SJ_E_IO, "%s: cannot create: %s", tmp, strerror(errno));
        sj_free(ctx, tmp);
        return st;
    }
    bool ok = fwrite(header, 1, hlen, f) == hlen &&
              (numel == 0 || fwrite(t->bytes, es, (size_t)numel, f) == (size_t)numel) &&
              fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    sj_status st = SJ_OK;
    if (!ok) {
        st = sj_fail(ctx, SJ_E_IO, "%s: write failed: %s", tmp, strerror(err));
    } else if (rename(tmp, path) != 0) {
        st = sj_fail(ctx, SJ_E_IO, "%s: cannot rename %s into place: %s", path, tmp,
                     strerror(errno));
    }
    if (st != SJ_OK) unlink(tmp);
    sj_free(ctx, tmp);
    return st;
}

/* Code bundles (code_bundle.h). */
#include "plan/code_bundle.h"

#include <string.h>

static const char magic[8] = {'S', 'J', 'O', 'B', 'J', 'S', '0', '1'};
enum { HEAD_BYTES = 12, LEN_BYTES = 8 };

bool sj__code_bundle_is(const void *bytes, size_t len) {
    return bytes && len >= sizeof magic && memcmp(bytes, magic, sizeof magic) == 0;
}

static void put_le(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

sj_status sj__code_bundle_pack(sj_ctx *ctx, const uint8_t *const *objs, const size_t *lens, int n,
                              uint8_t **out, size_t *len) {
    *out = NULL;
    *len = 0;
    if (n < 1 || n > SJ_CODE_BUNDLE_MAX)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "code bundle: %d objects (1..%d)", n, SJ_CODE_BUNDLE_MAX);
    size_t total = HEAD_BYTES;
    for (int i = 0; i < n; i++) {
        if (!objs[i] || lens[i] == 0)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "code bundle: object %d is empty", i);
        total += LEN_BYTES + lens[i];
    }
    uint8_t *b = sj_alloc(ctx, total);
    if (!b) return sj_fail(ctx, SJ_E_NOMEM, "code bundle: out of memory for %zu bytes", total);
    memcpy(b, magic, sizeof magic);
    put_le(b + sizeof magic, (uint64_t)n, 4);
    size_t pos = HEAD_BYTES;
    for (int i = 0; i < n; i++) {
        put_le(b + pos, lens[i], LEN_BYTES);
        memcpy(b + pos + LEN_BYTES, objs[i], lens[i]);
        pos += LEN_BYTES + lens[i];
    }
    *out = b;
    *len = total;
    return SJ_OK;
}

sj_status sj__code_bundle_parse(sj_ctx *ctx, const void *bytes, size_t len, sj_code_piece **pieces,
                               int *n) {
    *pieces = NULL;
    *n = 0;
    const uint8_t *p = bytes;
    if (!sj__code_bundle_is(bytes, len) || len < HEAD_BYTES)
        return sj_fail(ctx, SJ_E_CORRUPT, "code bundle: %zu bytes without a bundle header", len);
    uint64_t count = get_le(p + sizeof magic, 4);
    if (count < 1 || count > SJ_CODE_BUNDLE_MAX)
        return sj_fail(ctx, SJ_E_CORRUPT, "code bundle: %llu objects (1..%d)", (unsigned long long)count,
                       SJ_CODE_BUNDLE_MAX);
    sj_code_piece *out = sj_alloc(ctx, (size_t)count * sizeof *out);
    if (!out) return sj_fail(ctx, SJ_E_NOMEM, "code bundle: out of memory");
    size_t pos = HEAD_BYTES;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t n_obj = len - pos >= LEN_BYTES ? get_le(p + pos, LEN_BYTES) : 0;
        if (len - pos < LEN_BYTES || n_obj == 0 || n_obj > len - pos - LEN_BYTES) {
            sj_free(ctx, out);
            return sj_fail(ctx, SJ_E_CORRUPT,
                           "code bundle: object %llu of %llu at byte %zu: length %llu, %zu bytes remain",
                           (unsigned long long)i, (unsigned long long)count, pos,
                           (unsigned long long)n_obj, len - pos);
        }
        out[i] = (sj_code_piece){pos + LEN_BYTES, (size_t)n_obj};
        pos += LEN_BYTES + (size_t)n_obj;
    }
    if (pos != len) {
        sj_free(ctx, out);
        return sj_fail(ctx, SJ_E_CORRUPT, "code bundle: %zu bytes follow the last of %llu objects",
                       len - pos, (unsigned long long)count);
    }
    *pieces = out;
    *n = (int)count;
    return SJ_OK;
}

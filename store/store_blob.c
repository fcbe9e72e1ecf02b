/* What a row's blob is: a zstd frame (checksum and content size on) and a
 * BLAKE3 digest binding the raw bytes to the row's key, so a blob moved to
 * another key's row fails the check even with its own digest beside it.
 * A part's blob is the same kind of frame, its digest bound to the part's
 * key (store_parts.c). A row's frame may be compressed against a base, a
 * raw-content dictionary (store_base.c). */
#include "store/store_impl.h"

#include <llvm-c/blake3.h>
#include <stdio.h>
#include <string.h>

const char *sj__store_str(const char *s) { return s ? s : ""; }

sj_status sj__store_key_check(sj_ctx *ctx, const sj_store_key *k) {
    const char *names[] = {"target triple", "target cpu", "target features", "shapejit version",
                           "compiler version"};
    const char *vals[] = {k->target_triple, k->target_cpu, k->target_features, k->shapejit_version,
                          k->compiler_version};
    for (int i = 0; i < 5; i++)
        if (strlen(sj__store_str(vals[i])) >= SJ_STORE_FIELD_MAX)
            return sj_fail(ctx, SJ_E_INVALID_ARG, "store key: %s is longer than %d bytes", names[i],
                           SJ_STORE_FIELD_MAX - 1);
    if (k->extent < 1) return sj_fail(ctx, SJ_E_INVALID_ARG, "store key: extent %lld must be >= 1", (long long)k->extent);
    return SJ_OK;
}

static void put_u64(llvm_blake3_hasher *h, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    llvm_blake3_hasher_update(h, b, 8);
}

static void put_str(llvm_blake3_hasher *h, const char *s) {
    s = sj__store_str(s);
    size_t n = strlen(s);
    put_u64(h, n);
    llvm_blake3_hasher_update(h, s, n);
}

void sj__store_key_digest(const sj_store_key *k, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, "shapejit store key 1", 20);
    llvm_blake3_hasher_update(&h, k->graph_hash, 32);
    put_u64(&h, (uint64_t)k->extent);
    llvm_blake3_hasher_update(&h, k->options_hash, 32);
    put_str(&h, k->target_triple);
    put_str(&h, k->target_cpu);
    put_str(&h, k->target_features);
    put_u64(&h, k->artifact_version);
    put_str(&h, k->shapejit_version);
    put_str(&h, k->compiler_version);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

void sj__store_content_digest(const uint8_t name[32], const void *raw, size_t len,
                             uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, name, 32);
    llvm_blake3_hasher_update(&h, raw, len);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

sj_status sj__store_compress(sj_ctx *ctx, int level, const void *dict, size_t dict_len, const void *raw,
                            size_t len, void **frame, size_t *frame_len) {
    *frame = NULL;
    size_t cap = ZSTD_compressBound(len);
    void *dst = sj_alloc(ctx, cap);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    if (!dst || !cc) {
        sj_free(ctx, dst);
        ZSTD_freeCCtx(cc);
        return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory compressing %zu bytes", len);
    }
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
    /* Loaded as a dictionary rather than referenced as a prefix: at the
     * store's fast level the rows of a BERT ladder came out 7% smaller.
     * Raw content whatever its first bytes are, as the decoder's prefix. */
    size_t n = dict_len ? ZSTD_CCtx_loadDictionary_advanced(cc, dict, dict_len, ZSTD_dlm_byRef, ZSTD_dct_rawContent)
                        : 0;
    if (!ZSTD_isError(n)) n = ZSTD_compress2(cc, dst, cap, raw, len);
    ZSTD_freeCCtx(cc);
    if (ZSTD_isError(n)) {
        sj_free(ctx, dst);
        return sj_fail(ctx, SJ_E_INTERNAL, "store: zstd compression failed: %s", ZSTD_getErrorName(n));
    }
    *frame = dst;
    *frame_len = n;
    return SJ_OK;
}

sj_status sj__store_inflate(ZSTD_DCtx *dctx, int64_t cap, const void *dict, size_t dict_len, const void *frame,
                           size_t frame_len, int64_t raw_size, void *dst, char *why, size_t why_len) {
    ZSTD_frameHeader fh;
    if (!frame || frame_len == 0) {
        snprintf(why, why_len, "empty blob");
        return SJ_E_CORRUPT;
    }
    if (raw_size < 0 || raw_size > cap) {
        snprintf(why, why_len, "declared size %lld is outside [0, %lld]", (long long)raw_size, (long long)cap);
        return SJ_E_CORRUPT;
    }
    if (ZSTD_getFrameHeader(&fh, frame, frame_len) != 0 || fh.frameType != ZSTD_frame) {
        snprintf(why, why_len, "blob is not a complete zstd frame header");
        return SJ_E_CORRUPT;
    }
    if (!fh.checksumFlag) {
        snprintf(why, why_len, "zstd frame has no content checksum");
        return SJ_E_CORRUPT;
    }
    if (fh.frameContentSize != (unsigned long long)raw_size) {
        snprintf(why, why_len, "zstd frame claims %llu bytes, the row declares %lld",
                 fh.frameContentSize, (long long)raw_size);
        return SJ_E_CORRUPT;
    }
    size_t whole = ZSTD_findFrameCompressedSize(frame, frame_len);
    if (ZSTD_isError(whole) || whole != frame_len) {
        snprintf(why, why_len, "blob is truncated or has trailing bytes (%zu stored)", frame_len);
        return SJ_E_CORRUPT;
    }
    /* a prefix is used by the next frame only, so a pooled context never
     * carries one over to another row */
    size_t n = dict_len ? ZSTD_DCtx_refPrefix(dctx, dict, dict_len) : 0;
    if (!ZSTD_isError(n)) n = ZSTD_decompressDCtx(dctx, dst, (size_t)raw_size, frame, frame_len);
    if (ZSTD_isError(n) || n != (size_t)raw_size) {
        snprintf(why, why_len, "zstd: %s", ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short frame");
        return SJ_E_CORRUPT;
    }
    return SJ_OK;
}

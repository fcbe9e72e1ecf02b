/* Shared parts: byte ranges of an artifact (compiled kernels) that the
 * store keeps once for every row holding them (issue #33). The store stays
 * opaque: a put names the ranges and gives each a 32-byte key, and equal
 * keys mean equal bytes (the caller's hash of what decides them).
 *
 * Layout (schema version 2 on, created in store_open.c):
 *   parts(key BLOB PRIMARY KEY, raw_size, stored_size, digest, blob,
 *         dict_key): one row per part key; blob a zstd frame made as a
 *     row's is, plain or (version 4) against the bytes of the part
 *     dict_key (store_part_delta.c), digest BLAKE3(key || raw).
 *   artifact_parts(artifact_id, seq, offset, len, part_key), primary key
 *     (artifact_id, seq), indexed on part_key: where row artifact_id
 *     places each of its parts, in offset order.
 *   artifacts: as in version 1, except that blob holds only the inline
 *     bytes (the raw bytes with the parts cut out) and stored_size is that
 *     blob's size; raw_size is still the whole artifact and digest still
 *     BLAKE3(key digest || whole raw bytes), checked on the reassembled
 *     bytes, so a damaged part or row reads as SJ_E_CORRUPT.
 * Triggers keep the references whole in every transaction that drops a
 * row, whoever drops it (rm, gc, eviction, a put's replaced list): a
 * deleted artifacts row deletes its artifact_parts rows, and a deleted
 * artifact_parts row deletes its part when no row places it any more and
 * no part is compressed against it (then it goes with the last such part:
 * store_part_delta.c).
 * The stored bytes (sj_store_stats, max_bytes) are the rows' blobs plus
 * the parts' and the bases' (store_base.c), each part and base once.
 *
 * A put keeps a part whose stored bytes decompress and equal the put's,
 * and replaces any other: so a damaged part is repaired for every row that
 * places it when any one of them is put again. */
#include "store/store_impl.h"
#include "core/hash.h"

#include <stdio.h>
#include <string.h>

/* --- checks --- */

bool sj__store_parts_bad(const sj_store_part *parts, int n_parts, uint64_t len, char *why, size_t why_len) {
    if (n_parts < 0) {
        snprintf(why, why_len, "n_parts %d is negative", n_parts);
        return true;
    }
    if (n_parts > 0 && !parts) {
        snprintf(why, why_len, "parts is NULL with n_parts %d", n_parts);
        return true;
    }
    uint64_t end = 0;
    for (int i = 0; i < n_parts; i++) {
        unsigned long long off = parts[i].offset, n = parts[i].len;
        if (n == 0)
            snprintf(why, why_len, "part %d (offset %llu) has len 0; a part is at least 1 byte", i, off);
        else if (off > len || n > len - off)
            snprintf(why, why_len, "part %d (offset %llu, len %llu) runs past the end of the %llu bytes", i, off,
                     n, (unsigned long long)len);
        else if (off < end)
            snprintf(why, why_len,
                     "part %d (offset %llu, len %llu) starts before part %d ends (at %llu): parts go in "
                     "increasing offset order without overlapping",
                     i, off, n, i - 1, (unsigned long long)end);
        else {
            end = off + n;
            continue;
        }
        return true;
    }
    return false;
}

/* Checks one stored part and decompresses it into dst (len bytes, where
 * a row places it) with dict, its reference's bytes (dict_len 0: it has
 * none). On SJ_E_CORRUPT `why` says which check failed. */
static sj_status part_check_into(ZSTD_DCtx *dctx, int64_t cap, const uint8_t key[32], const sj_store_part_row *r,
                                 uint64_t len, const void *dict, size_t dict_len, uint8_t *dst, char *why,
                                 size_t why_len) {
    if (!r->found) {
        snprintf(why, why_len, "missing from the parts table");
        return SJ_E_CORRUPT;
    }
    if (r->raw_size != (int64_t)len) {
        snprintf(why, why_len, "its parts row holds %lld bytes, the row places %llu", (long long)r->raw_size,
                 (unsigned long long)len);
        return SJ_E_CORRUPT;
    }
    if (r->digest_len != 32) {
        snprintf(why, why_len, "its digest is %zu bytes, not 32", r->digest_len);
        return SJ_E_CORRUPT;
    }
    if (sj__store_inflate(dctx, cap, dict, dict_len, r->frame, r->frame_len, r->raw_size, dst, why, why_len) !=
        SJ_OK)
        return SJ_E_CORRUPT;
    uint8_t got[32];
    sj__store_content_digest(key, dst, (size_t)len, got);
    if (memcmp(got, r->digest, 32) != 0) {
        snprintf(why, why_len, "BLAKE3 digest mismatch (its bytes changed)");
        return SJ_E_CORRUPT;
    }
    return SJ_OK;
}

/* --- reading a row --- */

void sj__store_part_row_free(sj_ctx *ctx, sj_store_part_row *r) {
    if (r->ref) sj__store_part_row_free(ctx, r->ref);
    sj_free(ctx, r->ref);
    sj_free(ctx, r->frame);
    r->ref = NULL;
    r->frame = NULL;
}

/* Copies a stored blob (a NULL column as an empty one). */
static sj_status copy_blob(sj_ctx *ctx, const void *src, size_t n, void **dst) {
    *dst = sj_alloc(ctx, n);
    if (!*dst) return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory reading a %zu-byte blob", n);
    if (n) memcpy(*dst, src, n);
    return SJ_OK;
}

sj_status sj__store_stored_copy(sj_ctx *ctx, sqlite3_stmt *q, int first, sj_store_part_row *r) {
    r->found = true;
    r->raw_size = sqlite3_column_int64(q, first);
    const void *digest = sqlite3_column_blob(q, first + 1);
    r->digest_len = (size_t)sqlite3_column_bytes(q, first + 1);
    if (r->digest_len == 32) memcpy(r->digest, digest, 32);
    const void *frame = sqlite3_column_blob(q, first + 2);
    r->frame_len = (size_t)sqlite3_column_bytes(q, first + 2);
    return copy_blob(ctx, frame, r->frame_len, &r->frame);
}

sj_status sj__store_part_copy(sj_ctx *ctx, sqlite3_stmt *q, int first, sj_store_part_row *r) {
    SJ_TRY(sj__store_stored_copy(ctx, q, first, r));
    if (sqlite3_column_type(q, first + 3) == SQLITE_NULL) return SJ_OK;
    /* a key of another length matches no part: read as missing */
    r->has_ref = true;
    if (sqlite3_column_bytes(q, first + 3) == 32) memcpy(r->ref_key, sqlite3_column_blob(q, first + 3), 32);
    if (!sqlite3_column_int(q, first + 4)) return SJ_OK;
    r->ref = sj_calloc(ctx, 1, sizeof *r->ref);
    if (!r->ref) return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory reading a part's reference");
    r->ref->has_ref = sqlite3_column_int(q, first + 8) != 0;
    return sj__store_stored_copy(ctx, q, first + 5, r->ref);
}

/* st_refs's row: offset, len, part_key, found, then SJ_STORE_PART_COLS. */
static sj_status ref_copy(sj_ctx *ctx, sqlite3_stmt *q, sj_store_part *p, sj_store_part_row *r) {
    memset(p, 0, sizeof *p);
    memset(r, 0, sizeof *r);
    p->offset = (uint64_t)sqlite3_column_int64(q, 0);
    p->len = (uint64_t)sqlite3_column_int64(q, 1);
    const void *key = sqlite3_column_blob(q, 2);
    size_t key_len = (size_t)sqlite3_column_bytes(q, 2);
    if (key) memcpy(p->key, key, key_len < 32 ? key_len : 32);
    return sqlite3_column_int(q, 3) ? sj__store_part_copy(ctx, q, 4, r) : SJ_OK;
}

static sj_status refs_grow(sj_ctx *ctx, sj_store_row *row, int *cap) {
    int n = *cap ? 2 * *cap : 8;
    sj_store_part *parts = sj_realloc(ctx, row->parts, (size_t)n * sizeof *parts);
    if (parts) row->parts = parts;
    sj_store_part_row *stored = parts ? sj_realloc(ctx, row->stored, (size_t)n * sizeof *stored) : NULL;
    if (!stored) return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory reading a row's %d parts", *cap);
    row->stored = stored;
    *cap = n;
    return SJ_OK;
}

static sj_status refs_read(sj_store *s, sj_store_row *row) {
    sqlite3_stmt *q = s->st_refs;
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, row->id);
    sj_status st = SJ_OK;
    int rc = SQLITE_DONE, cap = 0;
    while (st == SJ_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (row->n_parts == cap) st = refs_grow(s->ctx, row, &cap);
        if (st == SJ_OK) st = ref_copy(s->ctx, q, &row->parts[row->n_parts], &row->stored[row->n_parts]);
        if (st == SJ_OK) row->n_parts++;
    }
    if (st == SJ_OK && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "reading a row's parts");
    sqlite3_reset(q);
    return st;
}

sj_status sj__store_row_read(sj_store *s, sj_store_row *row, const void *digest, size_t digest_len,
                            const void *frame, size_t frame_len) {
    row->digest_len = digest_len;
    if (digest_len == 32) memcpy(row->digest, digest, 32);
    row->frame_len = frame_len;
    SJ_TRY(copy_blob(s->ctx, frame, frame_len, &row->frame));
    SJ_TRY(refs_read(s, row));
    return sj__store_base_read(s, row);
}

void sj__store_row_free(sj_ctx *ctx, sj_store_row *row) {
    sj__store_part_row_free(ctx, &row->base);
    for (int i = 0; i < row->n_parts; i++) sj__store_part_row_free(ctx, &row->stored[i]);
    sj_free(ctx, row->parts);
    sj_free(ctx, row->stored);
    sj_free(ctx, row->frame);
    memset(row, 0, sizeof *row);
}

/* --- reassembling a row --- */

/* The inline bytes fill the gaps between the parts, in order. */
static void scatter(const sj_store_row *row, const uint8_t *in, uint8_t *dst) {
    uint64_t at = 0;
    for (int i = 0; i < row->n_parts; i++) {
        size_t gap = (size_t)(row->parts[i].offset - at);
        memcpy(dst + at, in, gap);
        in += gap;
        at = row->parts[i].offset + row->parts[i].len;
    }
    memcpy(dst + at, in, (size_t)((uint64_t)row->raw_size - at));
}

/* The inline bytes, decompressed with the row's base when it has one. */
static sj_status inline_into(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_row *row, uint8_t *dst,
                             char *why, size_t why_len) {
    uint64_t placed = 0;
    for (int i = 0; i < row->n_parts; i++) placed += row->parts[i].len;
    size_t n = (size_t)((uint64_t)row->raw_size - placed);
    void *dict = NULL;
    SJ_TRY(sj__store_base_load(ctx, dctx, cap, row, &dict, why, why_len));
    size_t dict_len = dict ? (size_t)row->base.raw_size : 0;
    uint8_t *in = row->n_parts == 0 ? dst : sj_alloc(ctx, n);
    sj_status st = in ? sj__store_inflate(dctx, cap, dict, dict_len, row->frame, row->frame_len, (int64_t)n, in, why,
                                         why_len)
                      : sj_fail(ctx, SJ_E_NOMEM, "store: out of memory for a row's %zu inline bytes", n);
    if (st == SJ_OK && in != dst) scatter(row, in, dst);
    if (in != dst) sj_free(ctx, in);
    sj_free(ctx, dict);
    return st;
}

/* The references a row's parts were compressed against that the row
 * does not place, each checked and decompressed once per assembly. */
typedef struct ref_cache {
    const uint8_t *key;
    void *bytes;
    size_t len;
} ref_cache;

/* The bytes of part i's reference (*dict; NULL when it has none), from
 * the row's plain parts (decompressed first), the cache, or loaded. */
static sj_status ref_find(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_row *row, int i,
                          const uint8_t *dst, ref_cache *cache, int *n_cache, const void **dict, size_t *dict_len,
                          char *why, size_t why_len) {
    const sj_store_part_row *r = &row->stored[i];
    *dict = NULL;
    *dict_len = 0;
    if (!r->has_ref) return SJ_OK;
    for (int j = 0; j < row->n_parts; j++)
        if (!row->stored[j].has_ref && memcmp(row->parts[j].key, r->ref_key, 32) == 0) {
            *dict = dst + row->parts[j].offset;
            *dict_len = (size_t)row->parts[j].len;
            return SJ_OK;
        }
    for (int c = 0; c < *n_cache; c++)
        if (memcmp(cache[c].key, r->ref_key, 32) == 0) {
            *dict = cache[c].bytes;
            *dict_len = cache[c].len;
            return SJ_OK;
        }
    void *bytes;
    SJ_TRY(sj__store_part_ref_load(ctx, dctx, cap, r, &bytes, why, why_len));
    cache[*n_cache] = (ref_cache){r->ref_key, bytes, (size_t)r->ref->raw_size};
    *dict = cache[*n_cache].bytes;
    *dict_len = cache[(*n_cache)++].len;
    return SJ_OK;
}

static sj_status part_into(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_row *row, int i, uint8_t *dst,
                           ref_cache *cache, int *n_cache, char *why, size_t why_len) {
    const sj_store_part *p = &row->parts[i];
    char detail[SJ_STORE_WHY_MAX], hex[65];
    const void *dict;
    size_t dict_len;
    sj_status st = ref_find(ctx, dctx, cap, row, i, dst, cache, n_cache, &dict, &dict_len, detail, sizeof detail);
    if (st == SJ_OK)
        st = part_check_into(dctx, cap, p->key, &row->stored[i], p->len, dict, dict_len, dst + p->offset,
                                      detail, sizeof detail);
    if (st != SJ_E_CORRUPT) return st;
    sj__hex_encode(p->key, 32, hex);
    snprintf(why, why_len, "part %s at offset %llu: %s", hex, (unsigned long long)p->offset, detail);
    return SJ_E_CORRUPT;
}

/* The parts into dst: the plain ones first, so that a part compressed
 * against another part of the row finds its bytes there. */
static sj_status parts_into(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_row *row, uint8_t *dst,
                            char *why, size_t why_len) {
    ref_cache *cache = row->n_parts ? sj_calloc(ctx, (size_t)row->n_parts, sizeof *cache) : NULL;
    if (row->n_parts && !cache) return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory reading a row's parts");
    int n_cache = 0;
    sj_status st = SJ_OK;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; st == SJ_OK && i < row->n_parts; i++)
            if (row->stored[i].has_ref == (pass == 1))
                st = part_into(ctx, dctx, cap, row, i, dst, cache, &n_cache, why, why_len);
    for (int c = 0; c < n_cache; c++) sj_free(ctx, cache[c].bytes);
    sj_free(ctx, cache);
    return st;
}

sj_status sj__store_row_assemble(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_key *key,
                                const sj_store_row *row, void **raw, char *why, size_t why_len) {
    *raw = NULL;
    char detail[SJ_STORE_WHY_MAX];
    if (row->digest_len != 32) {
        snprintf(why, why_len, "digest is %zu bytes, not 32", row->digest_len);
        return SJ_E_CORRUPT;
    }
    if (row->raw_size < 0 || row->raw_size > cap) {
        snprintf(why, why_len, "declared size %lld is outside [0, %lld]", (long long)row->raw_size, (long long)cap);
        return SJ_E_CORRUPT;
    }
    if (sj__store_parts_bad(row->parts, row->n_parts, (uint64_t)row->raw_size, detail, sizeof detail)) {
        snprintf(why, why_len, "its part list is damaged: %s", detail);
        return SJ_E_CORRUPT;
    }
    uint8_t *dst = sj_alloc(ctx, (size_t)row->raw_size);
    if (!dst)
        return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory for a %lld-byte artifact", (long long)row->raw_size);
    sj_status st = inline_into(ctx, dctx, cap, row, dst, why, why_len);
    if (st == SJ_OK) st = parts_into(ctx, dctx, cap, row, dst, why, why_len);
    uint8_t kd[32], got[32];
    if (st == SJ_OK) {
        sj__store_key_digest(key, kd);
        sj__store_content_digest(kd, dst, (size_t)row->raw_size, got);
        if (memcmp(got, row->digest, 32) != 0) {
            snprintf(why, why_len, "BLAKE3 digest mismatch (bytes changed or belong to another key)");
            st = SJ_E_CORRUPT;
        }
    }
    if (st != SJ_OK) {
        sj_free(ctx, dst);
        return st;
    }
    *raw = dst;
    return SJ_OK;
}

/* --- packing a put --- */

/* The bytes between the parts, in order: what the row's own blob holds. */
static void gather(const uint8_t *bytes, size_t len, const sj_store_part *parts, int n_parts, uint8_t *out) {
    uint64_t at = 0;
    for (int i = 0; i < n_parts; i++) {
        size_t gap = (size_t)(parts[i].offset - at);
        memcpy(out, bytes + at, gap);
        out += gap;
        at = parts[i].offset + parts[i].len;
    }
    memcpy(out, bytes + at, len - (size_t)at);
}

static sj_status inline_pack(sj_store *s, const sj_store_key *key, const uint8_t *bytes, size_t len,
                             const sj_store_part *parts, int n_parts, sj_store_packed *out) {
    if (n_parts == 0) return sj__store_base_pack(s, key, bytes, len, &out->base, &out->frame, &out->frame_len);
    size_t n = len;
    for (int i = 0; i < n_parts; i++) n -= (size_t)parts[i].len;
    uint8_t *in = sj_alloc(s->ctx, n);
    if (!in) return sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory for %zu inline bytes", n);
    gather(bytes, len, parts, n_parts, in);
    sj_status st = sj__store_base_pack(s, key, in, n, &out->base, &out->frame, &out->frame_len);
    sj_free(s->ctx, in);
    return st;
}

sj_status sj__store_pack(sj_store *s, const sj_store_key *key, const uint8_t *bytes, size_t len,
                        const sj_store_part *parts, int n_parts, sj_store_packed *out) {
    memset(out, 0, sizeof *out);
    uint8_t kd[32];
    sj__store_key_digest(key, kd);
    sj__store_content_digest(kd, bytes, len, out->digest);
    sj_status st = inline_pack(s, key, bytes, len, parts, n_parts, out);
    if (st == SJ_OK && n_parts > 0) st = sj__store_parts_pack(s, key, bytes, parts, n_parts, out);
    if (st != SJ_OK) sj__store_packed_free(s->ctx, out);
    return st;
}

void sj__store_packed_free(sj_ctx *ctx, sj_store_packed *pk) {
    sj__store_part_refs_free(ctx, pk);
    for (int i = 0; i < pk->n_parts; i++) {
        sj_free(ctx, pk->parts[i].frame);
        sj_free(ctx, pk->parts[i].delta);
    }
    sj_free(ctx, pk->parts);
    sj_free(ctx, pk->frame);
    sj__store_base_free(ctx, &pk->base);
    memset(pk, 0, sizeof *pk);
}

/* --- writing --- */

/* Whether the stored row at sel (raw_size, digest, blob) holds exactly
 * raw under `digest`. */
static sj_status stored_sound(sj_store *s, sqlite3_stmt *sel, const uint8_t *raw, uint64_t len,
                              const uint8_t digest[32], bool *sound) {
    *sound = false;
    const void *stored_digest = sqlite3_column_blob(sel, 1);
    if (sqlite3_column_int64(sel, 0) != (int64_t)len || sqlite3_column_bytes(sel, 1) != 32 ||
        memcmp(stored_digest, digest, 32) != 0)
        return SJ_OK;
    uint8_t *got = sj_alloc(s->ctx, (size_t)len);
    if (!got) return sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory checking a %llu-byte part",
                             (unsigned long long)len);
    char why[SJ_STORE_WHY_MAX];
    const void *frame = sqlite3_column_blob(sel, 2);
    size_t frame_len = (size_t)sqlite3_column_bytes(sel, 2);
    *sound = sj__store_inflate(s->dctx, s->cfg.max_artifact_bytes, NULL, 0, frame, frame_len, (int64_t)len, got,
                               why, sizeof why) == SJ_OK &&
             memcmp(got, raw, (size_t)len) == 0;
    sj_free(s->ctx, got);
    return SJ_OK;
}

sj_status sj__store_stored_keep(sj_store *s, sqlite3_stmt *sel, const uint8_t key[32], const uint8_t *raw,
                               uint64_t len, const uint8_t digest[32], bool *found, bool *keep) {
    *keep = false;
    sqlite3_reset(sel);
    sqlite3_bind_blob(sel, 1, key, 32, SQLITE_STATIC);
    int rc = sqlite3_step(sel);
    *found = rc == SQLITE_ROW;
    sj_status st = rc == SQLITE_ROW    ? stored_sound(s, sel, raw, len, digest, keep)
                   : rc == SQLITE_DONE ? SJ_OK
                                       : sj__store_sql_fail(s, "put: reading what is stored");
    sqlite3_reset(sel);
    return st;
}

/* The index of an earlier part of this put with part i's key, or -1. */
static int earlier_same_key(const sj_store_part *parts, int i) {
    for (int j = 0; j < i; j++)
        if (memcmp(parts[j].key, parts[i].key, 32) == 0) return j;
    return -1;
}

/* Copies the parts row of key with its reference's (one statement: one
 * snapshot); found false when there is none. Caller holds s->mu. */
static sj_status part_row_read(sj_store *s, const uint8_t key[32], sj_store_part_row *r) {
    memset(r, 0, sizeof *r);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT " SJ_STORE_PART_COLS " FROM parts p" SJ_STORE_PART_REF_JOIN " WHERE p.key = ?1",
                           -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "reading a part");
    sqlite3_bind_blob(q, 1, key, 32, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    sj_status st = rc == SQLITE_ROW    ? sj__store_part_copy(s->ctx, q, 0, r)
                   : rc == SQLITE_DONE ? SJ_OK
                                       : sj__store_sql_fail(s, "reading a part");
    sqlite3_finalize(q);
    return st;
}

/* Inside a write transaction: *found whether part `key` is stored, *keep
 * whether it holds exactly raw under `digest`, its reference (if any)
 * sound too, so a put keeps it rather than writing its own. A part
 * compressed against another that is a reference itself (a chain: never
 * written, so damage) is rewritten, plain. */
static sj_status part_keep(sj_store *s, const uint8_t key[32], const uint8_t *raw, uint64_t len,
                           const uint8_t digest[32], bool *found, bool *keep) {
    sj_store_part_row r;
    *keep = false;
    sj_status st = part_row_read(s, key, &r);
    *found = r.found;
    if (st == SJ_OK && r.found && r.raw_size == (int64_t)len && r.digest_len == 32 && memcmp(r.digest, digest, 32) == 0) {
        void *got = NULL;
        char why[SJ_STORE_WHY_MAX]; /* a damaged part is no error here: the put rewrites it */
        st = sj__store_stored_unpack(s->ctx, s->dctx, s->cfg.max_artifact_bytes, key, &r, &got, why, sizeof why);
        if (st == SJ_OK) *keep = memcmp(got, raw, (size_t)len) == 0;
        else if (st == SJ_E_CORRUPT) st = SJ_OK;
        sj_free(s->ctx, got);
        bool chain = false;
        if (st == SJ_OK && *keep && r.has_ref) st = sj__store_part_is_reference(s, key, &chain);
        if (chain) *keep = false;
    }
    sj__store_part_row_free(s->ctx, &r);
    return st;
}

static sj_status part_write(sj_store *s, const uint8_t *bytes, const sj_store_part *parts, int i,
                            const sj_store_packed *pk) {
    const sj_store_part *p = &parts[i];
    bool found, keep;
    SJ_TRY(part_keep(s, p->key, bytes + p->offset, p->len, pk->parts[i].digest, &found, &keep));
    if (keep) return SJ_OK;
    /* A part this put wrote already, with other bytes: equal keys must
     * mean equal bytes, or one of the two places would read back wrong. */
    int j = found ? earlier_same_key(parts, i) : -1;
    if (j >= 0)
        return sj_fail(s->ctx, SJ_E_INVALID_ARG,
                       "store put: parts %d and %d have the same key but different bytes (offset %llu, len %llu; "
                       "offset %llu, len %llu)",
                       j, i, (unsigned long long)parts[j].offset, (unsigned long long)parts[j].len,
                       (unsigned long long)p->offset, (unsigned long long)p->len);
    return sj__store_part_put(s, p, pk, i);
}

sj_status sj__store_parts_write(sj_store *s, const uint8_t *bytes, const sj_store_part *parts,
                               const sj_store_packed *pk) {
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < pk->n_parts; i++) st = part_write(s, bytes, parts, i, pk);
    return st;
}

/* Runs sql with ?1 bound to id; no result rows. */
static sj_status exec_id(sj_store *s, const char *sql, int64_t id, const char *what) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return sj__store_sql_fail(s, what);
    sqlite3_bind_int64(q, 1, id);
    sj_status st = sqlite3_step(q) == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, what);
    sqlite3_finalize(q);
    return st;
}

static sj_status refs_insert(sj_store *s, int64_t artifact_id, const sj_store_part *parts, int n_parts) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO artifact_parts(artifact_id, seq, offset, len, part_key) "
                           "VALUES(?1, ?2, ?3, ?4, ?5)",
                           -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "put: placing the parts");
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < n_parts; i++) {
        sqlite3_reset(q);
        sqlite3_bind_int64(q, 1, artifact_id);
        sqlite3_bind_int64(q, 2, i);
        sqlite3_bind_int64(q, 3, (int64_t)parts[i].offset);
        sqlite3_bind_int64(q, 4, (int64_t)parts[i].len);
        sqlite3_bind_blob(q, 5, parts[i].key, 32, SQLITE_STATIC);
        if (sqlite3_step(q) != SQLITE_DONE) st = sj__store_sql_fail(s, "put: placing the parts");
    }
    sqlite3_finalize(q);
    return st;
}

sj_status sj__store_refs_replace(sj_store *s, int64_t id, const sj_store_part *parts, int n_parts) {
    /* The new list goes in under -id first, so a part the row keeps still
     * has a reference while the old list's deletion fires the trigger that
     * drops parts nobody places; then it takes the row's id. */
    if (n_parts > 0) SJ_TRY(refs_insert(s, -id, parts, n_parts));
    SJ_TRY(exec_id(s, "DELETE FROM artifact_parts WHERE artifact_id = ?1", id, "put: replacing the part list"));
    if (n_parts == 0) return SJ_OK;
    return exec_id(s, "UPDATE artifact_parts SET artifact_id = ?1 WHERE artifact_id = -?1", id,
                   "put: replacing the part list");
}

/* --- sizes and dropping rows --- */

/* The first column of the first row of sql, its ?1 (if any) bound to id;
 * 0 when there is no row. */
static sj_status query_id(sj_store *s, const char *sql, int64_t id, const char *what, int64_t *out) {
    sqlite3_stmt *q;
    *out = 0;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return sj__store_sql_fail(s, what);
    if (sqlite3_bind_parameter_count(q) >= 1) sqlite3_bind_int64(q, 1, id);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW) *out = sqlite3_column_int64(q, 0);
    sj_status st = rc == SQLITE_ROW || rc == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, what);
    sqlite3_finalize(q);
    return st;
}

sj_status sj__store_stored_total(sj_store *s, int64_t *total) {
    return query_id(s,
                    "SELECT (SELECT coalesce(sum(stored_size), 0) FROM artifacts) + "
                    "(SELECT coalesce(sum(stored_size), 0) FROM parts) + "
                    "(SELECT coalesce(sum(stored_size), 0) FROM bases)",
                    0, "summing the stored bytes", total);
}

sj_status sj__store_drop_row(sj_store *s, int64_t id, int64_t *freed) {
    /* the row's blob; the parts no other row places (alone), and of
     * them and their references those no part that stays is compressed
     * against (what the triggers delete: a part compressed against
     * another is never a reference itself); the base no other row uses */
    static const char frees_sql[] =
        "WITH alone(k) AS (SELECT DISTINCT part_key FROM artifact_parts m WHERE artifact_id = ?1 "
        "AND NOT EXISTS (SELECT 1 FROM artifact_parts r WHERE r.part_key = m.part_key AND r.artifact_id <> ?1)), "
        "deltas(k, ref) AS (SELECT p.key, p.dict_key FROM parts p JOIN alone ON p.key = alone.k "
        "WHERE p.dict_key IS NOT NULL), "
        "cand(k) AS (SELECT k FROM alone UNION SELECT ref FROM deltas), "
        "freed(k) AS (SELECT k FROM cand c WHERE "
        "NOT EXISTS (SELECT 1 FROM artifact_parts r WHERE r.part_key = c.k AND r.artifact_id <> ?1) "
        "AND NOT EXISTS (SELECT 1 FROM parts d WHERE d.dict_key = c.k AND d.key NOT IN (SELECT k FROM deltas))) "
        "SELECT a.stored_size + coalesce((SELECT sum(stored_size) FROM parts WHERE key IN (SELECT k FROM freed)), 0) "
        "+ coalesce((SELECT b.stored_size FROM bases b WHERE b.key = a.base_key "
        "AND NOT EXISTS (SELECT 1 FROM artifacts o WHERE o.base_key = a.base_key AND o.id <> a.id)), 0) "
        "FROM artifacts a WHERE a.id = ?1";
    int64_t f;
    SJ_TRY(query_id(s, frees_sql, id, "dropping a row", &f));
    SJ_TRY(exec_id(s, "DELETE FROM artifacts WHERE id = ?1", id, "dropping a row"));
    *freed += f;
    return SJ_OK;
}

/* --- get_part --- */

sj_status sj__store_stored_unpack(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const uint8_t key[32],
                                 const sj_store_part_row *r, void **bytes, char *why, size_t why_len) {
    if (r->raw_size < 0 || r->raw_size > cap) {
        snprintf(why, why_len, "declared size %lld is outside [0, %lld]", (long long)r->raw_size, (long long)cap);
        return SJ_E_CORRUPT;
    }
    void *dict;
    SJ_TRY(sj__store_part_ref_load(ctx, dctx, cap, r, &dict, why, why_len));
    uint8_t *dst = sj_alloc(ctx, r->raw_size ? (size_t)r->raw_size : 1);
    sj_status st = dst ? part_check_into(dctx, cap, key, r, (uint64_t)r->raw_size, dict,
                                                  dict ? (size_t)r->ref->raw_size : 0, dst, why, why_len)
                       : sj_fail(ctx, SJ_E_NOMEM, "store: out of memory reading %lld stored bytes",
                                 (long long)r->raw_size);
    sj_free(ctx, dict);
    if (st != SJ_OK) sj_free(ctx, dst);
    else *bytes = dst;
    return st;
}

/* Checks and decompresses a parts row outside the lock; *bytes on SJ_OK. */
static sj_status part_unpack(sj_store *s, const uint8_t key[32], const sj_store_part_row *r, void **bytes,
                             char *why, size_t why_len) {
    ZSTD_DCtx *d = sj__store_dctx_take(s);
    if (!d) return sj_fail(s->ctx, SJ_E_NOMEM, "store: out of memory reading a part");
    sj_status st = sj__store_stored_unpack(s->ctx, d, s->cfg.max_artifact_bytes, key, r, bytes, why, why_len);
    sj__store_dctx_give(s, d);
    return st;
}

sj_status sj_store_get_part(sj_store *s, const uint8_t key[32], void **bytes, size_t *len) {
    if (!s || !key || !bytes || !len)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *bytes = NULL;
    *len = 0;
    char hex[65], why[SJ_STORE_WHY_MAX];
    sj__hex_encode(key, 32, hex);
    sj_store_part_row r;
    pthread_mutex_lock(&s->mu);
    sj_status st = part_row_read(s, key, &r);
    pthread_mutex_unlock(&s->mu);
    if (st == SJ_OK && !r.found) st = sj_fail(s->ctx, SJ_E_NOT_FOUND, "store: no part %s", hex);
    else if (st == SJ_OK) st = part_unpack(s, key, &r, bytes, why, sizeof why);
    if (st == SJ_E_CORRUPT) st = sj_fail(s->ctx, SJ_E_CORRUPT, "store: part %s is corrupt: %s", hex, why);
    if (st == SJ_OK) *len = (size_t)r.raw_size;
    sj__store_part_row_free(s->ctx, &r);
    return st;
}

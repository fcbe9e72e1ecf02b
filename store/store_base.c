/* Bases: the rows of one graph compressed against one another (issue #33).
 * What a row keeps of its own (its inline bytes: the launch plan and
 * headers, parts cut out) is nearly the same in every bucket of a graph,
 * differing in extents and strides; compressed against another bucket's
 * inline bytes it is a fraction of its size.
 *
 * Layout (schema version 3, created in store_open.c):
 *   bases(key BLOB PRIMARY KEY, family, extent, raw_size, stored_size,
 *         digest, blob), indexed on family: one row per base; family is
 *     the key digest of the rows' key with extent 0 (graph, options,
 *     target, versions: every component but the extent), extent that of
 *     the row whose inline bytes it was made of, key BLAKE3(family || raw)
 *     (content-keyed), digest BLAKE3(key || raw), blob the raw bytes' plain
 *     zstd frame.
 *   artifacts.base_key, indexed: the base the row's blob was compressed
 *     against (a raw-content zstd dictionary), NULL for none.
 * Two triggers drop a base when the last row using it is deleted or moves
 * to another base, whoever does it (rm, gc, eviction, a put). A base is
 * counted once in the stored bytes.
 *
 * A put with at least SJ_STORE_BASE_MIN inline bytes looks up the bases
 * of its family nearest its extent (one query on the family index), and
 * compresses against the first that checks and pays: the row comes out at
 * most half the size of the base's own frame. Otherwise (no base, damaged
 * ones, or ones of another shape: the buckets of a BERT ladder fall into
 * two such shapes, extents 1-8 and 16-512, whose rows compress to 15-25%
 * against their own shape and 65-75% against the other) its own inline
 * bytes become a new base and the row is compressed against them (some 20
 * bytes). So the first row of a graph costs its plain frame, as before,
 * plus those bytes (keeping it plain instead and making the second row's
 * bytes the base saves them for a graph of one bucket and costs a second
 * plain frame, 5.8 KB, on the BERT ladder). A damaged base is rewritten
 * whole by a put of the bytes it was made of (the key is theirs) and
 * otherwise left to the rows using it, each a miss (SJ_E_CORRUPT, naming
 * the base) until recompiled and put against a sound base, the damaged one
 * going with the last of them. A get reads the base with the row in one
 * snapshot and checks it before decompressing with it: for a BERT plan
 * some 40 us more per get, a fifth. */
#include "store/store_impl.h"
#include "core/hash.h"

#include <stdio.h>
#include <string.h>

/* Fewer inline bytes than this are compressed plain: their frame is a
 * few hundred bytes, about what a base's keys and index entries cost. */
#define SJ_STORE_BASE_MIN 1024
/* The nearest bases a put tries before making its own: a row whose
 * nearest base is of the other shape finds its own shape's next. */
#define SJ_STORE_BASE_TRIES 3

void sj__store_base_free(sj_ctx *ctx, sj_store_base *base) {
    sj_free(ctx, base->raw);
    sj_free(ctx, base->frame);
    memset(base, 0, sizeof *base);
}

/* --- a put: choosing the base --- */

/* A stored base as the lookup copies it out. */
typedef struct candidate {
    uint8_t key[32];
    int64_t extent;
    sj_store_part_row r;
} candidate;

/* The family's bases nearest `extent` (by ratio: the buckets of a ladder
 * double; the newest first among equals), at most SJ_STORE_BASE_TRIES. */
static sj_status candidates(sj_store *s, const uint8_t family[32], int64_t extent, candidate *c, int *n) {
    *n = 0;
    sqlite3_stmt *q;
    pthread_mutex_lock(&s->mu);
    sj_status st = SJ_OK;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT key, extent, raw_size, digest, blob FROM bases WHERE family = ?1 "
                           "ORDER BY max(extent, ?2) * 1.0 / max(1, min(extent, ?2)), rowid DESC LIMIT ?3",
                           -1, &q, NULL) != SQLITE_OK) {
        st = sj__store_sql_fail(s, "put: finding a base");
    } else {
        sqlite3_bind_blob(q, 1, family, 32, SQLITE_STATIC);
        sqlite3_bind_int64(q, 2, extent);
        sqlite3_bind_int(q, 3, SJ_STORE_BASE_TRIES);
        int rc;
        while (st == SJ_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            if (sqlite3_column_bytes(q, 0) != 32) continue; /* matches no row's base_key */
            memset(&c[*n], 0, sizeof c[*n]);
            memcpy(c[*n].key, sqlite3_column_blob(q, 0), 32);
            c[*n].extent = sqlite3_column_int64(q, 1);
            st = sj__store_stored_copy(s->ctx, q, 2, &c[*n].r);
            (*n)++;
        }
        if (st == SJ_OK && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "put: finding a base");
        sqlite3_finalize(q);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* The row's inline bytes compressed against candidate c when c checks
 * and the row comes out at most half the size of c's own frame (else a
 * base of another shape); *ok says whether, and b then holds c. */
static sj_status try_base(sj_store *s, candidate *c, const uint8_t *in, size_t n, sj_store_base *b, void **frame,
                          size_t *frame_len, bool *ok) {
    *ok = false;
    void *raw = NULL;
    char why[SJ_STORE_WHY_MAX]; /* a damaged base is no error here: the put makes another */
    ZSTD_DCtx *d = sj__store_dctx_take(s);
    if (!d) return sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory checking a base");
    sj_status st = sj__store_stored_unpack(s->ctx, d, s->cfg.max_artifact_bytes, c->key, &c->r, &raw, why, sizeof why);
    sj__store_dctx_give(s, d);
    if (st != SJ_OK) return st == SJ_E_CORRUPT ? SJ_OK : st;
    st = sj__store_compress(s->ctx, s->cfg.compression_level, raw, (size_t)c->r.raw_size, in, n, frame, frame_len);
    if (st != SJ_OK || *frame_len * 2 > c->r.frame_len) {
        if (st == SJ_OK) sj_free(s->ctx, *frame);
        *frame = NULL;
        sj_free(s->ctx, raw);
        return st;
    }
    *ok = true;
    memcpy(b->key, c->key, 32);
    memcpy(b->digest, c->r.digest, 32);
    b->extent = c->extent;
    b->raw = raw;
    b->len = (size_t)c->r.raw_size;
    b->frame = c->r.frame; /* moved */
    b->frame_len = c->r.frame_len;
    c->r.frame = NULL;
    return SJ_OK;
}

/* A new base made of the row's own inline bytes (copied: zstd ignores a
 * dictionary that overlaps what it compresses), the row compressed
 * against it. */
static sj_status fresh(sj_store *s, const sj_store_key *key, const uint8_t family[32], const uint8_t *in, size_t n,
                       sj_store_base *b, void **frame, size_t *frame_len) {
    int level = s->cfg.compression_level;
    b->raw = sj_alloc(s->ctx, n);
    if (!b->raw) return sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory for a %zu-byte base", n);
    memcpy(b->raw, in, n);
    b->len = n;
    b->extent = key->extent;
    sj__store_content_digest(family, in, n, b->key);
    sj__store_content_digest(b->key, in, n, b->digest);
    SJ_TRY(sj__store_compress(s->ctx, level, NULL, 0, in, n, &b->frame, &b->frame_len));
    return sj__store_compress(s->ctx, level, b->raw, n, in, n, frame, frame_len);
}

sj_status sj__store_base_pack(sj_store *s, const sj_store_key *key, const uint8_t *in, size_t n,
                             sj_store_base *base, void **frame, size_t *frame_len) {
    memset(base, 0, sizeof *base);
    *frame = NULL;
    if (n < SJ_STORE_BASE_MIN)
        return sj__store_compress(s->ctx, s->cfg.compression_level, NULL, 0, in, n, frame, frame_len);
    sj_store_key family_key = *key;
    family_key.extent = 0; /* no row's: every bucket of the graph shares it */
    uint8_t family[32];
    sj__store_key_digest(&family_key, family);
    candidate c[SJ_STORE_BASE_TRIES];
    int n_c = 0;
    bool ok = false;
    sj_status st = candidates(s, family, key->extent, c, &n_c);
    for (int i = 0; st == SJ_OK && !ok && i < n_c; i++) st = try_base(s, &c[i], in, n, base, frame, frame_len, &ok);
    for (int i = 0; i < n_c; i++) sj_free(s->ctx, c[i].r.frame);
    if (st == SJ_OK && !ok) st = fresh(s, key, family, in, n, base, frame, frame_len);
    if (st != SJ_OK) {
        sj__store_base_free(s->ctx, base);
        sj_free(s->ctx, *frame);
        *frame = NULL;
        return st;
    }
    memcpy(base->family, family, 32);
    base->used = true;
    return SJ_OK;
}

/* --- a put: writing it --- */

sj_status sj__store_base_write(sj_store *s, const sj_store_base *b) {
    if (!b->used) return SJ_OK;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT raw_size, digest, blob FROM bases WHERE key = ?1", -1, &q, NULL))
        return sj__store_sql_fail(s, "put: reading the base");
    /* The one this put checked may have gone or changed since (another
     * process's gc or damage): this put's copy is sound, so it goes in. */
    bool found, keep;
    sj_status st = sj__store_stored_keep(s, q, b->key, b->raw, b->len, b->digest, &found, &keep);
    sqlite3_finalize(q);
    if (st != SJ_OK || keep) return st;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT OR REPLACE INTO bases(key, family, extent, raw_size, stored_size, digest, blob) "
                           "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                           -1, &q, NULL))
        return sj__store_sql_fail(s, "put: writing the base");
    sqlite3_bind_blob(q, 1, b->key, 32, SQLITE_STATIC);
    sqlite3_bind_blob(q, 2, b->family, 32, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, b->extent);
    sqlite3_bind_int64(q, 4, (int64_t)b->len);
    sqlite3_bind_int64(q, 5, (int64_t)b->frame_len);
    sqlite3_bind_blob(q, 6, b->digest, 32, SQLITE_STATIC);
    sqlite3_bind_blob64(q, 7, b->frame, (sqlite3_uint64)b->frame_len, SQLITE_STATIC);
    if (sqlite3_step(q) != SQLITE_DONE) st = sj__store_sql_fail(s, "put: writing the base");
    sqlite3_finalize(q);
    return st;
}

/* --- a get, verify or export: reading it --- */

sj_status sj__store_base_read(sj_store *s, sj_store_row *row) {
    sqlite3_stmt *q = s->st_base;
    sqlite3_reset(q);
    sqlite3_bind_int64(q, 1, row->id);
    int rc = sqlite3_step(q);
    sj_status st = SJ_OK;
    if (rc == SQLITE_ROW) {
        /* a key of another length matches no base: read as missing */
        row->has_base = true;
        if (sqlite3_column_bytes(q, 0) == 32) memcpy(row->base_key, sqlite3_column_blob(q, 0), 32);
        if (sqlite3_column_int(q, 1)) st = sj__store_stored_copy(s->ctx, q, 2, &row->base);
    } else if (rc != SQLITE_DONE) {
        st = sj__store_sql_fail(s, "reading a row's base");
    }
    sqlite3_reset(q);
    return st;
}

sj_status sj__store_base_load(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_row *row, void **dict,
                             char *why, size_t why_len) {
    *dict = NULL;
    if (!row->has_base) return SJ_OK;
    char detail[SJ_STORE_WHY_MAX], hex[65];
    sj_status st = SJ_E_CORRUPT;
    if (!row->base.found) snprintf(detail, sizeof detail, "missing from the bases table");
    else st = sj__store_stored_unpack(ctx, dctx, cap, row->base_key, &row->base, dict, detail, sizeof detail);
    if (st == SJ_E_CORRUPT) {
        sj__hex_encode(row->base_key, 32, hex);
        snprintf(why, why_len, "base %s: %s", hex, detail);
    }
    return st;
}

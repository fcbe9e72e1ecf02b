/* put, get, rm and the counters: the paths the compile cache uses. */
#include "store/store_impl.h"
#include "core/hash.h"

#include <stdio.h>
#include <string.h>

/* Parses a hex column into 32 bytes (zeros when malformed). */
static void unhex(const unsigned char *hex, uint8_t out[32]) {
    memset(out, 0, 32);
    if (!hex || strlen((const char *)hex) != 64) return;
    for (int i = 0; i < 64; i++) {
        int c = hex[i], v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) {
            memset(out, 0, 32);
            return;
        }
        out[i / 2] = (uint8_t)(out[i / 2] | (i % 2 ? v : v << 4));
    }
}

void sj__store_bind_key(sqlite3_stmt *st, int first, const sj_store_key *k, char gh[65], char oh[65]) {
    sj__hex_encode(k->graph_hash, 32, gh);
    sj__hex_encode(k->options_hash, 32, oh);
    sqlite3_bind_text(st, first, gh, 64, SQLITE_STATIC);
    sqlite3_bind_int64(st, first + 1, k->extent);
    sqlite3_bind_text(st, first + 2, oh, 64, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 3, sj__store_str(k->target_triple), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 4, sj__store_str(k->target_cpu), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 5, sj__store_str(k->target_features), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, first + 6, k->artifact_version);
    sqlite3_bind_text(st, first + 7, sj__store_str(k->shapejit_version), -1, SQLITE_STATIC);
    sqlite3_bind_text(st, first + 8, sj__store_str(k->compiler_version), -1, SQLITE_STATIC);
}

void sj__store_read_entry(sqlite3_stmt *st, int c, sj_store_entry *e) {
    memset(e, 0, sizeof *e);
    unhex(sqlite3_column_text(st, c), e->key.graph_hash);
    e->key.extent = sqlite3_column_int64(st, c + 1);
    unhex(sqlite3_column_text(st, c + 2), e->key.options_hash);
    e->key.target_triple = (const char *)sqlite3_column_text(st, c + 3);
    e->key.target_cpu = (const char *)sqlite3_column_text(st, c + 4);
    e->key.target_features = (const char *)sqlite3_column_text(st, c + 5);
    e->key.artifact_version = (uint32_t)sqlite3_column_int64(st, c + 6);
    e->key.shapejit_version = (const char *)sqlite3_column_text(st, c + 7);
    e->key.compiler_version = (const char *)sqlite3_column_text(st, c + 8);
    e->raw_bytes = sqlite3_column_int64(st, c + 9);
    e->stored_bytes = sqlite3_column_int64(st, c + 10);
    e->created_ms = sqlite3_column_int64(st, c + 11);
    e->last_used_ms = sqlite3_column_int64(st, c + 12);
}

sj_status sj__store_evict(sj_store *s, int64_t max_bytes, int64_t keep_id, int64_t *evicted,
                         int64_t *freed) {
    int64_t total;
    SJ_TRY(sj__store_stored_total(s, &total));
    sqlite3_stmt *old;
    if (sqlite3_prepare_v2(s->db, "SELECT id FROM artifacts WHERE id<>?1 ORDER BY last_used_ms, id LIMIT 1", -1,
                           &old, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "eviction");
    sqlite3_bind_int64(old, 1, keep_id);
    sj_status st = SJ_OK;
    while (st == SJ_OK && total > max_bytes) {
        sqlite3_reset(old);
        int rc = sqlite3_step(old);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            st = sj__store_sql_fail(s, "eviction");
            break;
        }
        int64_t id = sqlite3_column_int64(old, 0), size = 0;
        sqlite3_reset(old);
        st = sj__store_drop_row(s, id, &size);
        total -= size;
        *evicted += 1;
        *freed += size;
    }
    sqlite3_finalize(old);
    return st;
}

/* Inside a write transaction: the row of `key` holds pk's digest, inline
 * blob and base now (inserted or overwritten in place); *id is its id. */
static sj_status row_write(sj_store *s, const sj_store_key *key, size_t len, const sj_store_packed *pk,
                           int64_t *id) {
    char gh[65], oh[65];
    sqlite3_stmt *p = s->st_put;
    sqlite3_reset(p);
    sj__store_bind_key(p, 1, key, gh, oh);
    sqlite3_bind_int64(p, 10, (int64_t)len);
    sqlite3_bind_int64(p, 11, (int64_t)pk->frame_len);
    sqlite3_bind_blob(p, 12, pk->digest, 32, SQLITE_STATIC);
    sqlite3_bind_int64(p, 13, sj__store_now_ms());
    sqlite3_bind_blob64(p, 14, pk->frame, (sqlite3_uint64)pk->frame_len, SQLITE_STATIC);
    if (pk->base.used) sqlite3_bind_blob(p, 15, pk->base.key, 32, SQLITE_STATIC);
    sj_status st = SJ_OK;
    if (sqlite3_step(p) != SQLITE_ROW) st = sj__store_sql_fail(s, "put");
    else *id = sqlite3_column_int64(p, 0);
    if (st == SJ_OK && sqlite3_step(p) != SQLITE_DONE) st = sj__store_sql_fail(s, "put");
    sqlite3_reset(p);
    sqlite3_clear_bindings(p);
    return st;
}

/* Inside a write transaction: the base, the parts, the row, its part
 * list, then eviction (never of the row just written; *evicted counts it). */
static sj_status put_locked(sj_store *s, const sj_store_key *key, const uint8_t *bytes, size_t len,
                            const sj_store_part *parts, const sj_store_packed *pk, int64_t *evicted) {
    int64_t id = 0, freed = 0;
    SJ_TRY(sj__store_base_write(s, &pk->base));
    SJ_TRY(sj__store_parts_write(s, bytes, parts, pk));
    SJ_TRY(row_write(s, key, len, pk, &id));
    SJ_TRY(sj__store_refs_replace(s, id, parts, pk->n_parts));
    if (s->cfg.max_bytes > 0) SJ_TRY(sj__store_evict(s, s->cfg.max_bytes, id, evicted, &freed));
    return SJ_OK;
}

sj_status sj_store_put(sj_store *s, const sj_store_key *key, const void *bytes, size_t len) {
    return sj_store_put_parts(s, key, bytes, len, NULL, 0);
}

sj_status sj_store_put_parts(sj_store *s, const sj_store_key *key, const void *bytes, size_t len,
                             const sj_store_part *parts, int n_parts) {
    if (!s || !key || (!bytes && len))
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    SJ_TRY(sj__store_key_check(s->ctx, key));
    if ((uint64_t)len > (uint64_t)s->cfg.max_artifact_bytes)
        return sj_fail(s->ctx, SJ_E_INVALID_ARG, "store put: artifact of %zu bytes exceeds the %lld-byte cap",
                       len, (long long)s->cfg.max_artifact_bytes);
    char why[SJ_STORE_WHY_MAX];
    if (sj__store_parts_bad(parts, n_parts, len, why, sizeof why))
        return sj_fail(s->ctx, SJ_E_INVALID_ARG, "store put: %s", why);
    /* Compress and hash before taking any lock (finding the base takes
     * s->mu for one query): the slow part stays parallel. */
    sj_store_packed pk;
    SJ_TRY(sj__store_pack(s, key, bytes, len, parts, n_parts, &pk));

    pthread_mutex_lock(&s->mu);
    int64_t evicted = 0;
    sj_status st = sj__store_write_begin(s, false);
    if (st == SJ_OK) {
        st = put_locked(s, key, bytes, len, parts, &pk, &evicted);
        sj_status end = sj__store_write_end(s, st == SJ_OK);
        if (st == SJ_OK) st = end;
    }
    if (st == SJ_OK) {
        s->counters.puts++;
        s->counters.bytes_written += len;
        s->counters.evictions += (uint64_t)evicted;
    }
    pthread_mutex_unlock(&s->mu);
    sj__store_packed_free(s->ctx, &pk);
    return st;
}

/* Best effort: a hit refreshes last_used at most once per touch interval,
 * and skips it rather than wait when another process is writing. */
static void touch(sj_store *s, int64_t id, int64_t last_used) {
    int64_t now = sj__store_now_ms();
    if (s->read_only || now - last_used < s->cfg.touch_interval_ms) return;
    if (sj__store_write_begin(s, true) != SJ_OK) {
        sj_ctx_clear_error(s->ctx);
        return;
    }
    sqlite3_reset(s->st_touch);
    sqlite3_bind_int64(s->st_touch, 1, now);
    sqlite3_bind_int64(s->st_touch, 2, id);
    bool ok = sqlite3_step(s->st_touch) == SQLITE_DONE;
    sqlite3_reset(s->st_touch);
    if (sj__store_write_end(s, ok) != SJ_OK) sj_ctx_clear_error(s->ctx);
}

/* Copies out the row of `key` and its parts in one read transaction, so
 * another process's gc, eviction or put cannot show this one a row whose
 * parts are half gone. SJ_E_NOT_FOUND (no message) when there is no row.
 * Caller holds s->mu. */
static sj_status row_fetch(sj_store *s, const sj_store_key *key, char gh[65], char oh[65], sj_store_row *row,
                           int64_t *last_used) {
    memset(row, 0, sizeof *row);
    if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return sj__store_sql_fail(s, "get");
    sqlite3_stmt *q = s->st_get;
    sqlite3_reset(q);
    sj__store_bind_key(q, 1, key, gh, oh);
    int rc = sqlite3_step(q);
    sj_status st = rc == SQLITE_DONE ? SJ_E_NOT_FOUND : rc == SQLITE_ROW ? SJ_OK : sj__store_sql_fail(s, "get");
    if (rc == SQLITE_ROW) {
        row->id = sqlite3_column_int64(q, 0);
        row->raw_size = sqlite3_column_int64(q, 1);
        *last_used = sqlite3_column_int64(q, 4);
        const void *digest = sqlite3_column_blob(q, 2);
        size_t digest_len = (size_t)sqlite3_column_bytes(q, 2);
        const void *frame = sqlite3_column_blob(q, 3);
        st = sj__store_row_read(s, row, digest, digest_len, frame, (size_t)sqlite3_column_bytes(q, 3));
    }
    sqlite3_reset(q);
    /* a read transaction: COMMIT only ends it */
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    if (st != SJ_OK) sj__store_row_free(s->ctx, row);
    return st;
}

/* Reassembles and checks a fetched row outside the lock. */
static sj_status row_unpack(sj_store *s, const sj_store_key *key, const sj_store_row *row, void **raw, char *why,
                            size_t why_len) {
    ZSTD_DCtx *d = sj__store_dctx_take(s);
    if (!d) return sj_fail(s->ctx, SJ_E_NOMEM, "store: out of memory reading a %zu-byte row", row->frame_len);
    sj_status st = sj__store_row_assemble(s->ctx, d, s->cfg.max_artifact_bytes, key, row, raw, why, why_len);
    sj__store_dctx_give(s, d);
    return st;
}

sj_status sj_store_get(sj_store *s, const sj_store_key *key, void **bytes, size_t *len) {
    if (!s || !key || !bytes || !len)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *bytes = NULL;
    *len = 0;
    SJ_TRY(sj__store_key_check(s->ctx, key));
    char gh[65], oh[65], why[SJ_STORE_WHY_MAX];
    sj_store_row row;
    int64_t last_used = 0;
    pthread_mutex_lock(&s->mu);
    sj_status st = row_fetch(s, key, gh, oh, &row, &last_used);
    if (st == SJ_E_NOT_FOUND) {
        s->counters.misses++;
        st = sj_fail(s->ctx, SJ_E_NOT_FOUND, "store: no artifact for graph %.16s... at extent %lld", gh,
                     (long long)key->extent);
    } else if (st == SJ_OK) {
        /* Decompression and the digest checks, the slow part, run outside
         * the lock so gets on several threads (a warm precompile --jobs N)
         * overlap. */
        pthread_mutex_unlock(&s->mu);
        void *raw = NULL;
        st = row_unpack(s, key, &row, &raw, why, sizeof why);
        pthread_mutex_lock(&s->mu);
        if (st == SJ_OK) {
            s->counters.hits++;
            s->counters.bytes_read += (uint64_t)row.raw_size;
            *bytes = raw;
            *len = (size_t)row.raw_size;
            touch(s, row.id, last_used);
        } else if (st == SJ_E_CORRUPT) {
            s->counters.corrupt++;
            s->counters.misses++;
            st = sj_fail(s->ctx, SJ_E_CORRUPT, "store: artifact for graph %.16s... at extent %lld is corrupt: %s",
                         gh, (long long)key->extent, why);
        }
        sj__store_row_free(s->ctx, &row);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static sj_status rm_where(sj_store *s, const char *sql, const sj_store_key *key, const char *prefix,
                          int64_t *removed) {
    pthread_mutex_lock(&s->mu);
    sj_status st = sj__store_write_begin(s, false);
    int64_t n = 0;
    if (st == SJ_OK) {
        sqlite3_stmt *d;
        char gh[65], oh[65];
        if (sqlite3_prepare_v2(s->db, sql, -1, &d, NULL) != SQLITE_OK) {
            st = sj__store_sql_fail(s, "rm");
        } else {
            if (key) sj__store_bind_key(d, 1, key, gh, oh);
            else sqlite3_bind_text(d, 1, prefix, -1, SQLITE_STATIC);
            if (sqlite3_step(d) != SQLITE_DONE) st = sj__store_sql_fail(s, "rm");
            else n = sqlite3_changes(s->db);
            sqlite3_finalize(d);
        }
        sj_status end = sj__store_write_end(s, st == SJ_OK);
        if (st == SJ_OK) st = end;
    }
    pthread_mutex_unlock(&s->mu);
    if (removed) *removed = st == SJ_OK ? n : 0;
    return st;
}

sj_status sj_store_rm_prefix(sj_store *s, const char *hex_prefix, int64_t *removed) {
    if (!s || !hex_prefix)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    size_t n = strlen(hex_prefix);
    if (n < 1 || n > 64)
        return sj_fail(s->ctx, SJ_E_INVALID_ARG, "store rm: graph hash prefix '%s' must be 1 to 64 hex digits",
                       hex_prefix);
    char lower[65];
    for (size_t i = 0; i < n; i++) {
        char c = hex_prefix[i];
        if (c >= 'A' && c <= 'F') c = (char)(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return sj_fail(s->ctx, SJ_E_INVALID_ARG, "store rm: '%s' is not hex (character %zu)", hex_prefix,
                           i + 1);
        lower[i] = c;
    }
    lower[n] = '\0';
    return rm_where(s, "DELETE FROM artifacts WHERE substr(graph_hash, 1, length(?1)) = ?1", NULL, lower,
                    removed);
}

sj_status sj_store_rm(sj_store *s, const sj_store_key *key, int64_t *removed) {
    if (!s || !key)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    SJ_TRY(sj__store_key_check(s->ctx, key));
    return rm_where(s,
                    "DELETE FROM artifacts WHERE graph_hash=?1 AND extent=?2 AND options_hash=?3 AND "
                    "target_triple=?4 AND target_cpu=?5 AND target_features=?6 AND artifact_version=?7 "
                    "AND shapejit_version=?8 AND compiler_version=?9",
                    key, NULL, removed);
}

void sj__store_counters(sj_store *s, sj_store_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->counters;
    pthread_mutex_unlock(&s->mu);
}

sj_status sj_store_stats_get(sj_store *s, sj_store_stats *out) {
    if (!s || !out)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    pthread_mutex_lock(&s->mu);
    *out = s->counters;
    sqlite3_stmt *q;
    sj_status st = SJ_OK;
    /* one statement, one snapshot; each part's and base's bytes counted once */
    if (sqlite3_prepare_v2(s->db,
                           "SELECT count(*), coalesce(sum(stored_size),0) + "
                           "(SELECT coalesce(sum(stored_size),0) FROM parts) + "
                           "(SELECT coalesce(sum(stored_size),0) FROM bases), coalesce(sum(raw_size),0) "
                           "FROM artifacts",
                           -1, &q, NULL) != SQLITE_OK) {
        st = sj__store_sql_fail(s, "stats");
    } else {
        if (sqlite3_step(q) == SQLITE_ROW) {
            out->entries = sqlite3_column_int64(q, 0);
            out->stored_bytes = sqlite3_column_int64(q, 1);
            out->raw_bytes = sqlite3_column_int64(q, 2);
        } else {
            st = sj__store_sql_fail(s, "stats");
        }
        sqlite3_finalize(q);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

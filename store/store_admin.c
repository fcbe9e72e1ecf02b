/* Maintenance over all rows: ls, verify, gc, explain. */
#include "store/store_impl.h"

#include <stdio.h>
#include <string.h>

const char *sj_store_key_component_name(unsigned bit) {
    switch (bit) {
    case SJ_KEY_GRAPH: return "graph hash";
    case SJ_KEY_EXTENT: return "extent";
    case SJ_KEY_OPTIONS: return "options hash";
    case SJ_KEY_TRIPLE: return "target triple";
    case SJ_KEY_CPU: return "target cpu";
    case SJ_KEY_FEATURES: return "target features";
    case SJ_KEY_ARTIFACT_VERSION: return "artifact version";
    case SJ_KEY_SHAPEJIT_VERSION: return "shapejit version";
    case SJ_KEY_COMPILER_VERSION: return "compiler version";
    default: return NULL;
    }
}

sj_status sj_store_ls(sj_store *s, sj_store_visit_fn fn, void *user) {
    if (!s || !fn)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *q;
    sj_status st = SJ_OK;
    if (sqlite3_prepare_v2(s->db, "SELECT " SJ_STORE_ENTRY_COLS " FROM artifacts ORDER BY graph_hash, extent, id",
                           -1, &q, NULL) != SQLITE_OK) {
        st = sj__store_sql_fail(s, "ls");
    } else {
        int rc;
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            sj_store_entry e;
            sj__store_read_entry(q, 0, &e);
            if (fn(user, &e)) break;
        }
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "ls");
        sqlite3_finalize(q);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* Checks every row; hands each good one's bytes to good() (may be NULL;
 * nonzero stops), calls bad() for each corrupt one and collects their ids
 * when `ids` is given. Caller holds s->mu. */
static sj_status check_all(sj_store *s, sj_store_row_fn good, sj_store_problem_fn bad, void *user,
                           int64_t *n_checked, int64_t *n_bad, int64_t **ids) {
    sqlite3_stmt *q;
    int64_t checked = 0, nbad = 0, cap = 0;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT " SJ_STORE_ENTRY_COLS ", digest, blob, id FROM artifacts ORDER BY graph_hash, extent, id",
                           -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "verify");
    sj_status st = SJ_OK;
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        sj_store_entry e;
        sj__store_read_entry(q, 0, &e);
        void *raw;
        char why[160];
        checked++;
        sj_status u = sj__store_unpack(s->ctx, s->dctx, s->cfg.max_artifact_bytes, &e.key,
                                      sqlite3_column_blob(q, 14), (size_t)sqlite3_column_bytes(q, 14),
                                      e.raw_bytes, sqlite3_column_blob(q, 13),
                                      (size_t)sqlite3_column_bytes(q, 13), &raw, why, sizeof why);
        if (u == SJ_OK) {
            int stop = good ? good(user, &e, raw, (size_t)e.raw_bytes) : 0;
            sj_free(s->ctx, raw);
            if (stop) break;
            continue;
        }
        if (u != SJ_E_CORRUPT) {
            st = u;
            break;
        }
        nbad++;
        if (bad) bad(user, &e, why);
        if (ids) {
            if (nbad > cap) {
                cap = cap ? 2 * cap : 16;
                int64_t *grown = sj_realloc(s->ctx, *ids, (size_t)cap * sizeof **ids);
                if (!grown) {
                    st = sj_fail(s->ctx, SJ_E_NOMEM, "store verify: out of memory");
                    break;
                }
                *ids = grown;
            }
            (*ids)[nbad - 1] = sqlite3_column_int64(q, 15);
        }
    }
    if (st == SJ_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "verify");
    sqlite3_finalize(q);
    if (n_checked) *n_checked = checked;
    if (n_bad) *n_bad = nbad;
    return st;
}

sj_status sj_store_verify(sj_store *s, sj_store_problem_fn bad, void *user, int64_t *n_checked,
                          int64_t *n_bad) {
    if (!s) return SJ_E_INVALID_ARG;
    pthread_mutex_lock(&s->mu);
    sj_status st = check_all(s, NULL, bad, user, n_checked, n_bad, NULL);
    pthread_mutex_unlock(&s->mu);
    return st;
}

sj_status sj_store_scan(sj_store *s, sj_store_row_fn fn, sj_store_problem_fn bad, void *user) {
    if (!s || !fn)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    pthread_mutex_lock(&s->mu);
    sj_status st = check_all(s, fn, bad, user, NULL, NULL, NULL);
    pthread_mutex_unlock(&s->mu);
    return st;
}

sj_status sj_store_gc(sj_store *s, int64_t max_bytes, bool remove_corrupt, sj_store_gc_result *out) {
    if (!s) return SJ_E_INVALID_ARG;
    sj_store_gc_result r = {0, 0, 0};
    pthread_mutex_lock(&s->mu);
    sj_status st = sj__store_write_begin(s, false);
    if (st == SJ_OK) {
        int64_t *ids = NULL, nbad = 0;
        if (remove_corrupt) st = check_all(s, NULL, NULL, NULL, NULL, &nbad, &ids);
        sqlite3_stmt *d = NULL;
        if (st == SJ_OK && nbad > 0 &&
            sqlite3_prepare_v2(s->db, "DELETE FROM artifacts WHERE id=?1 RETURNING stored_size", -1, &d, NULL) !=
                SQLITE_OK)
            st = sj__store_sql_fail(s, "gc");
        for (int64_t i = 0; st == SJ_OK && i < nbad; i++) {
            sqlite3_reset(d);
            sqlite3_bind_int64(d, 1, ids[i]);
            if (sqlite3_step(d) == SQLITE_ROW) {
                r.bytes_freed += sqlite3_column_int64(d, 0);
                r.corrupt_removed++;
            }
            sqlite3_reset(d);
        }
        sqlite3_finalize(d);
        sj_free(s->ctx, ids);
        if (st == SJ_OK && max_bytes >= 0) {
            /* Evict oldest first until the bound holds; no row is exempt. */
            sqlite3_stmt *q;
            if (sqlite3_prepare_v2(s->db,
                                   "DELETE FROM artifacts WHERE id IN (SELECT id FROM (SELECT id, sum(stored_size) "
                                   "OVER (ORDER BY last_used_ms DESC, id DESC) AS kept FROM artifacts) "
                                   "WHERE kept > ?1) RETURNING stored_size",
                                   -1, &q, NULL) != SQLITE_OK) {
                st = sj__store_sql_fail(s, "gc");
            } else {
                sqlite3_bind_int64(q, 1, max_bytes);
                int rc;
                while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
                    r.evicted++;
                    r.bytes_freed += sqlite3_column_int64(q, 0);
                }
                if (rc != SQLITE_DONE) st = sj__store_sql_fail(s, "gc");
                sqlite3_finalize(q);
            }
        }
        sj_status end = sj__store_write_end(s, st == SJ_OK);
        if (st == SJ_OK) st = end;
        if (st == SJ_OK) s->counters.evictions += (uint64_t)r.evicted;
    }
    pthread_mutex_unlock(&s->mu);
    if (out) *out = st == SJ_OK ? r : (sj_store_gc_result){0, 0, 0};
    return st;
}

/* --- explain --- */

static unsigned key_diff(const sj_store_key *a, const sj_store_key *b) {
    unsigned d = 0;
    if (memcmp(a->graph_hash, b->graph_hash, 32)) d |= SJ_KEY_GRAPH;
    if (a->extent != b->extent) d |= SJ_KEY_EXTENT;
    if (memcmp(a->options_hash, b->options_hash, 32)) d |= SJ_KEY_OPTIONS;
    if (strcmp(sj__store_str(a->target_triple), sj__store_str(b->target_triple))) d |= SJ_KEY_TRIPLE;
    if (strcmp(sj__store_str(a->target_cpu), sj__store_str(b->target_cpu))) d |= SJ_KEY_CPU;
    if (strcmp(sj__store_str(a->target_features), sj__store_str(b->target_features))) d |= SJ_KEY_FEATURES;
    if (a->artifact_version != b->artifact_version) d |= SJ_KEY_ARTIFACT_VERSION;
    if (strcmp(sj__store_str(a->shapejit_version), sj__store_str(b->shapejit_version))) d |= SJ_KEY_SHAPEJIT_VERSION;
    if (strcmp(sj__store_str(a->compiler_version), sj__store_str(b->compiler_version))) d |= SJ_KEY_COMPILER_VERSION;
    return d;
}

/* Smaller is nearer: differing components first, a different graph
 * weighing most, then the distance in extent. */
static uint64_t distance(const sj_store_key *want, const sj_store_key *have, unsigned diff) {
    uint64_t comps = (uint64_t)__builtin_popcount(diff) + ((diff & SJ_KEY_GRAPH) ? 16 : 0);
    int64_t de = want->extent - have->extent;
    uint64_t ext = (uint64_t)(de < 0 ? -de : de);
    if (ext > ((uint64_t)1 << 40)) ext = (uint64_t)1 << 40;
    return (comps << 41) | ext;
}

typedef struct near_row {
    int64_t id;
    uint64_t dist;
    unsigned diff;
} near_row;

sj_status sj_store_explain(sj_store *s, const sj_store_key *key, int max_results,
                           sj_store_explain_fn fn, void *user) {
    if (!s || !key || !fn || max_results < 1)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (max_results > 64) max_results = 64;
    near_row best[64];
    int n = 0;
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *q = NULL, *one = NULL;
    sj_status st = SJ_OK;
    if (sqlite3_prepare_v2(s->db, "SELECT " SJ_STORE_ENTRY_COLS ", id FROM artifacts", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, "SELECT " SJ_STORE_ENTRY_COLS " FROM artifacts WHERE id=?1", -1, &one, NULL) !=
            SQLITE_OK) {
        st = sj__store_sql_fail(s, "explain");
        goto done;
    }
    int rc;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        sj_store_entry e;
        sj__store_read_entry(q, 0, &e);
        near_row r = {sqlite3_column_int64(q, 13), 0, key_diff(key, &e.key)};
        r.dist = distance(key, &e.key, r.diff);
        /* insertion into the sorted top list */
        int pos = n;
        while (pos > 0 && best[pos - 1].dist > r.dist) pos--;
        if (pos >= max_results) continue;
        int last = n < max_results ? n : max_results - 1;
        memmove(&best[pos + 1], &best[pos], (size_t)(last - pos) * sizeof best[0]);
        best[pos] = r;
        if (n < max_results) n++;
    }
    if (rc != SQLITE_DONE) {
        st = sj__store_sql_fail(s, "explain");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        sqlite3_reset(one);
        sqlite3_bind_int64(one, 1, best[i].id);
        if (sqlite3_step(one) != SQLITE_ROW) continue;
        sj_store_entry e;
        sj__store_read_entry(one, 0, &e);
        fn(user, &e, best[i].diff);
    }
done:
    sqlite3_finalize(q);
    sqlite3_finalize(one);
    pthread_mutex_unlock(&s->mu);
    return st;
}

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

/* Reads row `id` (its blob columns at digest, digest + 1 of q) with its
 * parts and reassembles it as a get does. Caller holds s->mu. */
static sj_status check_row(sj_store *s, sqlite3_stmt *q, int digest, int64_t id, const sj_store_entry *e,
                           void **raw, char *why, size_t why_len) {
    sj_store_row row;
    memset(&row, 0, sizeof row);
    row.id = id;
    row.raw_size = e->raw_bytes;
    sj_status st = sj__store_row_read(s, &row, sqlite3_column_blob(q, digest), (size_t)sqlite3_column_bytes(q, digest),
                                     sqlite3_column_blob(q, digest + 1), (size_t)sqlite3_column_bytes(q, digest + 1));
    if (st == SJ_OK)
        st = sj__store_row_assemble(s->ctx, s->dctx, s->cfg.max_artifact_bytes, &e->key, &row, raw, why, why_len);
    sj__store_row_free(s->ctx, &row);
    return st;
}

static sj_status ids_push(sj_ctx *ctx, int64_t **ids, int64_t n, int64_t *cap, int64_t id) {
    if (n >= *cap) {
        int64_t grown_cap = *cap ? 2 * *cap : 16;
        int64_t *grown = sj_realloc(ctx, *ids, (size_t)grown_cap * sizeof **ids);
        if (!grown) return sj_fail(ctx, SJ_E_NOMEM, "store verify: out of memory");
        *ids = grown;
        *cap = grown_cap;
    }
    (*ids)[n] = id;
    return SJ_OK;
}

/* Checks every row with its parts (a damaged or missing part makes each
 * row placing it corrupt); hands each good one's bytes to good() (may be
 * NULL; nonzero stops), calls bad() for each corrupt one and collects
 * their ids when `ids` is given. Caller holds s->mu; the query's read
 * transaction makes the rows and their parts one snapshot. */
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
        char why[SJ_STORE_WHY_MAX];
        checked++;
        sj_status u = check_row(s, q, 13, sqlite3_column_int64(q, 15), &e, &raw, why, sizeof why);
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
        if (ids && (st = ids_push(s->ctx, ids, nbad - 1, &cap, sqlite3_column_int64(q, 15))) != SJ_OK) break;
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
        /* a damaged part goes with the last corrupt row placing it */
        for (int64_t i = 0; st == SJ_OK && i < nbad; i++) {
            st = sj__store_drop_row(s, ids[i], &r.bytes_freed);
            r.corrupt_removed++;
        }
        sj_free(s->ctx, ids);
        /* Evict oldest first until the bound holds; no row is exempt. */
        if (st == SJ_OK && max_bytes >= 0) st = sj__store_evict(s, max_bytes, 0, &r.evicted, &r.bytes_freed);
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

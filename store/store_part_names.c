/* Names under which a part is found before its bytes are known
 * (shapejit/store.h, sj_store_name_parts): a compiler names each kernel
 * object by what decides its code, and a later compile of the same kernel
 * (another model, the same bucket) asks by that name instead of compiling.
 * Parts stay keyed by content, so objects that compile alike under several
 * names are still kept once. A table of its own, made on the first put, so
 * stores keep their schema version and older shapejits read them as
 * before. A name whose part is gone (removed with the last row holding it)
 * is a miss, and the next put drops such names. Local, as the model
 * digests are: export, import and the fleet tier carry artifacts only. */
#include "store/store_impl.h"

#include "core/hash.h"

#include <string.h>

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS part_names (name BLOB PRIMARY KEY, part_key BLOB NOT NULL)";

static sj_status step_done(sj_store *s, sqlite3_stmt *q, const char *what) {
    sj_status st = sqlite3_step(q) == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, what);
    sqlite3_finalize(q);
    return st;
}

static sj_status exec(sj_store *s, const char *sql, const char *what) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return sj__store_sql_fail(s, what);
    return step_done(s, q, what);
}

sj_status sj_store_name_parts(sj_store *s, const uint8_t (*names)[32], const uint8_t (*keys)[32], int n) {
    if (!s || n < 0 || (n > 0 && (!names || !keys)))
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument or a negative count",
                       __func__);
    if (n == 0) return SJ_OK;
    if (s->read_only)
        return sj_fail(s->ctx, SJ_E_IO, "store %s is read-only (%s): part names are not kept", s->path,
                       s->ro_why);
    static const char what[] = "naming parts";
    pthread_mutex_lock(&s->mu);
    sj_status st = sj__store_write_begin(s, false);
    if (st == SJ_OK) {
        st = exec(s, create_sql, what);
        /* names of parts removed since (their last row went) */
        if (st == SJ_OK)
            st = exec(s, "DELETE FROM part_names WHERE part_key NOT IN (SELECT key FROM parts)", what);
        for (int i = 0; i < n && st == SJ_OK; i++) {
            sqlite3_stmt *q;
            if (sqlite3_prepare_v2(s->db,
                                   "INSERT OR REPLACE INTO part_names SELECT ?1, key FROM parts WHERE key = ?2",
                                   -1, &q, NULL) != SQLITE_OK) {
                st = sj__store_sql_fail(s, what);
                break;
            }
            sqlite3_bind_blob(q, 1, names[i], 32, SQLITE_STATIC);
            sqlite3_bind_blob(q, 2, keys[i], 32, SQLITE_STATIC);
            st = step_done(s, q, what);
        }
        sj_status end = sj__store_write_end(s, st == SJ_OK);
        if (st == SJ_OK) st = end;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* The part key `name` points to; SJ_E_NOT_FOUND when none. */
static sj_status lookup(sj_store *s, const uint8_t name[32], uint8_t key[32]) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT part_key FROM part_names WHERE name = ?1", -1, &q, NULL) !=
        SQLITE_OK)
        return SJ_E_NOT_FOUND; /* no table yet: nothing named, a miss as any */
    sqlite3_bind_blob(q, 1, name, 32, SQLITE_STATIC);
    sj_status st = SJ_E_NOT_FOUND;
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW && sqlite3_column_bytes(q, 0) == 32) {
        memcpy(key, sqlite3_column_blob(q, 0), 32);
        st = SJ_OK;
    } else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        st = sj__store_sql_fail(s, "reading a part name");
    }
    sqlite3_finalize(q);
    return st;
}

sj_status sj_store_get_named_part(sj_store *s, const uint8_t name[32], void **bytes, size_t *len) {
    if (!s || !name || !bytes || !len)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *bytes = NULL;
    *len = 0;
    uint8_t key[32];
    pthread_mutex_lock(&s->mu);
    sj_status st = lookup(s, name, key);
    pthread_mutex_unlock(&s->mu);
    if (st == SJ_E_NOT_FOUND) {
        char hex[65];
        sj__hex_encode(name, 32, hex);
        return sj_fail(s->ctx, SJ_E_NOT_FOUND, "store: no part named %s", hex);
    }
    /* read as any part: checked against its digest, in its own snapshot */
    return st == SJ_OK ? sj_store_get_part(s, key, bytes, len) : st;
}

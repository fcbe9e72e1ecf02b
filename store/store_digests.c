/* What a model's weights hashed to, kept under the source key of the files
 * they were read from (ir/graph_impl.h says what the key covers): a warm
 * start whose files are unchanged finds the digests here and hashes no
 * weight byte (cache/model_digests.c). A table of its own, made on the
 * first put, so stores keep their schema version and older shapejits read
 * them as before. Local to this store: paths and inodes mean nothing on
 * another machine, so export, import and the fleet tier carry artifacts
 * only. Each row carries BLAKE3(key || digests): a damaged row is a miss,
 * never digests taken on trust. Bounded: a source's new row replaces the
 * path's older ones (the file changed), and at most SJ_STORE_DIGEST_ROWS
 * rows stay, the least recently written dropped. */
#include "store/store_impl.h"

#include <llvm-c/blake3.h>
#include <stdio.h>
#include <string.h>

#define SJ_STORE_DIGEST_ROWS 64

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS model_digests ("
    " source_key BLOB PRIMARY KEY, path TEXT NOT NULL, written_ms INTEGER NOT NULL,"
    " digests BLOB NOT NULL, check_hash BLOB NOT NULL)";

static void check_of(const uint8_t key[32], const void *blob, size_t len, uint8_t out[32]) {
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, "sj-model-digests-1", 18);
    llvm_blake3_hasher_update(&h, key, 32);
    llvm_blake3_hasher_update(&h, blob, len);
    llvm_blake3_hasher_finalize(&h, out, 32);
}

static bool table_exists(sj_store *s) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='model_digests'",
                           -1, &q, NULL) != SQLITE_OK)
        return false;
    bool found = sqlite3_step(q) == SQLITE_ROW;
    sqlite3_finalize(q);
    return found;
}

sj_status sj__store_digests_get(sj_store *s, const uint8_t key[32], void **blob, size_t *len) {
    *blob = NULL;
    *len = 0;
    pthread_mutex_lock(&s->mu);
    sj_status st = SJ_E_NOT_FOUND;
    sqlite3_stmt *q = NULL;
    if (table_exists(s)) {
        if (sqlite3_prepare_v2(s->db, "SELECT digests, check_hash FROM model_digests WHERE source_key = ?",
                               -1, &q, NULL) != SQLITE_OK) {
            st = sj__store_sql_fail(s, "reading the weights' digests");
        } else {
            sqlite3_bind_blob(q, 1, key, 32, SQLITE_STATIC);
            int rc = sqlite3_step(q);
            if (rc == SQLITE_ROW) {
                size_t n = (size_t)sqlite3_column_bytes(q, 0);
                const void *d = sqlite3_column_blob(q, 0);
                uint8_t want[32];
                if (d && n) check_of(key, d, n, want);
                if (d && n && sqlite3_column_bytes(q, 1) == 32 &&
                    memcmp(sqlite3_column_blob(q, 1), want, 32) == 0) {
                    if ((*blob = sj_alloc(s->ctx, n))) {
                        memcpy(*blob, d, n);
                        *len = n;
                        st = SJ_OK;
                    } else {
                        st = sj_fail(s->ctx, SJ_E_NOMEM, "store: out of memory reading the weights' digests");
                    }
                }
            } else if (rc != SQLITE_DONE) {
                st = sj__store_sql_fail(s, "reading the weights' digests");
            }
        }
    }
    sqlite3_finalize(q);
    pthread_mutex_unlock(&s->mu);
    if (st == SJ_E_NOT_FOUND) return sj_fail(s->ctx, SJ_E_NOT_FOUND, "store: no digests for this model file");
    return st;
}

static sj_status exec(sj_store *s, const char *sql, const uint8_t key[32], const char *path,
                      const void *blob, size_t len, const uint8_t check[32]) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "writing the weights' digests");
    int n = sqlite3_bind_parameter_count(q);
    if (n >= 1) sqlite3_bind_blob(q, 1, key, 32, SQLITE_STATIC);
    if (n >= 2) sqlite3_bind_text(q, 2, path, -1, SQLITE_STATIC);
    if (n >= 3) sqlite3_bind_int64(q, 3, sj__store_now_ms());
    if (n >= 4) sqlite3_bind_blob64(q, 4, blob, (sqlite3_uint64)len, SQLITE_STATIC);
    if (n >= 5) sqlite3_bind_blob(q, 5, check, 32, SQLITE_STATIC);
    sj_status st = sqlite3_step(q) == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, "writing the weights' digests");
    sqlite3_finalize(q);
    return st;
}

sj_status sj__store_digests_put(sj_store *s, const uint8_t key[32], const char *path, const void *blob,
                               size_t len) {
    if (s->read_only)
        return sj_fail(s->ctx, SJ_E_IO, "store %s is read-only (%s): the weights' digests are not kept",
                       s->path, s->ro_why);
    uint8_t check[32];
    check_of(key, blob, len, check);
    char limit[160];
    snprintf(limit, sizeof limit,
             "DELETE FROM model_digests WHERE source_key NOT IN "
             "(SELECT source_key FROM model_digests ORDER BY written_ms DESC, rowid DESC LIMIT %d)",
             SJ_STORE_DIGEST_ROWS);
    pthread_mutex_lock(&s->mu);
    sj_status st = sj__store_write_begin(s, false);
    if (st == SJ_OK) {
        st = exec(s, create_sql, NULL, NULL, NULL, 0, NULL);
        /* the path's rows from files since changed, then this one */
        if (st == SJ_OK)
            st = exec(s, "DELETE FROM model_digests WHERE source_key <> ?1 AND path = ?2", key, path, NULL, 0,
                      NULL);
        if (st == SJ_OK)
            st = exec(s, "INSERT OR REPLACE INTO model_digests VALUES (?1, ?2, ?3, ?4, ?5)", key, path, blob,
                      len, check);
        if (st == SJ_OK) st = exec(s, limit, NULL, NULL, NULL, 0, NULL);
        sj_status end = sj__store_write_end(s, st == SJ_OK);
        if (st == SJ_OK) st = end;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

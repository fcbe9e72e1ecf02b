/* The store's private state and the helpers its files share. Not installed. */
#ifndef SJ_STORE_IMPL_H
#define SJ_STORE_IMPL_H

#include "shapejit/store.h"

#include "core/core_impl.h"

#include <pthread.h>
#include <sqlite3.h>
/* ZSTD_getFrameHeader: the frame flags are checked before decoding. */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#define SJ_STORE_SCHEMA_VERSION 1
/* Checkpoint once the WAL holds this many frames (SQLite's default
 * autocheckpoint threshold, run by us under the write lock instead). */
#define SJ_STORE_CHECKPOINT_FRAMES 1000

struct sj_store {
    sj_ctx *ctx;
    sj_store_config cfg;
    char *path;      /* NULL for in-memory */
    char *lock_path; /* path + "-sjlock" */
    int lock_fd;     /* flock()ed around every write and checkpoint; -1 in memory */
    char warning[512];
    /* Opened read-only (the file or its folder is not writable): reads and
     * lookups work, every write fails naming ro_why, hits are not touched. */
    bool read_only;
    char ro_why[256];
    sqlite3 *db;
    pthread_mutex_t mu; /* serialises use of db, the statements and dctx */
    sqlite3_stmt *st_get, *st_put, *st_touch;
    ZSTD_DCtx *dctx;
    /* Decompression contexts for gets, which decompress outside mu. */
    pthread_mutex_t pool_mu;
    ZSTD_DCtx *pool[8];
    int n_pool;
    int wal_frames; /* from the WAL hook: frames in the WAL after the last commit */
    sj_store_stats counters;
};

/* --- store_open.c --- */
/* Takes the cross-process write lock (waiting up to busy_timeout_ms unless
 * `try_only`), then BEGIN IMMEDIATE. Caller holds s->mu. */
sj_status sj__store_write_begin(sj_store *s, bool try_only);
/* COMMIT (ok) or ROLLBACK, checkpoint when the WAL is long, release the
 * lock. Returns the COMMIT's failure, if any. */
sj_status sj__store_write_end(sj_store *s, bool ok);
sj_status sj__store_sql_fail(sj_store *s, const char *what);
int64_t sj__store_now_ms(void);

/* The in-memory counters of sj_store_stats (no SQL, cannot fail): for
 * callers that only want evictions and hits. */
void sj__store_counters(sj_store *s, sj_store_stats *out);

/* A decompression context for use outside mu (NULL: out of memory), and
 * back to the pool (freed when the pool is full). */
ZSTD_DCtx *sj__store_dctx_take(sj_store *s);
void sj__store_dctx_give(sj_store *s, ZSTD_DCtx *d);

/* --- store_digests.c --- */
/* The weights' digests kept for a model file's source key (*blob
 * sj_alloc'ed); SJ_E_NOT_FOUND when none is kept or the row is damaged. */
sj_status sj__store_digests_get(sj_store *s, const uint8_t key[32], void **blob, size_t *len);
/* Keeps them (replacing path's older rows); fails on a read-only store. */
sj_status sj__store_digests_put(sj_store *s, const uint8_t key[32], const char *path, const void *blob,
                               size_t len);

/* --- store_blob.c --- */
/* BLAKE3 over the key's canonical encoding. */
void sj__store_key_digest(const sj_store_key *k, uint8_t out[32]);
/* BLAKE3(key digest || raw): what a row's digest column holds. */
void sj__store_content_digest(const uint8_t key_digest[32], const void *raw, size_t len,
                             uint8_t out[32]);
/* zstd frame with checksum and content size; *frame from sj_alloc. */
sj_status sj__store_compress(sj_ctx *ctx, int level, const void *raw, size_t len, void **frame,
                            size_t *frame_len);
/* Checks and decompresses one stored blob. On SJ_E_CORRUPT `why` says
 * which check failed; *raw is then NULL. */
sj_status sj__store_unpack(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_key *key,
                          const void *frame, size_t frame_len, int64_t raw_size,
                          const void *digest, size_t digest_len, void **raw, char *why,
                          size_t why_len);
/* Validates a key's strings (length, NULL -> ""). */
sj_status sj__store_key_check(sj_ctx *ctx, const sj_store_key *k);
const char *sj__store_str(const char *s);

/* --- store_rw.c --- */
/* Reads the key + size columns (in the order of SJ_STORE_ENTRY_COLS)
 * starting at column `first`; strings point into the statement's row. */
void sj__store_read_entry(sqlite3_stmt *st, int first, sj_store_entry *e);

#define SJ_STORE_KEY_COLS                                                                          \
    "graph_hash, extent, options_hash, target_triple, target_cpu, target_features, "              \
    "artifact_version, shapejit_version, compiler_version"
#define SJ_STORE_ENTRY_COLS SJ_STORE_KEY_COLS ", raw_size, stored_size, created_ms, last_used_ms"

#endif

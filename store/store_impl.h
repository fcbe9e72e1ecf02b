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

/* 2: shared parts (the parts and artifact_parts tables, store_parts.c).
 * 3: bases (the bases table and artifacts.base_key, store_base.c).
 * 4: parts compressed against parts (parts.dict_key, store_part_delta.c). */
#define SJ_STORE_SCHEMA_VERSION 4
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
    sqlite3_stmt *st_get, *st_put, *st_touch, *st_refs, *st_base;
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
/* BLAKE3(name || raw): what a row's digest column holds (name: the key
 * digest) and a part's (name: the part's key). */
void sj__store_content_digest(const uint8_t name[32], const void *raw, size_t len,
                             uint8_t out[32]);
/* zstd frame with checksum and content size, compressed against dict (a
 * raw-content dictionary; dict_len 0: none); *frame from sj_alloc. dict
 * must not overlap raw (zstd would ignore it). */
sj_status sj__store_compress(sj_ctx *ctx, int level, const void *dict, size_t dict_len, const void *raw,
                            size_t len, void **frame, size_t *frame_len);
/* Validates a key's strings (length, NULL -> ""). */
sj_status sj__store_key_check(sj_ctx *ctx, const sj_store_key *k);
const char *sj__store_str(const char *s);

/* Checks a frame and decompresses it into dst, which holds exactly
 * raw_size bytes, with the dictionary it was compressed against (dict_len
 * 0: none). On SJ_E_CORRUPT `why` says which check failed. */
sj_status sj__store_inflate(ZSTD_DCtx *dctx, int64_t cap, const void *dict, size_t dict_len, const void *frame,
                           size_t frame_len, int64_t raw_size, void *dst, char *why, size_t why_len);

/* --- store_parts.c --- */
/* Room for a check's reason: a part's key in hex, its place, the check. */
#define SJ_STORE_WHY_MAX 320

/* A parts row as read for a get, verify or export, copied out so it can
 * be checked outside the store's lock; found is false when no parts row
 * holds the key a row places. A part compressed against another part
 * (has_ref: its reference, ref_key, store_part_delta.c) comes with that
 * part's row, ref (sj_alloc'ed; NULL when no parts row holds ref_key;
 * ref->has_ref when the reference is itself compressed against one, which
 * a sound store never holds). Bases use found..frame_len only. */
typedef struct sj_store_part_row {
    bool found;
    int64_t raw_size;
    uint8_t digest[32];
    size_t digest_len;
    void *frame;
    size_t frame_len;
    bool has_ref;
    uint8_t ref_key[32];
    struct sj_store_part_row *ref;
} sj_store_part_row;

/* The columns a part is read with (p its parts row, d its reference's,
 * LEFT JOINed on d.key = p.dict_key), for sj__store_part_copy. */
#define SJ_STORE_PART_COLS                                                                          \
    "p.raw_size, p.digest, p.blob, p.dict_key, d.key IS NOT NULL, d.raw_size, d.digest, d.blob, "      \
    "d.dict_key IS NOT NULL"
#define SJ_STORE_PART_REF_JOIN " LEFT JOIN parts d ON d.key = p.dict_key"

/* A row as read for a get, verify or export: its own blob (the inline
 * bytes) and the parts it places (parts[i], from artifact_parts, in offset
 * order) with their parts rows (stored[i]), and the base its blob was
 * compressed against (has_base; base as its bases row), all copied out. */
typedef struct sj_store_row {
    int64_t id, raw_size;
    uint8_t digest[32];
    size_t digest_len;
    void *frame;
    size_t frame_len;
    sj_store_part *parts;
    sj_store_part_row *stored;
    int n_parts;
    bool has_base;
    uint8_t base_key[32];
    sj_store_part_row base;
} sj_store_row;

/* Copies the row's digest and blob into row (id and raw_size are the
 * caller's), then the parts it places, read with s->st_refs, and its base
 * (store_base.c). Caller holds s->mu inside one read transaction (or a
 * statement still stepping), so the row, its parts and its base are one
 * snapshot. */
sj_status sj__store_row_read(sj_store *s, sj_store_row *row, const void *digest, size_t digest_len,
                            const void *frame, size_t frame_len);
void sj__store_row_free(sj_ctx *ctx, sj_store_row *row);
/* The row's bytes: its inline bytes with each part spliced back in, every
 * part checked against BLAKE3(part key || bytes) and the whole against the
 * row's digest (BLAKE3(key digest || bytes)). On SJ_E_CORRUPT `why`
 * (SJ_STORE_WHY_MAX bytes) says which check failed, naming a part by its
 * key in hex; *raw is then NULL. */
sj_status sj__store_row_assemble(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_key *key,
                                const sj_store_row *row, void **raw, char *why, size_t why_len);

/* A stored part or base (r) checked against BLAKE3(key || bytes) and
 * decompressed (*bytes sj_alloc'ed on SJ_OK), a part with its reference
 * checked and decompressed first. SJ_E_CORRUPT: `why` says which check
 * failed. */
sj_status sj__store_stored_unpack(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const uint8_t key[32],
                                 const sj_store_part_row *r, void **bytes, char *why, size_t why_len);
/* Copies raw_size, digest and blob from columns first..first+2 of q into
 * r (found). */
sj_status sj__store_stored_copy(sj_ctx *ctx, sqlite3_stmt *q, int first, sj_store_part_row *r);
/* Copies a part read with SJ_STORE_PART_COLS (from column first) into r:
 * sj__store_stored_copy and its reference, if any. */
sj_status sj__store_part_copy(sj_ctx *ctx, sqlite3_stmt *q, int first, sj_store_part_row *r);
void sj__store_part_row_free(sj_ctx *ctx, sj_store_part_row *r);
/* Inside a write transaction: sel (SELECT raw_size, digest, blob ...
 * WHERE key = ?1) run for key; *found whether a row is stored, *keep
 * whether it holds exactly raw under `digest` (so a put keeps it rather
 * than writing its own). */
sj_status sj__store_stored_keep(sj_store *s, sqlite3_stmt *sel, const uint8_t key[32], const uint8_t *raw,
                               uint64_t len, const uint8_t digest[32], bool *found, bool *keep);

/* False when the part list fits `len` bytes as sj_store_put_parts asks;
 * true with why not (the part index and the numbers) in why. */
bool sj__store_parts_bad(const sj_store_part *parts, int n_parts, uint64_t len, char *why, size_t why_len);

/* The base a put compresses its row against (used), as it writes it:
 * key BLAKE3(family || raw), digest BLAKE3(key || raw), raw its bytes and
 * frame their plain frame (both sj_alloc'ed). */
typedef struct sj_store_base {
    bool used;
    uint8_t key[32], family[32], digest[32];
    int64_t extent; /* of the row whose bytes it was made from */
    void *raw, *frame;
    size_t len, frame_len;
} sj_store_base;

/* What a put writes, made before the lock: the row's digest and inline
 * frame, its base, and each part's digest and plain frame, with a frame
 * compressed against a reference (delta, when ref >= 0: refs[ref]) when
 * that pays. */
typedef struct sj_store_packed_part {
    uint8_t digest[32];
    void *frame;
    size_t frame_len;
    int ref;
    void *delta;
    size_t delta_len;
} sj_store_packed_part;
/* A part the put compresses others against: a stored one that checked
 * or one of its own; kept plain with these bytes (store_part_delta.c).
 * frame is its plain frame: copied from the store (owned) or the put's
 * own part's (borrowed). */
typedef struct sj_store_part_ref {
    uint8_t key[32], digest[32];
    void *raw;
    size_t len;
    void *frame;
    size_t frame_len;
    bool owned;
    int part; /* the put's part it is, or -1 */
} sj_store_part_ref;
typedef struct sj_store_packed {
    uint8_t digest[32];
    void *frame;
    size_t frame_len;
    sj_store_base base;
    sj_store_packed_part *parts;
    int n_parts;
    sj_store_part_ref *refs;
    int n_refs;
} sj_store_packed;
sj_status sj__store_pack(sj_store *s, const sj_store_key *key, const uint8_t *bytes, size_t len,
                        const sj_store_part *parts, int n_parts, sj_store_packed *out);
void sj__store_packed_free(sj_ctx *ctx, sj_store_packed *pk);
/* Inside a write transaction: keeps each part whose stored bytes are
 * sound and equal to the put's, writes (replaces) the others. */
sj_status sj__store_parts_write(sj_store *s, const uint8_t *bytes, const sj_store_part *parts,
                               const sj_store_packed *pk);
/* Inside a write transaction: row `id` places exactly these parts now;
 * parts no row places any more are deleted. */
sj_status sj__store_refs_replace(sj_store *s, int64_t id, const sj_store_part *parts, int n_parts);

/* Inside a transaction: the stored bytes of the rows, the parts and the
 * bases, each part and base once. */
sj_status sj__store_stored_total(sj_store *s, int64_t *total);
/* Inside a write transaction: deletes row `id`, the parts no other row
 * places and its base when no other row uses it; adds the stored bytes
 * that frees to *freed. */
sj_status sj__store_drop_row(sj_store *s, int64_t id, int64_t *freed);

/* --- store_part_delta.c --- */
/* Each part's digest and plain frame, and a frame against the most
 * similar part of the graph's stored rows or of this put when that halves
 * it (pk->parts and pk->refs; pk->n_parts set). Takes s->mu once, for the
 * lookups; the caller holds no lock. */
sj_status sj__store_parts_pack(sj_store *s, const sj_store_key *key, const uint8_t *bytes, const sj_store_part *parts,
                              int n_parts, sj_store_packed *pk);
void sj__store_part_refs_free(sj_ctx *ctx, sj_store_packed *pk);
/* The checked bytes of r's reference (*dict sj_alloc'ed; NULL when r has
 * none). On SJ_E_CORRUPT `why` names the reference by its key. */
sj_status sj__store_part_ref_load(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_part_row *r,
                                 void **dict, char *why, size_t why_len);
/* Inside a write transaction: the put's part i (not kept) written, as its
 * delta when it has one and no stored part is compressed against it (a
 * reference stays plain), after making sure its reference is stored plain
 * and sound (else writing the put's checked copy). */
sj_status sj__store_part_put(sj_store *s, const sj_store_part *p, const sj_store_packed *pk, int i);
/* Inside a transaction: whether a stored part is compressed against part
 * `key` (it is a reference). */
sj_status sj__store_part_is_reference(sj_store *s, const uint8_t key[32], bool *yes);

/* --- store_base.c --- */
/* The row's inline bytes (in, n) compressed, against a base of its
 * graph when it has enough of them: the nearest stored one that checks
 * and pays, else one made of these bytes (*base says which; free it with
 * sj__store_base_free). *frame sj_alloc'ed. Takes s->mu for one lookup;
 * the caller holds no lock. */
sj_status sj__store_base_pack(sj_store *s, const sj_store_key *key, const uint8_t *in, size_t n,
                             sj_store_base *base, void **frame, size_t *frame_len);
void sj__store_base_free(sj_ctx *ctx, sj_store_base *base);
/* Inside a write transaction: keeps the stored base when it is sound and
 * holds base's bytes, writes (replaces) it otherwise. No-op unless used. */
sj_status sj__store_base_write(sj_store *s, const sj_store_base *base);
/* Copies row `id`'s base (if any) into row, read with s->st_base. Caller
 * holds s->mu inside the row's read transaction. */
sj_status sj__store_base_read(sj_store *s, sj_store_row *row);
/* The row's base checked and decompressed (*dict sj_alloc'ed; NULL when
 * the row has none). On SJ_E_CORRUPT `why` names the base by its key. */
sj_status sj__store_base_load(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_row *row, void **dict,
                             char *why, size_t why_len);

/* --- store_rw.c --- */
/* Binds the 9 key columns (SJ_STORE_KEY_COLS' order) to parameters
 * first..first+8 of st; gh and oh hold the hex hashes until it has run. */
void sj__store_bind_key(sqlite3_stmt *st, int first, const sj_store_key *k, char gh[65], char oh[65]);
/* Reads the key + size columns (in the order of SJ_STORE_ENTRY_COLS)
 * starting at column `first`; strings point into the statement's row. */
void sj__store_read_entry(sqlite3_stmt *st, int first, sj_store_entry *e);

/* Inside a write transaction: drops least recently used rows other than
 * keep_id (0: none kept) until the stored bytes fit max_bytes; adds to
 * *evicted and *freed. */
sj_status sj__store_evict(sj_store *s, int64_t max_bytes, int64_t keep_id, int64_t *evicted,
                         int64_t *freed);

#define SJ_STORE_KEY_COLS                                                                          \
    "graph_hash, extent, options_hash, target_triple, target_cpu, target_features, "              \
    "artifact_version, shapejit_version, compiler_version"
#define SJ_STORE_ENTRY_COLS SJ_STORE_KEY_COLS ", raw_size, stored_size, created_ms, last_used_ms"

#endif

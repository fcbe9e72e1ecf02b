/* shapejit/store.h — the persistent artifact store: SQLite (WAL) + zstd.
 *
 *   sj_store_config cfg;
 *   sj_store_config_init(&cfg);
 *   cfg.path = "/home/me/.cache/shapejit/store.db";   // directory made 0700, file 0600
 *   cfg.max_bytes = 1 << 30;                           // evict least recently used above 1 GiB
 *   sj_store *s;
 *   if (sj_store_open(ctx, &cfg, &s) != SJ_OK) { puts(sj_ctx_last_error(ctx)); return 1; }
 *   sj_store_key k = {...};                            // graph hash, extent, options, target, toolchain
 *   void *bytes; size_t len;
 *   sj_status st = sj_store_get(s, &k, &bytes, &len);
 *   if (st == SJ_OK) { use(bytes, len); sj_free(ctx, bytes); }
 *   else if (st == SJ_E_NOT_FOUND || st == SJ_E_CORRUPT) { compile(&bytes, &len); sj_store_put(s, &k, bytes, len); }
 *   // or, naming the compiled kernels inside the bytes so each is kept once
 *   // however many buckets and models hold it (key: a hash of what decides it):
 *   sj_store_part kernels[2] = {{.offset = 256, .len = 4096, .key = {...}},
 *                               {.offset = 4352, .len = 900, .key = {...}}};
 *   sj_store_put_parts(s, &k, bytes, len, kernels, 2);   // a get returns the same bytes
 *   sj_store_close(s);
 *
 * One row per artifact, keyed by every component of sj_store_key, each in a
 * column of its own (so `explain` can say which one made a lookup miss).
 * The artifact bytes are opaque here. A blob is a zstd frame (content size
 * and checksum on) plus a BLAKE3 digest over the row's key and the raw
 * bytes, checked before a byte is handed out: a flipped, truncated, or
 * swapped-in blob (one from another key's row) comes back as SJ_E_CORRUPT,
 * which callers treat as a miss (compile, then put overwrites the row).
 * The parts a put names are kept once, in a table of their own, each with
 * a digest of its key and bytes; the row's blob holds the rest, and a get
 * splices the parts back in and checks the whole as above, so a damaged
 * part is a miss for every row holding it, and the next put of any of
 * those rows repairs it for all of them.
 * What a row holds besides its parts (a launch plan: much the same in
 * every bucket of a graph, differing in extents and strides) is
 * compressed against a base, inside put and get (nothing to call): those
 * bytes of an earlier row of the graph (every key component equal but
 * the extent), kept once like a part and checked by a digest whenever
 * read. The first row of a graph (or one of another shape than its stored
 * bases) makes its own bytes a base; the next ones are a fraction of their
 * size (a BERT ladder's ten plans: 68 KB alone, 22 KB with two bases).
 * A damaged or missing base is a miss for every row using it; a put of
 * the bytes it was made of repairs it, any other put writes a fresh base,
 * and it goes with the last row using it.
 * A part that is nearly the same bytes as another the graph's rows hold
 * (a kernel compiled at another bucket extent differs in a few immediates)
 * is kept as a frame against it, likewise inside put and get: against the
 * stored part nearest its size that halves it, or an earlier part of the
 * same put, never against one that is itself kept so (a BERT ladder's 56
 * kernel objects: 91 KB alone, 52 KB so). That part stays as long as one
 * is kept against it, even when no row holds it any more, and is checked
 * by its own digest whenever read; a damaged or missing one is a miss for
 * every part and row kept against it, naming it, until a put of a row
 * holding it (or of each of those parts) repairs them.
 *
 * Several threads may share one sj_store (calls are serialised inside), and
 * several processes may open the same file. The store belongs to the
 * context it was opened with; close it before destroying the context.
 */
#ifndef SHAPEJIT_STORE_H
#define SHAPEJIT_STORE_H

#include "shapejit/common.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The full key. Strings are borrowed for the duration of a call; NULL reads
 * as "". Every string is at most SJ_STORE_FIELD_MAX - 1 bytes. */
#define SJ_STORE_FIELD_MAX 256
typedef struct sj_store_key {
    uint8_t graph_hash[32];       /* sj_graph_hash */
    int64_t extent;               /* the bucket extent the artifact was compiled at */
    uint8_t options_hash[32];     /* canonical compile options */
    const char *target_triple;    /* "x86_64-pc-linux-gnu", "nvptx64-nvidia-cuda" */
    const char *target_cpu;       /* "znver3", "sm_90" */
    const char *target_features;  /* "+avx2,+fma", "" */
    uint32_t artifact_version;    /* artifact format version */
    const char *shapejit_version; /* sj_version_string() of the compiling library */
    const char *compiler_version; /* "llvm-19.1.7", "nvrtc-12.4" */
} sj_store_key;

/* Bits naming key components (explain). */
enum {
    SJ_KEY_GRAPH = 1u << 0,
    SJ_KEY_EXTENT = 1u << 1,
    SJ_KEY_OPTIONS = 1u << 2,
    SJ_KEY_TRIPLE = 1u << 3,
    SJ_KEY_CPU = 1u << 4,
    SJ_KEY_FEATURES = 1u << 5,
    SJ_KEY_ARTIFACT_VERSION = 1u << 6,
    SJ_KEY_SHAPEJIT_VERSION = 1u << 7,
    SJ_KEY_COMPILER_VERSION = 1u << 8,
    SJ_KEY_ALL_ = (1u << 9) - 1
};
/* "graph hash", "extent", ... for one bit; NULL for anything else. */
SJ_API const char *sj_store_key_component_name(unsigned bit);

typedef struct sj_store_config {
    /* Set by sj_store_config_init to the size of this struct the caller is built with;
     * leave it (see "Config structs" in shapejit/common.h). */
    size_t size;
    /* The database file. NULL = keep everything in memory (nothing persists). */
    const char *path;
    /* Bound on the stored (compressed) bytes, each shared part and base
     * counted once; above it the least recently used rows are evicted
     * after a put (never the row just written, even when it alone is
     * larger), and the parts and bases nothing needs any more with them.
     * 0 = unbounded. */
    int64_t max_bytes;
    /* Largest artifact accepted by put and produced by get (a frame that
     * claims more is corrupt). Default 1 GiB. */
    int64_t max_artifact_bytes;
    /* How long a call waits for another process's write lock. Default 5000. */
    int busy_timeout_ms;
    /* zstd level for puts. Default -1: a fast level stores literals raw,
     * which decodes about twice as fast as level 3 for object code at some
     * 15-20% more bytes; a warm start pays the decode on every artifact. */
    int compression_level;
    /* A hit rewrites the row's last_used only when it is older than this,
     * so a hot artifact costs a write at most this often. Default 60000. */
    int64_t touch_interval_ms;
    /* When the file is not a database, is read-only, or cannot be created,
     * open an in-memory store instead of failing; sj_store_persistent() is
     * then false and sj_store_warning() says why. Default false. */
    bool fallback_to_memory;
} sj_store_config;

SJ_API void sj_store_config_init(sj_store_config *cfg);

typedef struct sj_store sj_store;

/* A file that cannot be written, or whose folder cannot (its mode grants
 * no write, even to root; a read-only mount), is opened read-only: gets,
 * ls, verify, explain and export work, hits are not recorded, and every
 * write (put, rm, gc, import) fails with SJ_E_IO naming the path and why;
 * sj_store_read_only() is true and sj_store_warning() says so. A read-only
 * store must hold this version's schema (nothing can be rebuilt in it).
 * Errors: SJ_E_IO (cannot create the directory or file; read-only and empty),
 * SJ_E_CORRUPT (the file is not an SQLite database), SJ_E_UNSUPPORTED (a
 * store written by a newer shapejit: its schema version is unknown),
 * SJ_E_BUSY (another process held the lock past busy_timeout_ms). Each
 * message names the path. An older schema is rebuilt (the store is a cache). */
SJ_API sj_status sj_store_open(sj_ctx *ctx, const sj_store_config *cfg, sj_store **out);
SJ_API void sj_store_close(sj_store *s);
/* False for an in-memory store (path NULL or fallback taken). */
SJ_API bool sj_store_persistent(const sj_store *s);
/* Why the store fell back to memory, or that it is read-only; "" otherwise. */
SJ_API const char *sj_store_warning(const sj_store *s);
/* Opened read-only (see sj_store_open). */
SJ_API bool sj_store_read_only(const sj_store *s);

/* Inserts or overwrites the row of `key`. */
SJ_API sj_status sj_store_put(sj_store *s, const sj_store_key *key, const void *bytes, size_t len);
/* A byte range of a put's bytes that the store keeps once for every row
 * holding the same part (a compiled kernel that several buckets and models
 * share). key names the content: the caller guarantees equal keys mean
 * equal bytes (a cryptographic hash of what decides them); the store still
 * checks each part's bytes against a digest of (key, bytes) whenever it
 * reads them. */
typedef struct sj_store_part {
    uint64_t offset, len;
    uint8_t key[32];
} sj_store_part;
/* sj_store_put, with parts: ranges of bytes, in increasing offset order,
 * not overlapping, each len >= 1, inside [0, len). n_parts 0 is
 * sj_store_put. A part already stored under the same key is kept when its
 * stored bytes are sound and equal these, and replaced otherwise (which
 * repairs a damaged part for every row holding it). Refused with
 * SJ_E_INVALID_ARG, nothing written, naming the part and its numbers: a
 * range out of bounds, overlapping or out of order, len 0, n_parts < 0,
 * parts NULL with n_parts > 0, or two parts of this put with one key and
 * different bytes. */
SJ_API sj_status sj_store_put_parts(sj_store *s, const sj_store_key *key, const void *bytes, size_t len,
                                    const sj_store_part *parts, int n_parts);
/* On SJ_OK *bytes (allocated with sj_alloc on the store's context; caller
 * frees with sj_free) holds the verified artifact: exactly the bytes put,
 * parts spliced back in. The row, its parts (with the parts they are kept
 * against) and its base are read in one snapshot, so another process's
 * put, rm or gc never shows a half-removed row. SJ_E_NOT_FOUND: no row.
 * SJ_E_CORRUPT: a row whose blob, base or one of whose parts (or a part
 * one is kept against) failed a check or is missing (counted; message
 * says which check, naming a part or base by its key in hex). Both are
 * misses. */
SJ_API sj_status sj_store_get(sj_store *s, const sj_store_key *key, void **bytes, size_t *len);
/* One part's bytes by its key (*bytes sj_alloc'ed, free with sj_free): for
 * a compiler that reuses a kernel another artifact already holds.
 * SJ_E_NOT_FOUND when absent; SJ_E_CORRUPT (with a message) when its bytes,
 * or those of the part it is kept against, fail their check. Not counted
 * in sj_store_stats. */
SJ_API sj_status sj_store_get_part(sj_store *s, const uint8_t key[32], void **bytes, size_t *len);
/* Names for parts the store holds, under which a caller that knows what
 * decides a part's bytes but not the bytes (a compiler, before it compiles
 * a kernel) finds it: names[i] points to part keys[i], replacing what the
 * name pointed to; a key the store does not hold names nothing. Local to
 * this store (export, import and the fleet tier carry artifacts only).
 * SJ_E_INVALID_ARG for n < 0 or NULL arrays with n > 0; SJ_E_IO read-only. */
SJ_API sj_status sj_store_name_parts(sj_store *s, const uint8_t (*names)[32], const uint8_t (*keys)[32],
                                     int n);
/* The part a name points to, as sj_store_get_part gives it (checked);
 * SJ_E_NOT_FOUND when the name, or the part it pointed to, is gone. */
SJ_API sj_status sj_store_get_named_part(sj_store *s, const uint8_t name[32], void **bytes, size_t *len);

typedef struct sj_store_stats {
    /* This handle's counters since open. */
    uint64_t hits, misses, corrupt, puts, evictions;
    uint64_t bytes_read, bytes_written; /* raw artifact bytes */
    /* The file's contents now: stored_bytes counts the rows' blobs and
     * each part and base once; raw_bytes the rows' whole artifacts. */
    int64_t entries, stored_bytes, raw_bytes;
} sj_store_stats;
SJ_API sj_status sj_store_stats_get(sj_store *s, sj_store_stats *out);

/* A row as listed: key strings borrowed for the duration of the callback.
 * stored_bytes is the row's own blob, without the parts and base it
 * shares. */
typedef struct sj_store_entry {
    sj_store_key key;
    int64_t raw_bytes, stored_bytes;
    int64_t created_ms, last_used_ms; /* Unix time, milliseconds */
} sj_store_entry;

/* Called per row; return nonzero to stop. Callbacks run with the store's
 * lock held and must not call back into the store. */
typedef int (*sj_store_visit_fn)(void *user, const sj_store_entry *e);
/* Rows ordered by graph hash, extent. */
SJ_API sj_status sj_store_ls(sj_store *s, sj_store_visit_fn fn, void *user);

/* Decompresses and hash-checks every row with its parts and base; `bad`
 * (may be NULL) hears of each corrupt one with the reason (a damaged or
 * missing part or base: every row holding it, or holding a part kept
 * against it, its key in hex). *n_bad counts them. */
typedef void (*sj_store_problem_fn)(void *user, const sj_store_entry *e, const char *why);
SJ_API sj_status sj_store_verify(sj_store *s, sj_store_problem_fn bad, void *user, int64_t *n_checked,
                                 int64_t *n_bad);

/* Every row with its artifact bytes (decompressed and hash-checked, as get
 * checks them), in sj_store_ls's order, for tools that read what rows hold:
 * fn hears of each good row (return nonzero to stop), bad (may be NULL) of
 * each corrupt one. Reads only: no row is touched or counted as a hit.
 * Callbacks run with the store's lock held, as sj_store_ls's do. */
typedef int (*sj_store_row_fn)(void *user, const sj_store_entry *e, const void *bytes, size_t len);
SJ_API sj_status sj_store_scan(sj_store *s, sj_store_row_fn fn, sj_store_problem_fn bad, void *user);

typedef struct sj_store_gc_result {
    int64_t corrupt_removed, evicted, bytes_freed;
} sj_store_gc_result;
/* Removes corrupt rows (when remove_corrupt) then evicts least recently
 * used rows until the stored bytes are <= max_bytes (< 0: no eviction).
 * Here and in rm, a part or base goes with the last row holding it (a
 * damaged one with the corrupt rows), a part others are kept against with
 * the last of them; bytes_freed counts them too. */
SJ_API sj_status sj_store_gc(sj_store *s, int64_t max_bytes, bool remove_corrupt, sj_store_gc_result *out);

/* Removes the rows whose graph hash (hex) starts with `hex_prefix` (1..64
 * hex digits) or exactly the row of `key`. *removed may be NULL. */
SJ_API sj_status sj_store_rm_prefix(sj_store *s, const char *hex_prefix, int64_t *removed);
SJ_API sj_status sj_store_rm(sj_store *s, const sj_store_key *key, int64_t *removed);

/* Writes every row whose graph hash starts with hex_prefix (NULL = all) to
 * `path` (temp file + rename; no partial file on failure), each with its
 * part list, so an import keeps the parts shared (and makes its own
 * bases); a row with parts or a base that fails its check is left out.
 * Import checks each record as get does and skips (counts) the corrupt
 * ones and those whose part list a put would refuse; it reads exports
 * written before parts existed too. */
SJ_API sj_status sj_store_export(sj_store *s, const char *path, const char *hex_prefix, int64_t *n_written);
SJ_API sj_status sj_store_import(sj_store *s, const char *path, int64_t *n_imported, int64_t *n_rejected);
/* sj_store_import that tells `bad` (may be NULL) why each rejected record
 * was refused; e holds the record's key and its declared raw size. */
SJ_API sj_status sj_store_import_report(sj_store *s, const char *path, sj_store_problem_fn bad,
                                        void *user, int64_t *n_imported, int64_t *n_rejected);

/* The nearest stored rows to `key` (fewest differing components; the same
 * graph first, then the closest extent), at most max_results of them, best
 * first. `differs` is a set of SJ_KEY_* bits; 0 means the key is stored. */
typedef void (*sj_store_explain_fn)(void *user, const sj_store_entry *e, unsigned differs);
SJ_API sj_status sj_store_explain(sj_store *s, const sj_store_key *key, int max_results,
                                  sj_store_explain_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif

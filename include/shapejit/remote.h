/* shapejit/remote.h — the fleet tier: a shared artifact cache on a remote
 * key-value server (Redis), behind the local store.
 *
 *   sj_remote_config rc;
 *   sj_remote_config_init(&rc);                    // timeouts 100/500 ms, back-off 2 s
 *   rc.url = "redis://:s3cret@cache.internal:6379/2";
 *   rc.secret = fleet_secret;                      // values carry a keyed-BLAKE3 MAC
 *   sj_remote *r;
 *   if (sj_remote_create(ctx, &rc, &r) != SJ_OK) ...   // parses the URL, connects lazily
 *   void *bytes; size_t n;
 *   if (sj_remote_get(r, key_digest, &bytes, &n) == SJ_OK) {   // verified before returned
 *       use(bytes, n);
 *       sj_free(ctx, bytes);
 *   } else {
 *       compile(...);                              // any other status is a miss
 *       sj_remote_put(r, key_digest, artifact, artifact_size);  // queued, returns at once
 *   }
 *   sj_remote_destroy(r);                          // publishes what is queued, joins
 *
 * One compile per fleet: with compile leases (on by default, lease_ms), M
 * processes starting cold on one model compile each key once in total; the
 * engine and the bucketed cache take them (shapejit/ext/remote_tier.h has
 * the lease calls and the tiers together, for code below the engine).
 *
 * Serving never waits on the remote server for longer than its budget:
 * connecting is bounded by connect_timeout_ms, every command by
 * command_timeout_ms, and after a failed connection, a timeout or an I/O
 * error the tier is off for backoff_ms: calls in that period return a miss
 * at once without touching the network. A connection that failed is freed
 * (with the idle ones: they lead to the same server) and a new one made on
 * the next attempt after the back-off. One call waits at most: one command
 * timeout for a pooled connection when all pool_size are busy, the connect
 * timeout, and one command timeout each for AUTH (with a password), SELECT
 * (db other than 0) and the command itself. With neither password nor db
 * and a free connection: connect + one command. Host names are resolved by
 * getaddrinfo, which has no timeout: give an address, or a name the local
 * resolver answers at once.
 *
 * Values are binary frames: magic, version, the key digest, the content
 * length and a 32-byte tag over all of them and the content. With a secret
 * the tag is keyed BLAKE3 (key derived from the secret), so a value is
 * trusted only if a holder of the secret wrote it under this very key;
 * without one it is plain BLAKE3, a checksum against corruption only. A value
 * that is malformed, stored under another key, over max_value_size, or whose
 * tag fails, is a miss counted as rejected and never returned. Readers and
 * writers of one fleet must agree on the secret: a MAC'd frame is rejected
 * by a tier without a secret and a checksum-only frame by one with a secret.
 * A node whose secret disagrees with a value's never publishes over it (the
 * publisher reads the key first): otherwise nodes with two secrets would
 * overwrite each other's values forever, each compiling every time. Such
 * values are counted (foreign, kept_foreign) and reported once through
 * on_warning.
 *
 * Puts are write-behind: sj_remote_put copies the value into a bounded queue
 * that one background thread publishes; a full queue drops the put (counted).
 *
 * Thread-safety: get, put, flush and stats may be called from any number of
 * threads at once. The tier owns copies of every config string. A value
 * returned by get belongs to the caller (free it with sj_free on the tier's
 * context). sj_remote_destroy(NULL) is a no-op; the tier must be destroyed
 * before its context.
 */
#ifndef SHAPEJIT_REMOTE_H
#define SHAPEJIT_REMOTE_H

#include "shapejit/common.h"
#include "shapejit/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A key is the 256-bit digest of the full cache key (graph hash, extent,
 * options, target, toolchain), computed by the caller. */
#define SJ_REMOTE_KEY_SIZE 32
/* The frame around each value: what max_value_size must leave room for. */
#define SJ_REMOTE_FRAME_OVERHEAD 80
/* Redis refuses strings over 512 MiB. */
#define SJ_REMOTE_MAX_VALUE_LIMIT ((size_t)512 << 20)
#define SJ_REMOTE_MAX_PREFIX 200

typedef struct sj_remote_config {
    /* Set by sj_remote_config_init to the size of this struct the caller is built with;
     * leave it (see "Config structs" in shapejit/common.h). */
    size_t size;
    /* redis://[[user]:password@]host[:port][/db]; host may be [ipv6];
     * userinfo may be %-encoded; port defaults to 6379, db to 0. */
    const char *url;
    const char *key_prefix;   /* default "shapejit:"; at most SJ_REMOTE_MAX_PREFIX bytes */
    const char *secret;       /* NULL or "": checksum only, no MAC */
    bool read_only;           /* fetch, never publish: puts are ignored */
    int connect_timeout_ms;   /* default 100 */
    int command_timeout_ms;   /* default 500 */
    int backoff_ms;           /* default 2000: the tier is off this long after a failure */
    size_t max_value_size;    /* whole frame, default 64 MiB, at most SJ_REMOTE_MAX_VALUE_LIMIT */
    size_t queue_capacity;    /* write-behind puts waiting at most, default 64 */
    int lease_ms;             /* compile leases (below): default SJ_REMOTE_DEFAULT_LEASE_MS,
                                 0 = off, at most SJ_REMOTE_MAX_LEASE_MS */
    int pool_size;            /* connections shared by concurrent gets, default 4 */
    /* Called once per tier, from whichever thread first finds a value whose
     * tag this tier's secret does not verify although the frame is whole (a
     * fleet member with another secret, or none, wrote it): a likely secret
     * mismatch an operator must hear of. NULL = not told (still counted). */
    void (*on_warning)(void *user, const char *message);
    void *warning_user;
} sj_remote_config;

SJ_API void sj_remote_config_init(sj_remote_config *cfg);

typedef struct sj_remote_stats {
    uint64_t hits;          /* gets that returned a verified value */
    uint64_t misses;        /* gets that returned none, for any reason below or absent */
    uint64_t errors;        /* failed connections, I/O errors, server error replies */
    uint64_t timeouts;      /* connects or commands that ran out of time */
    uint64_t rejected;      /* values refused: garbage, wrong key, oversized, tag failed */
    uint64_t backoff_skips; /* calls answered without the network while backing off */
    uint64_t puts;          /* values published */
    uint64_t dropped_puts;  /* puts not attempted: queue full, too large, backing off */
    uint64_t foreign;       /* values refused (and counted in rejected) whose tag is whole
                               but not this tier's secret's: another secret wrote them */
    uint64_t kept_foreign;  /* puts not published because the key holds such a value:
                               a node never overwrites what the fleet's secret signed */
    uint64_t leases_won;    /* claims this node won: it compiles the key under its lease */
    uint64_t lease_waits;   /* claims that found another node's lease and waited */
    uint64_t lease_waited_hits;     /* ... and got the value it published */
    uint64_t lease_waited_compiles; /* ... and compiled after all (lease gone without a
                                       value, wait ran out, or the server failed) */
    uint64_t lease_errors;  /* lease commands that failed, and leases found lost
                               (expired or taken over) when renewed */
} sj_remote_stats;

typedef struct sj_remote sj_remote;

/* Validates cfg (a malformed URL fails with SJ_E_INVALID_ARG and a message
 * naming the part) and starts the write-behind thread. Does not connect:
 * an unreachable server is found, counted and backed off from on first use. */
SJ_API sj_status sj_remote_create(sj_ctx *ctx, const sj_remote_config *cfg, sj_remote **out);
/* Publishes what is still queued (each bounded by the timeouts; while the
 * tier is backing off they are dropped), joins the thread, closes. */
SJ_API void sj_remote_destroy(sj_remote *r);

/* SJ_OK: *data (sj_alloc'ed, caller frees) holds the verified content.
 * Otherwise a miss, with a message saying why: SJ_E_NOT_FOUND absent,
 * SJ_E_CORRUPT rejected, SJ_E_IO error or timeout, SJ_E_BUSY backing off,
 * SJ_E_NOMEM. The caller treats every miss alike: compile as without a tier. */
SJ_API sj_status sj_remote_get(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], void **data,
                               size_t *size);

/* Queues a copy of data for publishing and returns. SJ_OK when queued or
 * when the tier is read-only (nothing happens); SJ_E_BUSY when the queue is
 * full, SJ_E_OUT_OF_RANGE when the frame would exceed max_value_size (both
 * dropped and counted); SJ_E_NOMEM. */
SJ_API sj_status sj_remote_put(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], const void *data,
                               size_t size);

/* Waits until every put queued before the call has been published or
 * dropped. For tests, shutdown and precompile steps; serving never needs it. */
SJ_API void sj_remote_flush(sj_remote *r);

/* The counters so far (any thread). */
SJ_API void sj_remote_stats_get(const sj_remote *r, sj_remote_stats *out);

/* The server-side key name of a key digest (prefix + 64 lowercase hex
 * digits), for tools and diagnostics. Writes at most cap bytes including the
 * NUL; returns the length the full name needs, like snprintf. */
SJ_API size_t sj_remote_key_name(const sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], char *buf,
                                 size_t cap);

/* The context the tier was created with (bytes from get are allocated on it). */
SJ_API sj_ctx *sj_remote_ctx(const sj_remote *r);

/* The URL the tier was made with, password replaced by "***" (for logs). */
SJ_API const char *sj_remote_url(const sj_remote *r);

/* Compile leases (lease_ms): the default and the bound. Set lease_ms above
 * the longest compile: a node that took a lease and crashed delays the
 * others by at most it (two lease times after a takeover), never a hang.
 * How they work: shapejit/ext/remote_tier.h. */
#define SJ_REMOTE_DEFAULT_LEASE_MS 30000
#define SJ_REMOTE_MAX_LEASE_MS 3600000

#ifdef __cplusplus
}
#endif
#endif

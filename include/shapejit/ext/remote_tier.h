/* shapejit/ext/remote_tier.h — below the engine: compile leases on the
 * fleet tier, and the local store and the fleet tier used together, as the
 * bucketed cache uses them.
 *
 * One compile per fleet (compile leases, on by default: sj_remote_config.lease_ms):
 *
 *   sj_remote_claim how; sj_remote_lease *lease;
 *   sj_remote_lease_claim(r, key_digest, &how, &lease, &bytes, &n);
 *   if (how == SJ_REMOTE_CLAIM_FETCHED) use(bytes, n);  // another node compiled it
 *   else {                                              // OWNED or ALONE
 *       ok = compile(...) == SJ_OK;
 *       if (ok) sj_remote_put(r, key_digest, artifact, artifact_size);
 *       sj_remote_lease_end(lease, ok);                 // NULL when ALONE
 *   }
 *
 * The tiers together, local store first:
 *
 *   sj_tier from;
 *   st = sj_tiered_get(store, remote, &key, &bytes, &len, &from);
 *   if (st != SJ_OK) { compile(&bytes, &len); sj_tiered_put(store, remote, &key, bytes, len); }
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_EXT_REMOTE_TIER_H
#define SHAPEJIT_EXT_REMOTE_TIER_H

#include "shapejit/common.h"
#include "shapejit/remote.h"
#include "shapejit/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compile leases: M processes starting cold on one model compile each
 * key once in total.
 *
 * Before compiling a key that missed everywhere, a node takes the key's
 * lease: SET <prefix>lease:<key hex> <token> NX PX lease_ms, the token
 * random per lease. While it compiles, a background thread renews every
 * lease the tier holds each lease_ms / 3 (compare-and-renew: a small Lua
 * script extends the lease only if it still holds this token, so a node
 * whose lease expired never extends the next owner's). After a successful
 * compile the node puts the value and ends the lease as published: the
 * lease is dropped by the write-behind thread after the put before it, so
 * the value is on the server before the lease goes; after a failure it is
 * dropped at once. Drops compare the token too (compare-and-delete).
 *
 * A node that finds the lease held waits for the value: it polls the key
 * with back-off (10 ms doubling to 200 ms), and takes the lease itself when
 * it is gone without a value (a holder that failed, or crashed and whose
 * lease expired). It waits at most lease_ms for one owner (monotonic
 * clock): when another node takes the lease over from a crashed owner, the
 * new owner's compile gets a lease time of its own, up to 2 x lease_ms in
 * all. Then it compiles without a lease: a holder that never publishes, or
 * a compile longer than lease_ms, costs the others one lease time (two
 * after a takeover), never a hang. The
 * server failing during the wait (an error or timeout: the tier backs off)
 * ends the wait at once, and the node compiles alone. Set lease_ms above
 * the longest compile: a crashed holder delays the others by at most it.
 *
 * A read-only tier never publishes, so it takes no leases (others would
 * wait for nothing) and does not wait: it compiles alone. lease_ms = 0
 * turns leases off (every node compiles what it misses, as before). */
typedef enum sj_remote_claim {
    SJ_REMOTE_CLAIM_OWNED,   /* *lease is held: compile, put, sj_remote_lease_end */
    SJ_REMOTE_CLAIM_FETCHED, /* another node published it meanwhile: *data, *size (caller frees) */
    SJ_REMOTE_CLAIM_ALONE,   /* compile without a lease: leases off, read-only, the server
                                failing, or the wait ran out (counters say which) */
} sj_remote_claim;

typedef struct sj_remote_lease sj_remote_lease;

/* Claims the compile of key (see above). SJ_OK with *how set; the call may
 * wait up to lease_ms (plus one command timeout per poll) when another node
 * holds the lease. SJ_E_INVALID_ARG, SJ_E_NOMEM otherwise; never a
 * remote failure (that is ALONE). *lease is NULL unless OWNED; *data NULL
 * unless FETCHED. Holds no lock of the tier while it waits: other keys
 * are claimed, fetched and published meanwhile. */
SJ_API sj_status sj_remote_lease_claim(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                                       sj_remote_claim *how, sj_remote_lease **lease, void **data,
                                       size_t *size);

/* Ends an OWNED claim: published = the value was put (the lease is dropped
 * after that put reaches the server), else dropped now. NULL is a no-op. */
SJ_API void sj_remote_lease_end(sj_remote_lease *lease, bool published);

/* ---- The tiers together: local store, then remote (example above).
 * Either tier may be NULL (no local store: `--store none`; no remote tier).
 * Both must belong to the same context; returned bytes are sj_alloc'ed on it.
 * The memory tier above them is the bucketed cache's own. */
typedef enum sj_tier {
    SJ_TIER_NONE = 0,   /* a miss everywhere */
    SJ_TIER_LOCAL = 1,  /* the local store had it */
    SJ_TIER_REMOTE = 2, /* the remote tier had it (and the local store has it now) */
} sj_tier;

/* Read-through: the local store; on a local miss (absent or corrupt) the
 * remote tier; a remote hit, already verified by its frame and tag, is
 * written to the local store (a failed local write is ignored: the bytes
 * are still served) and returned. When neither has it: the local store's
 * status (SJ_E_NOT_FOUND, or SJ_E_CORRUPT for a corrupt local row), else
 * SJ_E_NOT_FOUND, with a message giving both reasons; a remote failure of
 * any kind is a miss here (its stats say which). Without a remote tier
 * this is sj_store_get. *from may be NULL. */
SJ_API sj_status sj_tiered_get(sj_store *local, sj_remote *remote, const sj_store_key *key, void **bytes,
                               size_t *len, sj_tier *from);

/* Write-behind: the local store first (synchronously), then the remote tier
 * queued without waiting. Returns the local put's status (remote drops are
 * counted in its stats, never an error here). */
SJ_API sj_status sj_tiered_put(sj_store *local, sj_remote *remote, const sj_store_key *key,
                               const void *bytes, size_t len);
/* sj_tiered_put, the local store keeping parts of the bytes once
 * (sj_store_put_parts); the remote tier gets the bytes whole. */
SJ_API sj_status sj_tiered_put_parts(sj_store *local, sj_remote *remote, const sj_store_key *key,
                                     const void *bytes, size_t len, const sj_store_part *parts,
                                     int n_parts);

/* After sj_tiered_get missed: sj_remote_lease_claim for key's digest; a
 * FETCHED value is written to the local store (as a remote hit is) and
 * returned in *bytes. Without a remote tier: ALONE. */
SJ_API sj_status sj_tiered_claim(sj_store *local, sj_remote *remote, const sj_store_key *key,
                                 sj_remote_claim *how, sj_remote_lease **lease, void **bytes,
                                 size_t *len);

/* The remote key digest of a full store key (the store's own key digest). */
SJ_API void sj_tiered_key_digest(const sj_store_key *key, uint8_t out[SJ_REMOTE_KEY_SIZE]);

#ifdef __cplusplus
}
#endif
#endif

/* The local store and the remote tier as one read-through, write-behind
 * lookup. Nothing here waits on the remote server beyond the remote tier's
 * own budget, and a remote failure of any kind reads as a miss. */
#include "store/remote_tier_impl.h"
#include "store/store_impl.h"

#include <stdio.h>
#include <string.h>

void sj_tiered_key_digest(const sj_store_key *key, uint8_t out[SJ_REMOTE_KEY_SIZE]) {
    sj__store_key_digest(key, out);
}

static sj_ctx *tiers_ctx(sj_store *local, sj_remote *remote) {
    return local ? local->ctx : remote ? sj_remote_ctx(remote) : NULL;
}

static sj_status check_tiers(sj_store *local, sj_remote *remote, const sj_store_key *key) {
    sj_ctx *ctx = tiers_ctx(local, remote);
    if (!ctx || !key) return sj_fail(ctx, SJ_E_INVALID_ARG, "tiered store: NULL argument");
    if (local && remote && sj_remote_ctx(remote) != local->ctx)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "tiered store: the local store and the remote tier belong to different "
                       "contexts");
    return sj__store_key_check(ctx, key);
}

sj_status sj_tiered_get(sj_store *local, sj_remote *remote, const sj_store_key *key, void **bytes,
                        size_t *len, sj_tier *from) {
    if (from) *from = SJ_TIER_NONE;
    if (!bytes || !len)
        return sj_fail(tiers_ctx(local, remote), SJ_E_INVALID_ARG, "tiered get: NULL argument");
    *bytes = NULL;
    *len = 0;
    SJ_TRY(check_tiers(local, remote, key));
    sj_ctx *ctx = tiers_ctx(local, remote);
    sj_status local_st = SJ_E_NOT_FOUND;
    char local_why[256] = "no local store";
    if (local) {
        local_st = sj_store_get(local, key, bytes, len);
        if (local_st == SJ_OK && from) *from = SJ_TIER_LOCAL;
        if (!remote || (local_st != SJ_E_NOT_FOUND && local_st != SJ_E_CORRUPT)) return local_st;
        snprintf(local_why, sizeof local_why, "%s", sj_ctx_last_error(ctx));
    }
    uint8_t digest[SJ_REMOTE_KEY_SIZE];
    sj__store_key_digest(key, digest);
    sj_status st = sj_remote_get(remote, digest, bytes, len);
    if (st == SJ_E_INVALID_ARG || st == SJ_E_NOMEM) return st;
    if (st != SJ_OK) {
        sj__error_prefix(ctx, "%s; ", local_why);
        return local_st;
    }
    if (local && sj_store_put(local, key, *bytes, *len) != SJ_OK) sj_ctx_clear_error(ctx);
    if (from) *from = SJ_TIER_REMOTE;
    return SJ_OK;
}

sj_status sj_tiered_put(sj_store *local, sj_remote *remote, const sj_store_key *key,
                        const void *bytes, size_t len) {
    return sj_tiered_put_parts(local, remote, key, bytes, len, NULL, 0);
}

sj_status sj_tiered_put_parts(sj_store *local, sj_remote *remote, const sj_store_key *key,
                              const void *bytes, size_t len, const sj_store_part *parts, int n_parts) {
    if (!bytes && len)
        return sj_fail(tiers_ctx(local, remote), SJ_E_INVALID_ARG, "tiered put: %zu bytes at NULL", len);
    SJ_TRY(check_tiers(local, remote, key));
    sj_status st = local ? sj_store_put_parts(local, key, bytes, len, parts, n_parts) : SJ_OK;
    if (!remote) return st;
    sj_ctx *ctx = tiers_ctx(local, remote);
    char local_why[512] = "";
    if (st != SJ_OK) snprintf(local_why, sizeof local_why, "%s", sj_ctx_last_error(ctx));
    uint8_t digest[SJ_REMOTE_KEY_SIZE];
    sj__store_key_digest(key, digest);
    /* A remote put that is dropped (queue full, too large) is counted in the
     * remote stats; the caller hears about the local store only. */
    if (sj_remote_put(remote, digest, bytes, len) != SJ_OK) {
        if (st == SJ_OK)
            sj_ctx_clear_error(ctx);
        else
            sj__set_error(ctx, "%s", local_why);
    }
    return st;
}

sj_status sj_tiered_claim(sj_store *local, sj_remote *remote, const sj_store_key *key,
                          sj_remote_claim *how, sj_remote_lease **lease, void **bytes, size_t *len) {
    if (!how || !lease || !bytes || !len)
        return sj_fail(tiers_ctx(local, remote), SJ_E_INVALID_ARG, "tiered claim: NULL argument");
    *how = SJ_REMOTE_CLAIM_ALONE;
    *lease = NULL;
    *bytes = NULL;
    *len = 0;
    SJ_TRY(check_tiers(local, remote, key));
    if (!remote) return SJ_OK;
    uint8_t digest[SJ_REMOTE_KEY_SIZE];
    sj__store_key_digest(key, digest);
    SJ_TRY(sj_remote_lease_claim(remote, digest, how, lease, bytes, len));
    /* Kept locally like any remote hit; a failed local write still serves. */
    if (*how == SJ_REMOTE_CLAIM_FETCHED && local && sj_store_put(local, key, *bytes, *len) != SJ_OK)
        sj_ctx_clear_error(local->ctx);
    return SJ_OK;
}

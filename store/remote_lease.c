/* Compile leases on the remote tier: one node of a fleet compiles a key,
 * the others wait for its value (bounded), so M nodes starting cold compile
 * each bucket once in total. The policy is in include/shapejit/remote.h;
 * the server commands are the transport's (SET NX PX, compare-and-renew,
 * compare-and-delete). Every wait uses CLOCK_MONOTONIC. */
#include "core/core_impl.h"
#include "store/remote_tier_impl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* A waiter's polls: 10 ms, doubling, at most 200 ms apart. */
#define POLL_FIRST_MS 10
#define POLL_MAX_MS 200

static void lease_name(const sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                       sj_remote_lease *l) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    memcpy(l->name, r->prefix, r->prefix_len);
    o += r->prefix_len;
    memcpy(l->name + o, "lease:", 6);
    o += 6;
    for (size_t i = 0; i < SJ_REMOTE_KEY_SIZE; i++) {
        l->name[o++] = hex[key[i] >> 4];
        l->name[o++] = hex[key[i] & 15];
    }
    l->name[o] = 0;
    l->name_len = o;
}

static sj_remote_lease *lease_new(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE]) {
    sj_remote_lease *l = sj_calloc(r->ctx, 1, sizeof *l);
    if (!l) return NULL;
    l->r = r;
    lease_name(r, key, l);
    /* Unique per lease, so a renew or drop of one that ended can never
     * touch a later lease on the same key, even this node's own. */
    snprintf(l->token, sizeof l->token, "%s-%llu", r->token_base,
             (unsigned long long)atomic_fetch_add(&r->lease_seq, 1));
    return l;
}

static void list_add(sj_remote *r, sj_remote_lease *l) {
    pthread_mutex_lock(&r->lease_lock);
    l->next = r->leases;
    r->leases = l;
    pthread_mutex_unlock(&r->lease_lock);
}

static void list_remove(sj_remote *r, sj_remote_lease *l) {
    pthread_mutex_lock(&r->lease_lock);
    for (sj_remote_lease **p = &r->leases; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            break;
        }
    pthread_mutex_unlock(&r->lease_lock);
}

/* One lease command; a failure of the server backs the tier off (as a get
 * would) and counts a lease error. */
static sj_remote_io lease_cmd(sj_remote *r, sj_remote_lease_op op, const sj_remote_lease *l) {
    char why[SJ_REMOTE_WHY_MAX];
    sj_remote_io io = r->tp->lease(r->tp_impl, op, l->name, l->name_len, l->token, r->lease_ms,
                                   why, sizeof why);
    if (io == SJ_REMOTE_IO_OK || io == SJ_REMOTE_IO_ABSENT) return io;
    sj__remote_bump(&r->n.lease_errors);
    sj__remote_enter_backoff(r, io, why);
    return io;
}

void sj__remote_lease_drop(sj_remote_lease *l) {
    sj_remote *r = l->r;
    list_remove(r, l);
    /* Backing off: the server just failed; the lease expires by itself. A
     * drop that finds the lease not ours (it expired, another took it over)
     * leaves it alone: the renewer counted the loss already. */
    if (sj__remote_backoff_left_ms(r) == 0) lease_cmd(r, SJ_REMOTE_LEASE_DROP, l);
    sj_free(r->ctx, l);
}

void sj_remote_lease_end(sj_remote_lease *l, bool published) {
    if (!l) return;
    if (published && sj__remote_queue_release(l->r, l)) return;
    sj__remote_lease_drop(l);
}

/* ---- The renewer: every lease_ms / 3, each held lease is renewed. */

typedef struct lease_copy {
    char name[SJ_REMOTE_NAME_MAX];
    size_t name_len;
    char token[64];
} lease_copy;

static void renew_all(sj_remote *r) {
    /* Copied under the lock and renewed outside it: a claim or a drop on
     * another key never waits for a renewal's round trip. */
    pthread_mutex_lock(&r->lease_lock);
    size_t n = 0;
    for (sj_remote_lease *l = r->leases; l; l = l->next) n++;
    lease_copy *copies = n ? sj_alloc(r->ctx, n * sizeof *copies) : NULL;
    size_t k = 0;
    for (sj_remote_lease *l = r->leases; copies && l; l = l->next, k++) {
        memcpy(copies[k].name, l->name, l->name_len + 1);
        copies[k].name_len = l->name_len;
        memcpy(copies[k].token, l->token, sizeof l->token);
    }
    pthread_mutex_unlock(&r->lease_lock);
    for (size_t i = 0; i < k && sj__remote_backoff_left_ms(r) == 0; i++) {
        sj_remote_lease tmp = {.r = r, .name_len = copies[i].name_len};
        memcpy(tmp.name, copies[i].name, copies[i].name_len + 1);
        memcpy(tmp.token, copies[i].token, sizeof tmp.token);
        /* Not ours any more: it expired (this node stalled longer than the
         * lease) or was dropped since the copy; the compile goes on, and
         * others may compile the key too. */
        if (lease_cmd(r, SJ_REMOTE_LEASE_RENEW, &tmp) == SJ_REMOTE_IO_ABSENT) {
            bool listed = false;
            pthread_mutex_lock(&r->lease_lock);
            for (sj_remote_lease *l = r->leases; l && !listed; l = l->next)
                listed = !strcmp(l->token, tmp.token);
            pthread_mutex_unlock(&r->lease_lock);
            if (listed) sj__remote_bump(&r->n.lease_errors);
        }
    }
    sj_free(r->ctx, copies);
}

static void *renewer_main(void *arg) {
    sj_remote *r = arg;
    int period = r->lease_ms / 3 > 0 ? r->lease_ms / 3 : 1;
    pthread_mutex_lock(&r->lease_lock);
    while (!r->lease_stopping) {
        struct timespec until;
        sj__remote_deadline_after_ms(&until, period);
        while (!r->lease_stopping &&
               pthread_cond_timedwait(&r->lease_wake, &r->lease_lock, &until) != ETIMEDOUT) {
        }
        if (r->lease_stopping) break;
        pthread_mutex_unlock(&r->lease_lock);
        renew_all(r);
        pthread_mutex_lock(&r->lease_lock);
    }
    pthread_mutex_unlock(&r->lease_lock);
    return NULL;
}

sj_status sj__remote_leases_start(sj_remote *r, int lease_ms) {
    r->lease_ms = lease_ms;
    pthread_mutex_init(&r->lease_lock, NULL);
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return sj_fail(r->ctx, SJ_E_NOMEM, "remote tier: cannot make the lease renewer's condition");
    int e = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (e == 0) e = pthread_cond_init(&r->lease_wake, &ca);
    pthread_condattr_destroy(&ca);
    if (e != 0) {
        pthread_mutex_destroy(&r->lease_lock);
        return sj_fail(r->ctx, SJ_E_NOMEM, "remote tier: cannot make the lease renewer's condition: %s",
                       strerror(e));
    }
    r->lease_inited = true;
    if (lease_ms == 0) return SJ_OK;
    uint8_t rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return sj_fail(r->ctx, SJ_E_IO, "remote tier: no random bytes for the lease token: %s",
                       strerror(errno));
    int o = snprintf(r->token_base, sizeof r->token_base, "%ld-", (long)getpid());
    for (size_t i = 0; i < sizeof rnd && o + 2 < (int)sizeof r->token_base; i++)
        o += snprintf(r->token_base + o, sizeof r->token_base - (size_t)o, "%02x", rnd[i]);
    if ((e = pthread_create(&r->renewer, NULL, renewer_main, r)) != 0)
        return sj_fail(r->ctx, SJ_E_NOMEM, "remote tier: cannot start the lease renewer: %s",
                       strerror(e));
    r->renewer_started = true;
    return SJ_OK;
}

void sj__remote_leases_stop(sj_remote *r) {
    if (!r->lease_inited) return;
    if (r->renewer_started) {
        pthread_mutex_lock(&r->lease_lock);
        r->lease_stopping = true;
        pthread_cond_signal(&r->lease_wake);
        pthread_mutex_unlock(&r->lease_lock);
        pthread_join(r->renewer, NULL);
    }
    /* Claims never ended by their caller: given back rather than left to
     * expire, so the fleet does not wait for them. */
    while (r->leases) sj__remote_lease_drop(r->leases);
    pthread_cond_destroy(&r->lease_wake);
    pthread_mutex_destroy(&r->lease_lock);
}

/* ---- Claim */

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
    }
}

/* Takes l: OK (held now, listed for renewal), ABSENT (another owner holds
 * it), or a failure (backing off now). */
static sj_remote_io take(sj_remote *r, sj_remote_lease *l) {
    sj_remote_io io = lease_cmd(r, SJ_REMOTE_LEASE_TAKE, l);
    if (io == SJ_REMOTE_IO_OK) list_add(r, l);
    return io;
}

/* Who holds l's key now; a failure of the server backs off (lease_cmd). */
static sj_remote_io owner_of(sj_remote *r, const sj_remote_lease *l, char *owner, size_t cap) {
    char why[SJ_REMOTE_WHY_MAX];
    owner[0] = 0;
    sj_remote_io io = r->tp->lease_owner(r->tp_impl, l->name, l->name_len, owner, cap, why, sizeof why);
    if (io == SJ_REMOTE_IO_OK || io == SJ_REMOTE_IO_ABSENT) return io;
    sj__remote_bump(&r->n.lease_errors);
    sj__remote_enter_backoff(r, io, why);
    return io;
}

typedef enum fetched { GOT_VALUE, NO_VALUE, SERVER_FAILED } fetched;

/* The key's value, if it is there now; a failure of the server (the tier
 * backs off) is told apart from an absent or refused value. */
static fetched poll_value(sj_remote *r, const uint8_t *key, void **data, size_t *size,
                          sj_status *fatal) {
    sj_status st = sj__remote_fetch(r, key, data, size, false);
    if (st == SJ_OK) return GOT_VALUE;
    if (st == SJ_E_NOMEM) *fatal = st;
    sj_ctx_clear_error(r->ctx);
    return st == SJ_E_IO || st == SJ_E_BUSY || st == SJ_E_NOMEM ? SERVER_FAILED : NO_VALUE;
}

sj_status sj_remote_lease_claim(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                                sj_remote_claim *how, sj_remote_lease **lease, void **data,
                                size_t *size) {
    if (!r || !key || !how || !lease || !data || !size)
        return sj_fail(r ? r->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *how = SJ_REMOTE_CLAIM_ALONE;
    *lease = NULL;
    *data = NULL;
    *size = 0;
    if (r->lease_ms == 0 || sj__remote_backoff_left_ms(r) > 0) return SJ_OK;
    sj_remote_lease *l = lease_new(r, key);
    if (!l) return sj_fail(r->ctx, SJ_E_NOMEM, "remote tier: out of memory for a lease");
    sj_status fatal = SJ_OK;
    sj_remote_io io = take(r, l);
    bool waited = false;
    if (io == SJ_REMOTE_IO_ABSENT) {
        waited = true;
        sj__remote_bump(&r->n.lease_waits);
        int64_t lease_ns = (int64_t)r->lease_ms * 1000000, start = sj__remote_now_ns();
        int64_t deadline = start + lease_ns, pause = POLL_FIRST_MS;
        char seen[sizeof l->token] = "";
        if (owner_of(r, l, seen, sizeof seen) == SJ_REMOTE_IO_ABSENT) seen[0] = 0;
        for (;;) {
            int64_t left_ms = (deadline - sj__remote_now_ns()) / 1000000;
            if (left_ms <= 0) break; /* the wait ran out: compile alone */
            sleep_ms(pause < left_ms ? pause : left_ms);
            pause = pause * 2 < POLL_MAX_MS ? pause * 2 : POLL_MAX_MS;
            fetched f = poll_value(r, key, data, size, &fatal);
            if (f == GOT_VALUE) {
                sj__remote_bump(&r->n.lease_waited_hits);
                *how = SJ_REMOTE_CLAIM_FETCHED;
                sj_free(r->ctx, l);
                return SJ_OK;
            }
            if (f == SERVER_FAILED) break;
            /* No value yet: still held, or gone without a value (the holder
             * failed, or crashed and the lease expired): take it over. */
            if ((io = take(r, l)) != SJ_REMOTE_IO_ABSENT) break;
            /* Another node took the lease over (the owner before it crashed
             * or failed): its compile gets a lease time of its own, up to
             * twice the lease time in all. */
            char now_owner[sizeof l->token];
            sj_remote_io o = owner_of(r, l, now_owner, sizeof now_owner);
            if (o != SJ_REMOTE_IO_OK && o != SJ_REMOTE_IO_ABSENT) break;
            if (o == SJ_REMOTE_IO_OK && strcmp(now_owner, seen) != 0) {
                if (seen[0]) {
                    int64_t renewed = sj__remote_now_ns() + lease_ns;
                    deadline = renewed < start + 2 * lease_ns ? renewed : start + 2 * lease_ns;
                }
                snprintf(seen, sizeof seen, "%s", now_owner);
            }
        }
        if (io == SJ_REMOTE_IO_ABSENT) io = SJ_REMOTE_IO_TIMEOUT; /* not taken */
    }
    if (io != SJ_REMOTE_IO_OK) {
        if (waited) sj__remote_bump(&r->n.lease_waited_compiles);
        sj_free(r->ctx, l);
        if (fatal != SJ_OK) return sj_fail(r->ctx, fatal, "remote tier: out of memory while waiting");
        return SJ_OK;
    }
    /* Held. The holder before may have published and dropped its lease
     * between the caller's miss (or the last poll) and this take: look once
     * more, so that value is not compiled a second time. */
    if (poll_value(r, key, data, size, &fatal) == GOT_VALUE) {
        if (waited) sj__remote_bump(&r->n.lease_waited_hits);
        sj_remote_lease_end(l, false);
        *how = SJ_REMOTE_CLAIM_FETCHED;
        return SJ_OK;
    }
    if (fatal != SJ_OK) {
        sj_remote_lease_end(l, false);
        return sj_fail(r->ctx, fatal, "remote tier: out of memory");
    }
    if (waited) sj__remote_bump(&r->n.lease_waited_compiles);
    sj__remote_bump(&r->n.leases_won);
    *how = SJ_REMOTE_CLAIM_OWNED;
    *lease = l;
    return SJ_OK;
}

/* Background compiles: a bucket serving code that is not the cache's best
 * is made again by one background thread and swapped in. Two policies feed
 * the one queue (each bucket at most once in the cache's life):
 *
 * - native_after: a fleet starts from the portable CPU levels a build
 *   machine stored and converges to code for its own CPU. A bucket that
 *   serves from a level (a fallback target) and has served native_after
 *   runs is queued (sj__cache_specialise_note_run, below).
 * - tiered compilation: a bucket first compiled by the quick compiler
 *   (bucketed_cache.c, tiered.c) is queued at once.
 *
 * The mechanism is the same for both: the thread makes the bucket for the
 * compiler's own target with the cache's compiler (from the store tiers
 * when another process put it there, else a compile that is stored and
 * published like any other) and swaps it in.
 *
 * The swap takes the bucket's run lock, so the run in flight finishes on
 * the old executable; runs waiting for the lock read the bucket's
 * executable again once they hold it (sj__cache_run) and get the new one.
 * It takes the bucket's mu too (inspection reads exe under it), and the
 * old executable is destroyed after both are let go: no run and no reader
 * holds it then. Nothing here ever fails a request: a failed compile is
 * counted and the bucket keeps serving the old code. */
#include "cache/bucketed_cache_impl.h"

#include <stdio.h>
#include <string.h>

static void *specialiser(void *arg);

sj_status sj__cache_specialise_init(sj_bucketed_cache *c) {
    pthread_mutex_init(&c->spec_mu, NULL);
    pthread_cond_init(&c->spec_cv, NULL);
    pthread_cond_init(&c->spec_idle_cv, NULL);
    bool used = c->native_after > 0 || c->quick.compile;
    if (used && !(c->spec_queue = sj_calloc(c->ctx, (size_t)c->n_buckets + 1, sizeof *c->spec_queue)))
        return SJ_E_NOMEM;
    return SJ_OK;
}

void sj__cache_specialise_destroy(sj_bucketed_cache *c) {
    pthread_mutex_lock(&c->spec_mu);
    c->spec_stop = true; /* what is still queued is dropped */
    pthread_cond_broadcast(&c->spec_cv);
    bool started = c->spec_started;
    pthread_mutex_unlock(&c->spec_mu);
    if (started) pthread_join(c->spec_thread, NULL);
    sj_free(c->ctx, c->spec_queue);
    pthread_mutex_destroy(&c->spec_mu);
    pthread_cond_destroy(&c->spec_cv);
    pthread_cond_destroy(&c->spec_idle_cv);
}

/* Whether bucket b was queued by tiered compilation (else native_after). */
static bool tier_up(const sj_bucketed_cache *c, int b) {
    return atomic_load(&c->buckets[b].upgrade) == SJ_UPGRADE_TIER;
}

/* A failure: counted by its reason, the first one's message kept; spec_mu
 * held. */
static void note_failure(sj_bucketed_cache *c, int b, const char *why) {
    sj_cache_bucket *bk = &c->buckets[b];
    bool tier = tier_up(c, b);
    atomic_store(&bk->specialise, SJ_SPECIALISE_FAILED);
    atomic_fetch_add(tier ? &c->tier_up_failures : &c->specialise_failures, 1);
    if (!c->spec_error[0])
        snprintf(c->spec_error, sizeof c->spec_error, "%sbucket %lld: %s", tier ? "tier-up: " : "",
                 (long long)sj_ladder_extent(c->ladder, b), why);
}

void sj__cache_specialise_queue(sj_bucketed_cache *c, int b, sj_cache_upgrade why) {
    sj_cache_bucket *bk = &c->buckets[b];
    pthread_mutex_lock(&c->spec_mu);
    /* At most once per bucket: the ring holds n_buckets. */
    if (c->spec_stop || atomic_load(&bk->specialise) != SJ_SPECIALISE_NONE) {
        pthread_mutex_unlock(&c->spec_mu);
        return;
    }
    atomic_store(&bk->upgrade, (int)why);
    if (!c->spec_started) {
        if (pthread_create(&c->spec_thread, NULL, specialiser, c) != 0) {
            note_failure(c, b, "cannot start the background thread");
            pthread_mutex_unlock(&c->spec_mu);
            return;
        }
        c->spec_started = true;
    }
    atomic_store(&bk->specialise, SJ_SPECIALISE_PENDING);
    c->spec_queue[(c->spec_head + c->spec_len++) % c->n_buckets] = b;
    pthread_cond_signal(&c->spec_cv);
    pthread_mutex_unlock(&c->spec_mu);
}

/* native_after's policy: the run that brings a level bucket's count to
 * native_after queues it. */
void sj__cache_specialise_note_run(sj_bucketed_cache *c, int b) {
    if (c->native_after <= 0) return;
    sj_cache_bucket *bk = &c->buckets[b];
    /* Own code, or asked already (a failed one stays on the level): no count. */
    if (atomic_load_explicit(&bk->target, memory_order_relaxed) < 0 ||
        atomic_load_explicit(&bk->specialise, memory_order_relaxed) != SJ_SPECIALISE_NONE)
        return;
    /* Exactly one run sees the count reach native_after. */
    if (atomic_fetch_add_explicit(&bk->level_runs, 1, memory_order_relaxed) + 1 != (uint64_t)c->native_after)
        return;
    sj__cache_specialise_queue(c, b, SJ_UPGRADE_NATIVE);
}

/* Bucket b for the own target, swapped in for the next run. */
static sj_status specialise(sj_bucketed_cache *c, int b) {
    sj_cache_bucket *bk = &c->buckets[b];
    void *fresh, *art;
    size_t art_len;
    sj_cache_made made;
    int target;
    SJ_TRY(sj__cache_materialize(c, sj_ladder_extent(c->ladder, b), false, &fresh, &made, &target,
                                &art, &art_len));
    pthread_mutex_lock(&bk->run_mu);
    pthread_mutex_lock(&bk->mu);
    void *old = atomic_load_explicit(&bk->exe, memory_order_acquire);
    if (c->comp.memory) { /* no run holds old: its work counters are final */
        sj_executable_memory_info m;
        c->comp.memory(c->comp.ctx, old, &m);
        atomic_fetch_add(&bk->swapped_padded_computed, m.rows_computed - m.rows_requested);
    }
    /* A reload after a device reset (read under run_mu) loads the new
     * code's bytes, not the old code's (quick code kept none). */
    void *old_art = NULL;
    if (art) {
        old_art = bk->art;
        bk->art = art;
        bk->art_len = art_len;
    }
    atomic_store_explicit(&bk->target, -1, memory_order_relaxed);
    atomic_store_explicit(&bk->exe, fresh, memory_order_release);
    pthread_mutex_unlock(&bk->mu);
    pthread_mutex_unlock(&bk->run_mu);
    c->comp.destroy(c->comp.ctx, old);
    sj_free(c->ctx, old_art);
    return SJ_OK;
}

static void *specialiser(void *arg) {
    sj_bucketed_cache *c = arg;
    pthread_mutex_lock(&c->spec_mu);
    for (;;) {
        while (!c->spec_len && !c->spec_stop) pthread_cond_wait(&c->spec_cv, &c->spec_mu);
        if (c->spec_stop) break;
        int b = c->spec_queue[c->spec_head];
        c->spec_head = (c->spec_head + 1) % c->n_buckets;
        c->spec_len--;
        c->spec_busy = true;
        pthread_mutex_unlock(&c->spec_mu);
        sj_status st = specialise(c, b);
        pthread_mutex_lock(&c->spec_mu);
        c->spec_busy = false;
        if (st == SJ_OK) {
            atomic_store(&c->buckets[b].specialise, SJ_SPECIALISE_DONE);
            atomic_fetch_add(tier_up(c, b) ? &c->tier_ups : &c->specialised, 1);
        } else {
            note_failure(c, b, sj_ctx_last_error(c->ctx)); /* this thread's own message */
        }
        if (!c->spec_len) pthread_cond_broadcast(&c->spec_idle_cv);
    }
    /* Dropped at shutdown: nothing is queued or running any more. */
    c->spec_len = 0;
    pthread_cond_broadcast(&c->spec_idle_cv);
    pthread_mutex_unlock(&c->spec_mu);
    return NULL;
}

void sj_bucketed_cache_specialise_wait(sj_bucketed_cache *c) {
    if (!c) return;
    pthread_mutex_lock(&c->spec_mu);
    while ((c->spec_len || c->spec_busy) && c->spec_started)
        pthread_cond_wait(&c->spec_idle_cv, &c->spec_mu);
    pthread_mutex_unlock(&c->spec_mu);
}

void sj_bucketed_cache_specialise_error(sj_bucketed_cache *c, char *buf, size_t cap) {
    if (!buf || !cap) return;
    buf[0] = '\0';
    if (!c) return;
    pthread_mutex_lock(&c->spec_mu);
    snprintf(buf, cap, "%s", c->spec_error);
    pthread_mutex_unlock(&c->spec_mu);
}

/* Bucket i's state when it was queued for `why`, else NONE. */
static sj_cache_specialise_state state_for(const sj_bucketed_cache *c, int i, sj_cache_upgrade why) {
    if (!c || i < 0 || i >= c->n_buckets) return SJ_SPECIALISE_NONE;
    int st = atomic_load(&c->buckets[i].specialise);
    /* upgrade is stored before the state leaves NONE */
    if (st == SJ_SPECIALISE_NONE || atomic_load(&c->buckets[i].upgrade) != (int)why) return SJ_SPECIALISE_NONE;
    return (sj_cache_specialise_state)st;
}

sj_cache_specialise_state sj_bucketed_cache_bucket_specialise(const sj_bucketed_cache *c, int i) {
    return state_for(c, i, SJ_UPGRADE_NATIVE);
}

sj_cache_specialise_state sj_bucketed_cache_bucket_tier(const sj_bucketed_cache *c, int i) {
    return state_for(c, i, SJ_UPGRADE_TIER);
}

/* The remote tier's policy, apart from any transport: trust (every value is
 * framed and verified), back-off (a failing server is left alone for a
 * while, so serving never queues behind it), write-behind (one thread
 * publishes, callers only enqueue) and the counters. */
#include "core/core_impl.h"
#include "store/remote_tier_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define WHY_MAX SJ_REMOTE_WHY_MAX

/* A value to publish, or (release set, no content) a lease to drop once the
 * puts queued before it are done. */
struct sj_remote_put_item {
    struct sj_remote_put_item *next;
    sj_remote_lease *release;
    uint8_t key[SJ_REMOTE_KEY_SIZE];
    size_t content_size;
    uint8_t frame[]; /* SJ_REMOTE_FRAME_OVERHEAD header, then the content */
};
typedef struct sj_remote_put_item put_item;

typedef struct scheme_entry {
    const char *prefix;
    sj_remote_transport_open_fn open;
} scheme_entry;

static const scheme_entry SCHEMES[] = {
    {"redis://", sj__remote_redis_open},
};

void sj_remote_config_init(sj_remote_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    cfg->key_prefix = "shapejit:";
    cfg->connect_timeout_ms = 100;
    cfg->command_timeout_ms = 500;
    cfg->backoff_ms = 2000;
    cfg->max_value_size = (size_t)64 << 20;
    cfg->queue_capacity = 64;
    cfg->pool_size = 4;
    cfg->lease_ms = SJ_REMOTE_DEFAULT_LEASE_MS;
}

int64_t sj__remote_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sj__remote_bump(atomic_uint_fast64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

void sj__remote_enter_backoff(sj_remote *r, sj_remote_io io, const char *why) {
    sj__remote_bump(io == SJ_REMOTE_IO_TIMEOUT ? &r->n.timeouts : &r->n.errors);
    pthread_mutex_lock(&r->why_lock);
    snprintf(r->last_failure, sizeof r->last_failure, "%s", why);
    pthread_mutex_unlock(&r->why_lock);
    atomic_store(&r->off_until_ns, sj__remote_now_ns() + (int64_t)r->backoff_ms * 1000000);
}

int64_t sj__remote_backoff_left_ms(sj_remote *r) {
    int64_t until = atomic_load_explicit(&r->off_until_ns, memory_order_relaxed);
    if (until == 0) return 0;
    int64_t left = until - sj__remote_now_ns();
    return left > 0 ? (left + 999999) / 1000000 : 0;
}

static size_t key_name(const char *prefix, size_t prefix_len, const uint8_t key[SJ_REMOTE_KEY_SIZE],
                       char *buf, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t need = prefix_len + 2 * SJ_REMOTE_KEY_SIZE;
    if (cap == 0) return need;
    size_t o = 0;
    for (size_t i = 0; i < prefix_len && o + 1 < cap; i++) buf[o++] = prefix[i];
    for (size_t i = 0; i < SJ_REMOTE_KEY_SIZE && o + 1 < cap; i++) {
        buf[o++] = hex[key[i] >> 4];
        if (o + 1 < cap) buf[o++] = hex[key[i] & 15];
    }
    buf[o] = 0;
    return need;
}

size_t sj_remote_key_name(const sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], char *buf,
                          size_t cap) {
    return key_name(r->prefix, r->prefix_len, key, buf, cap);
}

const char *sj_remote_url(const sj_remote *r) { return r->safe_url; }

sj_ctx *sj_remote_ctx(const sj_remote *r) { return r->ctx; }

/* A whole frame whose tag is not ours: counted, and the first one told. */
static void note_foreign(sj_remote *r, const char *name, const char *why) {
    sj__remote_bump(&r->n.foreign);
    if (!r->on_warning || atomic_exchange(&r->warned, true)) return;
    char msg[512];
    snprintf(msg, sizeof msg,
             "remote tier %s: the value under %s was refused: %s. The fleet likely uses another "
             "secret than this node: its values are not loaded here and not overwritten from here "
             "(this node compiles what it needs); check --remote-secret-file on every node",
             r->safe_url, name, why);
    r->on_warning(r->warning_user, msg);
}

/* ---- get */

sj_status sj_remote_get(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], void **data,
                        size_t *size) {
    return sj__remote_fetch(r, key, data, size, true);
}

sj_status sj__remote_fetch(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], void **data,
                          size_t *size, bool count_absent) {
    if (!r || !key || !data || !size)
        return sj_fail(r ? r->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *data = NULL;
    *size = 0;
    char name[SJ_REMOTE_NAME_MAX];
    size_t name_len = key_name(r->prefix, r->prefix_len, key, name, sizeof name);
    int64_t left = sj__remote_backoff_left_ms(r);
    if (left > 0) {
        sj__remote_bump(&r->n.backoff_skips);
        sj__remote_bump(&r->n.misses);
        char why[WHY_MAX];
        pthread_mutex_lock(&r->why_lock);
        snprintf(why, sizeof why, "%s", r->last_failure);
        pthread_mutex_unlock(&r->why_lock);
        return sj_fail(r->ctx, SJ_E_BUSY, "remote tier %s: off for %lld ms more after: %s",
                       r->safe_url, (long long)left, why);
    }
    char why[WHY_MAX];
    sj_remote_blob blob = {0};
    sj_remote_io io = r->tp->fetch(r->tp_impl, name, name_len, r->max_value_size, &blob, why,
                                   sizeof why);
    if (io != SJ_REMOTE_IO_OK) {
        if (io != SJ_REMOTE_IO_ABSENT || count_absent) sj__remote_bump(&r->n.misses);
        switch (io) {
        case SJ_REMOTE_IO_ABSENT:
            return sj_fail(r->ctx, SJ_E_NOT_FOUND, "remote %s: %s", name, why);
        case SJ_REMOTE_IO_OVERSIZE:
        case SJ_REMOTE_IO_INVALID:
            sj__remote_bump(&r->n.rejected);
            return sj_fail(r->ctx, SJ_E_CORRUPT, "remote %s: rejected: %s", name, why);
        case SJ_REMOTE_IO_PROTOCOL:
            /* not a value gone bad but a server that does not speak Redis
             * (another service on the port): a failure of the tier, like
             * a lost connection, and a distinct status so a caller asking
             * "is it up" can tell the two apart */
            sj__remote_enter_backoff(r, io, why);
            return sj_fail(r->ctx, SJ_E_PARSE, "remote tier %s: %s; off for %d ms", r->safe_url, why,
                           r->backoff_ms);
        default:
            sj__remote_enter_backoff(r, io, why);
            return sj_fail(r->ctx, SJ_E_IO, "remote tier %s: %s%s; off for %d ms", r->safe_url,
                           io == SJ_REMOTE_IO_TIMEOUT ? "timed out: " : "", why, r->backoff_ms);
        }
    }
    size_t off = 0, n = 0;
    const char *bad = sj__remote_frame_check(&r->trust, key, blob.data, blob.size, &off, &n);
    if (bad) {
        r->tp->release(r->tp_impl, &blob);
        sj__remote_bump(&r->n.rejected);
        sj__remote_bump(&r->n.misses);
        if (sj__remote_frame_foreign(bad)) note_foreign(r, name, bad);
        return sj_fail(r->ctx, SJ_E_CORRUPT, "remote %s: rejected: %s", name, bad);
    }
    void *copy = sj_alloc(r->ctx, n);
    if (!copy) {
        r->tp->release(r->tp_impl, &blob);
        sj__remote_bump(&r->n.misses);
        return sj_fail(r->ctx, SJ_E_NOMEM, "remote %s: out of memory for %zu bytes", name, n);
    }
    memcpy(copy, blob.data + off, n);
    r->tp->release(r->tp_impl, &blob);
    sj__remote_bump(&r->n.hits);
    *data = copy;
    *size = n;
    return SJ_OK;
}

/* ---- put: write-behind */

/* Whether the key holds a whole value that another secret signed: the
 * publisher then leaves it alone. Any other outcome (absent, ours, damaged,
 * unreachable) lets the put go ahead or fail on its own. */
static bool holds_foreign(sj_remote *r, const uint8_t *key, const char *name, size_t name_len) {
    sj_remote_blob blob = {0};
    char why[WHY_MAX];
    if (r->tp->fetch(r->tp_impl, name, name_len, r->max_value_size, &blob, why, sizeof why) !=
        SJ_REMOTE_IO_OK)
        return false;
    size_t off, n;
    const char *bad = sj__remote_frame_check(&r->trust, key, blob.data, blob.size, &off, &n);
    r->tp->release(r->tp_impl, &blob);
    if (!bad || !sj__remote_frame_foreign(bad)) return false;
    note_foreign(r, name, bad);
    return true;
}

static void publish(sj_remote *r, put_item *it) {
    if (sj__remote_backoff_left_ms(r) > 0) {
        sj__remote_bump(&r->n.dropped_puts);
        return;
    }
    char name[SJ_REMOTE_NAME_MAX];
    size_t name_len = key_name(r->prefix, r->prefix_len, it->key, name, sizeof name);
    if (holds_foreign(r, it->key, name, name_len)) {
        sj__remote_bump(&r->n.kept_foreign);
        return;
    }
    sj__remote_frame_seal(&r->trust, it->key, it->frame, it->content_size);
    char why[WHY_MAX];
    sj_remote_io io = r->tp->store(r->tp_impl, name, name_len, it->frame,
                                   SJ_REMOTE_FRAME_OVERHEAD + it->content_size, why, sizeof why);
    if (io == SJ_REMOTE_IO_OK)
        sj__remote_bump(&r->n.puts);
    else
        sj__remote_enter_backoff(r, io, why);
}

static void *writer_main(void *arg) {
    sj_remote *r = arg;
    pthread_mutex_lock(&r->q_lock);
    for (;;) {
        while (!r->q_head && !r->stopping) pthread_cond_wait(&r->q_work, &r->q_lock);
        if (!r->q_head) break; /* stopping, and everything queued is done */
        put_item *it = r->q_head;
        r->q_head = it->next;
        if (!r->q_head) r->q_tail = NULL;
        if (!it->release) r->q_len--;
        r->q_busy = true;
        pthread_mutex_unlock(&r->q_lock);
        if (it->release)
            sj__remote_lease_drop(it->release);
        else
            publish(r, it);
        sj_free(r->ctx, it);
        pthread_mutex_lock(&r->q_lock);
        r->q_busy = false;
        if (!r->q_head) pthread_cond_broadcast(&r->q_idle);
    }
    pthread_mutex_unlock(&r->q_lock);
    return NULL;
}

/* q_lock held. */
static void enqueue(sj_remote *r, put_item *it) {
    if (r->q_tail)
        r->q_tail->next = it;
    else
        r->q_head = it;
    r->q_tail = it;
    pthread_cond_signal(&r->q_work);
}

sj_status sj_remote_put(sj_remote *r, const uint8_t key[SJ_REMOTE_KEY_SIZE], const void *data,
                        size_t size) {
    if (!r || !key || (!data && size))
        return sj_fail(r ? r->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    if (r->read_only) return SJ_OK;
    if (size > r->max_value_size - SJ_REMOTE_FRAME_OVERHEAD) {
        sj__remote_bump(&r->n.dropped_puts);
        return sj_fail(r->ctx, SJ_E_OUT_OF_RANGE,
                       "remote put: %zu bytes framed exceed max_value_size %zu", size,
                       r->max_value_size);
    }
    put_item *it = sj_alloc(r->ctx, sizeof *it + SJ_REMOTE_FRAME_OVERHEAD + size);
    if (!it) {
        sj__remote_bump(&r->n.dropped_puts);
        return sj_fail(r->ctx, SJ_E_NOMEM, "remote put: out of memory for %zu bytes", size);
    }
    it->next = NULL;
    it->release = NULL;
    memcpy(it->key, key, SJ_REMOTE_KEY_SIZE);
    it->content_size = size;
    if (size) memcpy(it->frame + SJ_REMOTE_FRAME_OVERHEAD, data, size);
    pthread_mutex_lock(&r->q_lock);
    if (r->q_len >= r->queue_capacity) {
        pthread_mutex_unlock(&r->q_lock);
        sj_free(r->ctx, it);
        sj__remote_bump(&r->n.dropped_puts);
        return sj_fail(r->ctx, SJ_E_BUSY, "remote put: write-behind queue full (%zu puts)",
                       r->queue_capacity);
    }
    enqueue(r, it);
    r->q_len++;
    pthread_mutex_unlock(&r->q_lock);
    return SJ_OK;
}

/* A release is not bounded by queue_capacity: it is tiny, one per lease
 * held, and dropping it would leave the lease to expire. */
bool sj__remote_queue_release(sj_remote *r, sj_remote_lease *l) {
    if (!r->writer_started) return false;
    put_item *it = sj_calloc(r->ctx, 1, sizeof *it);
    if (!it) return false;
    it->release = l;
    pthread_mutex_lock(&r->q_lock);
    enqueue(r, it); /* not counted in q_len: it takes no put's place */
    pthread_mutex_unlock(&r->q_lock);
    return true;
}

void sj_remote_flush(sj_remote *r) {
    if (!r || !r->writer_started) return;
    pthread_mutex_lock(&r->q_lock);
    while (r->q_head || r->q_busy) pthread_cond_wait(&r->q_idle, &r->q_lock);
    pthread_mutex_unlock(&r->q_lock);
}

void sj_remote_stats_get(const sj_remote *r, sj_remote_stats *out) {
    memset(out, 0, sizeof *out);
    if (!r) return;
    sj_remote *m = (sj_remote *)r; /* atomics are read, never changed */
    out->hits = atomic_load(&m->n.hits);
    out->misses = atomic_load(&m->n.misses);
    out->errors = atomic_load(&m->n.errors);
    out->timeouts = atomic_load(&m->n.timeouts);
    out->rejected = atomic_load(&m->n.rejected);
    out->backoff_skips = atomic_load(&m->n.backoff_skips);
    out->puts = atomic_load(&m->n.puts);
    out->dropped_puts = atomic_load(&m->n.dropped_puts);
    out->foreign = atomic_load(&m->n.foreign);
    out->kept_foreign = atomic_load(&m->n.kept_foreign);
    out->leases_won = atomic_load(&m->n.leases_won);
    out->lease_waits = atomic_load(&m->n.lease_waits);
    out->lease_waited_hits = atomic_load(&m->n.lease_waited_hits);
    out->lease_waited_compiles = atomic_load(&m->n.lease_waited_compiles);
    out->lease_errors = atomic_load(&m->n.lease_errors);
}

/* ---- create / destroy */

static sj_status check_config(sj_ctx *ctx, const sj_remote_config *c) {
    if (!c->url || !c->url[0]) return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: no URL given");
    if (!c->key_prefix) return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: key_prefix is NULL");
    if (strlen(c->key_prefix) > SJ_REMOTE_MAX_PREFIX)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: key_prefix longer than %d bytes",
                       SJ_REMOTE_MAX_PREFIX);
    if (c->connect_timeout_ms <= 0 || c->command_timeout_ms <= 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "remote tier: connect_timeout_ms (%d) and command_timeout_ms (%d) must be "
                       "positive",
                       c->connect_timeout_ms, c->command_timeout_ms);
    if (c->backoff_ms < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: backoff_ms %d is negative",
                       c->backoff_ms);
    if (c->max_value_size <= SJ_REMOTE_FRAME_OVERHEAD || c->max_value_size > SJ_REMOTE_MAX_VALUE_LIMIT)
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "remote tier: max_value_size %zu outside %d..%zu bytes", c->max_value_size,
                       SJ_REMOTE_FRAME_OVERHEAD + 1, SJ_REMOTE_MAX_VALUE_LIMIT);
    if (c->queue_capacity == 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: queue_capacity must be at least 1");
    if (c->pool_size < 1 || c->pool_size > SJ_REMOTE_MAX_POOL)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: pool_size %d outside 1..%d",
                       c->pool_size, SJ_REMOTE_MAX_POOL);
    if (c->lease_ms < 0 || c->lease_ms > SJ_REMOTE_MAX_LEASE_MS)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "remote tier: lease_ms %d outside 0..%d (0: no leases)",
                       c->lease_ms, SJ_REMOTE_MAX_LEASE_MS);
    return SJ_OK;
}

sj_status sj_remote_create(sj_ctx *ctx, const sj_remote_config *cfg_in, sj_remote **out) {
    if (!ctx || !cfg_in || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_remote_config c; /* the caller's config as this library reads it */
    sj_remote_config_init(&c);
    SJ_TRY(sj__config_read(ctx, "sj_remote_config", cfg_in, SJ_CONFIG_SIZE(sj_remote_config, warning_user),
                           sizeof c, &c));
    const sj_remote_config *cfg = &c;
    SJ_TRY(check_config(ctx, cfg));
    const scheme_entry *scheme = NULL;
    for (size_t i = 0; i < sizeof SCHEMES / sizeof SCHEMES[0]; i++)
        if (strncmp(cfg->url, SCHEMES[i].prefix, strlen(SCHEMES[i].prefix)) == 0)
            scheme = &SCHEMES[i];
    if (!scheme) {
        const char *colon = strstr(cfg->url, "://");
        return sj_fail(ctx, SJ_E_INVALID_ARG,
                       "remote tier: URL scheme '%.*s' not supported (supported: redis://)",
                       colon ? (int)(colon - cfg->url) : 0, cfg->url);
    }
    sj_remote *r = sj_calloc(ctx, 1, sizeof *r);
    if (!r) return sj_fail(ctx, SJ_E_NOMEM, "remote tier: out of memory");
    r->ctx = ctx;
    r->prefix = sj_strdup(ctx, cfg->key_prefix);
    if (!r->prefix) {
        sj_free(ctx, r);
        return sj_fail(ctx, SJ_E_NOMEM, "remote tier: out of memory");
    }
    sj_status st = scheme->open(ctx, cfg, &r->tp, &r->tp_impl, &r->safe_url);
    if (st != SJ_OK) {
        sj_free(ctx, r->prefix);
        sj_free(ctx, r);
        return st;
    }
    r->prefix_len = strlen(r->prefix);
    sj__remote_trust_init(&r->trust, cfg->secret);
    r->read_only = cfg->read_only;
    r->backoff_ms = cfg->backoff_ms;
    r->max_value_size = cfg->max_value_size;
    r->queue_capacity = cfg->queue_capacity;
    r->on_warning = cfg->on_warning;
    r->warning_user = cfg->warning_user;
    pthread_mutex_init(&r->why_lock, NULL);
    pthread_mutex_init(&r->q_lock, NULL);
    pthread_cond_init(&r->q_work, NULL);
    pthread_cond_init(&r->q_idle, NULL);
    if (!r->read_only) {
        int e = pthread_create(&r->writer, NULL, writer_main, r);
        if (e != 0) {
            sj_remote_destroy(r);
            return sj_fail(ctx, SJ_E_NOMEM, "remote tier: cannot start the write-behind thread: %s",
                           strerror(e));
        }
        r->writer_started = true;
    }
    if ((st = sj__remote_leases_start(r, r->read_only ? 0 : cfg->lease_ms)) != SJ_OK) {
        sj_remote_destroy(r);
        return st;
    }
    *out = r;
    return SJ_OK;
}

void sj_remote_destroy(sj_remote *r) {
    if (!r) return;
    if (r->writer_started) {
        pthread_mutex_lock(&r->q_lock);
        r->stopping = true;
        pthread_cond_signal(&r->q_work);
        pthread_mutex_unlock(&r->q_lock);
        pthread_join(r->writer, NULL);
    }
    sj__remote_leases_stop(r); /* after the writer: its queued releases are done */
    pthread_cond_destroy(&r->q_idle);
    pthread_cond_destroy(&r->q_work);
    pthread_mutex_destroy(&r->q_lock);
    pthread_mutex_destroy(&r->why_lock);
    r->tp->destroy(r->tp_impl);
    sj_ctx *ctx = r->ctx;
    sj_free(ctx, r->safe_url);
    sj_free(ctx, r->prefix);
    sj_free(ctx, r);
}

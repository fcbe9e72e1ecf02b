/* The metadata info cache: a chained hash table of entries keyed by their
 * words, an intrusive LRU list holding exactly the unpinned entries (so the
 * eviction victim is always the list's tail), and an intrusive list of the
 * entries pinned by the capture in progress (so pinning never allocates). */
#include "shapejit/ext/metadata_cache.h"

#include "core/core_impl.h"
#include "core/array.h"

#include <string.h>

#define DEFAULT_MAX_ENTRIES 4096
#define DEFAULT_MAX_CACHED_BYTES 2048
#define INITIAL_BUCKETS 64

typedef struct lru_link {
    struct lru_link *prev, *next;
} lru_link;

typedef struct md_entry {
    lru_link lru;              /* linked iff locks == 0 */
    struct md_entry *chain;    /* next in the hash bucket */
    struct md_entry *pending;  /* next pinned by the capture in progress */
    uint64_t hash;
    uint64_t capture_epoch;    /* the last capture that pinned this entry */
    void *buffer;
    uint32_t locks;            /* live graphs (and the capture) pinning it */
    bool retired;              /* out of the table (sj_mdcache_clear), on the retired list */
    size_t n_words;
    int64_t words[];
} md_entry;

typedef struct md_graph {
    uint64_t id;
    md_entry **entries;
    size_t n;
} md_graph;

struct sj_mdcache {
    sj_ctx *ctx;
    sj_mdcache_policy policy;
    sj_mdcache_release_fn release;
    void *user;

    md_entry **buckets;
    size_t n_buckets; /* a power of two */
    size_t n_entries;

    lru_link lru; /* sentinel: next = most recently used, prev = least */
    size_t lru_len;

    bool capturing;
    uint64_t capture_epoch;
    md_entry *pending;
    size_t n_pending;

    md_graph *graphs;
    size_t n_graphs, cap_graphs;

    md_entry *retired; /* chained through `chain`: cleared while pinned */
    size_t n_retired;

    uint64_t hits, misses, evictions, eviction_probes;
};

void sj_mdcache_policy_init(sj_mdcache_policy *p) {
    p->max_entries = DEFAULT_MAX_ENTRIES;
    p->max_cached_bytes = DEFAULT_MAX_CACHED_BYTES;
    p->mode = SJ_CACHE_NORMAL;
}

bool sj_mdcache_policy_should_cache(const sj_mdcache_policy *p, size_t bytes) {
    if (p->mode == SJ_CACHE_CAPTURE) return true;
    return p->max_entries > 0 && bytes <= p->max_cached_bytes;
}

bool sj_mdcache_policy_capacity(const sj_mdcache_policy *p, size_t *out) {
    if (p->mode == SJ_CACHE_CAPTURE) return false;
    *out = p->max_entries;
    return true;
}

bool sj_mdcache_policy_pins_entries(const sj_mdcache_policy *p) {
    return p->mode == SJ_CACHE_CAPTURE;
}

/* Two independent multiply lanes (even and odd words) halve the dependency
 * chain of a serial hash; the final avalanche spreads every bit of every
 * word over the bucket index. */
static uint64_t hash_words(const int64_t *w, size_t n) {
    uint64_t a = 0x9E3779B97F4A7C15ull ^ (uint64_t)n, b = 0xC2B2AE3D27D4EB4Full;
    size_t i = 0;
    for (; i + 1 < n; i += 2) {
        a = (a ^ (uint64_t)w[i]) * 0xFF51AFD7ED558CCDull;
        b = (b ^ (uint64_t)w[i + 1]) * 0xC4CEB9FE1A85EC53ull;
        a ^= a >> 29;
        b ^= b >> 31;
    }
    if (i < n) a = (a ^ (uint64_t)w[i]) * 0xFF51AFD7ED558CCDull;
    uint64_t h = a ^ (b << 23 | b >> 41);
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

static void lru_unlink(sj_mdcache *c, md_entry *e) {
    e->lru.prev->next = e->lru.next;
    e->lru.next->prev = e->lru.prev;
    e->lru.prev = e->lru.next = NULL;
    c->lru_len--;
}

static void lru_push_front(sj_mdcache *c, md_entry *e) {
    e->lru.prev = &c->lru;
    e->lru.next = c->lru.next;
    c->lru.next->prev = &e->lru;
    c->lru.next = &e->lru;
    c->lru_len++;
}

static md_entry *entry_of(lru_link *l) {
    return (md_entry *)((char *)l - offsetof(md_entry, lru));
}

sj_status sj_mdcache_create(sj_ctx *ctx, const sj_mdcache_policy *policy,
                            sj_mdcache_release_fn release, void *user, sj_mdcache **out) {
    if (!ctx || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    if (!release) return sj_fail(ctx, SJ_E_INVALID_ARG, "metadata cache: no release callback");
    sj_mdcache *c = sj_calloc(ctx, 1, sizeof *c);
    if (!c) return sj_fail(ctx, SJ_E_NOMEM, "metadata cache: out of memory");
    c->ctx = ctx;
    if (policy)
        c->policy = *policy;
    else
        sj_mdcache_policy_init(&c->policy);
    c->policy.mode = SJ_CACHE_NORMAL;
    c->release = release;
    c->user = user;
    c->n_buckets = INITIAL_BUCKETS;
    c->buckets = sj_calloc(ctx, c->n_buckets, sizeof *c->buckets);
    if (!c->buckets) {
        sj_free(ctx, c);
        return sj_fail(ctx, SJ_E_NOMEM, "metadata cache: out of memory");
    }
    c->lru.prev = c->lru.next = &c->lru;
    *out = c;
    return SJ_OK;
}

void sj_mdcache_destroy(sj_mdcache *c) {
    if (!c) return;
    for (size_t b = 0; b < c->n_buckets; b++) {
        md_entry *e = c->buckets[b];
        while (e) {
            md_entry *next = e->chain;
            c->release(c->user, e->buffer);
            sj_free(c->ctx, e);
            e = next;
        }
    }
    for (md_entry *e = c->retired, *next; e; e = next) {
        next = e->chain;
        c->release(c->user, e->buffer);
        sj_free(c->ctx, e);
    }
    for (size_t i = 0; i < c->n_graphs; i++) sj_free(c->ctx, c->graphs[i].entries);
    sj_free(c->ctx, c->graphs);
    sj_free(c->ctx, c->buckets);
    sj_free(c->ctx, c);
}

static md_entry *find(const sj_mdcache *c, uint64_t h, const int64_t *words, size_t n) {
    for (md_entry *e = c->buckets[h & (c->n_buckets - 1)]; e; e = e->chain)
        if (e->hash == h && e->n_words == n &&
            (n == 0 || memcmp(e->words, words, n * sizeof *words) == 0))
            return e;
    return NULL;
}

/* Takes e out of the table and the LRU list and releases its buffer; the
 * entry's memory is the caller's to free or reuse. */
static void detach_entry(sj_mdcache *c, md_entry *e) {
    md_entry **pp = &c->buckets[e->hash & (c->n_buckets - 1)];
    while (*pp != e) pp = &(*pp)->chain;
    *pp = e->chain;
    if (e->lru.next) lru_unlink(c, e);
    c->n_entries--;
    c->release(c->user, e->buffer);
}

/* A retired entry lives on the retired list, not in the table. */
static void remove_retired(sj_mdcache *c, md_entry *e) {
    md_entry **pp = &c->retired;
    while (*pp != e) pp = &(*pp)->chain;
    *pp = e->chain;
    c->n_retired--;
    c->release(c->user, e->buffer);
    sj_free(c->ctx, e);
}

static void remove_entry(sj_mdcache *c, md_entry *e) {
    if (e->retired) {
        remove_retired(c, e);
        return;
    }
    detach_entry(c, e);
    sj_free(c->ctx, e);
}

/* Pins e to the capture in progress, once per capture. */
static void pin_for_capture(sj_mdcache *c, md_entry *e) {
    if (e->capture_epoch == c->capture_epoch) return;
    e->capture_epoch = c->capture_epoch;
    if (e->locks++ == 0 && e->lru.next) lru_unlink(c, e);
    e->pending = c->pending;
    c->pending = e;
    c->n_pending++;
}

static bool words_bytes(size_t n_words, size_t *bytes) {
    return !sj_mul_overflow_size(n_words, sizeof(int64_t), bytes);
}

sj_mdcache_lookup_result sj_mdcache_lookup(sj_mdcache *c, const int64_t *words, size_t n_words,
                                           void **out) {
    *out = NULL;
    size_t bytes;
    if (!words_bytes(n_words, &bytes) || !sj_mdcache_policy_should_cache(&c->policy, bytes))
        return SJ_MDCACHE_BUILD_FORGET;
    md_entry *e = find(c, hash_words(words, n_words), words, n_words);
    if (!e) {
        c->misses++;
        return SJ_MDCACHE_BUILD_STORE;
    }
    c->hits++;
    if (sj_mdcache_policy_pins_entries(&c->policy)) {
        pin_for_capture(c, e);
    } else if (e->locks == 0 && c->lru.next != &e->lru) {
        lru_unlink(c, e);
        lru_push_front(c, e);
    }
    *out = e->buffer;
    return SJ_MDCACHE_HIT;
}

/* Doubles the bucket array when the load passes one entry per bucket. A
 * failed allocation keeps the old array: chains get longer, nothing breaks. */
static void maybe_grow(sj_mdcache *c) {
    if (c->n_entries < c->n_buckets) return;
    size_t n = c->n_buckets * 2;
    md_entry **b = sj_calloc(c->ctx, n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < c->n_buckets; i++) {
        md_entry *e = c->buckets[i];
        while (e) {
            md_entry *next = e->chain;
            e->chain = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    sj_free(c->ctx, c->buckets);
    c->buckets = b;
    c->n_buckets = n;
}

sj_status sj_mdcache_store(sj_mdcache *c, const int64_t *words, size_t n_words, void *buffer) {
    size_t bytes, total;
    if (!words_bytes(n_words, &bytes) || !sj_mdcache_policy_should_cache(&c->policy, bytes))
        return sj_fail(c->ctx, SJ_E_STATE,
                       "metadata cache: the policy does not cache an info of %zu words now",
                       n_words);
    uint64_t h = hash_words(words, n_words);
    if (find(c, h, words, n_words))
        return sj_fail(c->ctx, SJ_E_STATE, "metadata cache: info of %zu words already cached",
                       n_words);
    if (sj_add_overflow_size(sizeof(md_entry), bytes, &total))
        return sj_fail(c->ctx, SJ_E_NOMEM, "metadata cache: info too large");
    size_t capacity;
    bool bounded = sj_mdcache_policy_capacity(&c->policy, &capacity);
    /* Evict down to one below the bound; the last victim's memory is reused
     * when it has the same size, so a full cache inserts without allocating. */
    md_entry *e = NULL;
    while (bounded && c->n_entries >= capacity && c->lru_len > 0) {
        md_entry *victim = entry_of(c->lru.prev);
        c->eviction_probes++;
        c->evictions++;
        if (c->n_entries == capacity && victim->n_words == n_words) {
            detach_entry(c, victim);
            e = victim;
        } else {
            remove_entry(c, victim);
        }
    }
    if (!e) e = sj_alloc(c->ctx, total);
    if (!e) return sj_fail(c->ctx, SJ_E_NOMEM, "metadata cache: out of memory");
    memset(e, 0, sizeof *e);
    e->hash = h;
    e->buffer = buffer;
    e->n_words = n_words;
    if (bytes) memcpy(e->words, words, bytes);

    maybe_grow(c);
    md_entry **bucket = &c->buckets[h & (c->n_buckets - 1)];
    e->chain = *bucket;
    *bucket = e;
    c->n_entries++;
    if (sj_mdcache_policy_pins_entries(&c->policy))
        pin_for_capture(c, e);
    else
        lru_push_front(c, e);
    return SJ_OK;
}

static void set_mode(sj_mdcache *c, sj_cache_mode mode) {
    c->policy.mode = mode;
}

sj_status sj_mdcache_capture_begin(sj_mdcache *c) {
    if (c->capturing)
        return sj_fail(c->ctx, SJ_E_STATE, "metadata cache: a capture is already in progress");
    c->capturing = true;
    c->capture_epoch++;
    c->pending = NULL;
    c->n_pending = 0;
    set_mode(c, SJ_CACHE_CAPTURE);
    return SJ_OK;
}

static md_graph *find_graph(sj_mdcache *c, uint64_t id) {
    for (size_t i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].id == id) return &c->graphs[i];
    return NULL;
}

sj_status sj_mdcache_capture_commit(sj_mdcache *c, uint64_t graph) {
    if (!c->capturing)
        return sj_fail(c->ctx, SJ_E_STATE, "metadata cache: commit of graph %llu with no capture",
                       (unsigned long long)graph);
    if (find_graph(c, graph))
        return sj_fail(c->ctx, SJ_E_INVALID_ARG, "metadata cache: graph %llu is already live",
                       (unsigned long long)graph);
    if (!sj__array_reserve(c->ctx, (void **)&c->graphs, &c->cap_graphs, c->n_graphs + 1,
                          sizeof *c->graphs))
        return sj_fail(c->ctx, SJ_E_NOMEM, "metadata cache: out of memory");
    md_entry **entries = sj_calloc(c->ctx, c->n_pending, sizeof *entries);
    if (!entries) return sj_fail(c->ctx, SJ_E_NOMEM, "metadata cache: out of memory");
    size_t n = 0;
    for (md_entry *e = c->pending; e; e = e->pending) entries[n++] = e;
    c->graphs[c->n_graphs++] = (md_graph){graph, entries, n};
    c->pending = NULL;
    c->n_pending = 0;
    c->capturing = false;
    set_mode(c, SJ_CACHE_NORMAL);
    return SJ_OK;
}

void sj_mdcache_capture_discard(sj_mdcache *c) {
    if (!c->capturing) return;
    for (md_entry *e = c->pending, *next; e; e = next) {
        next = e->pending;
        if (--e->locks == 0) {
            if (e->retired)
                remove_retired(c, e);
            else
                lru_push_front(c, e);
        }
    }
    c->pending = NULL;
    c->n_pending = 0;
    c->capturing = false;
    set_mode(c, SJ_CACHE_NORMAL);
}

sj_status sj_mdcache_graph_release(sj_mdcache *c, uint64_t graph) {
    md_graph *g = find_graph(c, graph);
    if (!g)
        return sj_fail(c->ctx, SJ_E_NOT_FOUND, "metadata cache: graph %llu is not live",
                       (unsigned long long)graph);
    md_graph taken = *g;
    *g = c->graphs[--c->n_graphs];
    for (size_t i = 0; i < taken.n; i++) {
        md_entry *e = taken.entries[i];
        /* Unpinned by its last graph: the graph was why it stayed, so it goes
         * now rather than waiting to be evicted. */
        if (--e->locks == 0) remove_entry(c, e);
    }
    sj_free(c->ctx, taken.entries);
    return SJ_OK;
}

void sj_mdcache_clear_unpinned(sj_mdcache *c) {
    while (c->lru_len > 0) remove_entry(c, entry_of(c->lru.prev));
}

void sj_mdcache_clear(sj_mdcache *c) {
    sj_mdcache_clear_unpinned(c);
    /* What is left is pinned: out of the table, onto the retired list. */
    for (size_t b = 0; b < c->n_buckets; b++) {
        md_entry *e = c->buckets[b];
        c->buckets[b] = NULL;
        while (e) {
            md_entry *next = e->chain;
            e->retired = true;
            e->chain = c->retired;
            c->retired = e;
            c->n_retired++;
            c->n_entries--;
            e = next;
        }
    }
}

sj_cache_mode sj_mdcache_mode(const sj_mdcache *c) { return c->policy.mode; }

const sj_mdcache_policy *sj_mdcache_policy_of(const sj_mdcache *c) { return &c->policy; }

void sj_mdcache_stats_get(const sj_mdcache *c, sj_mdcache_stats *out) {
    out->entries = c->n_entries;
    out->pinned = c->n_entries - c->lru_len;
    out->lru_length = c->lru_len;
    out->live_graphs = c->n_graphs;
    out->retired = c->n_retired;
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->eviction_probes = c->eviction_probes;
}

/* The server's JSON memory budget (--max-json-memory-bytes): what every
 * request's parsed JSON and every response body being built or sent hold,
 * together. A JSON array of numbers costs about twenty times its text once
 * parsed (a json_t per element), and a response for a wide output is as
 * large as its rows make it, so neither the body limit nor a per-request
 * count bounds the process: eight 30 MB bodies parsed at once held 3.9 GB
 * while each stayed under a per-thread budget of 256 MiB.
 *
 * jansson's allocator hook is process-wide: the server (a program, not the
 * library) installs it. Each block carries a header naming the pool it was
 * counted against and the bytes it really costs (malloc's usable size plus
 * its chunk header, not the size jansson asked for: small json_t blocks cost
 * about twice what they ask), so a block freed on any thread, or after its
 * request's account closed, gives back exactly what it took. */
#include "server/server_impl.h"

#include <jansson.h>
#include <malloc.h>
#include <stdlib.h>

/* What one block of malloc costs past its usable size: glibc's chunk header. */
#define CHUNK_OVERHEAD sizeof(size_t)

typedef struct block_header {
    srv_json_pool *pool; /* NULL: allocated outside any account */
    size_t cost;
} block_header;

/* 16 bytes, so the block jansson gets keeps malloc's alignment. */
_Static_assert(sizeof(block_header) == 16, "block header keeps 16-byte alignment");

/* The account jansson's allocations on this thread count against (NULL:
 * none). Per thread: with one thread per connection that is per request. */
static _Thread_local srv_json_account *current;

bool srv_json_reserve(srv_json_account *a, size_t n) {
    size_t limit = a->pool->limit;
    if (n > limit || a->used > limit - n) {
        a->over_self = true; /* this request alone needs more than the budget */
        return false;
    }
    size_t old = atomic_load(&a->pool->used);
    do {
        if (n > limit || old > limit - n) {
            a->over_pool = true; /* others hold the rest of it now */
            return false;
        }
    } while (!atomic_compare_exchange_weak(&a->pool->used, &old, old + n));
    a->used += n;
    return true;
}

void srv_json_unreserve(srv_json_pool *p, size_t n) {
    if (p && n) atomic_fetch_sub(&p->used, n);
}

static void *json_mem_alloc(size_t n) {
    if (n > SIZE_MAX - sizeof(block_header)) return NULL;
    block_header *h = malloc(n + sizeof *h);
    if (!h) return NULL;
    srv_json_account *a = current;
    size_t cost = malloc_usable_size(h) + CHUNK_OVERHEAD;
    if (a && !srv_json_reserve(a, cost)) {
        free(h);
        return NULL;
    }
    h->pool = a ? a->pool : NULL;
    h->cost = cost;
    return h + 1;
}

static void json_mem_free(void *ptr) {
    if (!ptr) return;
    block_header *h = (block_header *)ptr - 1;
    if (h->pool) {
        srv_json_unreserve(h->pool, h->cost);
        srv_json_account *a = current;
        if (a && a->pool == h->pool && a->used >= h->cost) a->used -= h->cost;
    }
    free(h);
}

void srv_json_memory_init(void) { json_set_alloc_funcs(json_mem_alloc, json_mem_free); }

void srv_json_account_begin(srv_json_account *a, srv_json_pool *p) {
    *a = (srv_json_account){.pool = p};
    current = a;
}

void srv_json_account_end(srv_json_account *a) {
    if (current == a) current = NULL;
}

srv_json_account *srv_json_account_suspend(void) {
    srv_json_account *a = current;
    current = NULL;
    return a;
}

void srv_json_account_resume(srv_json_account *a) { current = a; }

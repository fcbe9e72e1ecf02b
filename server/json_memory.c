/* A per-request memory budget for jansson. A JSON array of numbers costs
 * about twenty times its text once parsed (a json_t per element), so the
 * body limit alone does not bound what a request can make the server
 * allocate. jansson's allocator hook is process-wide; the budget is
 * per thread, and with one thread per connection that is per request. */
#include "server/server_impl.h"

#include <jansson.h>
#include <stdlib.h>

/* Each block carries its size in front, so free can give it back. */
#define HEADER 16

static _Thread_local size_t budget; /* 0: no budget on this thread */
static _Thread_local size_t used;
static _Thread_local bool exceeded;

static void *json_mem_alloc(size_t n) {
    if (budget) {
        if (n > budget || used > budget - n) {
            exceeded = true;
            return NULL;
        }
        used += n;
    }
    char *p = malloc(n + HEADER);
    if (!p) return NULL;
    *(size_t *)p = budget ? n : 0;
    return p + HEADER;
}

static void json_mem_free(void *ptr) {
    if (!ptr) return;
    char *p = (char *)ptr - HEADER;
    size_t n = *(size_t *)p;
    if (budget && n <= used) used -= n;
    free(p);
}

void srv_json_memory_init(void) { json_set_alloc_funcs(json_mem_alloc, json_mem_free); }

void srv_json_memory_budget(size_t bytes) {
    budget = bytes;
    used = 0;
    exceeded = false;
}

bool srv_json_memory_exceeded(void) { return exceeded; }

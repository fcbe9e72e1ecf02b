/* An open-addressing hash set of int32 ids whose string names live with
 * the owner (graph node names, ONNX value names). The index stores no
 * strings, so it never copies or frees one, and finding a name costs O(1)
 * on average where a scan over the owner's entries would make building a
 * big graph quadratic. Private to the library.
 *
 *   sj_name_index ix;
 *   sj__name_index_init(&ix, node_name, graph);   // node_name(graph, id) -> name
 *   if (!sj__name_index_reserve(ctx, &ix, 1)) ...out of memory...
 *   sj__name_index_add(&ix, id);                   // id's name must be absent
 *   int32_t found = sj__name_index_find(&ix, "x"); // -1 when absent
 *   sj__name_index_free(ctx, &ix);
 */
#ifndef SJ_NAME_INDEX_H
#define SJ_NAME_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shapejit/common.h"

/* The current name of id; called only for ids the index holds. */
typedef const char *(*sj_name_of_fn)(const void *owner, int32_t id);

typedef struct sj_name_index {
    int32_t *slots; /* ids, -1 = empty; linear probing at load <= 1/2 */
    size_t cap;     /* 0 or a power of two */
    size_t count;
    sj_name_of_fn name_of;
    const void *owner;
} sj_name_index;

void sj__name_index_init(sj_name_index *ix, sj_name_of_fn name_of, const void *owner);
void sj__name_index_free(sj_ctx *ctx, sj_name_index *ix);

/* Makes room for `extra` more ids, so the adds that follow cannot fail.
 * Returns false when out of memory, with the index unchanged. */
bool sj__name_index_reserve(sj_ctx *ctx, sj_name_index *ix, size_t extra);

/* The id whose name is `name`, or -1. */
int32_t sj__name_index_find(const sj_name_index *ix, const char *name);

/* Adds id under its current name, which must be absent; room must have
 * been reserved. */
void sj__name_index_add(sj_name_index *ix, int32_t id);

/* Removes id, looked up under its current name (which it must still have). */
void sj__name_index_remove(sj_name_index *ix, int32_t id);

/* dst (initialised, empty) becomes a copy of src's ids, answering through
 * dst's own owner: for an owner copied with the same ids. */
bool sj__name_index_copy(sj_ctx *ctx, sj_name_index *dst, const sj_name_index *src);

#endif

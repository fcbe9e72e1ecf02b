/* Growing the library's dynamic arrays (tokens, launches, graphs, ...) in
 * one place, so each does not carry its own doubling and overflow checks.
 * Private to the library.
 *
 *   if (!sj__array_reserve(ctx, (void **)&a->items, &a->cap, a->n + 1, sizeof *a->items))
 *       return sj_fail(ctx, SJ_E_NOMEM, "...: out of memory");
 *   a->items[a->n++] = x;
 */
#ifndef SJ_ARRAY_H
#define SJ_ARRAY_H

#include <stdbool.h>
#include <stddef.h>

#include "shapejit/common.h"

/* Makes the array *items (*cap entries of elem_size bytes) hold at least
 * `need` entries, doubling its capacity (from 8) so appends cost O(1)
 * amortised. Returns false when out of memory or when the size would
 * overflow; *items and *cap are then unchanged. */
bool sj__array_reserve(sj_ctx *ctx, void **items, size_t *cap, size_t need, size_t elem_size);

#endif

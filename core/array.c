#include "core/array.h"

#include <stdint.h>

#include "core/core_impl.h"

bool sj__array_reserve(sj_ctx *ctx, void **items, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) return true;
    size_t new_cap = *cap ? *cap : 8;
    while (new_cap < need) {
        if (new_cap > SIZE_MAX / 2) return false;
        new_cap *= 2;
    }
    size_t bytes;
    if (sj_mul_overflow_size(new_cap, elem_size, &bytes)) return false;
    void *p = sj_realloc(ctx, *items, bytes);
    if (!p) return false;
    *items = p;
    *cap = new_cap;
    return true;
}

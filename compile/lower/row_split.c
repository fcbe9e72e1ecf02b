/* Row-parallel kernels (row_split.h). */
#include "compile/lower/row_split.h"

/* Whether the output points of the dims in `mask` map to distinct
 * elements: sorted by stride, each stride passes everything the smaller
 * ones span (a mixed-radix layout, as every buffer lowering materialises
 * has, transposed or not). Dims of size 1 take one value and never clash. */
static bool output_injective(const sj_kernel *k, uint32_t mask) {
    int order[SJ_KSPACE_MAX], n = 0;
    for (int d = 0; d < k->rank; d++) {
        if (!((mask >> d) & 1) || k->dims[d] == 1) continue;
        if (k->out_strides[d] <= 0) return false;
        int i = n++;
        while (i > 0 && k->out_strides[order[i - 1]] > k->out_strides[d]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = d;
    }
    int64_t span = 0; /* largest offset the smaller strides reach */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        if (k->out_strides[d] <= span) return false;
        if (__builtin_mul_overflow(k->out_strides[d], k->dims[d] - 1, &(int64_t){0})) return false;
        span += k->out_strides[d] * (k->dims[d] - 1);
    }
    return true;
}

int sj__kernel_row_dim(const sj_kernel *k, uint64_t *row_work) {
    *row_work = 0;
    uint32_t all = (1u << k->rank) - 1, outputs = all & ~k->reduced;
    int d = -1;
    if (k->kind == SJ_KK_ATTENTION) {
        d = k->rank > 2 && k->sym[2] ? 2 : -1;
    } else if (k->kind == SJ_KK_MATMUL) {
        /* the rows, else a batch dim (a conv's images: each slice whole) */
        d = k->rank > 2 && k->sym[2] ? 2 : k->sym[0] ? 0 : k->sym[1] ? 1 : -1;
    } else {
        for (int i = 0; i < k->rank && d < 0; i++)
            if (k->sym[i] && ((outputs >> i) & 1)) d = i;
    }
    /* a launch splits units of the active extent, which a constant part
     * (k * n + c) would leave out */
    if (d < 0 || k->sym_add[d] || !output_injective(k, outputs)) return -1;
    uint64_t work = 1;
    for (int i = 0; i < k->rank; i++)
        if (i != d && __builtin_mul_overflow(work, (uint64_t)k->dims[i], &work)) work = UINT64_MAX;
    /* a unit of the active extent is k rows of a k*N dim */
    if (__builtin_mul_overflow(work, (uint64_t)k->sym[d], &work)) work = UINT64_MAX;
    *row_work = work ? work : 1;
    return d;
}

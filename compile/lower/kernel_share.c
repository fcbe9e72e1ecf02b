/* Content-addressed kernels (kernel_share.h). */
#include "compile/lower/kernel_share.h"

#include <llvm-c/blake3.h>
#include <stdio.h>
#include <string.h>

#include "core/array.h"
#include "core/core_impl.h"

typedef struct desc_buf {
    sj_ctx *ctx;
    uint8_t *p;
    size_t n, cap;
    bool oom;
} desc_buf;

static void put_bytes(desc_buf *d, const void *p, size_t n) {
    if (d->oom) return;
    if (!sj__array_reserve(d->ctx, (void **)&d->p, &d->cap, d->n + n, 1)) {
        d->oom = true;
        return;
    }
    memcpy(d->p + d->n, p, n);
    d->n += n;
}

static void put_i64(desc_buf *d, int64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    put_bytes(d, b, sizeof b);
}

static void put_f32(desc_buf *d, float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    put_i64(d, bits);
}

static void put_f64(desc_buf *d, double f) {
    uint64_t bits;
    memcpy(&bits, &f, sizeof bits);
    put_i64(d, (int64_t)bits);
}

/* Whole arrays, not only the first `rank` entries: lowering zeroes the
 * rest, and a field an emitter might read past rank must not be skipped. */
static void put_i64s(desc_buf *d, const int64_t *v, int n) {
    for (int i = 0; i < n; i++) put_i64(d, v[i]);
}

static void put_expr(desc_buf *d, const sj_kexpr *x) {
    put_i64(d, x->kind);
    put_i64(d, x->op);
    put_i64(d, x->a);
    put_i64(d, x->b);
    put_i64(d, x->c);
    put_i64(d, x->load);
    put_i64(d, x->gnext);
    put_f32(d, x->value);
    put_i64s(d, x->coef, SJ_KSPACE_MAX);
    put_i64(d, x->bias);
    put_i64(d, x->dtype);
    put_i64(d, x->ivalue);
    put_i64(d, x->gstride);
    put_i64(d, x->glen);
    put_i64(d, x->gfill);
    put_i64(d, x->gsafe);
    put_i64(d, x->dim);
    put_f64(d, x->first);
    put_f64(d, x->step);
    put_i64(d, x->first_n);
}

static void put_load(desc_buf *d, const sj_kload *ld) {
    put_i64(d, ld->buffer);
    put_i64(d, ld->dtype);
    put_i64(d, ld->storage);
    put_i64(d, ld->weight);
    put_i64s(d, ld->strides, SJ_KSPACE_MAX);
    put_i64(d, ld->offset);
    put_i64(d, ld->offset_n);
}

sj_status sj__kernel_describe(sj_ctx *ctx, const sj_kernel *k, uint8_t **out, size_t *len) {
    desc_buf d = {.ctx = ctx};
    static const char tag[] = "sj-kernel-desc-1";
    put_bytes(&d, tag, sizeof tag - 1);
    put_i64(&d, k->kind);
    put_i64(&d, k->out_dtype);
    put_i64(&d, k->rank);
    put_i64s(&d, k->dims, SJ_KSPACE_MAX);
    for (int i = 0; i < SJ_KSPACE_MAX; i++) put_i64(&d, k->sym[i]);
    for (int i = 0; i < SJ_KSPACE_MAX; i++) put_i64(&d, k->sym_add[i]);
    put_i64(&d, k->reduced);
    put_i64s(&d, k->out_strides, SJ_KSPACE_MAX);
    put_i64(&d, k->out_offset);
    put_i64(&d, k->out_offset_n);
    put_i64(&d, k->red_op);
    put_i64(&d, k->prologue);
    put_i64(&d, k->epilogue);
    put_i64(&d, k->scale);
    put_i64(&d, k->bias);
    put_f32(&d, k->epsilon);
    put_f32(&d, k->alpha);
    put_i64(&d, k->a);
    put_i64(&d, k->b);
    for (int i = 0; i < 4; i++) put_i64(&d, k->att[i]);
    put_i64(&d, k->att_dk);
    put_i64(&d, k->n_buffers);
    put_i64(&d, k->n_exprs);
    for (int i = 0; i < k->n_exprs; i++) put_expr(&d, &k->exprs[i]);
    put_i64(&d, k->n_loads);
    for (int i = 0; i < k->n_loads; i++) put_load(&d, &k->loads[i]);
    if (d.oom) {
        sj_free(ctx, d.p);
        return sj_fail(ctx, SJ_E_NOMEM, "lowering: out of memory describing kernel %s", k->name);
    }
    *out = d.p;
    *len = d.n;
    return SJ_OK;
}

typedef struct kept {
    uint8_t digest[LLVM_BLAKE3_OUT_LEN];
    uint8_t *desc;
    size_t len;
} kept;

static void free_kernel_arrays(sj_ctx *ctx, sj_kernel *k) {
    sj_free(ctx, k->exprs);
    sj_free(ctx, k->loads);
    k->exprs = NULL;
    k->loads = NULL;
}

sj_status sj__lowered_share_kernels(sj_lowered *l) {
    sj_ctx *ctx = l->ctx;
    sj_launch_plan *p = &l->plan;
    int n = l->n_kernels;
    if (p->n_kernels != n)
        return sj_fail(ctx, SJ_E_INTERNAL, "kernel sharing: plan has %d kernels, lowering %d",
                       (int)p->n_kernels, n);
    for (int i = 0; i < p->n_launches; i++)
        if (p->launches[i].kernel < 0 || p->launches[i].kernel >= n)
            return sj_fail(ctx, SJ_E_INTERNAL, "kernel sharing: launch %d names kernel %d of %d", i,
                           (int)p->launches[i].kernel, n);
    if (n < 2) return SJ_OK;
    /* Open addressing over the kept kernels, at most half full. */
    size_t cap = 4;
    while (cap < 2 * (size_t)n) cap *= 2;
    int32_t *map = sj_alloc(ctx, (size_t)n * sizeof *map);
    int32_t *table = sj_alloc(ctx, cap * sizeof *table);
    kept *ks = sj_calloc(ctx, (size_t)n, sizeof *ks);
    sj_status st = SJ_OK;
    if (!map || !table || !ks) st = sj_fail(ctx, SJ_E_NOMEM, "kernel sharing: out of memory");
    for (size_t i = 0; table && i < cap; i++) table[i] = -1;
    int n_kept = 0;
    for (int k = 0; k < n && st == SJ_OK; k++) {
        sj_kernel *kk = &l->kernels[k];
        if (strcmp(kk->name, p->kernels[k].name))
            st = sj_fail(ctx, SJ_E_INTERNAL, "kernel sharing: plan kernel %d is %s, lowering's %s",
                         k, p->kernels[k].name, kk->name);
        kept c;
        memset(&c, 0, sizeof c);
        if (st == SJ_OK) st = sj__kernel_describe(ctx, kk, &c.desc, &c.len);
        if (st != SJ_OK) break;
        llvm_blake3_hasher h;
        llvm_blake3_hasher_init(&h);
        llvm_blake3_hasher_update(&h, c.desc, c.len);
        llvm_blake3_hasher_finalize(&h, c.digest, sizeof c.digest);
        uint64_t slot;
        memcpy(&slot, c.digest, sizeof slot);
        int32_t found = -1;
        for (slot &= cap - 1; table[slot] >= 0; slot = (slot + 1) & (cap - 1)) {
            const kept *o = &ks[table[slot]];
            if (!memcmp(o->digest, c.digest, sizeof c.digest) && o->len == c.len &&
                !memcmp(o->desc, c.desc, c.len)) {
                found = table[slot];
                break;
            }
        }
        if (found >= 0) {
            map[k] = found;
            sj_free(ctx, c.desc);
            free_kernel_arrays(ctx, kk);
            continue;
        }
        table[slot] = n_kept;
        ks[n_kept] = c;
        map[k] = n_kept;
        if (n_kept != k) {
            l->kernels[n_kept] = *kk;
            p->kernels[n_kept] = p->kernels[k];
            memset(kk, 0, sizeof *kk);
        }
        n_kept++;
    }
    if (st == SJ_OK) {
        for (int i = 0; i < p->n_launches; i++) p->launches[i].kernel = map[p->launches[i].kernel];
        l->n_kernels = p->n_kernels = n_kept;
    }
    /* On failure every slot of l->kernels holds either its own arrays or
     * none (dropped copies and moved-from slots are cleared), so the caller
     * destroys the lowering as it stands. */
    for (int i = 0; ks && i < n; i++) sj_free(ctx, ks[i].desc);
    sj_free(ctx, ks);
    sj_free(ctx, table);
    sj_free(ctx, map);
    return st;
}

/* The name a kernel's code gets: "sjk_" and 32 hex digits of the BLAKE3 of
 * its description with the symbolic dims' bucket extents left out. So a
 * kernel whose code does not depend on the extent (most of them: the
 * active extent n reaches them at run time) is the same bytes in every
 * bucket, and the store keeps it once (issue #33). Within one lowering the
 * extents are all the bucket's, so equal names mean equal descriptions,
 * which sharing has merged already; a repeat is refused, not linked. */
sj_status sj__lowered_name_kernels(sj_lowered *l) {
    sj_ctx *ctx = l->ctx;
    sj_launch_plan *p = &l->plan;
    if (p->n_kernels != l->n_kernels)
        return sj_fail(ctx, SJ_E_INTERNAL, "kernel names: plan has %d kernels, lowering %d",
                       (int)p->n_kernels, l->n_kernels);
    for (int i = 0; i < l->n_kernels; i++) {
        sj_kernel masked = l->kernels[i];
        for (int d = 0; d < masked.rank && d < SJ_KSPACE_MAX; d++)
            if (masked.sym[d]) masked.dims[d] = -1;
        uint8_t *desc;
        size_t len;
        SJ_TRY(sj__kernel_describe(ctx, &masked, &desc, &len));
        uint8_t digest[16];
        llvm_blake3_hasher h;
        llvm_blake3_hasher_init(&h);
        llvm_blake3_hasher_update(&h, desc, len);
        llvm_blake3_hasher_finalize(&h, digest, sizeof digest);
        sj_free(ctx, desc);
        char name[SJ_KERNEL_NAME_MAX] = "sjk_";
        for (size_t b = 0; b < sizeof digest; b++)
            snprintf(name + 4 + 2 * b, sizeof name - 4 - 2 * b, "%02x", digest[b]);
        for (int j = 0; j < i; j++)
            if (!strcmp(p->kernels[j].name, name))
                return sj_fail(ctx, SJ_E_INTERNAL, "kernel names: kernels %d and %d are both %s", j, i,
                               name);
        memcpy(l->kernels[i].name, name, sizeof name);
        memcpy(p->kernels[i].name, name, sizeof name);
    }
    return SJ_OK;
}

/* Kernel descriptions -> LLVM IR for NVPTX, following gpu_schedule.h and
 * matching the CUDA C emitter kernel for kernel.
 *
 * Each kernel is `void name(ptr buffers, ptr info, i64 n)` marked as a PTX
 * entry. It loads its buffer pointers, casts them to the global address
 * space and calls an always-inlined body whose buffer parameters are
 * noalias (lowering never lets a kernel's output alias its inputs), so reads
 * can use the non-coherent cache. Loops are while-loops (a thread's first
 * index may already be past the bound); values that cross iterations live in
 * allocas that SROA promotes. Transcendentals come from libdevice, max/min
 * are llvm.maximum/minimum (NaN-propagating, as in the interpreter). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compile/llvm/llvm_point.h"
#include "compile/llvm/llvm_scalar.h"
#include "compile/gpu/nvptx_impl.h"
#include "compile/gpu/gpu_emit.h"
#include "compile/gpu/gpu_schedule.h"

typedef struct pe {
    sj_ctx *ctx;
    LLVMContextRef C;
    LLVMModuleRef M;
    LLVMBuilderRef B;
    LLVMTypeRef f32, i64, i32, ptr, gptr, voidt;
    LLVMValueRef fn, alloca_point;
    const sj_kernel *k;
    sj_gpu_schedule sch;
    LLVMValueRef *bufs; /* the body's buffer parameters, n_buffers of them */
    LLVMValueRef n;
    LLVMValueRef idx[SJ_KSPACE_MAX];
    LLVMValueRef acc;
    LLVMValueRef tid, ntid; /* i64 */
    bool bad;               /* a malformed expression was met */
} pe;

typedef struct wloop {
    LLVMBasicBlockRef head, exit;
    LLVMValueRef phi;
} wloop;

static LLVMValueRef cf(pe *e, double v) { return LLVMConstReal(e->f32, v); }
static LLVMValueRef ci(pe *e, int64_t v) { return LLVMConstInt(e->i64, (unsigned long long)v, 1); }

static LLVMValueRef sreg64(pe *e, const char *reg) {
    return LLVMBuildZExt(e->B, sj__nvptx_sreg(e->M, e->B, reg), e->i64, reg);
}

/* for (phi = start; phi < end; phi += step): open at the body. */
static LLVMValueRef wloop_open(pe *e, wloop *l, LLVMValueRef start, LLVMValueRef end) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->B);
    l->head = LLVMAppendBasicBlockInContext(e->C, e->fn, "head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->C, e->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(e->C, e->fn, "exit");
    LLVMBuildBr(e->B, l->head);
    LLVMPositionBuilderAtEnd(e->B, l->head);
    l->phi = LLVMBuildPhi(e->B, e->i64, "i");
    LLVMAddIncoming(l->phi, &start, &pre, 1);
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, l->phi, end, ""), body, l->exit);
    LLVMPositionBuilderAtEnd(e->B, body);
    return l->phi;
}

static void wloop_close(pe *e, wloop *l, LLVMValueRef step) {
    LLVMValueRef next = LLVMBuildNSWAdd(e->B, l->phi, step, "i.next");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->B);
    LLVMBuildBr(e->B, l->head);
    LLVMAddIncoming(l->phi, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(e->B, l->exit);
}

/* if (cond) { ... } : returns the join block; the builder is in the then block. */
static LLVMBasicBlockRef if_open(pe *e, LLVMValueRef cond) {
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->C, e->fn, "then");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(e->C, e->fn, "join");
    LLVMBuildCondBr(e->B, cond, then, join);
    LLVMPositionBuilderAtEnd(e->B, then);
    return join;
}

static void if_close(pe *e, LLVMBasicBlockRef join) {
    LLVMBuildBr(e->B, join);
    LLVMPositionBuilderAtEnd(e->B, join);
}

/* A symbolic dim k*N + c loops to k * n + c. */
static LLVMValueRef bound_of(pe *e, int d) {
    int64_t k = e->k->sym[d], c = e->k->sym_add[d];
    if (!k) return ci(e, e->k->dims[d]);
    LLVMValueRef v = k == 1 ? e->n : LLVMBuildNSWMul(e->B, e->n, ci(e, k), "kn");
    return c ? LLVMBuildNSWAdd(e->B, v, ci(e, c), "knc") : v;
}

static LLVMValueRef count_of(pe *e, uint32_t mask) {
    LLVMValueRef c = ci(e, 1);
    for (int d = 0; d < e->k->rank; d++)
        if ((mask >> d) & 1) c = LLVMBuildNSWMul(e->B, c, bound_of(e, d), "");
    return c;
}

/* idx[d] for the dims in mask from linear index v, last dim fastest. */
static void decompose(pe *e, uint32_t mask, LLVMValueRef v) {
    int dims[SJ_KSPACE_MAX], nd = 0;
    for (int d = 0; d < e->k->rank; d++)
        if ((mask >> d) & 1) dims[nd++] = d;
    for (int j = nd - 1; j > 0; j--) {
        LLVMValueRef b = bound_of(e, dims[j]);
        e->idx[dims[j]] = LLVMBuildSRem(e->B, v, b, "");
        v = LLVMBuildSDiv(e->B, v, b, "");
    }
    if (nd > 0) e->idx[dims[0]] = v;
}

static void zero_dims(pe *e, uint32_t mask) {
    for (int d = 0; d < e->k->rank; d++)
        if ((mask >> d) & 1) e->idx[d] = ci(e, 0);
}

/* Where the body stands, for the shared addressing (llvm_point.h). */
static sj_llvm_point here(pe *e) { return (sj_llvm_point){e->B, e->i64, e->k->rank, e->idx, e->n}; }

static LLVMValueRef address_t(pe *e, LLVMValueRef base, const int64_t *strides, LLVMTypeRef elt) {
    sj_llvm_point p = here(e);
    return sj__llvm_point_address(&p, base, strides, elt);
}

static LLVMValueRef offset_base_t(pe *e, LLVMValueRef base, int64_t offset, int64_t offset_n,
                                  LLVMTypeRef elt) {
    sj_llvm_point p = here(e);
    return sj__llvm_offset_base(&p, base, offset, offset_n, elt);
}

/* A load's element in memory: 16 bits for a param the precision policy
 * narrowed (kernel.h `storage`), else float32. */
static LLVMTypeRef ld_elt(pe *e, const sj_kload *ld) {
    return ld->storage != SJ_PRECISION_FP32 ? LLVMInt16TypeInContext(e->C) : e->f32;
}

static LLVMValueRef ld_addr(pe *e, const sj_kload *ld) {
    LLVMTypeRef elt = ld_elt(e, ld);
    return address_t(e, offset_base_t(e, e->bufs[ld->buffer], ld->offset, ld->offset_n, elt),
                     ld->strides, elt);
}

static LLVMValueRef out_addr(pe *e) {
    return address_t(e, offset_base_t(e, e->bufs[0], e->k->out_offset, e->k->out_offset_n, e->f32),
                     e->k->out_strides, e->f32);
}

static LLVMValueRef index_test(pe *e, const sj_kexpr *ex) {
    sj_llvm_point p = here(e);
    return sj__llvm_point_test(&p, ex);
}

static LLVMValueRef load_f32(pe *e, LLVMValueRef p) {
    LLVMValueRef v = LLVMBuildLoad2(e->B, e->f32, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

/* Load ld's element at the current point as float32: a narrowed weight
 * is read as a 16-bit word and widened with integer ops and one exact
 * multiply (sj__llvm_widen_16), the same widening the host uses. */
static LLVMValueRef load_ld(pe *e, const sj_kload *ld) {
    if (ld->storage == SJ_PRECISION_FP32) return load_f32(e, ld_addr(e, ld));
    LLVMValueRef v = LLVMBuildLoad2(e->B, LLVMInt16TypeInContext(e->C), ld_addr(e, ld), "");
    LLVMSetAlignment(v, 2);
    return sj__llvm_widen_16(e->B, ld->storage, v);
}

static LLVMValueRef alloca_f32(pe *e, const char *name) {
    return sj__llvm_entry_alloca(e->C, e->alloca_point, e->f32, name);
}

static LLVMValueRef intrinsic_f32(pe *e, const char *name, LLVMValueRef x, LLVMValueRef y) {
    return sj__llvm_intrinsic_f32(e->M, e->B, name, x, y);
}

static LLVMValueRef libdevice(pe *e, const char *fn, LLVMValueRef x, LLVMValueRef y) {
    LLVMValueRef args[2] = {x, y};
    return sj__nvptx_libdevice_f32(e->M, e->B, fn, args, y ? 2 : 1);
}

static LLVMValueRef fmax_nan(pe *e, LLVMValueRef a, LLVMValueRef b) {
    return intrinsic_f32(e, "llvm.maximum", a, b);
}

/* The GPU's transcendental functions come from libdevice. */
static LLVMValueRef nv_exp(void *e, LLVMValueRef x) { return libdevice(e, "__nv_expf", x, NULL); }
static LLVMValueRef nv_log(void *e, LLVMValueRef x) { return libdevice(e, "__nv_logf", x, NULL); }
static LLVMValueRef nv_tanh(void *e, LLVMValueRef x) { return libdevice(e, "__nv_tanhf", x, NULL); }
static LLVMValueRef nv_erf(void *e, LLVMValueRef x) { return libdevice(e, "__nv_erff", x, NULL); }
static LLVMValueRef nv_pow(void *e, LLVMValueRef x, LLVMValueRef y) {
    return libdevice(e, "__nv_powf", x, y);
}
static LLVMValueRef nv_libm(void *e, const char *name, LLVMValueRef x) {
    char fn[32];
    snprintf(fn, sizeof fn, "__nv_%s", name);
    return libdevice(e, fn, x, NULL);
}
static const sj_llvm_math nvptx_math = {nv_exp, nv_log, nv_tanh, nv_erf, nv_pow, nv_libm};

static LLVMValueRef unary(pe *e, sj_op op, LLVMValueRef x, float alpha) {
    return sj__llvm_unary(&(sj_llvm_scalar){e->M, e->B, &nvptx_math, e}, op, x, alpha);
}

static LLVMValueRef binary(pe *e, sj_op op, LLVMValueRef a, LLVMValueRef b) {
    return sj__llvm_binary(&(sj_llvm_scalar){e->M, e->B, &nvptx_math, e}, op, a, b);
}

static LLVMValueRef eval(pe *e, int32_t x) {
    if (x < 0 || x >= e->k->n_exprs) goto bad;
    const sj_kexpr *ex = &e->k->exprs[x];
    LLVMValueRef a, b, r = NULL;
    switch (ex->kind) {
    case SJ_KX_LOAD:
        if (ex->load < 0 || ex->load >= e->k->n_loads) goto bad;
        return load_ld(e, &e->k->loads[ex->load]);
    case SJ_KX_CONST: return cf(e, ex->value);
    case SJ_KX_ACC:
        if (!e->acc) goto bad;
        return e->acc;
    case SJ_KX_UNARY:
        if (!(a = eval(e, ex->a))) return NULL;
        r = unary(e, ex->op, a, ex->value);
        break;
    case SJ_KX_BINARY:
        if (!(a = eval(e, ex->a)) || !(b = eval(e, ex->b))) return NULL;
        r = binary(e, ex->op, a, b);
        break;
    case SJ_KX_SELECT:
        if (!(a = eval(e, ex->a)) || !(b = eval(e, ex->b))) return NULL;
        r = LLVMBuildSelect(e->B, index_test(e, ex), a, b, "");
        break;
    case SJ_KX_WHERE:
    case SJ_KX_GATHER:
    case SJ_KX_RANGE: break; /* typed: refused before emission (gpu_emitters.c) */
    }
    if (r) return r;
bad:
    e->bad = true;
    return NULL;
}

static sj_status bad_expr(pe *e) {
    return sj_fail(e->ctx, SJ_E_INTERNAL, "nvptx emitter: kernel %s has a malformed expression",
                   e->k->name);
}

static sj_status store_epilogue(pe *e) {
    LLVMValueRef v = eval(e, e->k->epilogue);
    if (!v) return bad_expr(e);
    LLVMSetAlignment(LLVMBuildStore(e->B, v, out_addr(e)), 4);
    return SJ_OK;
}

static sj_status emit_map(pe *e) {
    uint32_t all = (1u << e->k->rank) - 1;
    LLVMValueRef total = count_of(e, all);
    LLVMValueRef start = LLVMBuildNSWAdd(e->B, LLVMBuildNSWMul(e->B, sreg64(e, "ctaid.x"), e->ntid, ""), e->tid, "");
    LLVMValueRef step = LLVMBuildNSWMul(e->B, sreg64(e, "nctaid.x"), e->ntid, "");
    wloop l;
    LLVMValueRef p = wloop_open(e, &l, start, total);
    decompose(e, all, p);
    SJ_TRY(store_epilogue(e));
    wloop_close(e, &l, step);
    return SJ_OK;
}

/* The block's combined value of v (sum or NaN-propagating max) through the
 * shared array; ends with a barrier so the array can be reused at once. */
static LLVMValueRef block_combine(pe *e, LLVMValueRef shared, LLVMValueRef v, bool is_max) {
    LLVMTypeRef arr = LLVMGlobalGetValueType(shared);
    LLVMValueRef z = ci(e, 0);
    LLVMValueRef mine = LLVMBuildInBoundsGEP2(e->B, arr, shared, (LLVMValueRef[]){z, e->tid}, 2, "");
    LLVMBuildStore(e->B, v, mine);
    sj__nvptx_barrier(e->M, e->B);
    /* for (s = ntid / 2; s > 0; s /= 2): while-loop over s >= 1 as 0 < s */
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->B);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(e->C, e->fn, "tree");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(e->C, e->fn, "tree.body");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->C, e->fn, "tree.done");
    LLVMValueRef half = LLVMBuildLShr(e->B, e->ntid, ci(e, 1), "");
    LLVMBuildBr(e->B, head);
    LLVMPositionBuilderAtEnd(e->B, head);
    LLVMValueRef s = LLVMBuildPhi(e->B, e->i64, "s");
    LLVMAddIncoming(s, &half, &pre, 1);
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntUGT, s, z, ""), body, done);
    LLVMPositionBuilderAtEnd(e->B, body);
    LLVMBasicBlockRef join = if_open(e, LLVMBuildICmp(e->B, LLVMIntULT, e->tid, s, ""));
    LLVMValueRef oi = LLVMBuildNUWAdd(e->B, e->tid, s, "");
    LLVMValueRef other = LLVMBuildInBoundsGEP2(e->B, arr, shared, (LLVMValueRef[]){z, oi}, 2, "");
    LLVMValueRef a = load_f32(e, mine), b = load_f32(e, other);
    LLVMBuildStore(e->B, is_max ? fmax_nan(e, a, b) : LLVMBuildFAdd(e->B, a, b, ""), mine);
    if_close(e, join);
    sj__nvptx_barrier(e->M, e->B);
    LLVMValueRef s2 = LLVMBuildLShr(e->B, s, ci(e, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->B);
    LLVMBuildBr(e->B, head);
    LLVMAddIncoming(s, &s2, &latch, 1);
    LLVMPositionBuilderAtEnd(e->B, done);
    LLVMValueRef first = LLVMBuildInBoundsGEP2(e->B, arr, shared, (LLVMValueRef[]){z, z}, 2, "");
    LLVMValueRef r = load_f32(e, first);
    sj__nvptx_barrier(e->M, e->B);
    return r;
}

/* Folds f(prologue) over the active row into the alloca `slot`. */
typedef enum fold_kind { FOLD_SUM, FOLD_MAX, FOLD_EXP_SUM, FOLD_SQ_SUM } fold_kind;

static sj_status row_fold(pe *e, uint32_t red, LLVMValueRef cols, LLVMValueRef slot,
                          fold_kind kind, LLVMValueRef center) {
    wloop l;
    LLVMValueRef c = wloop_open(e, &l, e->tid, cols);
    decompose(e, red, c);
    LLVMValueRef v = eval(e, e->k->prologue);
    if (!v) return bad_expr(e);
    LLVMValueRef old = load_f32(e, slot), nv;
    switch (kind) {
    case FOLD_MAX: nv = fmax_nan(e, old, v); break;
    case FOLD_EXP_SUM:
        nv = LLVMBuildFAdd(e->B, old, libdevice(e, "__nv_expf", LLVMBuildFSub(e->B, v, center, ""), NULL), "");
        break;
    case FOLD_SQ_SUM: {
        LLVMValueRef dx = LLVMBuildFSub(e->B, v, center, "");
        nv = LLVMBuildFAdd(e->B, old, LLVMBuildFMul(e->B, dx, dx, ""), "");
        break;
    }
    default: nv = LLVMBuildFAdd(e->B, old, v, ""); break;
    }
    LLVMBuildStore(e->B, nv, slot);
    wloop_close(e, &l, e->ntid);
    return SJ_OK;
}

static sj_status emit_row(pe *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    uint32_t all = (1u << k->rank) - 1, red = k->reduced & all, outer = all & ~red;
    char name[SJ_KERNEL_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.sh", k->name);
    LLVMValueRef sh = sj__nvptx_shared_f32(e->M, name, e->sch.threads);
    LLVMValueRef rows = count_of(e, outer), cols = count_of(e, red);
    LLVMValueRef fcols = LLVMBuildSIToFP(B, cols, e->f32, "");
    LLVMValueRef s1 = alloca_f32(e, "s1"), s2 = alloca_f32(e, "s2");
    wloop rl;
    LLVMValueRef row = wloop_open(e, &rl, sreg64(e, "ctaid.x"), rows);
    decompose(e, outer, row);
    if (k->kind == SJ_KK_REDUCE) {
        bool is_max = k->red_op == SJ_OP_REDUCE_MAX;
        LLVMBuildStore(B, cf(e, is_max ? -INFINITY : 0.0), s1);
        SJ_TRY(row_fold(e, red, cols, s1, is_max ? FOLD_MAX : FOLD_SUM, NULL));
        e->acc = block_combine(e, sh, load_f32(e, s1), is_max);
        if (k->red_op == SJ_OP_REDUCE_MEAN) e->acc = LLVMBuildFDiv(B, e->acc, fcols, "");
        LLVMBasicBlockRef join = if_open(e, LLVMBuildICmp(B, LLVMIntEQ, e->tid, ci(e, 0), ""));
        zero_dims(e, red);
        SJ_TRY(store_epilogue(e));
        if_close(e, join);
        wloop_close(e, &rl, sreg64(e, "nctaid.x"));
        return SJ_OK;
    }
    LLVMValueRef center, scale;
    if (k->kind == SJ_KK_LAYERNORM) {
        LLVMBuildStore(B, cf(e, 0.0), s1);
        SJ_TRY(row_fold(e, red, cols, s1, FOLD_SUM, NULL));
        center = LLVMBuildFDiv(B, block_combine(e, sh, load_f32(e, s1), false), fcols, "mean");
        LLVMBuildStore(B, cf(e, 0.0), s2);
        SJ_TRY(row_fold(e, red, cols, s2, FOLD_SQ_SUM, center));
        LLVMValueRef var = LLVMBuildFDiv(B, block_combine(e, sh, load_f32(e, s2), false), fcols, "var");
        LLVMValueRef sd = intrinsic_f32(e, "llvm.sqrt", LLVMBuildFAdd(B, var, cf(e, k->epsilon), ""), NULL);
        scale = LLVMBuildFDiv(B, cf(e, 1.0), sd, "rstd");
    } else {
        LLVMBuildStore(B, cf(e, -INFINITY), s1);
        SJ_TRY(row_fold(e, red, cols, s1, FOLD_MAX, NULL));
        center = block_combine(e, sh, load_f32(e, s1), true);
        LLVMBuildStore(B, cf(e, 0.0), s2);
        SJ_TRY(row_fold(e, red, cols, s2, FOLD_EXP_SUM, center));
        LLVMValueRef sum = block_combine(e, sh, load_f32(e, s2), false);
        scale = k->kind == SJ_KK_SOFTMAX ? LLVMBuildFDiv(B, cf(e, 1.0), sum, "")
                                         : libdevice(e, "__nv_logf", sum, NULL);
    }
    wloop cl;
    LLVMValueRef c = wloop_open(e, &cl, e->tid, cols);
    decompose(e, red, c);
    LLVMValueRef v = eval(e, k->prologue);
    if (!v) return bad_expr(e);
    LLVMValueRef dx = LLVMBuildFSub(B, v, center, "");
    if (k->kind == SJ_KK_LAYERNORM) {
        e->acc = LLVMBuildFMul(B, dx, scale, "");
        if (k->scale >= 0) {
            LLVMValueRef sv = eval(e, k->scale);
            if (!sv) return bad_expr(e);
            e->acc = LLVMBuildFMul(B, e->acc, sv, "");
        }
        if (k->bias >= 0) {
            LLVMValueRef bv = eval(e, k->bias);
            if (!bv) return bad_expr(e);
            e->acc = LLVMBuildFAdd(B, e->acc, bv, "");
        }
    } else if (k->kind == SJ_KK_SOFTMAX) {
        e->acc = LLVMBuildFMul(B, libdevice(e, "__nv_expf", dx, NULL), scale, "");
    } else {
        e->acc = LLVMBuildFSub(B, dx, scale, "");
    }
    SJ_TRY(store_epilogue(e));
    wloop_close(e, &cl, e->ntid);
    wloop_close(e, &rl, sreg64(e, "nctaid.x"));
    return SJ_OK;
}

/* Address of element [r][c] of a shared T x (T+1) tile. */
static LLVMValueRef tile_at(pe *e, LLVMValueRef tile, LLVMValueRef r, LLVMValueRef c) {
    LLVMValueRef i = LLVMBuildNUWAdd(e->B, LLVMBuildNUWMul(e->B, r, ci(e, SJ_GPU_TILE + 1), ""), c, "");
    LLVMTypeRef arr = LLVMGlobalGetValueType(tile);
    return LLVMBuildInBoundsGEP2(e->B, arr, tile, (LLVMValueRef[]){ci(e, 0), i}, 2, "");
}

/* tile[ty][tx] = in_bounds ? load : 0 */
static void stage(pe *e, LLVMValueRef tile, LLVMValueRef ty, LLVMValueRef tx, LLVMValueRef ok,
                  const sj_kload *ld) {
    LLVMValueRef slot = tile_at(e, tile, ty, tx);
    LLVMBuildStore(e->B, cf(e, 0.0), slot);
    LLVMBasicBlockRef join = if_open(e, ok);
    LLVMBuildStore(e->B, load_ld(e, ld), slot);
    if_close(e, join);
}

static sj_status emit_matmul(pe *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    if (k->a < 0 || k->a >= k->n_loads || k->b < 0 || k->b >= k->n_loads) return bad_expr(e);
    const int64_t T = SJ_GPU_TILE;
    char name[SJ_KERNEL_NAME_MAX + 8];
    snprintf(name, sizeof name, "%s.as", k->name);
    LLVMValueRef as = sj__nvptx_shared_f32(e->M, name, (unsigned)(T * (T + 1)));
    snprintf(name, sizeof name, "%s.bs", k->name);
    LLVMValueRef bs = sj__nvptx_shared_f32(e->M, name, (unsigned)(T * (T + 1)));
    LLVMValueRef tx = e->tid, ty = sreg64(e, "tid.y");
    LLVMValueRef B1 = bound_of(e, 1), M = bound_of(e, 2), N = bound_of(e, 3), K = bound_of(e, 4);
    LLVMValueRef batches = count_of(e, 3u);
    LLVMValueRef acc = alloca_f32(e, "acc");
    LLVMValueRef tile = ci(e, T);
    wloop zl, ml, nl, kl;
    LLVMValueRef z = wloop_open(e, &zl, sreg64(e, "ctaid.z"), batches);
    LLVMValueRef i0 = LLVMBuildSDiv(B, z, B1, ""), i1 = LLVMBuildSRem(B, z, B1, "");
    LLVMValueRef m0 = wloop_open(e, &ml, LLVMBuildNSWMul(B, sreg64(e, "ctaid.y"), tile, ""), M);
    LLVMValueRef n0 = wloop_open(e, &nl, LLVMBuildNSWMul(B, sreg64(e, "ctaid.x"), tile, ""), N);
    LLVMBuildStore(B, cf(e, 0.0), acc);
    LLVMValueRef m = LLVMBuildNSWAdd(B, m0, ty, "m"), n = LLVMBuildNSWAdd(B, n0, tx, "n");
    LLVMValueRef k0 = wloop_open(e, &kl, ci(e, 0), K);
    /* a tile: [m0 + ty][k0 + tx]; b tile: [k0 + ty][n0 + tx] */
    LLVMValueRef ka = LLVMBuildNSWAdd(B, k0, tx, ""), kb = LLVMBuildNSWAdd(B, k0, ty, "");
    e->idx[0] = i0, e->idx[1] = i1, e->idx[2] = m, e->idx[3] = ci(e, 0), e->idx[4] = ka;
    stage(e, as, ty, tx,
          LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, m, M, ""), LLVMBuildICmp(B, LLVMIntSLT, ka, K, ""), ""),
          &k->loads[k->a]);
    e->idx[2] = ci(e, 0), e->idx[3] = n, e->idx[4] = kb;
    stage(e, bs, ty, tx,
          LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, kb, K, ""), LLVMBuildICmp(B, LLVMIntSLT, n, N, ""), ""),
          &k->loads[k->b]);
    sj__nvptx_barrier(e->M, B);
    LLVMValueRef sum = load_f32(e, acc);
    for (int64_t kk = 0; kk < T; kk++) {
        LLVMValueRef p = LLVMBuildFMul(B, load_f32(e, tile_at(e, as, ty, ci(e, kk))),
                                       load_f32(e, tile_at(e, bs, ci(e, kk), tx)), "");
        LLVMSetFastMathFlags(p, LLVMFastMathAllowContract);
        sum = LLVMBuildFAdd(B, sum, p, "");
        LLVMSetFastMathFlags(sum, LLVMFastMathAllowContract);
    }
    LLVMBuildStore(B, sum, acc);
    sj__nvptx_barrier(e->M, B);
    wloop_close(e, &kl, tile);
    e->acc = load_f32(e, acc);
    if (k->alpha != 1.0f) e->acc = LLVMBuildFMul(B, e->acc, cf(e, k->alpha), "");
    e->idx[0] = i0, e->idx[1] = i1, e->idx[2] = m, e->idx[3] = n, e->idx[4] = ci(e, 0);
    LLVMBasicBlockRef join = if_open(
        e, LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSLT, m, M, ""), LLVMBuildICmp(B, LLVMIntSLT, n, N, ""), ""));
    SJ_TRY(store_epilogue(e));
    if_close(e, join);
    wloop_close(e, &nl, LLVMBuildNSWMul(B, sreg64(e, "nctaid.x"), tile, ""));
    wloop_close(e, &ml, LLVMBuildNSWMul(B, sreg64(e, "nctaid.y"), tile, ""));
    wloop_close(e, &zl, sreg64(e, "nctaid.z"));
    return SJ_OK;
}

static void add_attr(pe *e, LLVMValueRef f, LLVMAttributeIndex i, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(f, i, LLVMCreateEnumAttribute(e->C, kind, 0));
}

static sj_status emit_body(pe *e) {
    switch (e->sch.kind) {
    case SJ_GPU_SCHED_MAP: return emit_map(e);
    case SJ_GPU_SCHED_ROW: return emit_row(e);
    case SJ_GPU_SCHED_MATMUL: return emit_matmul(e);
    }
    return sj_fail(e->ctx, SJ_E_INTERNAL, "nvptx emitter: unknown schedule");
}

/* Scratch for one kernel's buffer values, parameter types and call
 * arguments (any number of buffers). */
static sj_status emit_kernel_with(pe *e, const sj_kernel *k, LLVMTypeRef *bp, LLVMValueRef *args);

static sj_status emit_kernel(pe *e, const sj_kernel *k) {
    if (k->n_buffers < 1)
        return sj_fail(e->ctx, SJ_E_INTERNAL, "nvptx emitter: kernel %s has no output buffer", k->name);
    size_t n = (size_t)k->n_buffers + 1;
    e->bufs = sj_calloc(e->ctx, n, sizeof *e->bufs);
    LLVMTypeRef *bp = sj_calloc(e->ctx, n, sizeof *bp);
    LLVMValueRef *args = sj_calloc(e->ctx, n, sizeof *args);
    sj_status st = e->bufs && bp && args
                       ? emit_kernel_with(e, k, bp, args)
                       : sj_fail(e->ctx, SJ_E_NOMEM, "nvptx emitter: kernel %s (%d buffers)", k->name,
                                 k->n_buffers);
    sj_free(e->ctx, e->bufs);
    sj_free(e->ctx, bp);
    sj_free(e->ctx, args);
    e->bufs = NULL;
    return st;
}

static sj_status emit_kernel_with(pe *e, const sj_kernel *k, LLVMTypeRef *bp, LLVMValueRef *args) {
    for (int i = 0; i < k->n_loads; i++)
        if (k->loads[i].buffer < 0 || k->loads[i].buffer >= k->n_buffers)
            return sj_fail(e->ctx, SJ_E_INTERNAL, "nvptx emitter: kernel %s loads buffer %d of %d",
                           k->name, k->loads[i].buffer, k->n_buffers);
    e->k = k;
    e->acc = NULL;
    e->bad = false;
    SJ_TRY(sj__gpu_schedule_kernel(e->ctx, k, &e->sch));
    bool reads_out = false;
    for (int i = 0; i < k->n_loads; i++) reads_out |= k->loads[i].buffer == 0;

    for (int i = 0; i < k->n_buffers; i++) bp[i] = e->gptr;
    bp[k->n_buffers] = e->i64;
    LLVMTypeRef bt = LLVMFunctionType(e->voidt, bp, (unsigned)k->n_buffers + 1, 0);
    char bname[SJ_KERNEL_NAME_MAX + 8];
    snprintf(bname, sizeof bname, "%s.body", k->name);
    LLVMValueRef body = LLVMAddFunction(e->M, bname, bt);
    LLVMSetLinkage(body, LLVMInternalLinkage);
    add_attr(e, body, LLVMAttributeFunctionIndex, "alwaysinline");
    add_attr(e, body, LLVMAttributeFunctionIndex, "nounwind");
    for (int i = 0; i < k->n_buffers; i++) {
        if (i > 0 || !reads_out) add_attr(e, body, (LLVMAttributeIndex)(i + 1), "noalias");
        e->bufs[i] = LLVMGetParam(body, (unsigned)i);
    }
    e->fn = body;
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, body, "entry"));
    e->n = LLVMBuildFreeze(e->B, LLVMGetParam(body, (unsigned)k->n_buffers), "n");
    e->alloca_point = e->n; /* allocas go in front of it, in the entry block */
    for (int d = 0; d < SJ_KSPACE_MAX; d++) e->idx[d] = ci(e, 0);
    e->tid = sreg64(e, "tid.x");
    e->ntid = sreg64(e, "ntid.x");
    SJ_TRY(emit_body(e));
    if (e->bad) return bad_expr(e);
    LLVMBuildRetVoid(e->B);

    /* The ABI entry point: load, cast to global, call the body. */
    LLVMTypeRef kp[3] = {e->ptr, e->ptr, e->i64};
    LLVMValueRef fn = LLVMAddFunction(e->M, k->name, LLVMFunctionType(e->voidt, kp, 3, 0));
    add_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
    sj__nvptx_mark_kernel(e->M, fn);
    sj__nvptx_annotate(e->M, fn, "maxntidx", (int)e->sch.block[0]);
    if (e->sch.block[1] > 1) sj__nvptx_annotate(e->M, fn, "maxntidy", (int)e->sch.block[1]);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    for (int i = 0; i < k->n_buffers; i++) {
        LLVMValueRef ix = ci(e, i);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(e->B, e->ptr, LLVMGetParam(fn, 0), &ix, 1, "");
        LLVMValueRef v = LLVMBuildLoad2(e->B, e->ptr, p, "");
        /* the pointer table never changes during a launch */
        LLVMSetMetadata(v, LLVMGetMDKindIDInContext(e->C, "invariant.load", 14),
                        LLVMMetadataAsValue(e->C, LLVMMDNodeInContext2(e->C, NULL, 0)));
        args[i] = LLVMBuildAddrSpaceCast(e->B, v, e->gptr, "");
    }
    args[k->n_buffers] = LLVMGetParam(fn, 2);
    LLVMBuildCall2(e->B, bt, body, args, (unsigned)k->n_buffers + 1, "");
    LLVMBuildRetVoid(e->B);
    return SJ_OK;
}

sj_status sj__nvptx_emit_kernels(sj_ctx *ctx, LLVMModuleRef m, const sj_lowered *l) {
    pe e = {.ctx = ctx, .M = m, .C = LLVMGetModuleContext(m)};
    e.B = LLVMCreateBuilderInContext(e.C);
    e.f32 = LLVMFloatTypeInContext(e.C);
    e.i64 = LLVMInt64TypeInContext(e.C);
    e.i32 = LLVMInt32TypeInContext(e.C);
    e.ptr = LLVMPointerTypeInContext(e.C, 0);
    e.gptr = LLVMPointerTypeInContext(e.C, SJ_NVPTX_AS_GLOBAL);
    e.voidt = LLVMVoidTypeInContext(e.C);
    sj_status st = SJ_OK;
    for (int i = 0; i < l->n_kernels && st == SJ_OK; i++) st = emit_kernel(&e, &l->kernels[i]);
    LLVMDisposeBuilder(e.B);
    return st;
}

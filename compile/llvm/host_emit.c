/* Kernel descriptions -> LLVM IR for the host.
 *
 * Every kernel is `void name(ptr buffers, ptr info, i64 n)` (plan.h). It loads
 * its buffer pointers and calls an always-inlined body whose pointer
 * parameters are noalias. A row-parallel kernel (compile/lower/row_split.h)
 * also has `void name_rows(ptr buffers, ptr info, i64 n, i64 begin, i64
 * end)`, whose body loops its split dim over [begin, end) only, and `name`
 * calls it for [0, n): one copy of the code computes every row however the
 * host device splits them. The body's noalias parameters: lowering never lets a kernel's output share memory
 * with what it reads, and after inlining the noalias facts survive as scoped
 * alias metadata, which lets the vectoriser work on the inner loops.
 *
 * Loops are emitted do-while style (every bound is >= 1: constant dims are,
 * and the active extent n is too), innermost over the last dim, which is the
 * contiguous one for everything lowering materialises. Values that live
 * across loops (accumulators) are allocas that SROA promotes. Reductions add
 * with `reassoc` so they vectorise; nothing else relaxes IEEE semantics, so
 * NaN and Inf propagate as in the interpreter. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/DebugInfo.h>

#include "compile/llvm/llvm_impl.h"
#include "compile/llvm/llvm_point.h"
#include "compile/llvm/llvm_scalar.h"
#include "compile/lower/row_split.h"
#include "shapejit/ext/compile.h"

enum { FILL_SLOTS = 8 };
typedef struct fill_at {
    int32_t x;      /* the gather expression */
    unsigned width; /* floats of its slot */
    LLVMValueRef slot;
} fill_at;

typedef struct emitter {
    sj_ctx *ctx;
    LLVMContextRef C;
    LLVMModuleRef M;
    LLVMBuilderRef B;
    LLVMTypeRef f32, i64, i32, ptr, voidt;
    LLVMValueRef fn, entry_alloca_point;
    const sj_kernel *k;
    const sj_llvm_target *t;
    LLVMValueRef *bufs; /* the body's buffer parameters */
    LLVMValueRef n;
    int row_dim;           /* the dim looped over [rb, re) instead of [0, bound); -1 none */
    LLVMValueRef rb, re;
    LLVMValueRef scratch;  /* the calling thread's kernel scratch (sj_host_kernel_fn) */
    LLVMValueRef idx[SJ_KSPACE_MAX];
    LLVMValueRef acc;
    sj_llvm_emitted *emitted; /* externs called, weights read packed */
    int kernel_index;         /* of e->k in the lowered kernels */
    sj_status failed;         /* a failure inside a void emit step (out of memory) */
    /* A column split's unit in columns (0: rows are split, or nothing):
     * the body turns the unit range it is given into columns [rb, re). */
    int64_t split_cols;
    /* A matmul's rows taken a chunk at a time (emit_matmul): the chunk
     * [m_lo, m_hi) of dim 2 stands for its whole range; NULL otherwise. */
    LLVMValueRef m_lo, m_hi;
    /* The fill slots of this kernel's gathers (fill_slot): the first
     * FILL_SLOTS of them; one past those gets a slot of its own a use. */
    fill_at fills[FILL_SLOTS];
    int n_fills;
    int vector_floats; /* register width in floats, for explicit vector code */
    int gemm_level;    /* the sj__host_gemm code level the target runs (llvm_impl.h) */
} emitter;

typedef struct loop {
    LLVMBasicBlockRef body;
    LLVMValueRef phi, bound;
} loop;

static LLVMValueRef cf(emitter *e, double v) { return LLVMConstReal(e->f32, v); }
static LLVMValueRef ci(emitter *e, int64_t v) { return LLVMConstInt(e->i64, (unsigned long long)v, 1); }

/* k times the active extent plus c: a symbolic dim k*N + c's bound. */
static LLVMValueRef affine_n(emitter *e, int64_t k, int64_t c) {
    LLVMValueRef v = k == 1 ? e->n : LLVMBuildNSWMul(e->B, e->n, ci(e, k), "kn");
    return c ? LLVMBuildNSWAdd(e->B, v, ci(e, c), "knc") : v;
}

/* A length that is a dim (graph.h's encoding: symbolic ones negative). */
static LLVMValueRef dim_len(emitter *e, int64_t d) {
    return sj_dim_is_sym(d) ? affine_n(e, sj_dim_factor(d), sj_dim_offset(d)) : ci(e, d);
}

static LLVMValueRef bound_of(emitter *e, int d) {
    return e->k->sym[d] ? affine_n(e, e->k->sym[d], e->k->sym_add[d]) : ci(e, e->k->dims[d]);
}

/* The range a loop over dim d covers: the row range on the split dim, a
 * matmul's chunk of rows on dim 2 while it runs by chunks. */
static LLVMValueRef range_lo(emitter *e, int d) {
    if (d == 2 && e->m_lo) return e->m_lo;
    return d == e->row_dim ? e->rb : ci(e, 0);
}
static LLVMValueRef range_hi(emitter *e, int d) {
    if (d == 2 && e->m_hi) return e->m_hi;
    return d == e->row_dim ? e->re : bound_of(e, d);
}

static void loop_open(emitter *e, loop *l, int d) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->B);
    l->bound = range_hi(e, d);
    l->body = LLVMAppendBasicBlockInContext(e->C, e->fn, "loop");
    LLVMBuildBr(e->B, l->body);
    LLVMPositionBuilderAtEnd(e->B, l->body);
    l->phi = LLVMBuildPhi(e->B, e->i64, "i");
    LLVMValueRef lo = range_lo(e, d);
    LLVMAddIncoming(l->phi, &lo, &pre, 1);
    e->idx[d] = l->phi;
}

/* Asks LLVM to unroll the loop whose latch branch is br whole. */
static void unroll_full(emitter *e, LLVMValueRef br) {
    LLVMMetadataRef self = LLVMTemporaryMDNode(e->C, NULL, 0);
    LLVMMetadataRef full = LLVMMDStringInContext2(e->C, "llvm.loop.unroll.full", 21);
    LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(e->C, &full, 1)};
    LLVMMetadataRef node = LLVMMDNodeInContext2(e->C, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, node);
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(e->C, "llvm.loop", 9), LLVMMetadataAsValue(e->C, node));
}

/* An innermost loop of fewer steps than this is unrolled whole: left as a
 * loop, the vectorizer makes it one masked vector, and a strided read
 * becomes a masked gather. A conv stem's im2col ([N, P, 9 taps, 3
 * channels] from a channels-first image) ran 2.6x slower as AVX-512 code
 * than as AVX2 code that way (MobileNetV3-small, batch 8, Zen 4). */
enum { TINY_INNER_TRIPS = 4 };

static void loop_close(emitter *e, loop *l, int d) {
    LLVMValueRef next = LLVMBuildNUWAdd(e->B, l->phi, ci(e, 1), "i.next");
    LLVMValueRef more = LLVMBuildICmp(e->B, LLVMIntULT, next, l->bound, "more");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->B);
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(e->C, e->fn, "after");
    LLVMValueRef br = LLVMBuildCondBr(e->B, more, l->body, exit);
    if (d == e->k->rank - 1 && LLVMIsAConstantInt(l->bound) &&
        LLVMConstIntGetSExtValue(l->bound) < TINY_INNER_TRIPS)
        unroll_full(e, br);
    LLVMAddIncoming(l->phi, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(e->B, exit);
    e->idx[d] = ci(e, 0);
}

/* Opens loops over the dims in `mask`, outermost first. */
static void loops_open(emitter *e, loop *ls, uint32_t mask) {
    for (int d = 0; d < e->k->rank; d++)
        if ((mask >> d) & 1) loop_open(e, &ls[d], d);
}
static void loops_close(emitter *e, loop *ls, uint32_t mask) {
    for (int d = e->k->rank - 1; d >= 0; d--)
        if ((mask >> d) & 1) loop_close(e, &ls[d], d);
}

/* Where the body stands, for the shared addressing (llvm_point.h). */
static sj_llvm_point here(emitter *e) { return (sj_llvm_point){e->B, e->i64, e->k->rank, e->idx, e->n}; }

static LLVMValueRef address_t(emitter *e, LLVMValueRef base, const int64_t *strides, LLVMTypeRef elt) {
    sj_llvm_point p = here(e);
    return sj__llvm_point_address(&p, base, strides, elt);
}

static LLVMValueRef offset_base(emitter *e, LLVMValueRef base, int64_t offset, int64_t offset_n,
                                LLVMTypeRef elt) {
    sj_llvm_point p = here(e);
    return sj__llvm_offset_base(&p, base, offset, offset_n, elt);
}

/* A load's element in memory: 16 bits for a param the precision policy
 * narrowed, else its dtype's. */
static LLVMTypeRef ld_elt(emitter *e, const sj_kload *ld) {
    return ld->storage != SJ_PRECISION_FP32 ? LLVMInt16TypeInContext(e->C)
                                            : sj__llvm_dtype_mem_type(e->C, ld->dtype);
}

static LLVMValueRef ld_addr(emitter *e, const sj_kload *ld) {
    LLVMTypeRef elt = ld_elt(e, ld);
    return address_t(e, offset_base(e, e->bufs[ld->buffer], ld->offset, ld->offset_n, elt),
                     ld->strides, elt);
}

static LLVMValueRef out_addr(emitter *e) {
    LLVMTypeRef elt = sj__llvm_dtype_mem_type(e->C, e->k->out_dtype);
    return address_t(e, offset_base(e, e->bufs[0], e->k->out_offset, e->k->out_offset_n, elt),
                     e->k->out_strides, elt);
}

static LLVMValueRef index_test(emitter *e, const sj_kexpr *ex) {
    sj_llvm_point p = here(e);
    return sj__llvm_point_test(&p, ex);
}

static LLVMValueRef alloca_f32(emitter *e, const char *name) {
    return sj__llvm_entry_alloca(e->C, e->entry_alloca_point, e->f32, name);
}

static LLVMValueRef alloca_vec(emitter *e, LLVMTypeRef vt) {
    return sj__llvm_entry_alloca(e->C, e->entry_alloca_point, vt, "tile");
}

static LLVMValueRef call_f32(emitter *e, const char *intrinsic, LLVMValueRef x, LLVMValueRef y) {
    return sj__llvm_intrinsic_f32(e->M, e->B, intrinsic, x, y);
}

/* The host's transcendental functions: exp, log, erf, tanh and pow inline so
 * loops vectorise (sj__llvm_exp and friends, host_math.c). */
static LLVMValueRef host_exp(void *c, LLVMValueRef x) {
    emitter *e = c;
    return sj__llvm_exp(e->B, e->M, x);
}
static LLVMValueRef host_log(void *c, LLVMValueRef x) {
    emitter *e = c;
    return sj__llvm_log(e->B, e->M, x);
}
static LLVMValueRef host_tanh(void *c, LLVMValueRef x) {
    emitter *e = c;
    return sj__llvm_tanh(e->B, e->M, x);
}
static LLVMValueRef host_erf(void *c, LLVMValueRef x) {
    emitter *e = c;
    return sj__llvm_erf(e->B, e->M, x);
}
/* pow works in double: with 4-float registers (no AVX) that is two lanes
 * and more instructions per element than libm's scalar powf, so there it
 * stays a call (bench_host: inline is 0.7x the call on x86-64-v2, 1.3x
 * the call with AVX2, 2.9x with AVX-512; docs/host-math.md). */
static LLVMValueRef host_pow(void *c, LLVMValueRef x, LLVMValueRef y) {
    emitter *e = c;
    if (e->vector_floats < 8) return call_f32(c, "llvm.pow", x, y);
    return sj__llvm_pow(e->B, e->M, x, y);
}
/* A call to the process's libm (the ORC loader resolves it there). */
static LLVMValueRef host_libm(void *c, const char *name, LLVMValueRef x) {
    emitter *e = c;
    LLVMTypeRef ft = LLVMFunctionType(e->f32, &e->f32, 1, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->M, name);
    if (!f) f = LLVMAddFunction(e->M, name, ft);
    return LLVMBuildCall2(e->B, ft, f, &x, 1, "");
}
static const sj_llvm_math host_math = {host_exp, host_log, host_tanh, host_erf, host_pow, host_libm};

static LLVMValueRef load_typed(emitter *e, sj_dtype t, LLVMValueRef p) {
    LLVMValueRef v = LLVMBuildLoad2(e->B, sj__llvm_dtype_mem_type(e->C, t), p, "");
    LLVMSetAlignment(v, (unsigned)sj_dtype_size(t));
    return sj__llvm_from_mem(e->B, t, v);
}

/* 16-bit elements v (i16 or a vector of them) as float32, exactly. */
static LLVMValueRef widen(emitter *e, sj_precision storage, LLVMValueRef v) {
    return sj__llvm_widen_16(e->B, storage, v);
}

/* The element of ld at p as the kernel computes with it. */
static LLVMValueRef load_ld(emitter *e, const sj_kload *ld, LLVMValueRef p) {
    if (ld->storage == SJ_PRECISION_FP32) return load_typed(e, ld->dtype, p);
    LLVMValueRef v = LLVMBuildLoad2(e->B, LLVMInt16TypeInContext(e->C), p, "");
    LLVMSetAlignment(v, 2);
    return widen(e, ld->storage, v);
}

static LLVMValueRef eval(emitter *e, int32_t x);

/* The address of data[.., clamp(index), ..]: negative indices count from
 * the end of the gathered axis, then the index is clamped into it
 * (kernel.h); *fill_out: whether the index is the one past the data that
 * reads the fill (a padded window's gather), or NULL when it has none. */
/* Gather ex's offset in elements: its index, counted from the end when
 * negative, clamped to the axis, times the axis stride. *fill (gfill): the
 * index was the one past the data. */
static LLVMValueRef gather_offset(emitter *e, const sj_kexpr *ex, LLVMValueRef *fill) {
    LLVMValueRef i = eval(e, ex->a);
    if (e->k->exprs[ex->a].dtype == SJ_I32) i = LLVMBuildSExt(e->B, i, e->i64, "");
    LLVMValueRef len = dim_len(e, ex->glen);
    if (ex->gsafe) { /* a constant table's index, in range: only the fill's is held inside */
        *fill = ex->gfill ? LLVMBuildICmp(e->B, LLVMIntEQ, i, len, "") : NULL;
        if (*fill) i = LLVMBuildSelect(e->B, *fill, LLVMBuildSub(e->B, len, ci(e, 1), ""), i, "");
        return LLVMBuildMul(e->B, i, ci(e, ex->gstride), "");
    }
    LLVMValueRef neg = LLVMBuildICmp(e->B, LLVMIntSLT, i, ci(e, 0), "");
    i = LLVMBuildSelect(e->B, neg, LLVMBuildAdd(e->B, i, len, ""), i, "");
    i = LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, i, ci(e, 0), ""), ci(e, 0), i, "");
    /* a padded window's fill: the index one past the data */
    *fill = ex->gfill ? LLVMBuildICmp(e->B, LLVMIntEQ, i, len, "") : NULL;
    LLVMValueRef last = LLVMBuildSub(e->B, len, ci(e, 1), "");
    i = LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSGT, i, last, ""), last, i, "");
    return LLVMBuildMul(e->B, i, ci(e, ex->gstride), "");
}

static LLVMValueRef gather_addr(emitter *e, const sj_kexpr *ex, LLVMValueRef *fill_out) {
    const sj_kload *ld = &e->k->loads[ex->load];
    LLVMValueRef off = gather_offset(e, ex, fill_out);
    for (int32_t x = ex->gnext; x; x = e->k->exprs[x].gnext) { /* GatherND's further axes */
        LLVMValueRef unused;
        off = LLVMBuildAdd(e->B, off, gather_offset(e, &e->k->exprs[x], &unused), "");
    }
    return LLVMBuildGEP2(e->B, ld_elt(e, ld), ld_addr(e, ld), &off, 1, "");
}

static LLVMValueRef eval_gather(emitter *e, const sj_kexpr *ex) {
    LLVMValueRef fill, v = load_ld(e, &e->k->loads[ex->load], gather_addr(e, ex, &fill));
    return fill ? LLVMBuildSelect(e->B, fill, cf(e, ex->value), v, "") : v;
}

/* first + step * i (ints exactly; floats in double, rounded once). */
static LLVMValueRef eval_range(emitter *e, const sj_kexpr *ex) {
    LLVMValueRef i = ex->dim >= 0 ? e->idx[ex->dim] : ci(e, 0);
    if (ex->dtype != SJ_F32) {
        LLVMValueRef first = ci(e, (int64_t)ex->first);
        if (ex->first_n)
            first = LLVMBuildAdd(e->B, first, LLVMBuildMul(e->B, e->n, ci(e, ex->first_n), ""), "");
        LLVMValueRef v = LLVMBuildAdd(e->B, first, LLVMBuildMul(e->B, i, ci(e, (int64_t)ex->step), ""), "");
        return ex->dtype == SJ_I64 ? v : LLVMBuildTrunc(e->B, v, e->i32, "");
    }
    LLVMTypeRef f64 = LLVMDoubleTypeInContext(e->C);
    LLVMValueRef v = LLVMBuildFAdd(e->B, LLVMConstReal(f64, ex->first),
                                   LLVMBuildFMul(e->B, LLVMBuildSIToFP(e->B, i, f64, ""),
                                                 LLVMConstReal(f64, ex->step), ""), "");
    return LLVMBuildFPTrunc(e->B, v, e->f32, "");
}

static LLVMValueRef eval(emitter *e, int32_t x) {
    const sj_kexpr *ex = &e->k->exprs[x];
    sj_llvm_scalar sc = {e->M, e->B, &host_math, e};
    switch (ex->kind) {
    case SJ_KX_LOAD: return load_ld(e, &e->k->loads[ex->load], ld_addr(e, &e->k->loads[ex->load]));
    case SJ_KX_CONST:
        if (ex->dtype == SJ_F32) return cf(e, ex->value);
        return LLVMConstInt(sj__llvm_dtype_type(e->C, ex->dtype), (unsigned long long)ex->ivalue, 1);
    case SJ_KX_ACC: return e->acc;
    case SJ_KX_UNARY: {
        sj_dtype at = e->k->exprs[ex->a].dtype;
        if (ex->op == SJ_OP_CAST) return sj__llvm_cast(e->B, at, ex->dtype, eval(e, ex->a));
        return sj__llvm_typed_unary(&sc, ex->op, at, eval(e, ex->a), ex->value);
    }
    case SJ_KX_BINARY:
        return sj__llvm_typed_binary(&sc, ex->op, e->k->exprs[ex->a].dtype, eval(e, ex->a),
                                    eval(e, ex->b));
    case SJ_KX_WHERE:
        return LLVMBuildSelect(e->B, eval(e, ex->a), eval(e, ex->b), eval(e, ex->c), "");
    case SJ_KX_GATHER: return eval_gather(e, ex);
    case SJ_KX_RANGE: return eval_range(e, ex);
    case SJ_KX_SELECT: {
        LLVMValueRef a = eval(e, ex->a), b = eval(e, ex->b);
        return LLVMBuildSelect(e->B, index_test(e, ex), a, b, "");
    }
    }
    return NULL;
}

static void store_out(emitter *e, LLVMValueRef v) {
    LLVMValueRef s = LLVMBuildStore(e->B, sj__llvm_to_mem(e->B, e->k->out_dtype, v), out_addr(e));
    LLVMSetAlignment(s, (unsigned)sj_dtype_size(e->k->out_dtype));
}

static LLVMValueRef load_f32(emitter *e, LLVMValueRef p) {
    LLVMValueRef v = LLVMBuildLoad2(e->B, e->f32, p, "");
    LLVMSetAlignment(v, 4);
    return v;
}

/* acc op= v, with `reassoc` so the loop vectorises as a reduction. */
static void accumulate(emitter *e, LLVMValueRef slot, LLVMValueRef v, bool is_max) {
    LLVMValueRef old = load_f32(e, slot);
    LLVMValueRef nv;
    if (is_max) {
        nv = call_f32(e, "llvm.maximum", old, v);
    } else {
        nv = LLVMBuildFAdd(e->B, old, v, "");
        LLVMSetFastMathFlags(nv, LLVMFastMathAllowReassoc | LLVMFastMathAllowContract);
    }
    LLVMBuildStore(e->B, nv, slot);
}

/* Number of active points over the dims in mask, as float. */
static LLVMValueRef active_count(emitter *e, uint32_t mask) {
    LLVMValueRef c = ci(e, 1);
    for (int d = 0; d < e->k->rank; d++)
        if ((mask >> d) & 1) c = LLVMBuildNUWMul(e->B, c, bound_of(e, d), "");
    return LLVMBuildSIToFP(e->B, c, e->f32, "");
}

/* The innermost dim is kept (a reduction over rows, e.g. a sum over N of
 * [N, 64]): the output is the accumulator and every loop runs in memory
 * order, so the inner loop is contiguous for input and output alike. */
static void emit_reduce_into_output(emitter *e) {
    const sj_kernel *k = e->k;
    loop ls[SJ_KSPACE_MAX];
    uint32_t all = (1u << k->rank) - 1, red = k->reduced & all, outer = all & ~red;
    bool is_max = k->red_op == SJ_OP_REDUCE_MAX;
    loops_open(e, ls, outer);
    store_out(e, cf(e, is_max ? -INFINITY : 0.0));
    loops_close(e, ls, outer);
    loops_open(e, ls, all);
    LLVMValueRef op = out_addr(e);
    LLVMValueRef old = load_f32(e, op), v = eval(e, k->prologue);
    LLVMSetAlignment(LLVMBuildStore(e->B, is_max ? call_f32(e, "llvm.maximum", old, v)
                                                 : LLVMBuildFAdd(e->B, old, v, ""), op), 4);
    loops_close(e, ls, all);
    loops_open(e, ls, outer);
    e->acc = load_f32(e, out_addr(e));
    if (k->red_op == SJ_OP_REDUCE_MEAN) e->acc = LLVMBuildFDiv(e->B, e->acc, active_count(e, red), "");
    store_out(e, eval(e, k->epilogue));
    loops_close(e, ls, outer);
}

static bool reduce_vec_fits(const emitter *e);
static void emit_reduce_vec_columns(emitter *e);

static void emit_reduce(emitter *e) {
    const sj_kernel *k = e->k;
    if (k->rank > 0 && !((k->reduced >> (k->rank - 1)) & 1) && k->reduced) {
        if (reduce_vec_fits(e)) emit_reduce_vec_columns(e);
        else emit_reduce_into_output(e);
        return;
    }
    loop ls[SJ_KSPACE_MAX];
    uint32_t all = (1u << k->rank) - 1, red = k->reduced & all, outer = all & ~red;
    bool is_max = k->red_op == SJ_OP_REDUCE_MAX;
    LLVMValueRef acc = alloca_f32(e, "acc");
    loops_open(e, ls, outer);
    LLVMBuildStore(e->B, cf(e, is_max ? -INFINITY : 0.0), acc);
    loops_open(e, ls, red);
    accumulate(e, acc, eval(e, k->prologue), is_max);
    loops_close(e, ls, red);
    e->acc = load_f32(e, acc);
    if (k->red_op == SJ_OP_REDUCE_MEAN) e->acc = LLVMBuildFDiv(e->B, e->acc, active_count(e, red), "");
    store_out(e, eval(e, k->epilogue));
    loops_close(e, ls, outer);
}

/* Softmax over a dim that is not the innermost (axis 0 of [N, 64]) with a
 * static innermost dim runs by columns (emit_row_by_columns). */
static bool row_by_columns(const sj_kernel *k) {
    int in = k->rank - 1;
    return k->kind != SJ_KK_LAYERNORM && in > 0 && !((k->reduced >> in) & 1) && !k->sym[in] &&
           k->dims[in] > 1;
}
static void emit_row_by_columns(emitter *e);

static void emit_row(emitter *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    if (row_by_columns(k)) {
        emit_row_by_columns(e);
        return;
    }
    loop ls[SJ_KSPACE_MAX];
    uint32_t all = (1u << k->rank) - 1, row = k->reduced & all, outer = all & ~row;
    LLVMValueRef s1 = alloca_f32(e, "s1"), s2 = alloca_f32(e, "s2");
    loops_open(e, ls, outer);
    LLVMValueRef count = active_count(e, row);
    LLVMValueRef center, scale;
    if (k->kind == SJ_KK_LAYERNORM) {
        LLVMBuildStore(B, cf(e, 0.0), s1);
        loops_open(e, ls, row);
        accumulate(e, s1, eval(e, k->prologue), false);
        loops_close(e, ls, row);
        center = LLVMBuildFDiv(B, load_f32(e, s1), count, "mean");
        LLVMBuildStore(B, cf(e, 0.0), s2);
        loops_open(e, ls, row);
        LLVMValueRef dx = LLVMBuildFSub(B, eval(e, k->prologue), center, "");
        accumulate(e, s2, LLVMBuildFMul(B, dx, dx, ""), false);
        loops_close(e, ls, row);
        LLVMValueRef var = LLVMBuildFDiv(B, load_f32(e, s2), count, "var");
        LLVMValueRef sd = call_f32(e, "llvm.sqrt", LLVMBuildFAdd(B, var, cf(e, k->epsilon), ""), NULL);
        scale = LLVMBuildFDiv(B, cf(e, 1.0), sd, "rstd");
    } else {
        LLVMBuildStore(B, cf(e, -INFINITY), s1);
        loops_open(e, ls, row);
        accumulate(e, s1, eval(e, k->prologue), true);
        loops_close(e, ls, row);
        center = load_f32(e, s1);
        LLVMBuildStore(B, cf(e, 0.0), s2);
        loops_open(e, ls, row);
        LLVMValueRef ex = sj__llvm_exp(B, e->M, LLVMBuildFSub(B, eval(e, k->prologue), center, ""));
        accumulate(e, s2, ex, false);
        /* The output holds exp(x - max) until the last pass scales it: one exp per element. */
        if (k->kind == SJ_KK_SOFTMAX) store_out(e, ex);
        loops_close(e, ls, row);
        LLVMValueRef sum = load_f32(e, s2);
        scale = k->kind == SJ_KK_SOFTMAX ? LLVMBuildFDiv(B, cf(e, 1.0), sum, "")
                                         : call_f32(e, "llvm.log", sum, NULL);
    }
    loops_open(e, ls, row);
    LLVMValueRef dx = k->kind == SJ_KK_SOFTMAX ? NULL : LLVMBuildFSub(B, eval(e, k->prologue), center, "");
    if (k->kind == SJ_KK_LAYERNORM) {
        e->acc = LLVMBuildFMul(B, dx, scale, "");
        if (k->scale >= 0) e->acc = LLVMBuildFMul(B, e->acc, eval(e, k->scale), "");
        if (k->bias >= 0) e->acc = LLVMBuildFAdd(B, e->acc, eval(e, k->bias), "");
    } else if (k->kind == SJ_KK_SOFTMAX) {
        e->acc = LLVMBuildFMul(B, load_f32(e, out_addr(e)), scale, "");
    } else {
        e->acc = LLVMBuildFSub(B, dx, scale, "");
    }
    store_out(e, eval(e, k->epilogue));
    loops_close(e, ls, row);
    loops_close(e, ls, outer);
}

/* A loop lo, lo+step, ... < hi that runs zero times when lo >= hi. */
typedef struct rloop {
    LLVMBasicBlockRef body, exit;
    LLVMValueRef phi, lo, hi;
    int64_t step;
} rloop;

static LLVMValueRef rloop_open(emitter *e, rloop *l, LLVMValueRef lo, LLVMValueRef hi, int64_t step) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->B);
    l->body = LLVMAppendBasicBlockInContext(e->C, e->fn, "tile");
    l->exit = LLVMAppendBasicBlockInContext(e->C, e->fn, "tile.after");
    l->lo = lo;
    l->hi = hi;
    l->step = step;
    LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, lo, hi, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(e->B, l->body);
    l->phi = LLVMBuildPhi(e->B, e->i64, "t");
    LLVMAddIncoming(l->phi, &lo, &pre, 1);
    return l->phi;
}

static LLVMValueRef rloop_close(emitter *e, rloop *l) {
    LLVMValueRef next = LLVMBuildNSWAdd(e->B, l->phi, ci(e, l->step), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->B);
    LLVMValueRef br = LLVMBuildCondBr(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, next, l->hi, ""), l->body, l->exit);
    LLVMAddIncoming(l->phi, &next, &latch, 1);
    LLVMPositionBuilderAtEnd(e->B, l->exit);
    return br;
}

/* Loops of at most this many iterations that a kernel needs copied out. */
enum { SHORT_LOOP_TRIPS = 16 };

/* Closes l, asking LLVM to unroll it whole when its bounds are constants
 * at most SHORT_LOOP_TRIPS steps apart: the host pipeline leaves AVX-512
 * code's loops rolled (host_codegen.c), and a few loops need the copies,
 * as the narrow columns of emit_ikj, whose outputs only stay in registers
 * across k once each column is its own straight-line code. For innermost
 * loops only: forced on nested loops, the copies multiply. */
static void rloop_close_unrolled(emitter *e, rloop *l) {
    LLVMValueRef br = rloop_close(e, l);
    if (!LLVMIsAConstantInt(l->lo) || !LLVMIsAConstantInt(l->hi)) return;
    int64_t span = LLVMConstIntGetSExtValue(l->hi) - LLVMConstIntGetSExtValue(l->lo);
    if (span <= l->step || (span + l->step - 1) / l->step > SHORT_LOOP_TRIPS) return;
    unroll_full(e, br);
}

/* A transpose's tile: TRANSPOSE_TILE_T points along the dim the load reads
 * in order (one 64-byte line of float32) by TRANSPOSE_TILE_I along the
 * innermost dim. */
enum { TRANSPOSE_TILE_T = 16, TRANSPOSE_TILE_I = 64 };

/* The dim t a MAP kernel's load reads in order while the output runs in
 * order along the innermost dim, which that load strides across: a
 * transpose ([P, M] -> [M, P], a conv's GEMM output back to channels
 * first). -1 when there is none, or it is too small to tile. */
static int transposed_dim(const sj_kernel *k) {
    int in = k->rank - 1;
    if (in < 1 || k->out_strides[in] != 1 || k->dims[in] < 2 * TRANSPOSE_TILE_I) return -1;
    for (int l = 0; l < k->n_loads; l++) {
        const int64_t *st = k->loads[l].strides;
        if (st[in] == 0 || st[in] == 1) continue;
        for (int t = in - 1; t >= 0; t--)
            if (st[t] == 1 && k->dims[t] >= TRANSPOSE_TILE_T) return t;
    }
    return -1;
}

/* min(a + step, hi) */
static LLVMValueRef tile_end(emitter *e, LLVMValueRef a, int64_t step, LLVMValueRef hi) {
    LLVMValueRef end = LLVMBuildNSWAdd(e->B, a, ci(e, step), "");
    return LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, end, hi, ""), end, hi, "");
}

/* Every point, in order, except a transpose (transposed_dim), which runs
 * in tiles over (t, innermost): one row of the tile reads a line of the
 * source per point, and the tile's other rows read those lines again from
 * L1. In order, each row of the output swept the whole source: at
 * ResNet-18's first conv ([12544, 64] -> [64, 12544], 3.2 MB) every line
 * came from L3 sixteen times, 4.1 ms of a 55 ms run. The points are
 * independent, so the order changes no value. */
static void emit_map(emitter *e) {
    const sj_kernel *k = e->k;
    loop ls[SJ_KSPACE_MAX];
    uint32_t all = (1u << k->rank) - 1;
    int t = transposed_dim(k), in = k->rank - 1;
    if (t < 0) {
        loops_open(e, ls, all);
        store_out(e, eval(e, k->epilogue));
        loops_close(e, ls, all);
        return;
    }
    uint32_t rest = all & ~(1u << t) & ~(1u << in);
    loops_open(e, ls, rest);
    rloop tb, ib, tl, il;
    LLVMValueRef t_hi = range_hi(e, t), i_hi = range_hi(e, in);
    LLVMValueRef t0 = rloop_open(e, &tb, range_lo(e, t), t_hi, TRANSPOSE_TILE_T);
    LLVMValueRef i0 = rloop_open(e, &ib, range_lo(e, in), i_hi, TRANSPOSE_TILE_I);
    e->idx[t] = rloop_open(e, &tl, t0, tile_end(e, t0, TRANSPOSE_TILE_T, t_hi), 1);
    e->idx[in] = rloop_open(e, &il, i0, tile_end(e, i0, TRANSPOSE_TILE_I, i_hi), 1);
    store_out(e, eval(e, k->epilogue));
    rloop_close(e, &il);
    rloop_close(e, &tl);
    rloop_close(e, &ib);
    rloop_close(e, &tb);
    e->idx[t] = e->idx[in] = ci(e, 0);
    loops_close(e, ls, rest);
}

/* Softmax by columns: a row loop per innermost position would walk memory a
 * whole row apart for every element, three times over. Instead every pass
 * runs the row dims outside and a chunk of the innermost dim inside, with a
 * running max and a running sum per innermost position in stack arrays of
 * SJ_ROW_COLUMN_TILE floats (L1-sized): contiguous reads, and inner loops
 * that vectorise. */
#define SJ_ROW_COLUMN_TILE 1024

/* The innermost index's slot in a per-position array of the chunk at j0. */
static LLVMValueRef column(emitter *e, LLVMValueRef arr, LLVMValueRef j0) {
    LLVMValueRef j = LLVMBuildNSWSub(e->B, e->idx[e->k->rank - 1], j0, "");
    return LLVMBuildInBoundsGEP2(e->B, e->f32, arr, &j, 1, "");
}

static void chunk_open(emitter *e, rloop *l, LLVMValueRef j0, LLVMValueRef j1) {
    e->idx[e->k->rank - 1] = rloop_open(e, l, j0, j1, 1);
}
static void chunk_close(emitter *e, rloop *l) {
    rloop_close(e, l);
    e->idx[e->k->rank - 1] = ci(e, 0);
}

static void emit_row_by_columns(emitter *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    loop ls[SJ_KSPACE_MAX];
    rloop lc, lj;
    int in = k->rank - 1;
    uint32_t all = (1u << k->rank) - 1, row = k->reduced & all;
    uint32_t outer = all & ~row & ~(1u << in);
    LLVMTypeRef at = LLVMArrayType2(e->f32, SJ_ROW_COLUMN_TILE);
    LLVMValueRef mx = alloca_vec(e, at), sum = alloca_vec(e, at), width = ci(e, k->dims[in]);
    loops_open(e, ls, outer);
    LLVMValueRef j0 = rloop_open(e, &lc, ci(e, 0), width, SJ_ROW_COLUMN_TILE);
    LLVMValueRef end = LLVMBuildNSWAdd(B, j0, ci(e, SJ_ROW_COLUMN_TILE), "");
    LLVMValueRef j1 = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, end, width, ""), end, width, "");
    chunk_open(e, &lj, j0, j1);
    LLVMBuildStore(B, cf(e, -INFINITY), column(e, mx, j0));
    LLVMBuildStore(B, cf(e, 0.0), column(e, sum, j0));
    chunk_close(e, &lj);
    loops_open(e, ls, row);
    chunk_open(e, &lj, j0, j1);
    LLVMValueRef p = column(e, mx, j0);
    LLVMBuildStore(B, call_f32(e, "llvm.maximum", load_f32(e, p), eval(e, k->prologue)), p);
    chunk_close(e, &lj);
    loops_close(e, ls, row);
    loops_open(e, ls, row);
    chunk_open(e, &lj, j0, j1);
    LLVMValueRef dx = LLVMBuildFSub(B, eval(e, k->prologue), load_f32(e, column(e, mx, j0)), "");
    LLVMValueRef ex = sj__llvm_exp(B, e->M, dx);
    p = column(e, sum, j0);
    LLVMBuildStore(B, LLVMBuildFAdd(B, load_f32(e, p), ex, ""), p);
    /* As in emit_row: the output holds exp(x - max) until the last pass. */
    if (k->kind == SJ_KK_SOFTMAX) store_out(e, ex);
    chunk_close(e, &lj);
    loops_close(e, ls, row);
    chunk_open(e, &lj, j0, j1); /* the sum becomes the scale (softmax) or log(sum) */
    p = column(e, sum, j0);
    LLVMValueRef s = load_f32(e, p);
    s = k->kind == SJ_KK_SOFTMAX ? LLVMBuildFDiv(B, cf(e, 1.0), s, "") : sj__llvm_log(B, e->M, s);
    LLVMBuildStore(B, s, p);
    chunk_close(e, &lj);
    loops_open(e, ls, row);
    chunk_open(e, &lj, j0, j1);
    LLVMValueRef scale = load_f32(e, column(e, sum, j0));
    if (k->kind == SJ_KK_SOFTMAX) {
        e->acc = LLVMBuildFMul(B, load_f32(e, out_addr(e)), scale, "");
    } else {
        dx = LLVMBuildFSub(B, eval(e, k->prologue), load_f32(e, column(e, mx, j0)), "");
        e->acc = LLVMBuildFSub(B, dx, scale, "");
    }
    store_out(e, eval(e, k->epilogue));
    chunk_close(e, &lj);
    loops_close(e, ls, row);
    rloop_close(e, &lc);
    loops_close(e, ls, outer);
}

/* out[i, j] = 0 over rows [i0, i1) and columns [j0, j1). */
static void zero_out_block(emitter *e, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0, LLVMValueRef j1) {
    rloop li, lj;
    e->idx[2] = rloop_open(e, &li, i0, i1, 1);
    e->idx[3] = rloop_open(e, &lj, j0, j1, 1);
    LLVMBuildStore(e->B, cf(e, 0.0), out_addr(e));
    rloop_close(e, &lj);
    rloop_close(e, &li);
}

/* out[i, j] += av * b[k, j] at the current indexes (contraction allowed,
 * so the two become one FMA where the CPU has it). */
static void accumulate_out(emitter *e, LLVMValueRef av, const sj_kload *b) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef op = out_addr(e);
    LLVMValueRef prod = LLVMBuildFMul(B, av, load_ld(e, b, ld_addr(e, b)), "");
    LLVMSetFastMathFlags(prod, LLVMFastMathAllowContract);
    LLVMValueRef sum = LLVMBuildFAdd(B, load_f32(e, op), prod, "");
    LLVMSetFastMathFlags(sum, LLVMFastMathAllowContract);
    LLVMSetAlignment(LLVMBuildStore(B, sum, op), 4);
}

/* i-k-j over rows [i0, i1) step `rows` (each group whole) and columns
 * [j0, j1): the group's output rows are the accumulators and the inner loop
 * runs over contiguous n. */
enum { IKJ_ROWS = 4 };
static void ikj_rows(emitter *e, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0, LLVMValueRef j1,
                     int rows) {
    const sj_kernel *k = e->k;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    rloop li, lj, lk;
    LLVMValueRef i = rloop_open(e, &li, i0, i1, rows), av[IKJ_ROWS];
    e->idx[4] = rloop_open(e, &lk, ci(e, 0), bound_of(e, 4), 1);
    for (int r = 0; r < rows; r++) {
        e->idx[2] = LLVMBuildNSWAdd(e->B, i, ci(e, r), "");
        av[r] = load_ld(e, a, ld_addr(e, a));
    }
    e->idx[3] = rloop_open(e, &lj, j0, j1, 1);
    for (int r = 0; r < rows; r++) {
        e->idx[2] = LLVMBuildNSWAdd(e->B, i, ci(e, r), "");
        accumulate_out(e, av[r], b);
    }
    rloop_close_unrolled(e, &lj);
    rloop_close(e, &lk);
    rloop_close(e, &li);
}

/* i-k-j over rows [i0, i1) and columns [j0, j1), IKJ_ROWS rows at a time
 * and then one: a narrow n (the 10 logits of a classifier head) keeps a
 * row's outputs in a register or two across k, and one row alone made that
 * a chain of dependent multiply-adds, one FMA latency per k; IKJ_ROWS rows
 * are as many independent chains. Each output still sums over k in order,
 * so the grouping changes no bits. */
static void emit_ikj(emitter *e, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0, LLVMValueRef j1) {
    zero_out_block(e, i0, i1, j0, j1);
    LLVMValueRef ig = LLVMBuildSub(e->B, i1, LLVMBuildSRem(e->B, LLVMBuildSub(e->B, i1, i0, ""), ci(e, IKJ_ROWS), ""), "");
    ikj_rows(e, i0, ig, j0, j1, IKJ_ROWS);
    ikj_rows(e, ig, i1, j0, j1, 1);
    e->idx[2] = e->idx[3] = e->idx[4] = ci(e, 0);
}

/* k-i-j over rows [i0, i1) and columns [j0, j1) in column blocks of
 * KIJ_COLS: each row k of b is read from memory once for all the rows
 * (they reuse it from cache), in runs of KIJ_COLS contiguous elements the
 * prefetchers follow, while the rows' output blocks stay in L1. For few
 * rows the weights' bytes set the time (a request of N = 1..8 against a
 * large weight), and this order reads each weight once; i-k-j would read
 * them once per row, and the register tiles' narrow column panels stride
 * through b a few cache lines at a time. */
enum { KIJ_COLS = 512, KIJ_MAX_ROWS = SJ_MATMUL_ROWS_MAX };
static void emit_kij(emitter *e, LLVMValueRef i0, LLVMValueRef i1, LLVMValueRef j0, LLVMValueRef j1) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    rloop li, lj, lk, lb;
    zero_out_block(e, i0, i1, j0, j1);
    LLVMValueRef jb = rloop_open(e, &lb, j0, j1, KIJ_COLS);
    LLVMValueRef jb_end = LLVMBuildNSWAdd(B, jb, ci(e, KIJ_COLS), "");
    jb_end = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, jb_end, j1, ""), jb_end, j1, "");
    e->idx[4] = rloop_open(e, &lk, ci(e, 0), bound_of(e, 4), 1);
    e->idx[2] = rloop_open(e, &li, i0, i1, 1);
    LLVMValueRef av = load_ld(e, a, ld_addr(e, a));
    e->idx[3] = rloop_open(e, &lj, jb, jb_end, 1);
    accumulate_out(e, av, b);
    rloop_close(e, &lj);
    rloop_close(e, &li);
    rloop_close(e, &lk);
    rloop_close(e, &lb);
    e->idx[2] = e->idx[3] = e->idx[4] = ci(e, 0);
}

/* m rows from i0 (m a constant, at most KIJ_MAX_ROWS), columns [0, nv_end)
 * (a multiple of the step, see row_step): each row's vectors of outputs are
 * held in registers across a block of KIJ_K values of k, so per block a
 * step of b is loaded (and widened, when narrowed) once for all m rows and
 * the outputs are read and written once. b is read once in all: KIJ_K rows
 * of it move forward side by side as j advances, runs the prefetchers
 * follow. For few rows that is the whole cost (N = 1..8 against a large
 * weight).
 *
 * bf16 weights go two vectors at a time: one load of 2 * vw bf16 values
 * and two word interleaves with zero (vpunpcklwd / vpunpckhwd on x86: one
 * shuffle each, no shift competing with the multiply-adds) give them as
 * float32, in the interleave's column order (per 128-bit lane, the low four
 * columns of each group of eight, then the high four). The accumulators
 * keep that order, and the outputs are permuted into it and back once per
 * block. */
static LLVMValueRef load_b_vector(emitter *e, const sj_kload *b, LLVMTypeRef vt);
enum { KIJ_K = 16 };

static int row_step(const emitter *e, const sj_kload *b) {
    return b->storage == SJ_PRECISION_BF16 ? 2 * e->vector_floats : e->vector_floats;
}

/* Column of the 2 * vw group that element i of interleaved half h holds. */
static int pair_column(int i, int h) { return (i / 4) * 8 + h * 4 + i % 4; }

static LLVMValueRef shuffle(emitter *e, LLVMValueRef x, LLVMValueRef y, const int *idx, int n) {
    LLVMValueRef mask[64];
    for (int i = 0; i < n; i++) mask[i] = LLVMConstInt(e->i32, (unsigned)idx[i], 0);
    return LLVMBuildShuffleVector(e->B, x, y, LLVMConstVector(mask, (unsigned)n), "");
}

/* x in every lane of a vector of vt. */
static LLVMValueRef splat(emitter *e, LLVMTypeRef vt, LLVMValueRef x) {
    LLVMValueRef v = LLVMBuildInsertElement(e->B, LLVMGetUndef(vt), x, LLVMConstInt(e->i32, 0, 0), "");
    LLVMTypeRef mt = LLVMVectorType(e->i32, LLVMGetVectorSize(vt));
    return LLVMBuildShuffleVector(e->B, v, LLVMGetUndef(vt), LLVMConstNull(mt), "");
}

/* The 2 * vw bf16 values at the current point as two float32 vectors in
 * interleave order. */
static void load_bf16_pair(emitter *e, const sj_kload *b, LLVMValueRef out[2]) {
    int vw = e->vector_floats, idx[64];
    LLVMTypeRef i16 = LLVMInt16TypeInContext(e->C), wt = LLVMVectorType(i16, (unsigned)(2 * vw));
    LLVMValueRef x = LLVMBuildLoad2(e->B, wt, ld_addr(e, b), "");
    LLVMSetAlignment(x, 2);
    LLVMTypeRef vt = LLVMVectorType(e->f32, (unsigned)vw);
    for (int h = 0; h < 2; h++) {
        for (int i = 0; i < vw; i++) {
            idx[2 * i] = 0;                                   /* a zero word below ... */
            idx[2 * i + 1] = 2 * vw + pair_column(i, h);      /* ... the bf16 above it */
        }
        out[h] = LLVMBuildBitCast(e->B, shuffle(e, LLVMConstNull(wt), x, idx, 2 * vw), vt, "");
    }
}

/* A prefetch of b's row KIJ_PREFETCH elements ahead of the current point.
 * Measured (bench_precision): the bf16 kernel, which does half the loads
 * per multiply-add, then overlaps its reads with the arithmetic (N = 4..8
 * 10-20% faster); the float32 one lost as much to the extra instruction,
 * so only narrowed weights get it. A plain GEP: the address may lie past
 * the buffer, which a prefetch never faults on. */
enum { KIJ_PREFETCH = 512 };
static void prefetch_ahead(emitter *e, const sj_kload *b) {
    LLVMValueRef off = ci(e, KIJ_PREFETCH);
    LLVMValueRef pa = LLVMBuildGEP2(e->B, LLVMInt16TypeInContext(e->C), ld_addr(e, b), &off, 1, "");
    LLVMTypeRef pt[4] = {e->ptr, e->i32, e->i32, e->i32};
    LLVMTypeRef ft = LLVMFunctionType(e->voidt, pt, 4, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->M, "llvm.prefetch.p0");
    if (!f) f = LLVMAddFunction(e->M, "llvm.prefetch.p0", ft);
    /* read, high locality (into every cache level), data */
    LLVMValueRef args[4] = {pa, LLVMConstInt(e->i32, 0, 0), LLVMConstInt(e->i32, 3, 0),
                            LLVMConstInt(e->i32, 1, 0)};
    LLVMBuildCall2(e->B, ft, f, args, 4, "");
}

/* acc[v] += a (at the current indexes, splat to vt) * bv[v] for v < n:
 * one FMA per vector, the register-blocked matmuls' inner step. */
static void fma_row(emitter *e, const sj_kload *a, LLVMTypeRef vt, const LLVMValueRef *bv,
                    const LLVMValueRef *acc, int n, LLVMTypeRef fma_t, LLVMValueRef fma) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef as = splat(e, vt, load_ld(e, a, ld_addr(e, a)));
    for (int v = 0; v < n; v++) {
        LLVMValueRef args[3] = {as, bv[v], LLVMBuildLoad2(B, vt, acc[v], "")};
        LLVMBuildStore(B, LLVMBuildCall2(B, fma_t, fma, args, 3, ""), acc[v]);
    }
}

/* A vector of vt at p: all lanes, or (mask not NULL) the masked lanes,
 * the others read as zero and never touched in memory. */
static LLVMValueRef load_vec(emitter *e, LLVMTypeRef vt, LLVMValueRef p, LLVMValueRef mask) {
    if (!mask) {
        LLVMValueRef v = LLVMBuildLoad2(e->B, vt, p, "");
        LLVMSetAlignment(v, 4);
        return v;
    }
    LLVMTypeRef over[2] = {vt, e->ptr};
    unsigned id = LLVMLookupIntrinsicID("llvm.masked.load", 16);
    LLVMValueRef args[4] = {p, LLVMConstInt(e->i32, 4, 0), mask, LLVMConstNull(vt)};
    return LLVMBuildCall2(e->B, LLVMIntrinsicGetType(e->C, id, over, 2),
                          LLVMGetIntrinsicDeclaration(e->M, id, over, 2), args, 4, "");
}

static void store_vec(emitter *e, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask) {
    if (!mask) {
        LLVMSetAlignment(LLVMBuildStore(e->B, v, p), 4);
        return;
    }
    LLVMTypeRef over[2] = {LLVMTypeOf(v), e->ptr};
    unsigned id = LLVMLookupIntrinsicID("llvm.masked.store", 17);
    LLVMValueRef args[4] = {v, p, LLVMConstInt(e->i32, 4, 0), mask};
    LLVMBuildCall2(e->B, LLVMIntrinsicGetType(e->C, id, over, 2),
                   LLVMGetIntrinsicDeclaration(e->M, id, over, 2), args, 4, "");
}

/* ---- reductions by vector columns ---- */

/* REDUCE_VECS registers of sums per tile of emit_reduce_vec_columns: that
 * many independent add chains, and a tap's index (a table read, its checks
 * and the fill test) read once for all of them. A depthwise 5x5 conv over
 * 240 channels (MobileNetV3's, batch 8, one Zen 3 core) spent 0.57 of its
 * pointwise GEMM's time at 4 (as much as summing into the output did) and
 * 0.45 at 8; at 8 the AVX2 tile still holds its sums in registers. */
enum { REDUCE_VECS = 8 };

static bool inner_invariant(const emitter *e, int32_t x);

/* Whether every index a gather's address takes (its own and those linked
 * through gnext) is the same at every innermost index. */
static bool gather_indices_invariant(const emitter *e, const sj_kexpr *ex) {
    for (; ex; ex = ex->gnext ? &e->k->exprs[ex->gnext] : NULL)
        if (!inner_invariant(e, ex->a)) return false;
    return true;
}

/* Whether expression x is the same at every innermost index (a gather's
 * table index, read once per position and tap). */
static bool inner_invariant(const emitter *e, int32_t x) {
    const sj_kernel *k = e->k;
    const sj_kexpr *ex = &k->exprs[x];
    int in = k->rank - 1;
    switch (ex->kind) {
    case SJ_KX_CONST: return true;
    case SJ_KX_LOAD: return k->loads[ex->load].strides[in] == 0;
    case SJ_KX_RANGE: return ex->dim != in;
    case SJ_KX_GATHER:
        return k->loads[ex->load].strides[in] == 0 && gather_indices_invariant(e, ex);
    case SJ_KX_UNARY: return inner_invariant(e, ex->a);
    case SJ_KX_BINARY: return inner_invariant(e, ex->a) && inner_invariant(e, ex->b);
    default: return false;
    }
}

/* Whether x evaluates as vectors along the innermost dim (eval_vec):
 * float32 loads and gathers reading it contiguously or not at all, their
 * indices invariant along it, and +, -, * of those. */
static bool vec_expr(const emitter *e, int32_t x) {
    const sj_kernel *k = e->k;
    const sj_kexpr *ex = &k->exprs[x];
    int in = k->rank - 1;
    switch (ex->kind) {
    case SJ_KX_CONST: return ex->dtype == SJ_F32;
    case SJ_KX_LOAD:
    case SJ_KX_GATHER: {
        const sj_kload *ld = &k->loads[ex->load];
        if (ld->dtype != SJ_F32 || ld->storage != SJ_PRECISION_FP32 || ld->strides[in] < 0 ||
            ld->strides[in] > 1)
            return false;
        return ex->kind == SJ_KX_LOAD || gather_indices_invariant(e, ex);
    }
    case SJ_KX_BINARY:
        return ex->dtype == SJ_F32 && k->exprs[ex->a].dtype == SJ_F32 &&
               (ex->op == SJ_OP_ADD || ex->op == SJ_OP_SUB || ex->op == SJ_OP_MUL) &&
               vec_expr(e, ex->a) && vec_expr(e, ex->b);
    default: return false;
    }
}

/* Whether emit_reduce_vec_columns takes the reduction: it keeps a constant
 * innermost dim of whole 4-float vectors that no thread splits (its last
 * tile may be a narrower vector than the level's), and its prologue
 * evaluates as vectors. */
static bool reduce_vec_fits(const emitter *e) {
    const sj_kernel *k = e->k;
    int in = k->rank - 1;
    return !k->sym[in] && e->row_dim != in && k->dims[in] >= 4 && k->dims[in] % 4 == 0 &&
           vec_expr(e, k->prologue);
}

/* A stack vector of vt holding v in every lane, written once on the
 * kernel's entry. */
static LLVMValueRef const_slot(emitter *e, LLVMTypeRef vt, float v) {
    LLVMValueRef slot = alloca_vec(e, vt);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(e->C);
    LLVMPositionBuilderBefore(b, e->entry_alloca_point);
    LLVMBuildStore(b, splat(e, vt, cf(e, v)), slot);
    LLVMDisposeBuilder(b);
    return slot;
}

/* The stack vector of gather x's fill value (const_slot), one per gather
 * and width in a kernel. */
static LLVMValueRef fill_slot(emitter *e, int32_t x, LLVMTypeRef vt) {
    unsigned w = LLVMGetVectorSize(vt);
    for (int i = 0; i < e->n_fills; i++)
        if (e->fills[i].x == x && e->fills[i].width == w) return e->fills[i].slot;
    LLVMValueRef slot = const_slot(e, vt, e->k->exprs[x].value);
    if (e->n_fills < FILL_SLOTS) e->fills[e->n_fills++] = (fill_at){x, w, slot};
    return slot;
}

/* x (vec_expr) at the vector of columns from e->idx[in]. A padded window's
 * fill is read from a stack vector of the fill value, its address chosen
 * in place of the data's: selected after the load, the value became a
 * branch around every load of a tap's vectors (LLVM sinks a load into a
 * select's branch), eight taken branches a tap in a tile of a depthwise
 * conv over 240 channels. */
static LLVMValueRef eval_vec(emitter *e, int32_t x, LLVMTypeRef vt) {
    const sj_kexpr *ex = &e->k->exprs[x];
    int in = e->k->rank - 1;
    switch (ex->kind) {
    case SJ_KX_CONST: return splat(e, vt, cf(e, ex->value));
    case SJ_KX_LOAD:
    case SJ_KX_GATHER: {
        const sj_kload *ld = &e->k->loads[ex->load];
        LLVMValueRef fill = NULL, p = ex->kind == SJ_KX_LOAD ? ld_addr(e, ld) : gather_addr(e, ex, &fill);
        if (fill) p = LLVMBuildSelect(e->B, fill, fill_slot(e, x, vt), p, "");
        return ld->strides[in] ? load_vec(e, vt, p, NULL) : splat(e, vt, load_ld(e, ld, p));
    }
    default: { /* SJ_KX_BINARY: +, -, * */
        LLVMValueRef a = eval_vec(e, ex->a, vt), b = eval_vec(e, ex->b, vt);
        return ex->op == SJ_OP_ADD ? LLVMBuildFAdd(e->B, a, b, "")
               : ex->op == SJ_OP_SUB ? LLVMBuildFSub(e->B, a, b, "")
                                     : LLVMBuildFMul(e->B, a, b, "");
    }
    }
}

/* One tile of emit_reduce_vec_columns: nvec vectors of vf columns from j0
 * at npos positions (qd >= 0: dim qd from q0 on; else the current point's),
 * summed (or maxed) over the reduced dims in registers, then each column's
 * epilogue from a stack copy of the sums. */
static void reduce_vec_tile_at(emitter *e, LLVMValueRef acc, LLVMValueRef tile, LLVMValueRef j0, int nvec,
                               int vf, int qd, LLVMValueRef q0, int npos) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    loop ls[SJ_KSPACE_MAX];
    rloop lj;
    int in = k->rank - 1;
    uint32_t red = k->reduced & ((1u << k->rank) - 1);
    bool is_max = k->red_op == SJ_OP_REDUCE_MAX;
    LLVMTypeRef vt = LLVMVectorType(e->f32, (unsigned)vf);
    LLVMValueRef slot[REDUCE_VECS];
    for (int v = 0; v < nvec * npos; v++) {
        LLVMValueRef at = ci(e, v);
        slot[v] = LLVMBuildInBoundsGEP2(B, vt, acc, &at, 1, "");
        LLVMBuildStore(B, splat(e, vt, cf(e, is_max ? -INFINITY : 0.0)), slot[v]);
    }
    loops_open(e, ls, red);
    for (int q = 0; q < npos; q++) {
        if (qd >= 0) e->idx[qd] = LLVMBuildNSWAdd(B, q0, ci(e, q), "");
        for (int v = 0; v < nvec; v++) {
            e->idx[in] = LLVMBuildNSWAdd(B, j0, ci(e, (int64_t)v * vf), "");
            LLVMValueRef x = eval_vec(e, k->prologue, vt), old = LLVMBuildLoad2(B, vt, slot[q * nvec + v], "");
            LLVMValueRef nv;
            if (is_max) {
                unsigned id = LLVMLookupIntrinsicID("llvm.maximum", 12);
                LLVMValueRef args[2] = {old, x};
                nv = LLVMBuildCall2(B, LLVMIntrinsicGetType(e->C, id, &vt, 1),
                                    LLVMGetIntrinsicDeclaration(e->M, id, &vt, 1), args, 2, "");
            } else {
                nv = LLVMBuildFAdd(B, old, x, "");
            }
            LLVMBuildStore(B, nv, slot[q * nvec + v]);
        }
    }
    loops_close(e, ls, red);
    for (int q = 0; q < npos; q++) {
        if (qd >= 0) e->idx[qd] = LLVMBuildNSWAdd(B, q0, ci(e, q), "");
        for (int v = 0; v < nvec; v++) {
            LLVMValueRef at = ci(e, (int64_t)v * vf);
            LLVMValueRef dst = LLVMBuildInBoundsGEP2(B, e->f32, tile, &at, 1, "");
            LLVMSetAlignment(LLVMBuildStore(B, LLVMBuildLoad2(B, vt, slot[q * nvec + v], ""), dst), 4);
        }
        chunk_open(e, &lj, j0, LLVMBuildNSWAdd(B, j0, ci(e, (int64_t)nvec * vf), ""));
        e->acc = load_f32(e, column(e, tile, j0));
        if (k->red_op == SJ_OP_REDUCE_MEAN) e->acc = LLVMBuildFDiv(B, e->acc, active_count(e, red), "");
        store_out(e, eval(e, k->epilogue));
        chunk_close(e, &lj);
    }
}

static void reduce_vec_tile(emitter *e, LLVMValueRef acc, LLVMValueRef tile, LLVMValueRef j0, int nvec,
                            int vf) {
    reduce_vec_tile_at(e, acc, tile, j0, nvec, vf, -1, NULL, 1);
}

/* A reduction that keeps a constant innermost dim of whole vectors (a
 * depthwise conv's sum over its taps, [N, P, K, C] summed over K; a pool's
 * max or mean) by tiles of REDUCE_VECS vectors of columns: each tile's
 * sums in registers across the whole reduction, the tap's index read once
 * for the tile, where emit_reduce_into_output loads and stores every sum
 * at every term. Columns past the last whole vector (72 channels at 16
 * floats a vector) are one narrower vector: MobileNetV3's depthwise convs
 * over 72, 88 and 120 channels took the generic path on AVX-512 and made
 * its x86-64-v4 code slower than its x86-64-v3 code. Each column sums its
 * terms in the same order. */
/* From this many columns, emit_reduce_vec_columns runs the column tiles
 * outside the positions (positions_dim): a tile's channels of the window's
 * rows then stay in L1 while its positions pass over them, where every
 * channel of a position before the next one's took the rows of all
 * channels through L1 (a 5x5 depthwise conv over 240 channels at 14 x 14:
 * five rows of 14 positions are 67 KB; Zen 4, batch 8: 1.58 -> 1.15 ms,
 * and 576 channels at 7 x 7 0.84 -> 0.68 ms). Fewer columns keep the
 * positions outside: a second pass over them for a last, narrower tile
 * read each tap's index twice (72 channels at AVX-512: 0.56 -> 0.72 ms). */
enum { TILES_OUTSIDE_COLUMNS = 128 };

/* The innermost kept dim before the columns (a conv's output positions)
 * when the column tiles run outside it, else -1. */
static int positions_dim(const sj_kernel *k) {
    if (k->dims[k->rank - 1] < TILES_OUTSIDE_COLUMNS) return -1;
    for (int d = k->rank - 2; d >= 0; d--)
        if (!((k->reduced >> d) & 1)) return d;
    return -1;
}

/* Columns of one vector kind, at most REDUCE_VECS / 2 vectors of them (16
 * channels: one AVX-512 vector, two AVX2 ones), take REDUCE_VECS / that
 * many positions of dim *qd at once (the innermost kept dim before the
 * columns, constant and not split over threads), so the tile still holds
 * REDUCE_VECS independent sums: one position's took as many taps' sums
 * one after another, each waiting for the last. MobileNetV3-small's
 * depthwise conv over 16 channels, and its stem (27 taps to 16 channels,
 * onnx_op_conv.c). Returns the positions, or 1 (no such tiling). */
static int tile_positions(const emitter *e, int64_t nv, int64_t rest, int *qd) {
    const sj_kernel *k = e->k;
    int in = k->rank - 1, nvec = nv ? (int)nv : 1;
    *qd = -1;
    if ((nv && rest) || 2 * nvec > REDUCE_VECS) return 1;
    for (int d = in - 1; d >= 0 && *qd < 0; d--)
        if (!((k->reduced >> d) & 1)) *qd = d;
    if (*qd < 0 || k->sym[*qd] || e->row_dim == *qd || k->dims[*qd] < 2) return 1;
    return REDUCE_VECS / nvec;
}

static void emit_reduce_vec_columns(emitter *e) {
    const sj_kernel *k = e->k;
    loop ls[SJ_KSPACE_MAX];
    rloop lc;
    int in = k->rank - 1, vf = e->vector_floats, pd = positions_dim(k), qd;
    int64_t nv = k->dims[in] / vf, full = nv / REDUCE_VECS * REDUCE_VECS, rest = k->dims[in] - nv * vf;
    uint32_t all = (1u << k->rank) - 1, outer = all & ~k->reduced & ~(1u << in);
    uint32_t pos = pd >= 0 ? 1u << pd : 0;
    LLVMTypeRef vt = LLVMVectorType(e->f32, (unsigned)vf);
    LLVMValueRef acc = alloca_vec(e, LLVMArrayType2(vt, REDUCE_VECS));
    LLVMValueRef tile = alloca_vec(e, LLVMArrayType2(e->f32, (unsigned)(REDUCE_VECS * vf)));
    int npos = pd < 0 ? tile_positions(e, nv, rest, &qd) : 1;
    if (npos > 1) {
        int nvec = nv ? (int)nv : 1, width = nv ? vf : (int)rest;
        int64_t len = k->dims[qd], whole = len / npos * npos;
        loops_open(e, ls, outer & ~(1u << qd));
        if (whole) {
            LLVMValueRef q0 = rloop_open(e, &lc, ci(e, 0), ci(e, whole), npos);
            reduce_vec_tile_at(e, acc, tile, ci(e, 0), nvec, width, qd, q0, npos);
            rloop_close(e, &lc);
        }
        if (len > whole) {
            LLVMValueRef q = rloop_open(e, &lc, ci(e, whole), ci(e, len), 1);
            reduce_vec_tile_at(e, acc, tile, ci(e, 0), nvec, width, qd, q, 1);
            rloop_close(e, &lc);
        }
        e->idx[in] = e->idx[qd] = ci(e, 0);
        loops_close(e, ls, outer & ~(1u << qd));
        return;
    }
    loops_open(e, ls, outer & ~pos);
    if (full) {
        LLVMValueRef j0 = rloop_open(e, &lc, ci(e, 0), ci(e, full * vf), REDUCE_VECS * vf);
        loops_open(e, ls, pos);
        reduce_vec_tile(e, acc, tile, j0, REDUCE_VECS, vf);
        loops_close(e, ls, pos);
        rloop_close(e, &lc);
    }
    if (nv > full) {
        loops_open(e, ls, pos);
        reduce_vec_tile(e, acc, tile, ci(e, full * vf), (int)(nv - full), vf);
        loops_close(e, ls, pos);
    }
    if (rest) {
        loops_open(e, ls, pos);
        reduce_vec_tile(e, acc, tile, ci(e, nv * vf), 1, (int)rest);
        loops_close(e, ls, pos);
    }
    e->idx[in] = ci(e, 0);
    loops_close(e, ls, outer & ~pos);
}

/* One step of emit_rows_reg: the m rows' outputs at columns [j, j + step)
 * (mask: the lanes of a last, partial vector) take the k block [kb, kb_end):
 * loaded into the accumulators (zero for the first block), a multiply-add
 * per row per k, stored back. */
typedef struct rows_reg {
    int m, nvec;
    bool pairs;
    LLVMTypeRef vt;
    LLVMValueRef rows[KIJ_MAX_ROWS], acc[KIJ_MAX_ROWS][2], kb, kb_end, first, fma;
    LLVMTypeRef fma_t;
} rows_reg;

static void rows_reg_step(emitter *e, const rows_reg *r, LLVMValueRef j, LLVMValueRef mask) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    int vw = e->vector_floats, idx[64];
    LLVMTypeRef vt = r->vt;
    e->idx[4] = ci(e, 0);
    for (int i = 0; i < r->m; i++) {
        e->idx[2] = r->rows[i];
        LLVMValueRef part[2];
        for (int v = 0; v < r->nvec; v++) {
            e->idx[3] = LLVMBuildNSWAdd(B, j, ci(e, (int64_t)v * vw), "");
            part[v] = load_vec(e, vt, out_addr(e), mask);
        }
        if (r->pairs) { /* columns into interleave order */
            LLVMValueRef half[2];
            for (int h = 0; h < 2; h++) {
                for (int c = 0; c < vw; c++) idx[c] = pair_column(c, h);
                half[h] = shuffle(e, part[0], part[1], idx, vw);
            }
            part[0] = half[0];
            part[1] = half[1];
        }
        for (int v = 0; v < r->nvec; v++)
            LLVMBuildStore(B, LLVMBuildSelect(B, r->first, LLVMConstNull(vt), part[v], ""), r->acc[i][v]);
    }
    e->idx[3] = j;
    rloop lk;
    e->idx[4] = rloop_open(e, &lk, r->kb, r->kb_end, 1);
    if (r->pairs) prefetch_ahead(e, b);
    LLVMValueRef bv[2];
    if (r->pairs) load_bf16_pair(e, b, bv);
    else if (mask) bv[0] = load_vec(e, vt, ld_addr(e, b), mask);
    else bv[0] = load_b_vector(e, b, vt);
    for (int i = 0; i < r->m; i++) {
        e->idx[2] = r->rows[i];
        fma_row(e, a, vt, bv, r->acc[i], r->nvec, r->fma_t, r->fma);
    }
    rloop_close(e, &lk);
    e->idx[4] = ci(e, 0);
    for (int i = 0; i < r->m; i++) {
        e->idx[2] = r->rows[i];
        LLVMValueRef part[2];
        for (int v = 0; v < r->nvec; v++) part[v] = LLVMBuildLoad2(B, vt, r->acc[i][v], "");
        if (r->pairs) { /* back to column order: column c of the group from its half */
            LLVMValueRef lo = part[0], hi = part[1];
            for (int v = 0; v < 2; v++) {
                for (int c = 0; c < vw; c++) {
                    int col = v * vw + c, h = (col % 8) / 4, x = (col / 8) * 4 + col % 4;
                    idx[c] = h * vw + x;
                }
                part[v] = shuffle(e, lo, hi, idx, vw);
            }
        }
        for (int v = 0; v < r->nvec; v++) {
            e->idx[3] = LLVMBuildNSWAdd(B, j, ci(e, (int64_t)v * vw), "");
            store_vec(e, part[v], out_addr(e), mask);
        }
    }
}

/* Whether emit_rows_reg also takes the columns past the last whole vector,
 * as one masked vector: a constant column count (a weight's narrow output,
 * such as 10 logits) with float32 weights (a narrowed row step is two
 * vectors of widened pairs). Otherwise emit_kij does, a scalar at a time.
 * Not a symbolic count (p @ v's n columns, a run-time width): measured
 * slower than the scalar loop there (the MHA layer at 7 rows in its 8-row
 * bucket, 5.1 against 4.4 us; at 8 rows, the same mask, no slower). */
static bool rows_reg_masked_tail(const emitter *e) {
    return !e->k->sym[3] && e->k->loads[e->k->b].storage == SJ_PRECISION_FP32;
}

/* Rows [i0, i0 + m) over columns [j0, nv_end) in whole row steps, then
 * (rows_reg_masked_tail) the columns [nv_end, n_end) as one masked vector. */
static void emit_rows_reg(emitter *e, LLVMValueRef i0, int m, LLVMValueRef j0, LLVMValueRef nv_end,
                          LLVMValueRef n_end) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    const sj_kload *b = &k->loads[k->b];
    int vw = e->vector_floats;
    rows_reg r = {.m = m, .nvec = row_step(e, b) / vw};
    r.pairs = r.nvec == 2;
    r.vt = LLVMVectorType(e->f32, (unsigned)vw);
    unsigned fma_id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
    r.fma = LLVMGetIntrinsicDeclaration(e->M, fma_id, &r.vt, 1);
    r.fma_t = LLVMIntrinsicGetType(e->C, fma_id, &r.vt, 1);
    for (int i = 0; i < m; i++)
        for (int v = 0; v < r.nvec; v++) r.acc[i][v] = alloca_vec(e, r.vt);
    LLVMValueRef K = bound_of(e, 4), N = n_end;
    for (int i = 0; i < m; i++) r.rows[i] = LLVMBuildNSWAdd(B, i0, ci(e, i), "");
    rloop lkb, lj;
    r.kb = rloop_open(e, &lkb, ci(e, 0), K, KIJ_K);
    LLVMValueRef kb_end = LLVMBuildNSWAdd(B, r.kb, ci(e, KIJ_K), "");
    r.kb_end = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, kb_end, K, ""), kb_end, K, "");
    r.first = LLVMBuildICmp(B, LLVMIntEQ, r.kb, ci(e, 0), "");
    LLVMValueRef j = rloop_open(e, &lj, j0, nv_end, r.nvec * vw);
    rows_reg_step(e, &r, j, NULL);
    rloop_close(e, &lj);
    rloop_close(e, &lkb);
    if (rows_reg_masked_tail(e)) {
        /* The whole of k at once: its sums stay in registers, where a
         * masked store read back by a masked load a block later waits for
         * the store to retire (the mlp at 8 rows: 1.45 us with the tail
         * stored and reloaded per block of k, 1.18 us whole). */
        r.kb = ci(e, 0);
        r.kb_end = K;
        r.first = LLVMConstInt(LLVMInt1TypeInContext(e->C), 1, 0);
        /* lanes below N - nv_end */
        LLVMValueRef lanes[64];
        for (int c = 0; c < vw; c++) lanes[c] = ci(e, c);
        LLVMTypeRef it = LLVMVectorType(e->i64, (unsigned)vw);
        LLVMValueRef left = splat(e, it, LLVMBuildNSWSub(B, N, nv_end, ""));
        LLVMValueRef mask = LLVMBuildICmp(B, LLVMIntSLT, LLVMConstVector(lanes, (unsigned)vw), left, "");
        LLVMBasicBlockRef tail = LLVMAppendBasicBlockInContext(e->C, e->fn, "rows.tail");
        LLVMBasicBlockRef after = LLVMAppendBasicBlockInContext(e->C, e->fn, "rows.tail.after");
        LLVMBuildCondBr(B, LLVMBuildICmp(B, LLVMIntSLT, nv_end, N, ""), tail, after);
        LLVMPositionBuilderAtEnd(B, tail);
        rows_reg_step(e, &r, nv_end, mask);
        LLVMBuildBr(B, after);
        LLVMPositionBuilderAtEnd(B, after);
    }
    e->idx[2] = e->idx[3] = e->idx[4] = ci(e, 0);
}

/* Rows [i0, i0 + count), count at most max_rows (a run-time value): one
 * emit_rows_reg per possible count, the right one chosen at run time; the
 * columns past the last whole vector there too, masked (float32 weights),
 * or by emit_kij. The columns are the launch's range of them: all, or a
 * part when the launch splits its columns (row_dim 3). */
static void emit_few_rows(emitter *e, LLVMValueRef i0, LLVMValueRef count, int max_rows) {
    LLVMBuilderRef B = e->B;
    LLVMValueRef N0 = range_lo(e, 3), N = range_hi(e, 3);
    int step = row_step(e, &e->k->loads[e->k->b]);
    LLVMValueRef Nv = LLVMBuildSub(B, N, LLVMBuildURem(B, LLVMBuildSub(B, N, N0, ""), ci(e, step), ""), "");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->C, e->fn, "rows.done");
    LLVMValueRef sw = LLVMBuildSwitch(B, count, done, (unsigned)max_rows);
    for (int m = 1; m <= max_rows; m++) {
        LLVMBasicBlockRef bb = LLVMAppendBasicBlockInContext(e->C, e->fn, "rows");
        LLVMAddCase(sw, ci(e, m), bb);
        LLVMPositionBuilderAtEnd(B, bb);
        emit_rows_reg(e, i0, m, N0, Nv, N);
        LLVMBuildBr(B, done);
    }
    LLVMPositionBuilderAtEnd(B, done);
    if (!rows_reg_masked_tail(e)) emit_kij(e, i0, LLVMBuildNSWAdd(B, i0, count, ""), Nv, N);
}

/* Rows x vectors of a register tile: 4 x 4 accumulators fill half of
 * AVX-512's 32 registers; with 16 registers (AVX2) 4 x 2 leaves room for the
 * operands. */
enum { TILE_M = 4, TILE_NV_MAX = 4, TILE_KC = 128 };
static int tile_nv(const emitter *e) {
    int nv = e->vector_floats >= 16 ? 4 : 2;
    /* A narrow constant n (p @ v with a head of 32) gets narrower tiles. */
    while (nv > 1 && !e->k->sym[3] && e->k->dims[3] < (int64_t)e->vector_floats * nv) nv /= 2;
    return nv;
}

/* A vector of b at the current point as float32: 16-bit weights are
 * loaded as such and widened in registers. */
static LLVMValueRef load_b_vector(emitter *e, const sj_kload *b, LLVMTypeRef vt) {
    if (b->storage == SJ_PRECISION_FP32) {
        LLVMValueRef v = LLVMBuildLoad2(e->B, vt, ld_addr(e, b), "");
        LLVMSetAlignment(v, 4);
        return v;
    }
    LLVMTypeRef it = LLVMVectorType(LLVMInt16TypeInContext(e->C), LLVMGetVectorSize(vt));
    LLVMValueRef v = LLVMBuildLoad2(e->B, it, ld_addr(e, b), "");
    LLVMSetAlignment(v, 2);
    return widen(e, b->storage, v);
}

/* Register-tiled matmul for b and the output contiguous along n: tiles of
 * TILE_M rows x tile_nv() vectors held in registers across the whole k loop
 * (explicit vector IR), column panels outermost so a panel of b stays in
 * cache while every row tile passes over it. Edges go through emit_ikj. */
static void emit_matmul_tiled(emitter *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    int vw = e->vector_floats;
    int nv = tile_nv(e);
    int64_t nr = (int64_t)vw * nv;
    LLVMTypeRef vt = LLVMVectorType(e->f32, (unsigned)vw);
    /* Rows [M0, M): whole tiles from M0, so a row range starting at a
     * multiple of TILE_M tiles its rows as the whole range does. */
    LLVMValueRef M0 = range_lo(e, 2), M = range_hi(e, 2), N = bound_of(e, 3), K = bound_of(e, 4);
    LLVMValueRef Mm = LLVMBuildSub(B, M, LLVMBuildURem(B, LLVMBuildSub(B, M, M0, ""), ci(e, TILE_M), ""), "");
    LLVMValueRef Nm = LLVMBuildSub(B, N, LLVMBuildURem(B, N, ci(e, nr), ""), "");
    /* fmuladd, not fma: fused where the CPU has FMA, a multiply and an add
     * where it does not (llvm.fma must then call libm's software fmaf). */
    unsigned fma_id = LLVMLookupIntrinsicID("llvm.fmuladd", 12);
    LLVMValueRef fma = LLVMGetIntrinsicDeclaration(e->M, fma_id, &vt, 1);
    LLVMTypeRef fma_t = LLVMIntrinsicGetType(e->C, fma_id, &vt, 1);
    LLVMValueRef acc[TILE_M][TILE_NV_MAX];
    for (int r = 0; r < TILE_M; r++)
        for (int v = 0; v < nv; v++) acc[r][v] = alloca_vec(e, vt);
    rloop lkb, lj, li, lk;
    /* k in blocks of TILE_KC: a block of the b panel stays in L1 while every
     * row tile passes over it; later blocks add to the partial sums. */
    LLVMValueRef kb = rloop_open(e, &lkb, ci(e, 0), K, TILE_KC);
    LLVMValueRef kb_end = LLVMBuildNSWAdd(B, kb, ci(e, TILE_KC), "");
    kb_end = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntSLT, kb_end, K, ""), kb_end, K, "");
    LLVMValueRef first = LLVMBuildICmp(B, LLVMIntEQ, kb, ci(e, 0), "");
    LLVMValueRef j = rloop_open(e, &lj, ci(e, 0), Nm, nr);
    LLVMValueRef i = rloop_open(e, &li, M0, Mm, TILE_M);
    e->idx[4] = ci(e, 0);
    for (int r = 0; r < TILE_M; r++) {
        e->idx[2] = LLVMBuildNSWAdd(B, i, ci(e, r), "");
        for (int v = 0; v < nv; v++) {
            e->idx[3] = LLVMBuildNSWAdd(B, j, ci(e, (int64_t)v * vw), "");
            LLVMValueRef part = LLVMBuildLoad2(B, vt, out_addr(e), "");
            LLVMSetAlignment(part, 4);
            LLVMBuildStore(B, LLVMBuildSelect(B, first, LLVMConstNull(vt), part, ""), acc[r][v]);
        }
    }
    e->idx[4] = rloop_open(e, &lk, kb, kb_end, 1);
    LLVMValueRef bv[TILE_NV_MAX];
    for (int v = 0; v < nv; v++) {
        e->idx[3] = LLVMBuildNSWAdd(B, j, ci(e, (int64_t)v * vw), "");
        bv[v] = load_b_vector(e, b, vt);
    }
    for (int r = 0; r < TILE_M; r++) {
        e->idx[2] = LLVMBuildNSWAdd(B, i, ci(e, r), "");
        fma_row(e, a, vt, bv, acc[r], nv, fma_t, fma);
    }
    rloop_close(e, &lk);
    e->idx[4] = ci(e, 0);
    for (int r = 0; r < TILE_M; r++) {
        e->idx[2] = LLVMBuildNSWAdd(B, i, ci(e, r), "");
        for (int v = 0; v < nv; v++) {
            e->idx[3] = LLVMBuildNSWAdd(B, j, ci(e, (int64_t)v * vw), "");
            LLVMValueRef st = LLVMBuildStore(B, LLVMBuildLoad2(B, vt, acc[r][v], ""),
                                             out_addr(e));
            LLVMSetAlignment(st, 4);
        }
    }
    rloop_close(e, &li);
    rloop_close(e, &lj);
    rloop_close(e, &lkb);
    e->idx[2] = e->idx[3] = ci(e, 0);
    /* the last rows together: b read once more, not once per row */
    emit_few_rows(e, Mm, LLVMBuildSub(B, M, Mm, ""), TILE_M - 1);
    emit_ikj(e, M0, Mm, Nm, N);
}

/* alpha * sum: the matmul's result as its epilogue sees it. */
static LLVMValueRef scaled_acc(emitter *e, LLVMValueRef sum) {
    return e->k->alpha == 1.0f ? sum : LLVMBuildFMul(e->B, sum, cf(e, e->k->alpha), "");
}

/* b contiguous along k (a transposed operand, e.g. k^T in q @ k^T): one dot
 * product per output element, a vectorised reduction over k. */
static void emit_matmul_dot(emitter *e) {
    const sj_kernel *k = e->k;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    loop ls[SJ_KSPACE_MAX];
    LLVMValueRef acc = alloca_f32(e, "dot");
    loops_open(e, ls, 3u << 2);
    LLVMBuildStore(e->B, cf(e, 0.0), acc);
    loop_open(e, &ls[4], 4);
    LLVMValueRef prod = LLVMBuildFMul(e->B, load_ld(e, a, ld_addr(e, a)),
                                      load_ld(e, b, ld_addr(e, b)), "");
    LLVMSetFastMathFlags(prod, LLVMFastMathAllowContract);
    accumulate(e, acc, prod, false);
    loop_close(e, &ls[4], 4);
    e->acc = scaled_acc(e, load_f32(e, acc));
    store_out(e, eval(e, k->epilogue));
    loops_close(e, ls, 3u << 2);
}

/* cblas_sgemm on one [m, k] x [k, n] slice when both operands have a unit
 * stride on one of their two matrix dims (any layout lowering makes, with
 * transposes folded into the strides). */
static bool blas_layout(const sj_kernel *k, int64_t *lda, int *ta, int64_t *ldb, int *tb) {
    const int64_t *as = k->loads[k->a].strides, *bs = k->loads[k->b].strides;
    /* sgemm reads float32 only; narrowed weights take the generated kernels. */
    if (k->loads[k->a].storage != SJ_PRECISION_FP32 || k->loads[k->b].storage != SJ_PRECISION_FP32)
        return false;
    if (k->out_strides[3] != 1 && k->dims[3] > 1) return false;
    if (as[4] == 1 || k->dims[4] == 1) *ta = 111, *lda = as[2];
    else if (as[2] == 1 || k->dims[2] == 1) *ta = 112, *lda = as[4];
    else return false;
    if (bs[3] == 1 || k->dims[3] == 1) *tb = 111, *ldb = bs[4];
    else if (bs[4] == 1 || k->dims[4] == 1) *tb = 112, *ldb = bs[3];
    else return false;
    return true;
}

static LLVMValueRef to_i32(emitter *e, LLVMValueRef v) { return LLVMBuildTrunc(e->B, v, e->i32, ""); }

static void emit_blas_call(emitter *e, int ta, int64_t lda, int tb, int64_t ldb) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    LLVMValueRef M = bound_of(e, 2), N = bound_of(e, 3), K = bound_of(e, 4);
    /* A leading dimension must be at least the row length even where it is
     * never stepped (a dim of size 1). */
    LLVMValueRef rowa = ta == 111 ? K : M, rowb = tb == 111 ? N : K;
    LLVMValueRef la = lda ? ci(e, lda) : rowa, lb = ldb ? ci(e, ldb) : rowb;
    LLVMValueRef lc = k->out_strides[2] ? ci(e, k->out_strides[2]) : N;
    LLVMTypeRef ps[14] = {e->i32, e->i32, e->i32, e->i32, e->i32, e->i32, e->f32,
                          e->ptr, e->i32, e->ptr, e->i32, e->f32, e->ptr, e->i32};
    LLVMTypeRef ft = LLVMFunctionType(e->voidt, ps, 14, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->M, "cblas_sgemm");
    if (!f) f = LLVMAddFunction(e->M, "cblas_sgemm", ft);
    LLVMValueRef args[14] = {
        LLVMConstInt(e->i32, 101, 0), LLVMConstInt(e->i32, (unsigned)ta, 0),
        LLVMConstInt(e->i32, (unsigned)tb, 0), to_i32(e, M), to_i32(e, N), to_i32(e, K), cf(e, 1.0),
        ld_addr(e, &k->loads[k->a]), to_i32(e, la),
        ld_addr(e, &k->loads[k->b]), to_i32(e, lb),
        cf(e, 0.0), out_addr(e), to_i32(e, lc)};
    LLVMBuildCall2(B, ft, f, args, 14, "");
    e->emitted->externs |= SJ_LLVM_EXTERN_BLAS;
}

/* Whether the packed GEMM (host_gemm.c) can take the matmul: output
 * contiguous along n (the kernel's C has unit column stride), A in float32,
 * at least 32 columns and 16 of k. */
static bool gemm_operands_fit(const sj_kernel *k) {
    return k->out_strides[3] == 1 && k->loads[k->a].storage == SJ_PRECISION_FP32 && k->dims[3] >= 32 &&
           k->dims[4] >= 16;
}

/* Whether the packed GEMM takes the matmul: it can, at sizes at the bucket
 * extent where a packed panel pays for itself. Below them the register
 * tiles win (no packing, and the whole product is a few microseconds): at
 * [64, 64] x [64, 64] the two measure alike. */
static bool gemm_fits(const sj_kernel *k) {
    return gemm_operands_fit(k) && k->dims[2] >= 16 &&
           k->dims[2] * k->dims[3] * k->dims[4] >= SJ_HOST_GEMM_MIN_WORK;
}

/* The batch dim (0 or 1) whose index picks B's matrix, or -1 when one
 * matrix serves every batch index. */
static int b_batch_dim(const sj_kernel *k) {
    const sj_kload *b = &k->loads[k->b];
    return b->strides[0] ? 0 : b->strides[1] ? 1 : -1;
}

/* Whether the GEMM reads B packed once at load: a float32 weight (stored
 * as float32 or in 16 bits, packed as stored) of constant extents, one
 * matrix for every batch index (a Linear layer's) or one per index of a
 * constant batch dim, broadcast over the other (a Winograd conv's
 * transformed points, over the images). */
static bool gemm_packs_b(const sj_kernel *k) {
    const sj_kload *b = &k->loads[k->b];
    int d = b_batch_dim(k);
    return b->weight && b->dtype == SJ_F32 &&
           !(b->strides[0] && b->strides[1]) && (d < 0 || !k->sym[d]) && !b->strides[2] &&
           !b->offset_n && !k->sym[3] && !k->sym[4];
}

/* Notes that every launch of this kernel reads B's buffer packed, for the
 * backend to give those launches an SJ_SLOT_PACKED of the weight. */
static sj_status note_pack(emitter *e) {
    const sj_kernel *k = e->k;
    const sj_kload *b = &k->loads[k->b];
    sj_llvm_emitted *em = e->emitted;
    if (em->n_packs == em->cap_packs) {
        int cap = em->cap_packs ? 2 * em->cap_packs : 8;
        sj_llvm_pack *grown = sj_realloc(e->ctx, em->packs, (size_t)cap * sizeof *grown);
        if (!grown) return sj_fail(e->ctx, SJ_E_NOMEM, "host emitter: out of memory");
        em->packs = grown;
        em->cap_packs = cap;
    }
    sj_llvm_pack *p = &em->packs[em->n_packs++];
    *p = (sj_llvm_pack){.kernel = e->kernel_index, .buffer = b->buffer};
    p->words[SJ_PACK_OFFSET] = b->offset;
    p->words[SJ_PACK_K] = k->dims[4];
    p->words[SJ_PACK_N] = k->dims[3];
    p->words[SJ_PACK_ROW_STRIDE] = b->strides[4];
    p->words[SJ_PACK_COL_STRIDE] = b->strides[3];
    p->words[SJ_PACK_LEVEL] = e->gemm_level;
    int d = b_batch_dim(k);
    p->words[SJ_PACK_BATCH] = d < 0 ? 1 : k->dims[d];
    p->words[SJ_PACK_BATCH_STRIDE] = d < 0 ? 0 : b->strides[d];
    p->words[SJ_PACK_STORAGE] = b->storage;
    return SJ_OK;
}

/* sj__host_gemm_packed on a weight packed at load (the buffer is its panels,
 * which the backend's SJ_SLOT_PACKED makes), for the rows [M0, M). */
static sj_status emit_gemm_packed_call(emitter *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    const sj_kload *a = &k->loads[k->a];
    LLVMValueRef M0 = range_lo(e, 2), M = range_hi(e, 2);
    /* The launch's columns: all, or a range of whole panels (column_unit),
     * whose panels start at c0 * k floats into the packed weight. */
    LLVMValueRef c0 = range_lo(e, 3), c1 = range_hi(e, 3);
    e->idx[2] = M0;
    e->idx[4] = ci(e, 0);
    LLVMValueRef pa = ld_addr(e, a);
    e->idx[3] = c0;
    LLVMValueRef pc = out_addr(e);
    e->idx[2] = e->idx[3] = ci(e, 0);
    /* Offsets in the panels' elements: float32, or 16-bit as stored. */
    sj_precision storage = k->loads[k->b].storage;
    LLVMTypeRef et = storage == SJ_PRECISION_FP32 ? e->f32 : LLVMInt16TypeInContext(e->C);
    LLVMValueRef off = LLVMBuildNSWMul(B, c0, bound_of(e, 4), "");
    int d = b_batch_dim(k);
    if (d >= 0) { /* the batch index's matrix, packed after the ones before it */
        int64_t bytes = sj__host_gemm_pack_bytes(e->gemm_level, storage, k->dims[4], k->dims[3]);
        int64_t elements = bytes / sj__host_gemm_element_bytes(storage);
        off = LLVMBuildNSWAdd(B, off, LLVMBuildNSWMul(B, e->idx[d], ci(e, elements), ""), "");
    }
    LLVMValueRef pb = LLVMBuildInBoundsGEP2(B, et, e->bufs[k->loads[k->b].buffer], &off, 1, "");
    LLVMTypeRef i64 = e->i64, p = e->ptr;
    LLVMTypeRef ps[12] = {i64, i64, i64, i64, i64, p, i64, i64, p, p, i64, p};
    LLVMTypeRef ft = LLVMFunctionType(e->voidt, ps, 12, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->M, "sj__host_gemm_packed");
    if (!f) f = LLVMAddFunction(e->M, "sj__host_gemm_packed", ft);
    LLVMValueRef args[12] = {ci(e, e->gemm_level), ci(e, storage), LLVMBuildSub(B, M, M0, ""),
                             LLVMBuildSub(B, c1, c0, ""), bound_of(e, 4), pa,
                             ci(e, a->strides[2]), ci(e, a->strides[4]), pb, pc,
                             ci(e, k->out_strides[2]), e->scratch};
    LLVMBuildCall2(B, ft, f, args, 12, "");
    e->emitted->externs |= SJ_LLVM_EXTERN_GEMM_PACKED;
    return note_pack(e);
}

/* sj__host_gemm on the slice at the current batch indexes, over the row range
 * [M0, M): the rows are this launch's, so a row split runs each range alike. */
static void emit_gemm_call(emitter *e) {
    const sj_kernel *k = e->k;
    LLVMBuilderRef B = e->B;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    LLVMValueRef M0 = range_lo(e, 2), M = range_hi(e, 2);
    e->idx[2] = M0;
    e->idx[3] = e->idx[4] = ci(e, 0);
    LLVMValueRef pa = ld_addr(e, a), pb = ld_addr(e, b), pc = out_addr(e);
    e->idx[2] = ci(e, 0);
    LLVMTypeRef i64 = e->i64, p = e->ptr;
    LLVMTypeRef ps[14] = {i64, i64, i64, i64, i64, p, i64, i64, p, i64, i64, p, i64, p};
    LLVMTypeRef ft = LLVMFunctionType(e->voidt, ps, 14, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->M, "sj__host_gemm");
    if (!f) f = LLVMAddFunction(e->M, "sj__host_gemm", ft);
    LLVMValueRef args[14] = {ci(e, e->gemm_level), ci(e, b->storage), LLVMBuildSub(B, M, M0, ""),
                             bound_of(e, 3), bound_of(e, 4), pa, ci(e, a->strides[2]),
                             ci(e, a->strides[4]), pb, ci(e, b->strides[4]), ci(e, b->strides[3]),
                             pc, ci(e, k->out_strides[2]), e->scratch};
    LLVMBuildCall2(B, ft, f, args, 14, "");
    e->emitted->externs |= SJ_LLVM_EXTERN_GEMM;
}

/* Whether a matmul of few rows reads its weight packed (the GEMM's panels,
 * made once at load) instead of in place: a weight (float32, or 16-bit
 * panels) of at least FEW_ROWS_PACKED_MIN_WEIGHT elements, in code for
 * x86-64-v3 or above.
 * The panels are one stream in address order, where the in-place kernel
 * follows KIJ_K rows of the weight at once: from DRAM (a chain of BERT-base
 * FFN weights, 226 MB, Zen 4) 1, 4 and 8 rows took 0.90x, 0.78x and 0.70x
 * the in-place time. Smaller weights sit in cache, where the in-place
 * kernel's fewer instructions per launch win (the examples' 64-wide
 * layers); the SSE level's 4-row tiles made 8 rows slower than in place. */
enum { FEW_ROWS_PACKED_MIN_WEIGHT = 256 * 1024 };
static bool few_rows_packed(const emitter *e) {
    const sj_kernel *k = e->k;
    return e->gemm_level >= 3 && gemm_operands_fit(k) && k->dims[3] * k->dims[4] >= FEW_ROWS_PACKED_MIN_WEIGHT &&
           gemm_packs_b(k);
}

typedef enum matmul_path { MM_BLAS, MM_FEW_ROWS, MM_GEMM, MM_TILED, MM_DOT, MM_IKJ } matmul_path;

static matmul_path matmul_path_of(const emitter *e, int64_t *lda, int *ta, int64_t *ldb, int *tb) {
    const sj_kernel *k = e->k;
    const sj_kload *a = &k->loads[k->a], *b = &k->loads[k->b];
    if (e->t->blas_min_work > 0 && k->dims[3] * k->dims[4] >= e->t->blas_min_work &&
        k->dims[2] * k->dims[3] * k->dims[4] >= e->t->blas_min_work &&
        blas_layout(k, lda, ta, ldb, tb))
        return MM_BLAS;
    bool contiguous_n = b->strides[3] == 1 && k->out_strides[3] == 1;
    /* Few rows at the bucket extent: weight-bound, every weight read once
     * (unless the schedule says tiles: sj_matmul_schedule). Packed panels
     * take a weight of any layout: a Gemm's transposed one (a classifier
     * head, [1000, 1024]) otherwise took the dot-product path, which
     * reads the weight once per row (MobileNetV3's head at 8 rows: 5% of
     * the run). */
    if (k->dims[2] <= e->t->few_rows_max && few_rows_packed(e)) return MM_GEMM;
    if (contiguous_n && k->dims[2] <= e->t->few_rows_max) return MM_FEW_ROWS;
    if (gemm_fits(k)) return MM_GEMM;
    if (contiguous_n && (k->sym[3] || k->dims[3] >= (int64_t)e->vector_floats * tile_nv(e)) &&
        (k->sym[2] || k->dims[2] >= TILE_M))
        return MM_TILED;
    return !contiguous_n && b->strides[4] == 1 && a->strides[4] == 1 ? MM_DOT : MM_IKJ;
}

/* Whether the matmul's code computes a row the same whatever rows it is
 * given: not through cblas_sgemm (whose blocking, and threads, are its
 * own), nor the few-rows path (a bucket of at most KIJ_MAX_ROWS rows, never
 * worth splitting). */
static bool matmul_rows_split(const emitter *e) {
    int64_t lda, ldb;
    int ta, tb;
    matmul_path p = matmul_path_of(e, &lda, &ta, &ldb, &tb);
    return p != MM_BLAS && p != MM_FEW_ROWS;
}

/* Rows a chunk of emit_matmul takes (0: the whole range at once): about
 * EPILOGUE_CHUNK_BYTES of output, the rows shared out evenly in whole
 * multiples of EPILOGUE_CHUNK_ROWS. The epilogue then reads each chunk's
 * sums back from L2 right after the product wrote them, where one pass
 * after the whole product read them from L3 or memory (MobileNetV3-small's
 * expanding 1x1 convs, batch 8: a [25088, 72] output, 7 MB, written and
 * then read and written again). A batch index's output of at most twice
 * that stays whole: it is still in L2 for the pass after it, and a chunk
 * of a few rows left over (49 = 48 + 1 at 576 channels) reads all of B for
 * them. Only the tiled loop and a GEMM on weights packed at load: any other
 * GEMM packs B again in every call. The rows are computed alike in any
 * chunk: the GEMM's sums do not depend on the rows it is given
 * (host_gemm.c), and a chunk starts a whole number of TILE_M row tiles
 * from the range's start, so the tiled loop tiles the rows as it does the
 * whole range. */
enum { EPILOGUE_CHUNK_BYTES = 96 * 1024, EPILOGUE_CHUNK_ROWS = 12 };
static int64_t epilogue_chunk_rows(const emitter *e, matmul_path path) {
    const sj_kernel *k = e->k;
    if (k->sym[3] || (path != MM_TILED && !(path == MM_GEMM && gemm_packs_b(k)))) return 0;
    int64_t row_bytes = k->dims[3] * (int64_t)sizeof(float), m = k->dims[2]; /* at the bucket extent */
    if (m * row_bytes <= 2 * EPILOGUE_CHUNK_BYTES) return 0;
    int64_t target = EPILOGUE_CHUNK_BYTES / row_bytes;
    if (target < 1) target = 1;
    int64_t chunks = (m + target - 1) / target, rows = (m + chunks - 1) / chunks;
    return (rows + EPILOGUE_CHUNK_ROWS - 1) / EPILOGUE_CHUNK_ROWS * EPILOGUE_CHUNK_ROWS;
}

static void emit_matmul_rows(emitter *e, matmul_path path, int ta, int64_t lda, int tb, int64_t ldb);

static void emit_matmul(emitter *e) {
    loop ls[SJ_KSPACE_MAX];
    int64_t lda = 0, ldb = 0;
    int ta = 0, tb = 0;
    matmul_path path = matmul_path_of(e, &lda, &ta, &ldb, &tb);
    loops_open(e, ls, 3u);
    int64_t chunk = epilogue_chunk_rows(e, path);
    if (!chunk) {
        emit_matmul_rows(e, path, ta, lda, tb, ldb);
    } else {
        rloop lc;
        LLVMValueRef hi = range_hi(e, 2);
        e->m_lo = rloop_open(e, &lc, range_lo(e, 2), hi, chunk);
        e->m_hi = tile_end(e, e->m_lo, chunk, hi);
        emit_matmul_rows(e, path, ta, lda, tb, ldb);
        e->m_lo = e->m_hi = NULL;
        rloop_close(e, &lc);
    }
    loops_close(e, ls, 3u);
}

/* The product and its epilogue over the rows of range_lo(2)..range_hi(2)
 * at the current batch indexes. */
static void emit_matmul_rows(emitter *e, matmul_path path, int ta, int64_t lda, int tb, int64_t ldb) {
    loop ls[SJ_KSPACE_MAX];
    if (path == MM_BLAS) {
        emit_blas_call(e, ta, lda, tb, ldb);
    } else if (path == MM_GEMM && gemm_packs_b(e->k)) {
        sj_status st = emit_gemm_packed_call(e);
        if (st != SJ_OK) e->failed = st;
    } else if (path == MM_GEMM) {
        emit_gemm_call(e);
    } else if (path == MM_FEW_ROWS) {
        emit_few_rows(e, ci(e, 0), bound_of(e, 2), (int)e->k->dims[2]);
    } else if (path == MM_TILED) {
        emit_matmul_tiled(e);
    } else if (path == MM_DOT) {
        emit_matmul_dot(e);
        return;
    } else {
        emit_ikj(e, range_lo(e, 2), range_hi(e, 2), ci(e, 0), bound_of(e, 3));
    }
    /* Epilogue over the finished sums. */
    loops_open(e, ls, 3u << 2);
    e->acc = scaled_acc(e, load_f32(e, out_addr(e)));
    store_out(e, eval(e, e->k->epilogue));
    loops_close(e, ls, 3u << 2);
}

/* SJ_KK_ATTENTION: one call to sj__host_attention_rows (host_attention.c) with
 * the kernel's shape and strides as a constant table. */
static void emit_attention(emitter *e) {
    const sj_kernel *k = e->k;
    int64_t w[SJ_HOST_ATTENTION_WORDS] = {0};
    for (int d = 0; d < 5; d++) {
        w[d] = k->sym[d] ? k->sym[d] : k->dims[d];
        if (k->sym[d]) w[5] |= 1 << d;
    }
    w[6] = k->att_dk;
    w[7] = k->att[3] >= 0;
    int32_t sb;
    memcpy(&sb, &k->alpha, sizeof sb);
    w[8] = sb;
    for (int j = 0; j < 5; j++)
        for (int d = 0; d < 5; d++)
            w[9 + 5 * j + d] = j == 4 ? k->out_strides[d] : k->att[j] >= 0 ? k->loads[k->att[j]].strides[d] : 0;
    w[SJ_HOST_ATTENTION_WORDS - 1] = e->gemm_level;
    LLVMValueRef cw[SJ_HOST_ATTENTION_WORDS];
    for (int i = 0; i < SJ_HOST_ATTENTION_WORDS; i++) cw[i] = ci(e, w[i]);
    LLVMValueRef table = LLVMConstArray2(e->i64, cw, SJ_HOST_ATTENTION_WORDS);
    char gname[SJ_KERNEL_NAME_MAX + 8];
    snprintf(gname, sizeof gname, "%s.att", k->name);
    LLVMValueRef g = LLVMAddGlobal(e->M, LLVMTypeOf(table), gname);
    LLVMSetInitializer(g, table);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMPrivateLinkage);
    LLVMTypeRef ps[9] = {e->ptr, e->ptr, e->ptr, e->ptr, e->ptr, e->ptr, e->i64, e->i64, e->i64};
    LLVMTypeRef ft = LLVMFunctionType(e->voidt, ps, 9, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->M, "sj__host_attention_rows");
    if (!f) f = LLVMAddFunction(e->M, "sj__host_attention_rows", ft);
    /* Each operand's element 0 is its load's offset into its buffer (a view:
     * a slice or a picked head of a packed projection); the table gives the
     * strides from there. */
    LLVMValueRef args[9] = {g, NULL, NULL, NULL, LLVMConstNull(e->ptr),
                            offset_base(e, e->bufs[0], k->out_offset, k->out_offset_n, e->f32), e->n,
                            range_lo(e, 2), range_hi(e, 2)};
    for (int j = 0; j < 4; j++)
        if (k->att[j] >= 0) {
            const sj_kload *ld = &k->loads[k->att[j]];
            args[1 + j] = offset_base(e, e->bufs[ld->buffer], ld->offset, ld->offset_n, e->f32);
        }
    LLVMBuildCall2(e->B, ft, f, args, 9, "");
    e->emitted->externs |= SJ_LLVM_EXTERN_ATTENTION;
}

static void add_attr(emitter *e, LLVMValueRef f, LLVMAttributeIndex i, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(f, i, LLVMCreateEnumAttribute(e->C, kind, 0));
}

static void prefer_full_width(emitter *e, LLVMValueRef f) {
    if (e->vector_floats < 16) return;
    LLVMAttributeRef w = LLVMCreateStringAttribute(e->C, "prefer-vector-width", 19, "512", 3);
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, w);
}

/* Loads the kernel's buffer pointers from `buffers` into args. */
static void load_buffers(emitter *e, LLVMValueRef buffers, LLVMValueRef *args) {
    for (int i = 0; i < e->k->n_buffers; i++) {
        LLVMValueRef ix = ci(e, i);
        LLVMValueRef p = LLVMBuildInBoundsGEP2(e->B, e->ptr, buffers, &ix, 1, "");
        args[i] = LLVMBuildLoad2(e->B, e->ptr, p, "");
    }
}

/* The columns a unit of a column split covers, or 0 where the matmul splits
 * its rows (or nothing). Rows split only from 2 * SJ_HOST_MIN_SPLIT_ROWS of
 * them, so a bucket of fewer splits its columns: a matmul of few rows (the
 * whole bucket in registers, each weight read once; a decode step's launch
 * is one weight pass, which two threads stream at up to twice the rate) in
 * units of 16 columns, a GEMM of a packed weight in its panels. A packed
 * GEMM whose symbolic dim is a batch dim (a conv's images, each a GEMM of
 * constant rows) splits its images where the bucket holds two or more
 * (row_split.h: each slice whole, so no thread packs another's A), and its
 * columns in a bucket of one. */
static int64_t column_unit(const emitter *e, const sj_kernel *k) {
    int64_t lda, ldb;
    int ta, tb;
    if (k->kind != SJ_KK_MATMUL || k->sym[3] || k->sym[4]) return 0;
    bool sym_batch = k->sym[0] || k->sym[1];
    if (sym_batch && !k->sym[2] && k->dims[k->sym[0] ? 0 : 1] >= 2) return 0;
    matmul_path path = matmul_path_of(e, &lda, &ta, &ldb, &tb);
    bool packed = path == MM_GEMM && gemm_packs_b(k);
    int64_t unit = path == MM_FEW_ROWS && !sym_batch ? SJ_HOST_MIN_SPLIT_ROWS
                   : packed && (sym_batch || k->dims[2] < 2 * SJ_HOST_MIN_SPLIT_ROWS)
                       ? SJ_HOST_GEMM_PANEL(e->gemm_level)
                       : 0;
    return unit && k->dims[3] >= 2 * unit ? unit : 0;
}

/* The dim a launch may split (row_split.h), where this emitter's code for
 * the kernel computes each row alike whatever the range; -1 otherwise.
 * *split_extent: 0 for the rows of the active extent, else the constant
 * range split, in units of *split_cols columns (column_unit). */
static int row_dim_of(const emitter *e, const sj_kernel *k, uint64_t *row_work,
                      uint64_t *split_extent, int64_t *split_cols) {
    *split_extent = 0;
    *split_cols = column_unit(e, k);
    if (*split_cols) {
        /* a unit's work per active row: its columns' contraction over the
         * batch and rows the active extent does not count */
        uint64_t w = (uint64_t)(k->dims[4] * *split_cols);
        for (int i = 0; i < 3; i++)
            if (!k->sym[i]) w *= (uint64_t)k->dims[i];
        *row_work = w;
        *split_extent = (uint64_t)((k->dims[3] + *split_cols - 1) / *split_cols);
        return 3;
    }
    int d = sj__kernel_row_dim(k, row_work);
    if (d == 2 && k->kind == SJ_KK_MATMUL && !matmul_rows_split(e)) d = -1;
    return d;
}

/* A row worth a split part of its own: a conv's image (ResNet-18's
 * smallest, 7 x 7 x 512, is 25 Ki) passes, a token's row (768 or 3072
 * wide) does not, and keeps the 16-row blocks. */
#define SLICE_MIN_WORK ((uint64_t)1 << 14)

/* Whether the split dim's rows are whole slices worth a part each: no
 * vector runs along it (it is not the innermost dim), no row tile spans it
 * (it is not a matmul's or attention's m), and a row's work is at least
 * SLICE_MIN_WORK; a split may then fall after any row. */
static bool rows_are_slices(const emitter *e, uint64_t row_work) {
    const sj_kernel *k = e->k;
    if (e->row_dim < 0 || e->row_dim == k->rank - 1 || row_work < SLICE_MIN_WORK) return false;
    return (k->kind != SJ_KK_MATMUL && k->kind != SJ_KK_ATTENTION) || e->row_dim < 2;
}

/* A constant i64 global `<kernel name><suffix>` the host device reads. */
static void add_const_u64(emitter *e, const char *suffix, uint64_t value) {
    char name[SJ_KERNEL_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s%s", e->k->name, suffix);
    LLVMValueRef g = LLVMAddGlobal(e->M, e->i64, name);
    LLVMSetInitializer(g, LLVMConstInt(e->i64, value, 0));
    LLVMSetGlobalConstant(g, 1);
}

/* `name_rows(buffers, info, n, begin, end)` calling the body, and
 * `name_rows_work`, the row work the host device weighs a split by
 * (`name_rows_extent` for a constant range, `name_rows_step` 1 for rows
 * that are whole slices). */
static LLVMValueRef emit_rows_entry(emitter *e, LLVMTypeRef bt, LLVMValueRef body, LLVMValueRef *args,
                                    uint64_t row_work, uint64_t split_extent) {
    const sj_kernel *k = e->k;
    char name[SJ_KERNEL_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s_rows", k->name);
    LLVMTypeRef rp[6] = {e->ptr, e->ptr, e->i64, e->i64, e->i64, e->ptr};
    LLVMTypeRef rt = LLVMFunctionType(e->voidt, rp, 6, 0);
    LLVMValueRef rows = LLVMAddFunction(e->M, name, rt);
    add_attr(e, rows, LLVMAttributeFunctionIndex, "nounwind");
    /* One copy of the code: `name` calls this one rather than a copy
     * specialised for [0, n). */
    add_attr(e, rows, LLVMAttributeFunctionIndex, "noinline");
    prefer_full_width(e, rows);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, rows, "entry"));
    load_buffers(e, LLVMGetParam(rows, 0), args);
    for (unsigned i = 0; i < 4; i++) args[k->n_buffers + i] = LLVMGetParam(rows, 2 + i);
    LLVMBuildCall2(e->B, bt, body, args, (unsigned)k->n_buffers + 4, "");
    LLVMBuildRetVoid(e->B);
    add_const_u64(e, "_rows_work", row_work);
    if (split_extent) add_const_u64(e, "_rows_extent", split_extent);
    else if (rows_are_slices(e, row_work)) add_const_u64(e, "_rows_step", 1);
    return rows;
}

static sj_status emit_kernel(emitter *e, const sj_kernel *k) {
    size_t n_params = (size_t)k->n_buffers + 4;
    LLVMTypeRef *bp = sj_alloc(e->ctx, n_params * sizeof *bp);
    LLVMValueRef *args = sj_alloc(e->ctx, n_params * sizeof *args);
    e->bufs = sj_alloc(e->ctx, n_params * sizeof *e->bufs);
    if (!bp || !args || !e->bufs) {
        sj_free(e->ctx, bp);
        sj_free(e->ctx, args);
        sj_free(e->ctx, e->bufs);
        return sj_fail(e->ctx, SJ_E_NOMEM, "host emitter: out of memory");
    }
    e->k = k;
    e->n_fills = 0;
    uint64_t row_work, split_extent;
    e->row_dim = row_dim_of(e, k, &row_work, &split_extent, &e->split_cols);
    unsigned extra = e->row_dim >= 0 ? 4 : 2; /* n, the row range, and the scratch */
    /* Body with noalias buffer parameters. */
    for (int i = 0; i < k->n_buffers; i++) bp[i] = e->ptr;
    for (unsigned i = 0; i + 1 < extra; i++) bp[k->n_buffers + i] = e->i64;
    bp[k->n_buffers + extra - 1] = e->ptr;
    LLVMTypeRef bt = LLVMFunctionType(e->voidt, bp, (unsigned)k->n_buffers + extra, 0);
    char bname[SJ_KERNEL_NAME_MAX + 8];
    snprintf(bname, sizeof bname, "%s.body", k->name);
    LLVMValueRef body = LLVMAddFunction(e->M, bname, bt);
    LLVMSetLinkage(body, LLVMInternalLinkage);
    add_attr(e, body, LLVMAttributeFunctionIndex, "alwaysinline");
    add_attr(e, body, LLVMAttributeFunctionIndex, "nounwind");
    /* x86 CPUs with AVX-512 default to 256-bit vectors for fear of clock
     * throttling; these kernels are long-running vector loops that gain
     * from the full width. */
    prefer_full_width(e, body);
    for (int i = 0; i < k->n_buffers; i++) {
        add_attr(e, body, (LLVMAttributeIndex)(i + 1), "noalias");
        e->bufs[i] = LLVMGetParam(body, (unsigned)i);
    }
    e->n = LLVMGetParam(body, (unsigned)k->n_buffers);
    e->scratch = LLVMGetParam(body, (unsigned)k->n_buffers + extra - 1);
    if (e->row_dim >= 0) {
        e->rb = LLVMGetParam(body, (unsigned)k->n_buffers + 1);
        e->re = LLVMGetParam(body, (unsigned)k->n_buffers + 2);
    }
    e->fn = body;
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->C, body, "entry");
    LLVMPositionBuilderAtEnd(e->B, entry);
    if (e->split_cols) { /* units to columns, the last unit cut at n */
        LLVMValueRef u = ci(e, e->split_cols), N = ci(e, k->dims[3]);
        e->rb = LLVMBuildNSWMul(e->B, e->rb, u, "cb");
        LLVMValueRef ce = LLVMBuildNSWMul(e->B, e->re, u, "");
        e->re = LLVMBuildSelect(e->B, LLVMBuildICmp(e->B, LLVMIntSLT, ce, N, ""), ce, N, "ce");
    } else if (e->row_dim >= 0 && k->sym[e->row_dim] > 1) {
        /* the host device splits the active extent; a k*N dim has k rows
         * per unit of it */
        e->rb = LLVMBuildNSWMul(e->B, e->rb, ci(e, k->sym[e->row_dim]), "rb");
        e->re = LLVMBuildNSWMul(e->B, e->re, ci(e, k->sym[e->row_dim]), "re");
    }
    /* Allocas go in front of this marker so they stay in the entry block. */
    e->entry_alloca_point = LLVMBuildFreeze(e->B, e->n, "n");
    e->n = e->entry_alloca_point;
    for (int d = 0; d < SJ_KSPACE_MAX; d++) e->idx[d] = ci(e, 0);
    switch (k->kind) {
    case SJ_KK_MAP: emit_map(e); break;
    case SJ_KK_REDUCE: emit_reduce(e); break;
    case SJ_KK_SOFTMAX:
    case SJ_KK_LOG_SOFTMAX:
    case SJ_KK_LAYERNORM: emit_row(e); break;
    case SJ_KK_MATMUL: emit_matmul(e); break;
    case SJ_KK_ATTENTION: emit_attention(e); break;
    }
    LLVMBuildRetVoid(e->B);
    if (e->failed != SJ_OK) {
        sj_free(e->ctx, bp);
        sj_free(e->ctx, args);
        sj_free(e->ctx, e->bufs);
        e->bufs = NULL;
        return e->failed;
    }

    LLVMValueRef rows = e->row_dim >= 0 ? emit_rows_entry(e, bt, body, args, row_work, split_extent) : NULL;
    /* The ABI entry point. */
    LLVMTypeRef kp[4] = {e->ptr, e->ptr, e->i64, e->ptr};
    LLVMValueRef fn = LLVMAddFunction(e->M, k->name, LLVMFunctionType(e->voidt, kp, 4, 0));
    add_attr(e, fn, LLVMAttributeFunctionIndex, "nounwind");
    prefer_full_width(e, fn);
    LLVMPositionBuilderAtEnd(e->B, LLVMAppendBasicBlockInContext(e->C, fn, "entry"));
    if (rows) {
        /* the whole range: every row, or every unit of a constant split */
        LLVMValueRef n = LLVMGetParam(fn, 2);
        LLVMValueRef whole = split_extent ? ci(e, (int64_t)split_extent) : n;
        LLVMValueRef rargs[6] = {LLVMGetParam(fn, 0), LLVMGetParam(fn, 1), n, ci(e, 0), whole,
                                 LLVMGetParam(fn, 3)};
        LLVMBuildCall2(e->B, LLVMGlobalGetValueType(rows), rows, rargs, 6, "");
    } else {
        load_buffers(e, LLVMGetParam(fn, 0), args);
        args[k->n_buffers] = LLVMGetParam(fn, 2);
        args[k->n_buffers + 1] = LLVMGetParam(fn, 3);
        LLVMBuildCall2(e->B, bt, body, args, (unsigned)k->n_buffers + 2, "");
    }
    LLVMBuildRetVoid(e->B);
    e->row_dim = -1;
    e->split_cols = 0;
    sj_free(e->ctx, bp);
    sj_free(e->ctx, args);
    sj_free(e->ctx, e->bufs);
    e->bufs = NULL;
    return SJ_OK;
}

/* The batch dim (0 or 1) of a matmul of one row per batch index whose B
 * is one matrix for the whole batch ([1, N, 1, n, k]: a 1x1 conv on pooled
 * images, as the squeeze-excite blocks and the head of MobileNetV3 run),
 * or -1. Its batch dim is its rows in all but name. */
static int batch_rows_dim(const sj_kernel *k) {
    if (k->kind != SJ_KK_MATMUL || k->rank != 5 || k->dims[2] != 1 || k->sym[2]) return -1;
    const sj_kload *b = &k->loads[k->b];
    for (int d = 0; d < 2; d++) {
        int o = 1 - d;
        if ((k->sym[d] || k->dims[d] > 1) && !k->sym[o] && k->dims[o] == 1 && b->strides[d] == 0) return d;
    }
    return -1;
}

/* *out = k with dims d and 2 swapped: the same points under other names
 * (loads, output, ranges and selects follow the dims). out's loads and
 * exprs are its own (the caller frees them). */
static sj_status swap_dims(emitter *e, const sj_kernel *k, int d, sj_kernel *out) {
    *out = *k;
    out->loads = sj_alloc(e->ctx, (size_t)(k->n_loads ? k->n_loads : 1) * sizeof *out->loads);
    out->exprs = sj_alloc(e->ctx, (size_t)(k->n_exprs ? k->n_exprs : 1) * sizeof *out->exprs);
    if (!out->loads || !out->exprs) {
        sj_free(e->ctx, out->loads);
        sj_free(e->ctx, out->exprs);
        return sj_fail(e->ctx, SJ_E_NOMEM, "host emitter: out of memory");
    }
    memcpy(out->loads, k->loads, (size_t)k->n_loads * sizeof *out->loads);
    memcpy(out->exprs, k->exprs, (size_t)k->n_exprs * sizeof *out->exprs);
#define SJ_SWAP(T, a, b) do { T t_ = (a); (a) = (b); (b) = t_; } while (0)
    SJ_SWAP(int64_t, out->dims[d], out->dims[2]);
    SJ_SWAP(int64_t, out->sym[d], out->sym[2]); /* k of a symbolic dim k * N + c */
    SJ_SWAP(int64_t, out->sym_add[d], out->sym_add[2]);
    SJ_SWAP(int64_t, out->out_strides[d], out->out_strides[2]);
    for (int i = 0; i < k->n_loads; i++) SJ_SWAP(int64_t, out->loads[i].strides[d], out->loads[i].strides[2]);
    for (int i = 0; i < k->n_exprs; i++) {
        sj_kexpr *x = &out->exprs[i];
        SJ_SWAP(int64_t, x->coef[d], x->coef[2]);
        if (x->kind == SJ_KX_RANGE && (x->dim == d || x->dim == 2)) x->dim = x->dim == d ? 2 : d;
    }
#undef SJ_SWAP
    return SJ_OK;
}

/* Whether a launch of k may split (row_dim_of). */
static bool splits(emitter *e, const sj_kernel *k) {
    const sj_kernel *was = e->k;
    uint64_t work, extent;
    int64_t cols;
    e->k = k; /* the matmul path row_dim_of weighs is e->k's */
    int d = row_dim_of(e, k, &work, &extent, &cols);
    e->k = was;
    return d >= 0;
}

/* emit_kernel, a matmul of one row per batch index (batch_rows_dim) with
 * its batch dim as its rows: the GEMM or the few-rows kernel then reads B
 * once for every row of the launch, where each batch index's one-row
 * product read all of B again (MobileNetV3's 576 -> 1024 head conv, 2.4
 * MB, once per image). Not where that would keep a launch from splitting
 * over the threads as its images did: few rows of fewer than two blocks
 * of columns (a squeeze-excite conv to 8 channels) split neither way. */
static sj_status emit_kernel_relabelled(emitter *e, const sj_kernel *k) {
    int d = batch_rows_dim(k);
    if (d < 0) return emit_kernel(e, k);
    sj_kernel rows;
    SJ_TRY(swap_dims(e, k, d, &rows));
    if (!splits(e, &rows) && splits(e, k)) {
        sj_free(e->ctx, rows.loads);
        sj_free(e->ctx, rows.exprs);
        return emit_kernel(e, k);
    }
    sj_status st = emit_kernel(e, &rows);
    sj_free(e->ctx, rows.loads);
    sj_free(e->ctx, rows.exprs);
    return st;
}

sj_status sj__llvm_emit_kernels(sj_ctx *ctx, LLVMModuleRef m, const sj_lowered *l, int first, int last,
                               const sj_llvm_target *t, int vector_floats, int gemm_level,
                               sj_llvm_emitted *out) {
    emitter e = {.ctx = ctx, .M = m, .C = LLVMGetModuleContext(m), .t = t, .vector_floats = vector_floats,
                 .gemm_level = gemm_level, .row_dim = -1, .emitted = out};
    e.B = LLVMCreateBuilderInContext(e.C);
    e.f32 = LLVMFloatTypeInContext(e.C);
    e.i64 = LLVMInt64TypeInContext(e.C);
    e.i32 = LLVMInt32TypeInContext(e.C);
    e.ptr = LLVMPointerTypeInContext(e.C, 0);
    e.voidt = LLVMVoidTypeInContext(e.C);
    sj_status st = SJ_OK;
    for (int i = first; i < last && st == SJ_OK; i++) {
        e.kernel_index = i;
        st = emit_kernel_relabelled(&e, &l->kernels[i]);
    }
    LLVMDisposeBuilder(e.B);
    return st;
}

void sj__llvm_emitted_free(sj_ctx *ctx, sj_llvm_emitted *em) {
    sj_free(ctx, em->packs);
    sj_free(ctx, em->code_keys);
    memset(em, 0, sizeof *em);
}

/* Reference kernels: plain loops, float32 data accumulated in double,
 * written to be obviously right rather than fast. Elementwise ops read any
 * element type through get_f / get_i and write through put. */
#include "interp/interp_impl.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- indexing helpers ---- */

/* Strides of t's dims when t is right-aligned against `rank` result dims
 * under numpy broadcasting: 0 for a missing or size-1 dim, which repeats it. */
static void broadcast_strides(int t_rank, const int64_t *t_dims, int rank, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int j = t_rank - rank + i;
        if (j < 0) {
            strides[i] = 0;
            continue;
        }
        strides[i] = t_dims[j] == 1 ? 0 : s;
        s *= t_dims[j];
    }
}

/* Row-major strides of t. */
static void row_strides(const sj_tensor *t, int64_t *strides) {
    int64_t s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= t->dims[i];
    }
}

/* Offset of the element with multi-index idx (of `rank` dims) in a tensor
 * with the given strides. */
static int64_t offset_of(int rank, const int64_t *idx, const int64_t *strides) {
    int64_t off = 0;
    for (int i = 0; i < rank; i++) off += idx[i] * strides[i];
    return off;
}

/* Row-major multi-index of flat position `flat` in dims. */
static void unflatten(int rank, const int64_t *dims, int64_t flat, int64_t *idx) {
    for (int i = rank - 1; i >= 0; i--) {
        idx[i] = flat % dims[i];
        flat /= dims[i];
    }
}

static int64_t numel(const sj_tensor *t) { return sj_tensor_numel(t); }

/* numpy maximum / minimum: a NaN on either side propagates. */
static double max_nan(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a > b ? a : b; }
static double min_nan(double a, double b) { return isnan(a) ? a : isnan(b) ? b : a < b ? a : b; }

/* ---- elementwise ---- */

static double unary_fn(const sj_node *n, double x) {
    switch (n->op) {
    case SJ_OP_NEG: return -x;
    case SJ_OP_ABS: return fabs(x);
    case SJ_OP_EXP: return exp(x);
    case SJ_OP_LOG: return log(x);
    case SJ_OP_SQRT: return sqrt(x);
    case SJ_OP_RSQRT: return 1.0 / sqrt(x);
    case SJ_OP_RECIPROCAL: return 1.0 / x;
    case SJ_OP_TANH: return tanh(x);
    case SJ_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    /* Written as "x < 0" so a NaN falls through to the NaN itself. */
    case SJ_OP_RELU: return x < 0 ? 0.0 : x;
    case SJ_OP_LEAKY_RELU: return x < 0 ? (double)n->attrs.alpha * x : x;
    case SJ_OP_GELU: return x * 0.5 * (1.0 + erf(x / sqrt(2.0)));
    case SJ_OP_SILU: return x / (1.0 + exp(-x));
    case SJ_OP_ERF: return erf(x);
    case SJ_OP_SIN: return sin(x);
    case SJ_OP_COS: return cos(x);
    case SJ_OP_TAN: return tan(x);
    case SJ_OP_ASIN: return asin(x);
    case SJ_OP_ACOS: return acos(x);
    case SJ_OP_ATAN: return atan(x);
    case SJ_OP_SINH: return sinh(x);
    case SJ_OP_COSH: return cosh(x);
    case SJ_OP_ASINH: return asinh(x);
    case SJ_OP_ACOSH: return acosh(x);
    case SJ_OP_ATANH: return atanh(x);
    case SJ_OP_FLOOR: return floor(x);
    case SJ_OP_CEIL: return ceil(x);
    case SJ_OP_ROUND: return nearbyint(x); /* half to even in the default mode */
    case SJ_OP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x; /* keeps 0, -0 and NaN */
    default: break;
    }
    return NAN; /* unreachable: the builder admits only the ops above */
}

/* ---- element access by dtype ---- */

static double get_f(const sj_tensor *t, int64_t i) {
    switch (t->dtype) {
    case SJ_I64: return (double)t->i64[i];
    case SJ_I32: return (double)t->i32[i];
    case SJ_BOOL: return (double)t->b8[i];
    default: return (double)t->data[i];
    }
}

static int64_t get_i(const sj_tensor *t, int64_t i) {
    switch (t->dtype) {
    case SJ_I64: return t->i64[i];
    case SJ_I32: return (int64_t)t->i32[i];
    case SJ_BOOL: return (int64_t)t->b8[i];
    default: return (int64_t)t->data[i]; /* callers convert floats themselves */
    }
}

/* float -> integer as the compiled code does it (cvttss2si on x86): toward
 * zero, NaN and out-of-range values give the type's minimum. */
static int64_t f_to_i64(double x) {
    if (!(x > -9223372036854775808.0 && x < 9223372036854775808.0)) return INT64_MIN;
    return (int64_t)x;
}
static int32_t f_to_i32(double x) {
    if (!(x > -2147483649.0 && x < 2147483648.0)) return INT32_MIN;
    return (int32_t)x;
}

/* Stores a result given as an integer (is_int) or a double. */
static void put(sj_tensor *t, int64_t i, bool is_int, int64_t iv, double fv) {
    switch (t->dtype) {
    case SJ_I64: t->i64[i] = is_int ? iv : f_to_i64(fv); return;
    case SJ_I32: t->i32[i] = is_int ? (int32_t)(uint32_t)iv : f_to_i32(fv); return;
    case SJ_BOOL: t->b8[i] = is_int ? iv != 0 : fv != 0.0; return;
    default: t->data[i] = is_int ? (float)iv : (float)fv; return;
    }
}

static bool is_int_type(sj_dtype t) { return t == SJ_I64 || t == SJ_I32 || t == SJ_BOOL; }

static void eval_unary(const sj_node *n, const sj_tensor *x, sj_tensor *y) {
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        switch (n->op) {
        case SJ_OP_CAST:
            if (is_int_type(x->dtype)) put(y, i, true, get_i(x, i), 0);
            else put(y, i, false, 0, get_f(x, i));
            break;
        case SJ_OP_NOT: y->b8[i] = !x->b8[i]; break;
        case SJ_OP_ISNAN: y->b8[i] = isnan(x->data[i]) != 0; break;
        case SJ_OP_ISINF: y->b8[i] = isinf(x->data[i]) != 0; /* glibc: -1 for -inf */ break;
        case SJ_OP_NEG:
        case SJ_OP_ABS:
            if (is_int_type(x->dtype)) {
                /* two's complement wrap, as the compiled code does */
                uint64_t v = (uint64_t)get_i(x, i);
                bool neg = n->op == SJ_OP_NEG || (int64_t)v < 0;
                put(y, i, true, (int64_t)(neg ? 0 - v : v), 0);
                break;
            }
            y->data[i] = (float)unary_fn(n, x->data[i]);
            break;
        default: y->data[i] = (float)unary_fn(n, x->data[i]); break;
        }
    }
}

/* Integer ops wrap like the compiled code; division by zero (undefined in
 * C and in ONNX) gives 0 rather than trapping. */
static int64_t binary_int(sj_op op, int64_t a, int64_t b, sj_dtype t) {
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case SJ_OP_ADD: return (int64_t)(ua + ub);
    case SJ_OP_SUB: return (int64_t)(ua - ub);
    case SJ_OP_MUL: return (int64_t)(ua * ub);
    case SJ_OP_DIV:
        if (b == 0 || (b == -1 && a == (t == SJ_I32 ? INT32_MIN : INT64_MIN))) return b ? a : 0;
        return a / b;
    case SJ_OP_MOD: {
        if (b == 0 || b == -1) return 0;
        int64_t r = a % b;
        return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
    }
    case SJ_OP_MAX: return a > b ? a : b;
    case SJ_OP_MIN: return a < b ? a : b;
    case SJ_OP_EQUAL: return a == b;
    case SJ_OP_LESS: return a < b;
    case SJ_OP_LESS_EQUAL: return a <= b;
    case SJ_OP_GREATER: return a > b;
    case SJ_OP_GREATER_EQUAL: return a >= b;
    case SJ_OP_AND: return a && b;
    case SJ_OP_OR: return a || b;
    case SJ_OP_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

static double binary_fn(sj_op op, double a, double b) {
    switch (op) {
    case SJ_OP_ADD: return a + b;
    case SJ_OP_SUB: return a - b;
    case SJ_OP_MUL: return a * b;
    case SJ_OP_DIV: return a / b;
    /* The operands are floats, so pow in double rounded once to float is
     * powf's result. */
    case SJ_OP_POW: return pow(a, b);
    case SJ_OP_MAX: return max_nan(a, b);
    case SJ_OP_MIN: return min_nan(a, b);
    case SJ_OP_MOD: return fmod(a, b);
    case SJ_OP_EQUAL: return a == b;
    case SJ_OP_LESS: return a < b;
    case SJ_OP_LESS_EQUAL: return a <= b;
    case SJ_OP_GREATER: return a > b;
    case SJ_OP_GREATER_EQUAL: return a >= b;
    default: break;
    }
    return NAN; /* unreachable */
}

static void eval_binary(const sj_node *n, const sj_tensor *a, const sj_tensor *b, sj_tensor *y) {
    int64_t sa[SJ_MAX_RANK], sb[SJ_MAX_RANK], idx[SJ_MAX_RANK];
    broadcast_strides(a->rank, a->dims, y->rank, sa);
    broadcast_strides(b->rank, b->dims, y->rank, sb);
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, idx);
        int64_t oa = offset_of(y->rank, idx, sa), ob = offset_of(y->rank, idx, sb);
        if (is_int_type(a->dtype))
            put(y, i, true, binary_int(n->op, get_i(a, oa), get_i(b, ob), a->dtype), 0);
        else
            put(y, i, false, 0, binary_fn(n->op, a->data[oa], b->data[ob]));
    }
}

/* ---- reductions ---- */

/* Walks the input positions of one output element: the kept axes come from
 * the output position, the reduced axes run over all their values. Dims of
 * size 1 added by keepdims do not change the flat order, so the output
 * position decomposes over the kept input axes alone. */
static void eval_reduce(const sj_node *n, const sj_tensor *x, sj_tensor *y) {
    uint32_t mask = n->attrs.axes;
    int64_t strides[SJ_MAX_RANK];
    row_strides(x, strides);
    int64_t per_output = 1;
    for (int i = 0; i < x->rank; i++)
        if (mask & (1u << i)) per_output *= x->dims[i];
    int64_t count = numel(y);
    for (int64_t o = 0; o < count; o++) {
        int64_t base = 0, rem = o;
        for (int i = x->rank - 1; i >= 0; i--) {
            if (mask & (1u << i)) continue;
            base += (rem % x->dims[i]) * strides[i];
            rem /= x->dims[i];
        }
        double acc = n->op == SJ_OP_REDUCE_MAX ? -INFINITY : 0.0;
        for (int64_t r = 0; r < per_output; r++) {
            int64_t off = base, rr = r;
            for (int i = x->rank - 1; i >= 0; i--) {
                if (!(mask & (1u << i))) continue;
                off += (rr % x->dims[i]) * strides[i];
                rr /= x->dims[i];
            }
            double v = x->data[off];
            acc = n->op == SJ_OP_REDUCE_MAX ? max_nan(acc, v) : acc + v;
        }
        if (n->op == SJ_OP_REDUCE_MEAN) acc /= (double)per_output;
        y->data[o] = (float)acc;
    }
}

/* ---- contractions ---- */

/* numpy matmul. A rank-1 operand is promoted to [1, K] or [K, 1]; dropping
 * that size-1 dim from the result leaves its flat layout unchanged, so the
 * result is written as the promoted [batch..., M, N]. */
static void eval_matmul(const sj_tensor *a, const sj_tensor *b, sj_tensor *y) {
    sj_tensor pa = *a, pb = *b;
    if (a->rank == 1) pa = (sj_tensor){.rank = 2, .dims = {1, a->dims[0]}, .data = a->data};
    if (b->rank == 1) pb = (sj_tensor){.rank = 2, .dims = {b->dims[0], 1}, .data = b->data};
    int64_t m = pa.dims[pa.rank - 2], k = pa.dims[pa.rank - 1], nn = pb.dims[pb.rank - 1];
    int batch_rank = (pa.rank > pb.rank ? pa.rank : pb.rank) - 2;
    int64_t batch_dims[SJ_MAX_RANK], batches = 1;
    for (int i = 0; i < batch_rank; i++) {
        int ia = pa.rank - 2 - batch_rank + i, ib = pb.rank - 2 - batch_rank + i;
        int64_t da = ia >= 0 ? pa.dims[ia] : 1, db = ib >= 0 ? pb.dims[ib] : 1;
        batch_dims[i] = da > db ? da : db;
        batches *= batch_dims[i];
    }
    /* Batch strides count whole [M, K] / [K, N] matrices. */
    int64_t sa[SJ_MAX_RANK], sb[SJ_MAX_RANK], idx[SJ_MAX_RANK];
    broadcast_strides(pa.rank - 2, pa.dims, batch_rank, sa);
    broadcast_strides(pb.rank - 2, pb.dims, batch_rank, sb);
    float *out = y->data;
    for (int64_t bi = 0; bi < batches; bi++) {
        unflatten(batch_rank, batch_dims, bi, idx);
        const float *ma = a->data + offset_of(batch_rank, idx, sa) * m * k;
        const float *mb = b->data + offset_of(batch_rank, idx, sb) * k * nn;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < nn; j++) {
                double acc = 0.0;
                for (int64_t p = 0; p < k; p++) acc += (double)ma[i * k + p] * mb[p * nn + j];
                *out++ = (float)acc;
            }
    }
}

/* Y = alpha * op(A) op(B) + beta * C, C broadcast to [M, N]. */
static void eval_gemm(const sj_node *n, const sj_tensor *a, const sj_tensor *b,
                      const sj_tensor *c, sj_tensor *y) {
    bool ta = n->attrs.trans_a, tb = n->attrs.trans_b;
    int64_t m = y->dims[0], nn = y->dims[1], k = a->dims[ta ? 0 : 1];
    int64_t sc[2] = {0, 0};
    if (c) broadcast_strides(c->rank, c->dims, 2, sc);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < nn; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; p++) {
                double va = a->data[ta ? p * m + i : i * k + p];
                double vb = b->data[tb ? j * k + p : p * nn + j];
                acc += va * vb;
            }
            acc *= n->attrs.alpha;
            if (c) acc += (double)n->attrs.beta * c->data[i * sc[0] + j * sc[1]];
            y->data[i * nn + j] = (float)acc;
        }
}

/* ---- row ops ---- */

/* Splits dims around `axis` into outer * len * inner. */
static void split_at_axis(const sj_tensor *t, int axis, int64_t *outer, int64_t *len,
                          int64_t *inner) {
    *outer = *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= t->dims[i];
    *len = t->dims[axis];
    for (int i = axis + 1; i < t->rank; i++) *inner *= t->dims[i];
}

/* Subtracts the row max before exponentiating so large inputs do not
 * overflow. */
static void eval_softmax(const sj_node *n, const sj_tensor *x, sj_tensor *y) {
    int64_t outer, len, inner;
    split_at_axis(x, n->attrs.axis, &outer, &len, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            const float *row = x->data + o * len * inner + in;
            float *dst = y->data + o * len * inner + in;
            double mx = -INFINITY, sum = 0.0;
            for (int64_t i = 0; i < len; i++) mx = max_nan(mx, row[i * inner]);
            for (int64_t i = 0; i < len; i++) sum += exp(row[i * inner] - mx);
            for (int64_t i = 0; i < len; i++) {
                double shifted = row[i * inner] - mx;
                dst[i * inner] =
                    (float)(n->op == SJ_OP_LOG_SOFTMAX ? shifted - log(sum) : exp(shifted) / sum);
            }
        }
}

/* Population mean and variance over axes [axis, rank), as ONNX
 * LayerNormalization; scale and bias broadcast to those axes. */
static void eval_layernorm(const sj_node *n, const sj_tensor *x, const sj_tensor *scale,
                           const sj_tensor *bias, sj_tensor *y) {
    int axis = n->attrs.axis, norm_rank = x->rank - axis;
    const int64_t *norm_dims = x->dims + axis;
    int64_t rows = 1, len = 1;
    for (int i = 0; i < axis; i++) rows *= x->dims[i];
    for (int i = 0; i < norm_rank; i++) len *= norm_dims[i];
    int64_t ss[SJ_MAX_RANK], sb[SJ_MAX_RANK], idx[SJ_MAX_RANK];
    if (scale) broadcast_strides(scale->rank, scale->dims, norm_rank, ss);
    if (bias) broadcast_strides(bias->rank, bias->dims, norm_rank, sb);
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x->data + r * len;
        float *dst = y->data + r * len;
        double mean = 0.0, var = 0.0;
        for (int64_t i = 0; i < len; i++) mean += row[i];
        mean /= (double)len;
        for (int64_t i = 0; i < len; i++) var += (row[i] - mean) * (row[i] - mean);
        var /= (double)len;
        double inv_std = 1.0 / sqrt(var + n->attrs.epsilon);
        for (int64_t i = 0; i < len; i++) {
            unflatten(norm_rank, norm_dims, i, idx);
            double v = (row[i] - mean) * inv_std;
            if (scale) v *= scale->data[offset_of(norm_rank, idx, ss)];
            if (bias) v += bias->data[offset_of(norm_rank, idx, sb)];
            dst[i] = (float)v;
        }
    }
}

/* ---- layout ---- */

static void eval_transpose(const sj_node *n, const sj_tensor *x, sj_tensor *y) {
    int64_t in_strides[SJ_MAX_RANK], perm_strides[SJ_MAX_RANK], idx[SJ_MAX_RANK];
    row_strides(x, in_strides);
    /* Output axis i walks input axis perm[i]. */
    for (int i = 0; i < y->rank; i++) perm_strides[i] = in_strides[n->attrs.perm[i]];
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, idx);
        size_t es = sj_dtype_size(x->dtype);
        memcpy((char *)y->bytes + i * es, (const char *)x->bytes + offset_of(y->rank, idx, perm_strides) * es, es);
    }
}

/* ---- typed ops ---- */

static void eval_where(const sj_tensor *c, const sj_tensor *a, const sj_tensor *b, sj_tensor *y) {
    int64_t sc[SJ_MAX_RANK], sa[SJ_MAX_RANK], sb[SJ_MAX_RANK], idx[SJ_MAX_RANK];
    broadcast_strides(c->rank, c->dims, y->rank, sc);
    broadcast_strides(a->rank, a->dims, y->rank, sa);
    broadcast_strides(b->rank, b->dims, y->rank, sb);
    size_t es = sj_dtype_size(y->dtype);
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, idx);
        bool pick_a = c->b8[offset_of(y->rank, idx, sc)];
        const sj_tensor *src = pick_a ? a : b;
        int64_t off = offset_of(y->rank, idx, pick_a ? sa : sb);
        memcpy((char *)y->bytes + i * es, (const char *)src->bytes + off * es, es);
    }
}

/* out[pre, j..., post] = data[pre, clamp(idx[j...]), post]; see graph.h for
 * the clamp. */
static void eval_gather(const sj_node *n, const sj_tensor *d, const sj_tensor *ix, sj_tensor *y) {
    int ax = n->attrs.axis;
    int64_t pre = 1, len = d->dims[ax], post = 1, ni = numel(ix);
    for (int i = 0; i < ax; i++) pre *= d->dims[i];
    for (int i = ax + 1; i < d->rank; i++) post *= d->dims[i];
    size_t es = sj_dtype_size(d->dtype), row = (size_t)post * es;
    for (int64_t p = 0; p < pre; p++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = get_i(ix, j);
            if (k < 0) k += len;
            k = k < 0 ? 0 : k >= len ? len - 1 : k;
            memcpy((char *)y->bytes + (size_t)((p * ni + j) * post) * es,
                   (const char *)d->bytes + (size_t)((p * len + k) * post) * es, row);
        }
}

static void eval_range(const sj_node *n, sj_tensor *y, int64_t extent) {
    int64_t count = numel(y), first = (int64_t)n->attrs.first + n->attrs.start_n[0] * extent;
    for (int64_t i = 0; i < count; i++) {
        if (y->dtype == SJ_F32)
            put(y, i, false, 0, n->attrs.first + (double)i * n->attrs.delta);
        else
            put(y, i, true, first + i * (int64_t)n->attrs.delta, 0);
    }
}

static void eval_fill(const sj_node *n, sj_tensor *y) {
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++)
        if (y->dtype == SJ_F32) put(y, i, false, 0, n->attrs.delta);
        else put(y, i, true, (int64_t)n->attrs.delta, 0);
}

/* ---- realops layout ops (element copies, any dtype) ---- */

static void copy_elem(sj_tensor *y, int64_t i, const sj_tensor *x, int64_t j) {
    size_t es = sj_dtype_size(y->dtype);
    memcpy((char *)y->bytes + (size_t)i * es, (const char *)x->bytes + (size_t)j * es, es);
}

static void eval_slice(const sj_node *n, const sj_tensor *x, sj_tensor *y, int64_t extent) {
    int64_t in_strides[SJ_MAX_RANK], st[SJ_MAX_RANK], idx[SJ_MAX_RANK], base = 0;
    row_strides(x, in_strides);
    for (int i = 0; i < y->rank; i++) {
        base += (n->attrs.start[i] + n->attrs.start_n[i] * extent) * in_strides[i];
        st[i] = n->attrs.step[i] * in_strides[i];
    }
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, idx);
        copy_elem(y, i, x, base + offset_of(y->rank, idx, st));
    }
}

static void eval_concat(const sj_node *n, const sj_tensor *a, const sj_tensor *b, sj_tensor *y) {
    int ax = n->attrs.axis;
    int64_t outer = 1, ia = 1, ib = 1;
    for (int i = 0; i < ax; i++) outer *= y->dims[i];
    for (int i = ax; i < y->rank; i++) {
        ia *= a->dims[i];
        ib *= b->dims[i];
    }
    size_t es = sj_dtype_size(y->dtype);
    char *yb = y->bytes;
    for (int64_t o = 0; o < outer; o++) {
        memcpy(yb + (size_t)(o * (ia + ib)) * es, (const char *)a->bytes + (size_t)(o * ia) * es,
               (size_t)ia * es);
        memcpy(yb + (size_t)(o * (ia + ib) + ia) * es, (const char *)b->bytes + (size_t)(o * ib) * es,
               (size_t)ib * es);
    }
}

static void eval_expand(const sj_tensor *x, sj_tensor *y) {
    int64_t sx[SJ_MAX_RANK], idx[SJ_MAX_RANK];
    broadcast_strides(x->rank, x->dims, y->rank, sx);
    int64_t count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, idx);
        copy_elem(y, i, x, offset_of(y->rank, idx, sx));
    }
}

static void eval_trilu(const sj_node *n, const sj_tensor *x, sj_tensor *y) {
    int64_t rows = y->dims[y->rank - 2], cols = y->dims[y->rank - 1], count = numel(y);
    for (int64_t i = 0; i < count; i++) {
        int64_t c = i % cols, r = (i / cols) % rows;
        bool keep = n->attrs.upper ? c - r >= n->attrs.k : c - r <= n->attrs.k;
        if (keep) copy_elem(y, i, x, i);
        else memset((char *)y->bytes + (size_t)i * sj_dtype_size(y->dtype), 0, sj_dtype_size(y->dtype));
    }
}

/* out[i] = data[i with its axis coordinate replaced by clamp(idx[i])]. */
static void eval_gather_elements(const sj_node *n, const sj_tensor *d, const sj_tensor *ix,
                                 sj_tensor *y) {
    int ax = n->attrs.axis;
    int64_t ds[SJ_MAX_RANK], idx[SJ_MAX_RANK], len = d->dims[ax], count = numel(y);
    row_strides(d, ds);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, idx);
        int64_t k = get_i(ix, i);
        if (k < 0) k += len;
        idx[ax] = k < 0 ? 0 : k >= len ? len - 1 : k;
        copy_elem(y, i, d, offset_of(y->rank, idx, ds));
    }
}

/* out[b.., i.., r..] = data[b.., clamp(idx[b.., i.., 0..K-1]), r..]: each
 * coordinate counted from the end when negative, then clamped to its axis;
 * a batch dim of size 1 in indices is broadcast. */
static void eval_gather_nd(const sj_node *n, const sj_tensor *d, const sj_tensor *ix, sj_tensor *y) {
    int b = n->attrs.axis, q = ix->rank, k = (int)ix->dims[q - 1];
    int64_t ds[SJ_MAX_RANK], is[SJ_MAX_RANK], yi[SJ_MAX_RANK], count = numel(y);
    row_strides(d, ds);
    row_strides(ix, is);
    for (int64_t i = 0; i < count; i++) {
        unflatten(y->rank, y->dims, i, yi);
        int64_t at = 0, tuple = 0;
        for (int j = 0; j < q - 1; j++) tuple += (ix->dims[j] == 1 ? 0 : yi[j]) * is[j];
        for (int j = 0; j < b; j++) at += yi[j] * ds[j];
        for (int j = 0; j < k; j++) {
            int64_t len = d->dims[b + j], c = get_i(ix, tuple + j * is[q - 1]);
            if (c < 0) c += len;
            at += (c < 0 ? 0 : c >= len ? len - 1 : c) * ds[b + j];
        }
        for (int j = b + k; j < d->rank; j++) at += yi[q - 1 + j - b - k] * ds[j];
        copy_elem(y, i, d, at);
    }
}

void sj__interp_eval(const sj_node *n, const sj_tensor *const in[3], sj_tensor *out,
                    int64_t extent) {
    if (sj_op_is_unary(n->op)) {
        eval_unary(n, in[0], out);
        return;
    }
    if (sj_op_is_binary(n->op)) {
        eval_binary(n, in[0], in[1], out);
        return;
    }
    if (sj_op_is_reduce(n->op)) {
        eval_reduce(n, in[0], out);
        return;
    }
    switch (n->op) {
    case SJ_OP_MATMUL: eval_matmul(in[0], in[1], out); return;
    case SJ_OP_GEMM: eval_gemm(n, in[0], in[1], in[2], out); return;
    case SJ_OP_SOFTMAX:
    case SJ_OP_LOG_SOFTMAX: eval_softmax(n, in[0], out); return;
    case SJ_OP_LAYERNORM: eval_layernorm(n, in[0], in[1], in[2], out); return;
    case SJ_OP_TRANSPOSE: eval_transpose(n, in[0], out); return;
    case SJ_OP_RESHAPE:
        memcpy(out->bytes, in[0]->bytes, (size_t)sj_tensor_bytes(out));
        return;
    case SJ_OP_WHERE: eval_where(in[0], in[1], in[2], out); return;
    case SJ_OP_GATHER: eval_gather(n, in[0], in[1], out); return;
    case SJ_OP_RANGE: eval_range(n, out, extent); return;
    case SJ_OP_FILL: eval_fill(n, out); return;
    case SJ_OP_SLICE: eval_slice(n, in[0], out, extent); return;
    case SJ_OP_CONCAT: eval_concat(n, in[0], in[1], out); return;
    case SJ_OP_EXPAND: eval_expand(in[0], out); return;
    case SJ_OP_TRILU: eval_trilu(n, in[0], out); return;
    case SJ_OP_GATHER_ELEMENTS: eval_gather_elements(n, in[0], in[1], out); return;
    case SJ_OP_GATHER_ND: eval_gather_nd(n, in[0], in[1], out); return;
    default: break;
    }
}

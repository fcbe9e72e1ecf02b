/* Fusion and scheduling: decides where every value lives (inlined into its
 * consumer, its own buffer, a view of another buffer, or the accumulator of a
 * fused core kernel), then builds one kernel per materialised value.
 *
 * Fusion rules (fusion on):
 *  - an elementwise value with one use, that is no output, is inlined into its
 *    consumer unless the consumer needs a buffer (matmul operands, reshape) or
 *    would evaluate it at more points than it has (broadcast expansion); so is
 *    one with two uses in one expression (x * sigmoid(x)), evaluated twice;
 *  - a padded window's gather reads its data past the padding concat, the
 *    fill selected for the index one past the data (window_fuse.h);
 *  - a transpose of a buffer is a strided view (an index map in its readers),
 *    except as a matmul's b with n strided and many rows (copied once, so the
 *    register-tiled kernel reads n contiguously); a transpose of an inlined
 *    value is inlined with permuted indices;
 *  - a reshape is always a view: graph.h keeps the symbolic dim unmerged, so
 *    the padded buffer has the same layout under both shapes;
 *  - a slice of a buffer is a view too (strides times steps, and an offset
 *    that may grow with the active extent); its operand is kept addressable;
 *  - expand and trilu are inlined like elementwise ops (a broadcast load; a
 *    select on the indices), concat writes each operand, inlined where it
 *    can be, into its part of one buffer, and so does a chain of concats
 *    along one axis (each inner one used once);
 *  - a gather through a constant table is inlined into the elementwise
 *    expression that uses it once, like a window's (window_fuse.h);
 *  - a reduction, row op or matmul with one use absorbs the elementwise chain
 *    after it (epilogue) when the chain keeps its shape;
 *  - inlined chains are at most MAX_INLINE_DEPTH deep.
 * Intermediates share one arena: first fit over values that are still live. */
#include <stdio.h>
#include <string.h>

#include "core/array.h"
#include "ir/graph_impl.h"
#include "compile/lower/attention_fuse.h"
#include "compile/lower/kernel_share.h"
#include "compile/lower/lower.h"
#include "compile/lower/window_fuse.h"

/* MATMUL_COPY_B_ROWS: see decide_homes. MAX_INLINE_DEPTH bounds the
 * expression trees (and the emitters' recursion over them). */
enum { MATMUL_COPY_B_ROWS = 16, MAX_INLINE_DEPTH = 64 };

typedef enum home { HOME_DEAD, HOME_INLINE, HOME_BUFFER, HOME_VIEW, HOME_EPI } home;

typedef struct vinfo {
    int uses, n_out, consumer; /* consumer: the first node that reads it */
    int next_consumer;         /* with two uses or more: the second reader (the first again when it reads twice) */
    bool need_load, need_contig;
    int64_t matmul_b_rows; /* most output rows of a matmul reading v as its b */
    home home;
    int buffer;
    int64_t strides[SJ_MAX_RANK];
    int64_t offset, offset_n; /* views: where element 0 lies (see sj_kload) */
    int epi_core; /* kernel root: the core node it absorbs, -1 = none */
    int depth;    /* inlined: longest chain of inlined values ending here */
    bool twice;   /* inlined at both of its two uses (uses_meet) */
} vinfo;

typedef struct lbuf {
    sj_slot_kind kind;
    sj_dtype dtype;
    sj_precision storage; /* params the policy narrows: their 16-bit type */
    int32_t index;
    int64_t bytes, offset;
    int def, last, slot;
} lbuf;

typedef struct kbufs {
    int n;
    size_t cap;
    int *ids; /* logical buffers, in launch order */
} kbufs;

typedef struct lowering {
    sj_ctx *ctx;
    const sj_graph *g;
    int64_t E;
    const sj_lower_options *o;
    vinfo *v;
    sj_attention_match *att; /* NULL: no fused attention */
    bool *win;               /* per node: a window gather to inline (window_fuse.h); NULL = none */
    sj_value *pad;           /* per node: the padding concat a gather reads past (window_fuse.h) */
    bool *narrow;            /* per node: a param the precision policy narrows; NULL = none */
    lbuf *bufs;
    int n_bufs;
    size_t cap_bufs;
    sj_kernel *kernels;
    kbufs *kb;
    int n_kernels;
    size_t cap_kernels, cap_kb;
} lowering;

static sj_status grow(sj_ctx *ctx, void **p, size_t *cap, int need, size_t elem) {
    if (!sj__array_reserve(ctx, p, cap, (size_t)need, elem))
        return sj_fail(ctx, SJ_E_NOMEM, "lowering: out of memory");
    return SJ_OK;
}

static const sj_shape *shape_of(const lowering *L, sj_value v) { return &L->g->nodes[v].shape; }

static int64_t dim_at(const lowering *L, int64_t d) { return sj_dim_at(d, L->E); }

static int64_t numel_at(const lowering *L, const sj_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= dim_at(L, s->dims[i]);
    return n;
}

static void contiguous_strides(const lowering *L, const sj_shape *s, int64_t *st) {
    int64_t acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= dim_at(L, s->dims[i]);
    }
}

static bool same_shape(const sj_shape *a, const sj_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

static bool is_core(sj_op op) {
    return sj_op_is_reduce(op) || op == SJ_OP_SOFTMAX || op == SJ_OP_LOG_SOFTMAX ||
           op == SJ_OP_LAYERNORM || op == SJ_OP_MATMUL || op == SJ_OP_GEMM;
}

/* The p @ v node of a fused attention (its chain's other nodes stay dead). */
static bool attention_root(const lowering *L, sj_value v) { return L->att && L->att[v].root == v; }

static bool addressable(const lowering *L, sj_value v) {
    return L->v[v].home == HOME_BUFFER || L->v[v].home == HOME_VIEW;
}

/* ---- use counts and homes ---- */

/* Input i of node n as lowering reads it: a padded window's gather reads
 * its data past the padding concat (window_fuse.h), the fill standing for
 * the element the concat appends. */
static sj_value input_of(const lowering *L, int n, int i) {
    sj_value u = L->g->nodes[n].inputs[i];
    if (i == 0 && L->pad && L->pad[n] != SJ_NO_VALUE) return L->g->nodes[L->pad[n]].inputs[0];
    return u;
}

static void count_uses(lowering *L) {
    const sj_graph *g = L->g;
    for (int i = 0; i < g->n_outputs; i++) {
        vinfo *v = &L->v[g->outputs[i].value];
        v->n_out++;
        v->uses++;
        v->home = HOME_BUFFER; /* marks live */
    }
    for (int n = g->n_nodes - 1; n >= 0; n--) {
        if (L->v[n].home == HOME_DEAD) continue;
        const sj_node *nd = &g->nodes[n];
        if (attention_root(L, n)) {
            const sj_attention_match *m = &L->att[n];
            sj_value ops[4] = {m->q, m->kt, m->v, m->mask};
            for (int i = 0; i < 4; i++) {
                if (ops[i] == SJ_NO_VALUE) continue;
                L->v[ops[i]].uses++;
                L->v[ops[i]].consumer = n;
                L->v[ops[i]].home = HOME_BUFFER;
                L->v[ops[i]].need_load = true;
            }
            continue;
        }
        for (int i = 0; i < nd->n_inputs; i++) {
            sj_value u = input_of(L, n, i);
            if (u == SJ_NO_VALUE) continue;
            L->v[u].uses++;
            L->v[u].next_consumer = L->v[u].consumer; /* nodes run last to first */
            L->v[u].consumer = n;
            L->v[u].home = HOME_BUFFER;
            if (nd->op == SJ_OP_RESHAPE) L->v[u].need_contig = true;
            if (nd->op == SJ_OP_SLICE) L->v[u].need_load = true;
            if ((nd->op == SJ_OP_GATHER || nd->op == SJ_OP_GATHER_ELEMENTS) && i == 0)
                L->v[u].need_load = true;
            /* its indices too: each coordinate is a load of its own column */
            if (nd->op == SJ_OP_GATHER_ND) L->v[u].need_load = true;
            if ((nd->op == SJ_OP_MATMUL || nd->op == SJ_OP_GEMM) && i < 2) L->v[u].need_load = true;
            if (nd->op == SJ_OP_MATMUL && i == 1 && nd->shape.rank >= 2) {
                int64_t rows = dim_at(L, nd->shape.dims[nd->shape.rank - 2]);
                if (rows > L->v[u].matmul_b_rows) L->v[u].matmul_b_rows = rows;
            }
        }
    }
}

static bool expands(const lowering *L, sj_value v) {
    const sj_node *c = &L->g->nodes[L->v[v].consumer];
    if (sj_op_is_reduce(c->op) || c->op == SJ_OP_CONCAT) return false;
    /* a window's taps times a weight, summed over the taps (window_fuse.h):
     * the sum reads a tap once for the vector of columns it spans */
    if (L->win && L->win[v] && c->op == SJ_OP_MUL &&
        sj_op_is_reduce(L->g->nodes[L->v[L->v[v].consumer].consumer].op))
        return false;
    return numel_at(L, &c->shape) > numel_at(L, shape_of(L, v));
}

/* Whether elementwise v's two uses lie in one expression: both by
 * elementwise nodes, the first one's chain of single-use elementwise values
 * leading to the second (x * sigmoid(x), x * hardsigmoid(x), x * x). Then v
 * inlined at both points stays in one kernel, evaluated twice there instead
 * of stored and read back: an activation after a GEMM is its epilogue. */
enum { MEET_STEPS = 16 };
static bool uses_meet(const lowering *L, sj_value v) {
    const sj_graph *g = L->g;
    int second = L->v[v].next_consumer;
    if (!sj_op_is_elementwise(g->nodes[second].op)) return false;
    int w = L->v[v].consumer;
    for (int step = 0; step < MEET_STEPS; step++) {
        if (w == second) return true;
        const vinfo *wi = &L->v[w];
        if (!sj_op_is_elementwise(g->nodes[w].op) || wi->uses != 1 || wi->n_out) return false;
        w = wi->consumer;
    }
    return false;
}

static bool may_inline(lowering *L, sj_value v) {
    vinfo *vi = &L->v[v];
    const sj_node *nd = &L->g->nodes[v];
    vi->depth = 1;
    bool over_twice = false; /* an operand already evaluated twice: no doubling again */
    for (int i = 0; i < nd->n_inputs; i++) {
        if (nd->inputs[i] == SJ_NO_VALUE || L->v[nd->inputs[i]].home != HOME_INLINE) continue;
        if (L->v[nd->inputs[i]].depth + 1 > vi->depth) vi->depth = L->v[nd->inputs[i]].depth + 1;
        over_twice |= L->v[nd->inputs[i]].twice;
    }
    if (!L->o->fusion || vi->n_out || vi->need_load || vi->need_contig || vi->depth > MAX_INLINE_DEPTH ||
        expands(L, v))
        return false;
    if (vi->uses == 1) return true;
    vi->twice = vi->uses == 2 && !over_twice && sj_op_is_elementwise(nd->op) && uses_meet(L, v);
    return vi->twice;
}

/* A gather whose index is one constant (exporters pick q, k and v out of
 * a packed projection that way) reads a fixed slice: *k is that index,
 * counted from the end when negative and clamped like the gather. */
static bool const_gather_index(const lowering *L, const sj_node *nd, int64_t *k) {
    if (nd->op != SJ_OP_GATHER) return false;
    const sj_node *ix = &L->g->nodes[nd->inputs[1]];
    if (ix->op != SJ_OP_PARAM || sj_shape_numel(&ix->shape, 1) != 1 || ix->shape.rank > 1)
        return false;
    int64_t len = shape_of(L, nd->inputs[0])->dims[nd->attrs.axis];
    if (sj_dim_is_sym(len)) return false;
    int64_t v = ix->dtype == SJ_I64 ? ((const int64_t *)ix->bytes)[0] : ((const int32_t *)ix->bytes)[0];
    if (v < 0) v += len;
    *k = v < 0 ? 0 : v >= len ? len - 1 : v;
    return true;
}

/* That gather as a view of its (addressable) data: the axis becomes the
 * index's dims (none or one of size 1), fixed at k. */
static void const_gather_view(const lowering *L, const sj_node *nd, int64_t k, int64_t *strides,
                              int64_t *offset, int64_t *offset_n) {
    const vinfo *in = &L->v[nd->inputs[0]];
    int ax = nd->attrs.axis, ir = L->g->nodes[nd->inputs[1]].shape.rank;
    const sj_shape *ds = shape_of(L, nd->inputs[0]);
    for (int i = 0, o = 0; i < ds->rank; i++) {
        if (i == ax) {
            for (int j = 0; j < ir; j++) strides[o++] = 0;
            continue;
        }
        strides[o++] = in->strides[i];
    }
    *offset = in->offset + k * in->strides[ax];
    *offset_n = in->offset_n;
}

/* Slice nd of an addressable operand as a view: per result dim, the
 * operand's stride times the step; element 0 at start (+ start_n * n). */
static void slice_view(const lowering *L, const sj_node *nd, int64_t *strides, int64_t *offset,
                       int64_t *offset_n) {
    const vinfo *in = &L->v[nd->inputs[0]];
    *offset = in->offset;
    *offset_n = in->offset_n;
    for (int i = 0; i < nd->shape.rank; i++) {
        strides[i] = in->strides[i] * nd->attrs.step[i];
        *offset += nd->attrs.start[i] * in->strides[i];
        *offset_n += nd->attrs.start_n[i] * in->strides[i];
    }
}

/* Whether concat v is written by the concat that reads it: its one use,
 * along the same axis, so its operands go straight to their parts of that
 * buffer (a chain of two-operand concats stacking many parts). */
static bool concat_part(const lowering *L, sj_value v) {
    const sj_node *nd = &L->g->nodes[v];
    const vinfo *vi = &L->v[v];
    if (nd->op != SJ_OP_CONCAT || !L->o->fusion || vi->uses != 1 || vi->n_out || vi->need_load ||
        vi->need_contig)
        return false;
    const sj_node *c = &L->g->nodes[vi->consumer];
    return c->op == SJ_OP_CONCAT && c->attrs.axis == nd->attrs.axis;
}

static void decide_homes(lowering *L) {
    const sj_graph *g = L->g;
    for (int n = 0; n < g->n_nodes; n++) {
        vinfo *vi = &L->v[n];
        if (vi->home == HOME_DEAD) continue;
        const sj_node *nd = &g->nodes[n];
        vi->epi_core = -1;
        if (nd->op == SJ_OP_RESHAPE) {
            vi->home = HOME_VIEW;
            vi->buffer = -1;
            contiguous_strides(L, &nd->shape, vi->strides);
            vi->offset = L->v[nd->inputs[0]].offset;
            vi->offset_n = L->v[nd->inputs[0]].offset_n;
        } else if (nd->op == SJ_OP_SLICE) {
            if (L->o->fusion && vi->n_out == 0 && !vi->need_contig) {
                vi->home = HOME_VIEW;
                vi->buffer = -1;
                slice_view(L, nd, vi->strides, &vi->offset, &vi->offset_n);
            } else {
                vi->home = HOME_BUFFER;
            }
        } else if (const_gather_index(L, nd, &(int64_t){0}) && L->o->fusion && vi->n_out == 0 &&
                   !vi->need_contig) {
            int64_t k = 0;
            const_gather_index(L, nd, &k);
            vi->home = HOME_VIEW;
            vi->buffer = -1;
            const_gather_view(L, nd, k, vi->strides, &vi->offset, &vi->offset_n);
        } else if (nd->op == SJ_OP_TRILU || nd->op == SJ_OP_EXPAND || (L->win && L->win[n])) {
            vi->home = may_inline(L, n) ? HOME_INLINE : HOME_BUFFER;
        } else if (nd->op == SJ_OP_TRANSPOSE) {
            sj_value s = nd->inputs[0];
            if (addressable(L, s)) {
                int64_t st[SJ_MAX_RANK];
                for (int i = 0; i < nd->shape.rank; i++) st[i] = L->v[s].strides[nd->attrs.perm[i]];
                /* A matmul's b with n strided (k^T in q @ k^T) is worth one
                 * contiguous copy when enough rows reuse it: the register-
                 * tiled kernel needs n contiguous. */
                bool copy_for_matmul = vi->matmul_b_rows >= MATMUL_COPY_B_ROWS &&
                                       nd->shape.rank >= 1 && st[nd->shape.rank - 1] != 1;
                if (L->o->fusion && vi->n_out == 0 && !vi->need_contig && !copy_for_matmul) {
                    vi->home = HOME_VIEW;
                    memcpy(vi->strides, st, sizeof st);
                    vi->offset = L->v[s].offset;
                    vi->offset_n = L->v[s].offset_n;
                } else {
                    vi->home = HOME_BUFFER;
                }
            } else {
                vi->home = may_inline(L, n) ? HOME_INLINE : HOME_BUFFER;
            }
        } else if (sj_op_is_elementwise(nd->op)) {
            vi->home = may_inline(L, n) ? HOME_INLINE : HOME_BUFFER;
        } else if (concat_part(L, n)) {
            vi->home = HOME_INLINE;
        } else {
            vi->home = HOME_BUFFER;
        }
        if (vi->home == HOME_BUFFER) {
            contiguous_strides(L, &nd->shape, vi->strides);
            vi->offset = vi->offset_n = 0;
        }
    }
}

/* A core with one use absorbs the shape-keeping elementwise chain after it. */
static void fuse_epilogues(lowering *L) {
    const sj_graph *g = L->g;
    for (int c = 0; c < g->n_nodes; c++) {
        vinfo *ci = &L->v[c];
        if (ci->home != HOME_BUFFER || !is_core(g->nodes[c].op) || ci->uses != 1 || ci->n_out ||
            attention_root(L, c))
            continue;
        int u = ci->consumer;
        for (;;) {
            const sj_node *un = &g->nodes[u];
            if (!sj_op_is_elementwise(un->op) || !same_shape(&un->shape, &g->nodes[c].shape)) break;
            if (L->v[u].home == HOME_INLINE) {
                u = L->v[u].consumer;
                continue;
            }
            if (L->v[u].home == HOME_BUFFER && L->v[u].epi_core < 0) {
                L->v[u].epi_core = c;
                ci->home = HOME_EPI;
            }
            break;
        }
    }
}

/* ---- logical buffers ---- */

static sj_status new_buf(lowering *L, sj_slot_kind kind, int32_t index, const sj_node *nd, int *out) {
    const sj_shape *s = &nd->shape;
    SJ_TRY(grow(L->ctx, (void **)&L->bufs, &L->cap_bufs, L->n_bufs + 1, sizeof(lbuf)));
    lbuf *b = &L->bufs[L->n_bufs];
    b->kind = kind;
    b->index = index;
    b->dtype = nd->dtype;
    b->storage = SJ_PRECISION_FP32;
    b->bytes = numel_at(L, s) * (int64_t)sj_dtype_size(nd->dtype);
    if (kind == SJ_SLOT_PARAM && L->narrow && L->narrow[index]) {
        b->storage = L->o->precision;
        b->bytes = numel_at(L, s) * 2;
    }
    b->def = b->last = -1;
    b->slot = -1;
    *out = L->n_bufs++;
    return SJ_OK;
}

static int output_entry(const lowering *L, sj_value v, int after) {
    for (int i = after + 1; i < L->g->n_outputs; i++)
        if (L->g->outputs[i].value == v) return i;
    return -1;
}

static sj_status assign_buffers(lowering *L) {
    const sj_graph *g = L->g;
    for (int n = 0; n < g->n_nodes; n++) {
        vinfo *vi = &L->v[n];
        const sj_node *nd = &g->nodes[n];
        if (vi->home == HOME_VIEW) {
            vi->buffer = L->v[nd->inputs[0]].buffer;
            continue;
        }
        if (vi->home != HOME_BUFFER) continue;
        if (nd->op == SJ_OP_INPUT) {
            int idx = 0;
            while (g->inputs[idx] != n) idx++;
            SJ_TRY(new_buf(L, SJ_SLOT_INPUT, idx, nd, &vi->buffer));
        } else if (nd->op == SJ_OP_PARAM) {
            SJ_TRY(new_buf(L, SJ_SLOT_PARAM, n, nd, &vi->buffer));
        } else if (vi->n_out) {
            SJ_TRY(new_buf(L, SJ_SLOT_OUTPUT, output_entry(L, n, -1), nd, &vi->buffer));
        } else {
            SJ_TRY(new_buf(L, SJ_SLOT_ARENA, 0, nd, &vi->buffer));
        }
    }
    return SJ_OK;
}

/* ---- kernel construction ---- */

static sj_status kernel_buffer(lowering *L, int ki, int buf, int *local) {
    kbufs *kb = &L->kb[ki];
    for (int i = 0; i < kb->n; i++)
        if (kb->ids[i] == buf) {
            *local = i;
            return SJ_OK;
        }
    SJ_TRY(grow(L->ctx, (void **)&kb->ids, &kb->cap, kb->n + 1, sizeof(int)));
    kb->ids[kb->n] = buf;
    *local = kb->n++;
    L->kernels[ki].n_buffers = kb->n;
    if (L->bufs[buf].def < 0) L->bufs[buf].def = ki;
    L->bufs[buf].last = ki;
    return SJ_OK;
}

/* The result type of e from its operands; CONST, RANGE and CAST carry
 * theirs. */
static sj_dtype expr_dtype(const sj_kernel *k, const sj_kexpr *e) {
    switch (e->kind) {
    case SJ_KX_LOAD:
    case SJ_KX_GATHER: return k->loads[e->load].dtype;
    case SJ_KX_ACC: return SJ_F32;
    case SJ_KX_UNARY:
        if (e->op == SJ_OP_CAST) return e->dtype;
        if (e->op == SJ_OP_ISNAN || e->op == SJ_OP_ISINF) return SJ_BOOL;
        return k->exprs[e->a].dtype;
    case SJ_KX_BINARY: return sj_op_is_compare(e->op) ? SJ_BOOL : k->exprs[e->a].dtype;
    case SJ_KX_SELECT: return k->exprs[e->a].dtype;
    case SJ_KX_WHERE: return k->exprs[e->b].dtype;
    default: return e->dtype;
    }
}

static sj_status add_expr(lowering *L, int ki, sj_kexpr e, int *out) {
    sj_kernel *k = &L->kernels[ki];
    e.dtype = expr_dtype(k, &e);
    SJ_TRY(grow(L->ctx, (void **)&k->exprs, &k->cap_exprs, k->n_exprs + 1, sizeof(sj_kexpr)));
    k->exprs[k->n_exprs] = e;
    *out = k->n_exprs++;
    return SJ_OK;
}

static sj_status add_const(lowering *L, int ki, float value, int *out) {
    return add_expr(L, ki, (sj_kexpr){.kind = SJ_KX_CONST, .value = value, .a = -1, .b = -1}, out);
}

static sj_status add_binary(lowering *L, int ki, sj_op op, int a, int b, int *out) {
    return add_expr(L, ki, (sj_kexpr){.kind = SJ_KX_BINARY, .op = op, .a = a, .b = b}, out);
}

/* A load of a value of shape s laid out in logical buffer `buf` with the
 * given strides and offsets, whose dim i sits on space dim map[i] (-1: held
 * at index 0). Size-1 dims never move the address. */
static sj_status add_load_raw(lowering *L, int ki, int buf, const sj_shape *s,
                              const int64_t *strides, int64_t offset, int64_t offset_n,
                              const int *map, int *out) {
    sj_kload ld = {0};
    ld.dtype = L->bufs[buf].dtype;
    ld.storage = L->bufs[buf].storage;
    ld.weight = L->bufs[buf].kind == SJ_SLOT_PARAM;
    SJ_TRY(kernel_buffer(L, ki, buf, &ld.buffer));
    ld.offset = offset;
    ld.offset_n = offset_n;
    for (int i = 0; i < s->rank; i++)
        if (map[i] >= 0 && s->dims[i] != 1) ld.strides[map[i]] += strides[i];
    sj_kernel *k = &L->kernels[ki];
    SJ_TRY(grow(L->ctx, (void **)&k->loads, &k->cap_loads, k->n_loads + 1, sizeof(sj_kload)));
    k->loads[k->n_loads] = ld;
    int li = k->n_loads++;
    return add_expr(L, ki, (sj_kexpr){.kind = SJ_KX_LOAD, .load = li, .a = -1, .b = -1}, out);
}

static sj_status add_load(lowering *L, int ki, sj_value v, const int *map, int *out) {
    const vinfo *vi = &L->v[v];
    return add_load_raw(L, ki, vi->buffer, shape_of(L, v), vi->strides, vi->offset, vi->offset_n,
                        map, out);
}

/* map for operand u broadcast (right-aligned) into a value of rank r with map vmap. */
static void broadcast_map(const lowering *L, sj_value u, int r, const int *vmap, int *umap) {
    const sj_shape *s = shape_of(L, u);
    for (int i = 0; i < s->rank; i++) umap[i] = s->dims[i] == 1 ? -1 : vmap[i + r - s->rank];
}

static sj_status build_expr(lowering *L, int ki, sj_value v, const int *map, int core, int *out);

static sj_status core_value(lowering *L, int ki, sj_value c, const int *map, int *out) {
    const sj_node *nd = &L->g->nodes[c];
    SJ_TRY(add_expr(L, ki, (sj_kexpr){.kind = SJ_KX_ACC, .a = -1, .b = -1}, out));
    if (nd->op != SJ_OP_GEMM) return SJ_OK;
    /* alpha is the kernel's (acc already holds alpha * a @ b); beta * C is
     * epilogue. */
    if (nd->inputs[2] != SJ_NO_VALUE) {
        int cmap[SJ_MAX_RANK], ce, be;
        broadcast_map(L, nd->inputs[2], 2, map, cmap);
        SJ_TRY(build_expr(L, ki, nd->inputs[2], cmap, -1, &ce));
        SJ_TRY(add_const(L, ki, nd->attrs.beta, &be));
        SJ_TRY(add_binary(L, ki, SJ_OP_MUL, ce, be, &ce));
        SJ_TRY(add_binary(L, ki, SJ_OP_ADD, *out, ce, out));
    }
    return SJ_OK;
}

/* A load of d (mapped by dmap, held at 0 on axis ax) that the index
 * expression ie moves along ax: what gather and gather_elements share. */
static sj_status gather_load(lowering *L, int ki, sj_value d, int ax, const int *dmap, int ie,
                             int *out) {
    const sj_shape *ds = shape_of(L, d);
    int e;
    SJ_TRY(add_load(L, ki, d, dmap, &e));
    sj_kexpr g = L->kernels[ki].exprs[e];
    g.kind = SJ_KX_GATHER;
    g.a = ie;
    g.gstride = L->v[d].strides[ax];
    g.glen = ds->dims[ax]; /* a symbolic one's factor, negated: glen's encoding */
    L->kernels[ki].exprs[e] = g;
    *out = e;
    return SJ_OK;
}

/* Whether every entry of index t is a constant within [0, len), or len
 * itself where that reads the fill (kernel.h's gsafe). */
static bool table_in_range(const sj_node *t, int64_t len, bool fill) {
    if (t->op != SJ_OP_PARAM || !t->bytes || sj_dim_is_sym(len) || len < 1 ||
        (t->dtype != SJ_I32 && t->dtype != SJ_I64))
        return false;
    int64_t n = sj_shape_numel(&t->shape, 1), hi = fill ? len : len - 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = t->dtype == SJ_I32 ? ((const int32_t *)t->bytes)[i] : ((const int64_t *)t->bytes)[i];
        if (v < 0 || v > hi) return false;
    }
    return true;
}

/* out[pre, j.., post] = data[pre, clamp(idx[j..]), post]: a load of data
 * whose gathered axis moves by the index value. */
static sj_status build_gather(lowering *L, int ki, sj_value v, const int *map, int core, int *out) {
    const sj_node *nd = &L->g->nodes[v];
    sj_value d = input_of(L, v, 0), ix = nd->inputs[1];
    const sj_shape *ds = shape_of(L, d), *is = shape_of(L, ix);
    int ax = nd->attrs.axis, dmap[SJ_MAX_RANK], imap[SJ_MAX_RANK], ie;
    for (int i = 0; i < ds->rank; i++)
        dmap[i] = i < ax ? map[i] : i == ax ? -1 : map[i - 1 + is->rank];
    for (int j = 0; j < is->rank; j++) imap[j] = is->dims[j] == 1 ? -1 : map[ax + j];
    SJ_TRY(build_expr(L, ki, ix, imap, core, &ie));
    SJ_TRY(gather_load(L, ki, d, ax, dmap, ie, out));
    sj_kexpr *g = &L->kernels[ki].exprs[*out];
    if (d != nd->inputs[0]) { /* past the padding concat: its fill's value at index glen */
        g->gfill = true;
        g->value = (float)L->g->nodes[L->g->nodes[nd->inputs[0]].inputs[1]].attrs.delta;
    }
    g->gsafe = table_in_range(&L->g->nodes[ix], g->glen, g->gfill);
    return SJ_OK;
}

/* out[i] = data[i with its axis coordinate clamp(idx[i])]: a load of data
 * held at 0 on the axis, moved there by the index value. */
static sj_status build_gather_elements(lowering *L, int ki, const sj_node *nd, const int *map,
                                       int core, int *out) {
    sj_value d = nd->inputs[0], ix = nd->inputs[1];
    const sj_shape *ds = shape_of(L, d);
    int ax = nd->attrs.axis, dmap[SJ_MAX_RANK], ie;
    for (int i = 0; i < ds->rank; i++) dmap[i] = i == ax ? -1 : map[i];
    SJ_TRY(build_expr(L, ki, ix, map, core, &ie));
    return gather_load(L, ki, d, ax, dmap, ie, out);
}

/* out[b.., i.., r..] = data[b.., clamp(idx[b.., i.., 0..K-1]), r..]: a load
 * of data held at 0 on its K indexed axes, moved along the first by a load
 * of index column 0 and along each further one by a gather linked through
 * gnext, whose index is a load of that column (the indices' buffer at the
 * column's offset, its last dim held). */
static sj_status build_gather_nd(lowering *L, int ki, const sj_node *nd, const int *map, int *out) {
    sj_value d = nd->inputs[0], ix = nd->inputs[1];
    const sj_shape *ds = shape_of(L, d), *is = shape_of(L, ix);
    int b = nd->attrs.axis, q = is->rank, k = (int)is->dims[q - 1];
    int dmap[SJ_MAX_RANK], imap[SJ_MAX_RANK];
    for (int i = 0; i < ds->rank; i++) dmap[i] = i < b ? map[i] : i < b + k ? -1 : map[q - 1 + i - b - k];
    for (int j = 0; j < q - 1; j++) imap[j] = is->dims[j] == 1 ? -1 : map[j];
    imap[q - 1] = -1;
    const vinfo *iv = &L->v[ix];
    int last = -1;
    for (int j = 0; j < k; j++) {
        int ie, ge;
        SJ_TRY(add_load_raw(L, ki, iv->buffer, is, iv->strides, iv->offset + j * iv->strides[q - 1],
                            iv->offset_n, imap, &ie));
        if (j == 0) {
            SJ_TRY(gather_load(L, ki, d, b, dmap, ie, &ge));
            *out = ge;
        } else {
            sj_kexpr g = L->kernels[ki].exprs[*out];
            g.a = ie;
            g.gstride = L->v[d].strides[b + j];
            g.glen = ds->dims[b + j];
            g.gnext = 0;
            SJ_TRY(add_expr(L, ki, g, &ge));
            L->kernels[ki].exprs[last].gnext = ge;
        }
        last = ge;
    }
    return SJ_OK;
}

/* The definition of v (elementwise or transpose) evaluated in the kernel's space. */
static sj_status build_def(lowering *L, int ki, sj_value v, const int *map, int core, int *out) {
    const sj_node *nd = &L->g->nodes[v];
    int r = nd->shape.rank;
    int m0[SJ_MAX_RANK], m1[SJ_MAX_RANK], a, b;
    if (nd->op == SJ_OP_TRANSPOSE) {
        for (int i = 0; i < r; i++) m0[nd->attrs.perm[i]] = map[i];
        return build_expr(L, ki, nd->inputs[0], m0, core, out);
    }
    if (nd->op == SJ_OP_EXPAND) {
        broadcast_map(L, nd->inputs[0], r, map, m0);
        return build_expr(L, ki, nd->inputs[0], m0, core, out);
    }
    if (nd->op == SJ_OP_SLICE) { /* materialised: read the operand through the view */
        int64_t st[SJ_MAX_RANK], off, off_n;
        slice_view(L, nd, st, &off, &off_n);
        return add_load_raw(L, ki, L->v[nd->inputs[0]].buffer, &nd->shape, st, off, off_n, map,
                            out);
    }
    if (nd->op == SJ_OP_TRILU) {
        /* keep where col - row - k >= 0 (upper) or row - col + k >= 0 (lower) */
        SJ_TRY(build_expr(L, ki, nd->inputs[0], map, core, &a));
        SJ_TRY(add_expr(L, ki, (sj_kexpr){.kind = SJ_KX_CONST, .dtype = nd->dtype, .a = -1, .b = -1}, &b));
        sj_kexpr sel = {.kind = SJ_KX_SELECT, .a = a, .b = b, .load = -1};
        int64_t sign = nd->attrs.upper ? 1 : -1;
        sel.bias = -sign * nd->attrs.k;
        if (map[r - 1] >= 0) sel.coef[map[r - 1]] += sign;
        if (map[r - 2] >= 0) sel.coef[map[r - 2]] -= sign;
        return add_expr(L, ki, sel, out);
    }
    if (sj_op_is_unary(nd->op)) {
        broadcast_map(L, nd->inputs[0], r, map, m0);
        SJ_TRY(build_expr(L, ki, nd->inputs[0], m0, core, &a));
        return add_expr(L, ki,
                        (sj_kexpr){.kind = SJ_KX_UNARY, .op = nd->op, .a = a, .b = -1,
                                   .value = nd->attrs.alpha, .dtype = nd->dtype},
                        out);
    }
    if (nd->op == SJ_OP_WHERE) {
        int m2[SJ_MAX_RANK], c;
        broadcast_map(L, nd->inputs[0], r, map, m0);
        broadcast_map(L, nd->inputs[1], r, map, m1);
        broadcast_map(L, nd->inputs[2], r, map, m2);
        SJ_TRY(build_expr(L, ki, nd->inputs[0], m0, core, &a));
        SJ_TRY(build_expr(L, ki, nd->inputs[1], m1, core, &b));
        SJ_TRY(build_expr(L, ki, nd->inputs[2], m2, core, &c));
        return add_expr(L, ki, (sj_kexpr){.kind = SJ_KX_WHERE, .a = a, .b = b, .c = c}, out);
    }
    if (nd->op == SJ_OP_FILL)
        return add_expr(L, ki,
                        (sj_kexpr){.kind = SJ_KX_CONST, .dtype = nd->dtype, .a = -1, .b = -1,
                                   .value = (float)nd->attrs.delta,
                                   .ivalue = nd->dtype == SJ_F32 ? 0 : (int64_t)nd->attrs.delta},
                        out);
    if (nd->op == SJ_OP_RANGE)
        return add_expr(L, ki,
                        (sj_kexpr){.kind = SJ_KX_RANGE, .dtype = nd->dtype, .a = -1, .b = -1,
                                   .dim = map[0], .first = nd->attrs.first,
                                   .first_n = nd->attrs.start_n[0], .step = nd->attrs.delta},
                        out);
    int64_t gk;
    if (const_gather_index(L, nd, &gk)) { /* materialised: a plain load through the view */
        int64_t st[SJ_MAX_RANK], off, off_n;
        const_gather_view(L, nd, gk, st, &off, &off_n);
        return add_load_raw(L, ki, L->v[nd->inputs[0]].buffer, &nd->shape, st, off, off_n, map,
                            out);
    }
    if (nd->op == SJ_OP_GATHER) return build_gather(L, ki, v, map, core, out);
    if (nd->op == SJ_OP_GATHER_ELEMENTS) return build_gather_elements(L, ki, nd, map, core, out);
    if (nd->op == SJ_OP_GATHER_ND) return build_gather_nd(L, ki, nd, map, out);
    if (sj_op_is_binary(nd->op)) {
        broadcast_map(L, nd->inputs[0], r, map, m0);
        broadcast_map(L, nd->inputs[1], r, map, m1);
        SJ_TRY(build_expr(L, ki, nd->inputs[0], m0, core, &a));
        SJ_TRY(build_expr(L, ki, nd->inputs[1], m1, core, &b));
        return add_binary(L, ki, nd->op, a, b, out);
    }
    return sj_fail(L->ctx, SJ_E_INTERNAL, "lowering: node %d (%s) cannot be inlined", v,
                   sj_op_name(nd->op));
}

static sj_status build_expr(lowering *L, int ki, sj_value v, const int *map, int core, int *out) {
    if (v == core) return core_value(L, ki, v, map, out);
    if (addressable(L, v)) return add_load(L, ki, v, map, out);
    return build_def(L, ki, v, map, core, out);
}

static sj_status new_kernel(lowering *L, sj_kernel_kind kind, int out_buf, int *out) {
    SJ_TRY(grow(L->ctx, (void **)&L->kernels, &L->cap_kernels, L->n_kernels + 1, sizeof(sj_kernel)));
    SJ_TRY(grow(L->ctx, (void **)&L->kb, &L->cap_kb, L->n_kernels + 1, sizeof(kbufs)));
    int ki = L->n_kernels++;
    sj_kernel *k = &L->kernels[ki];
    memset(k, 0, sizeof *k);
    memset(&L->kb[ki], 0, sizeof L->kb[ki]);
    k->kind = kind;
    k->out_dtype = L->bufs[out_buf].dtype;
    k->prologue = k->epilogue = k->scale = k->bias = k->a = k->b = -1;
    k->alpha = 1.0f;
    snprintf(k->name, sizeof k->name, "%sk%d", L->o->prefix ? L->o->prefix : "", ki);
    int local;
    SJ_TRY(kernel_buffer(L, ki, out_buf, &local));
    *out = ki;
    return SJ_OK;
}

static void set_space_from_shape(lowering *L, sj_kernel *k, const sj_shape *s) {
    k->rank = s->rank;
    for (int i = 0; i < s->rank; i++) {
        k->dims[i] = dim_at(L, s->dims[i]);
        k->sym[i] = sj_dim_factor(s->dims[i]);
        k->sym_add[i] = sj_dim_offset(s->dims[i]);
    }
}

static void set_space_dim(lowering *L, sj_kernel *k, int d, int64_t dim) {
    k->dims[d] = dim_at(L, dim);
    k->sym[d] = sj_dim_factor(dim);
    k->sym_add[d] = sj_dim_offset(dim);
}

static void set_out_strides(lowering *L, sj_kernel *k, sj_value root, const int *map) {
    const sj_shape *s = shape_of(L, root);
    int64_t st[SJ_MAX_RANK];
    contiguous_strides(L, s, st);
    memset(k->out_strides, 0, sizeof k->out_strides);
    for (int i = 0; i < s->rank; i++)
        if (map[i] >= 0 && s->dims[i] != 1) k->out_strides[map[i]] += st[i];
}

static sj_status map_kernel(lowering *L, sj_value root, sj_value src, int out_buf, bool copy) {
    int ki, map[SJ_MAX_RANK];
    SJ_TRY(new_kernel(L, SJ_KK_MAP, out_buf, &ki));
    sj_kernel *k = &L->kernels[ki];
    set_space_from_shape(L, k, shape_of(L, root));
    for (int i = 0; i < SJ_MAX_RANK; i++) map[i] = i;
    set_out_strides(L, k, root, map);
    int e;
    if (copy) SJ_TRY(build_expr(L, ki, src, map, -1, &e));
    else SJ_TRY(build_def(L, ki, src, map, -1, &e));
    L->kernels[ki].epilogue = e;
    return SJ_OK;
}

/* Kernel for core c whose stored value is root (c itself, or the end of the
 * elementwise chain c's epilogue absorbed). */
static sj_status attention_kernel(lowering *L, sj_value root) {
    const sj_attention_match *m = &L->att[root];
    const sj_shape *ss = shape_of(L, root);
    int r = ss->rank, ki, e;
    SJ_TRY(new_kernel(L, SJ_KK_ATTENTION, L->v[root].buffer, &ki));
    sj_kernel *k = &L->kernels[ki];
    k->rank = 5;
    for (int d = 0; d < 5; d++) k->dims[d] = 1;
    k->reduced = 1u << 3;
    k->alpha = m->scale;
    k->att[3] = -1;
    int qmap[SJ_MAX_RANK], kmap[SJ_MAX_RANK], vmap[SJ_MAX_RANK], smap[SJ_MAX_RANK], mmap[SJ_MAX_RANK];
    for (int i = 0; i < r - 2; i++) {
        int d = 2 - (r - 2) + i;
        qmap[i] = kmap[i] = vmap[i] = smap[i] = d;
        set_space_dim(L, k, d, ss->dims[i]);
    }
    const sj_shape *qs = shape_of(L, m->q), *vs = shape_of(L, m->v);
    set_space_dim(L, k, 2, qs->dims[r - 2]);
    set_space_dim(L, k, 3, vs->dims[r - 2]);
    set_space_dim(L, k, 4, vs->dims[r - 1]);
    k->att_dk = qs->dims[r - 1];
    qmap[r - 2] = 2, qmap[r - 1] = 4;
    kmap[r - 2] = 4, kmap[r - 1] = 3;
    vmap[r - 2] = 3, vmap[r - 1] = 4;
    smap[r - 2] = 2, smap[r - 1] = 3;
    sj_value ops[4] = {m->q, m->kt, m->v, m->mask};
    const int *maps[4] = {qmap, kmap, vmap, mmap};
    for (int j = 0; j < 4; j++) {
        if (ops[j] == SJ_NO_VALUE) continue;
        if (j == 3) broadcast_map(L, m->mask, r, smap, mmap);
        if (!addressable(L, ops[j]))
            return sj_fail(L->ctx, SJ_E_INTERNAL, "lowering: attention operand is not a buffer");
        SJ_TRY(add_load(L, ki, ops[j], maps[j], &e));
        L->kernels[ki].att[j] = L->kernels[ki].exprs[e].load;
    }
    int omap[SJ_MAX_RANK];
    memcpy(omap, qmap, sizeof omap);
    set_out_strides(L, &L->kernels[ki], root, omap);
    return SJ_OK;
}

static sj_status core_kernel(lowering *L, sj_value c, sj_value root) {
    if (attention_root(L, c)) return attention_kernel(L, c);
    const sj_node *nd = &L->g->nodes[c];
    static const sj_kernel_kind kinds[] = {[SJ_OP_SOFTMAX] = SJ_KK_SOFTMAX,
                                           [SJ_OP_LOG_SOFTMAX] = SJ_KK_LOG_SOFTMAX,
                                           [SJ_OP_LAYERNORM] = SJ_KK_LAYERNORM};
    sj_kernel_kind kind = sj_op_is_reduce(nd->op)                          ? SJ_KK_REDUCE
                          : (nd->op == SJ_OP_MATMUL || nd->op == SJ_OP_GEMM) ? SJ_KK_MATMUL
                                                                            : kinds[nd->op];
    int ki, e;
    SJ_TRY(new_kernel(L, kind, L->v[root].buffer, &ki));
    sj_kernel *k = &L->kernels[ki];
    int id[SJ_MAX_RANK] = {0, 1, 2, 3, 4, 5}, omap[SJ_MAX_RANK];
    const sj_shape *xs = shape_of(L, nd->inputs[0]);
    if (kind == SJ_KK_REDUCE) {
        set_space_from_shape(L, k, xs);
        k->reduced = nd->attrs.axes;
        k->red_op = nd->op;
        for (int i = 0, o = 0; i < xs->rank; i++) {
            bool red = (k->reduced >> i) & 1;
            if (nd->attrs.keepdims) omap[i] = red ? -1 : i;
            else if (!red) omap[o++] = i;
        }
        SJ_TRY(build_expr(L, ki, nd->inputs[0], id, -1, &e));
        L->kernels[ki].prologue = e;
    } else if (kind == SJ_KK_MATMUL) {
        const sj_shape *as = xs, *bs = shape_of(L, nd->inputs[1]), *cs = &nd->shape;
        int amap[SJ_MAX_RANK], bmap[SJ_MAX_RANK];
        k->rank = 5;
        for (int d = 0; d < 5; d++) k->dims[d] = 1;
        k->reduced = 1u << 4;
        if (nd->op == SJ_OP_GEMM) {
            k->alpha = nd->attrs.alpha;
            bool ta = nd->attrs.trans_a, tb = nd->attrs.trans_b;
            amap[ta ? 1 : 0] = 2;
            amap[ta ? 0 : 1] = 4;
            bmap[tb ? 1 : 0] = 4;
            bmap[tb ? 0 : 1] = 3;
            set_space_dim(L, k, 2, as->dims[ta ? 1 : 0]);
            set_space_dim(L, k, 4, as->dims[ta ? 0 : 1]);
            set_space_dim(L, k, 3, bs->dims[tb ? 0 : 1]);
            omap[0] = 2;
            omap[1] = 3;
        } else {
            int ra = as->rank, rb = bs->rank, rc = cs->rank;
            int nb = rc - (ra >= 2) - (rb >= 2);
            if (nb > 2)
                return sj_fail(L->ctx, SJ_E_UNSUPPORTED,
                               "lowering: matmul node %d has %d batch dims; kernels take at "
                               "most 2",
                               c, nb);
            for (int j = 0; j < nb; j++) {
                omap[j] = 2 - nb + j;
                set_space_dim(L, k, 2 - nb + j, cs->dims[j]);
            }
            int o = nb;
            if (ra >= 2) {
                omap[o++] = 2;
                set_space_dim(L, k, 2, as->dims[ra - 2]);
            }
            if (rb >= 2) {
                omap[o++] = 3;
                set_space_dim(L, k, 3, bs->dims[rb - 1]);
            }
            set_space_dim(L, k, 4, as->dims[ra - 1]);
            for (int i = 0; i < ra - 2; i++) amap[i] = 2 - (ra - 2) + i;
            if (ra >= 2) amap[ra - 2] = 2;
            amap[ra - 1] = 4;
            for (int i = 0; i < rb - 2; i++) bmap[i] = 2 - (rb - 2) + i;
            if (rb >= 2) {
                bmap[rb - 2] = 4;
                bmap[rb - 1] = 3;
            } else {
                bmap[0] = 4;
            }
        }
        int ea, eb;
        SJ_TRY(build_expr(L, ki, nd->inputs[0], amap, -1, &ea));
        SJ_TRY(build_expr(L, ki, nd->inputs[1], bmap, -1, &eb));
        k = &L->kernels[ki];
        if (k->exprs[ea].kind != SJ_KX_LOAD || k->exprs[eb].kind != SJ_KX_LOAD)
            return sj_fail(L->ctx, SJ_E_INTERNAL, "lowering: matmul operand is not a buffer");
        k->a = k->exprs[ea].load;
        k->b = k->exprs[eb].load;
    } else {
        set_space_from_shape(L, k, xs);
        for (int i = 0; i < xs->rank; i++) omap[i] = i;
        k->reduced = kind == SJ_KK_LAYERNORM ? ~0u << nd->attrs.axis & ((1u << xs->rank) - 1)
                                             : 1u << nd->attrs.axis;
        SJ_TRY(build_expr(L, ki, nd->inputs[0], id, -1, &e));
        L->kernels[ki].prologue = e;
        if (kind == SJ_KK_LAYERNORM) {
            L->kernels[ki].epsilon = nd->attrs.epsilon;
            for (int j = 1; j <= 2; j++) {
                if (nd->inputs[j] == SJ_NO_VALUE) continue;
                int m[SJ_MAX_RANK];
                broadcast_map(L, nd->inputs[j], xs->rank, id, m);
                SJ_TRY(build_expr(L, ki, nd->inputs[j], m, -1, &e));
                if (j == 1) L->kernels[ki].scale = e;
                else L->kernels[ki].bias = e;
            }
        }
    }
    set_out_strides(L, &L->kernels[ki], root, omap);
    if (root == c) SJ_TRY(core_value(L, ki, c, omap, &e));
    else SJ_TRY(build_def(L, ki, root, omap, c, &e));
    L->kernels[ki].epilogue = e;
    return SJ_OK;
}

/* One kernel per operand of concat v, writing it into its part of
 * `buffer` (strides st, v's part from element `base`), the operand inlined
 * where it could be; an operand that is a concat part (concat_part) the
 * same way, into its own part. */
static sj_status concat_parts(lowering *L, sj_value v, int buffer, const int64_t *st, int64_t base,
                              int64_t base_n) {
    const sj_node *nd = &L->g->nodes[v];
    int ax = nd->attrs.axis, id[SJ_MAX_RANK];
    int64_t along = 0, along_n = 0; /* where the part starts on the axis: along + along_n * n */
    for (int i = 0; i < SJ_MAX_RANK; i++) id[i] = i;
    for (int j = 0; j < 2; j++) {
        sj_value u = nd->inputs[j];
        const sj_shape *us = shape_of(L, u);
        int64_t at = base + along * st[ax], at_n = base_n + along_n * st[ax];
        int64_t d = us->dims[ax];
        along += sj_dim_is_sym(d) ? sj_dim_offset(d) : d;
        along_n += sj_dim_factor(d);
        if (L->g->nodes[u].op == SJ_OP_CONCAT && L->v[u].home == HOME_INLINE) {
            SJ_TRY(concat_parts(L, u, buffer, st, at, at_n));
            continue;
        }
        int ki, e;
        SJ_TRY(new_kernel(L, SJ_KK_MAP, buffer, &ki));
        sj_kernel *k = &L->kernels[ki];
        set_space_from_shape(L, k, us);
        for (int i = 0; i < us->rank; i++) k->out_strides[i] = us->dims[i] != 1 ? st[i] : 0;
        k->out_offset = at;
        k->out_offset_n = at_n;
        SJ_TRY(build_expr(L, ki, u, id, -1, &e));
        L->kernels[ki].epilogue = e;
    }
    return SJ_OK;
}

static sj_status concat_kernels(lowering *L, sj_value v) {
    int64_t st[SJ_MAX_RANK];
    contiguous_strides(L, &L->g->nodes[v].shape, st);
    return concat_parts(L, v, L->v[v].buffer, st, 0, 0);
}

static sj_status build_kernels(lowering *L) {
    const sj_graph *g = L->g;
    for (int n = 0; n < g->n_nodes; n++) {
        vinfo *vi = &L->v[n];
        const sj_node *nd = &g->nodes[n];
        if (vi->home == HOME_BUFFER && nd->op != SJ_OP_INPUT && nd->op != SJ_OP_PARAM) {
            if (vi->epi_core >= 0) SJ_TRY(core_kernel(L, vi->epi_core, n));
            else if (is_core(nd->op)) SJ_TRY(core_kernel(L, n, n));
            else if (nd->op == SJ_OP_CONCAT) SJ_TRY(concat_kernels(L, n));
            else SJ_TRY(map_kernel(L, n, n, vi->buffer, false));
        }
        if (!vi->n_out) continue;
        /* Outputs that no kernel of theirs writes (leaves, views, repeats) get a copy. */
        bool written = vi->home == HOME_BUFFER && nd->op != SJ_OP_INPUT && nd->op != SJ_OP_PARAM;
        for (int j = output_entry(L, n, -1); j >= 0; j = output_entry(L, n, j)) {
            if (written && L->bufs[vi->buffer].kind == SJ_SLOT_OUTPUT &&
                L->bufs[vi->buffer].index == j)
                continue;
            int ob;
            SJ_TRY(new_buf(L, SJ_SLOT_OUTPUT, j, nd, &ob));
            SJ_TRY(map_kernel(L, n, n, ob, true));
        }
    }
    return SJ_OK;
}

/* ---- arena: first fit over live intervals ---- */

static int64_t align64(int64_t x) { return (x + 63) & ~(int64_t)63; }

static void assign_arena(lowering *L, int64_t *total, int64_t *no_reuse) {
    *total = *no_reuse = 0;
    for (int b = 0; b < L->n_bufs; b++) {
        lbuf *bb = &L->bufs[b];
        if (bb->kind != SJ_SLOT_ARENA || bb->def < 0) continue;
        int64_t size = align64(bb->bytes);
        *no_reuse += size;
        /* Candidates: 0 and the end of every interval live at bb's definition. */
        int64_t best = -1;
        for (int c = -1; c < b; c++) {
            int64_t off = 0;
            if (c >= 0) {
                const lbuf *cb = &L->bufs[c];
                if (cb->kind != SJ_SLOT_ARENA || cb->def < 0 || cb->last < bb->def) continue;
                off = cb->offset + align64(cb->bytes);
            }
            if (best >= 0 && off >= best) continue;
            bool fits = true;
            for (int o = 0; o < b && fits; o++) {
                const lbuf *ob = &L->bufs[o];
                if (ob->kind != SJ_SLOT_ARENA || ob->def < 0 || ob->last < bb->def) continue;
                fits = off + size <= ob->offset || ob->offset + align64(ob->bytes) <= off;
            }
            if (fits) best = off;
        }
        bb->offset = best;
        if (best + size > *total) *total = best + size;
    }
}

/* ---- plan ---- */

/* A sub-batch's rows (plan.h's sub_rows): the most rows, a power of two,
 * whose share of the largest intermediate buffer stays within
 * SUB_BATCH_BYTES, so a launch's output for a sub-batch is still in cache
 * (L2 and a share of L3) when the next launch reads it; 0 (whole) where
 * the graph's rows are not independent, or the bucket takes no more rows
 * than that anyway. Measured on Zen 4 (1 MiB L2, 32 MiB L3), one thread,
 * sub-batches of 1 to 8 rows at batch 32: MobileNetV3-small (0.9 MB a row
 * in its largest buffer, the first expanding 1x1 conv's) ran fastest by
 * 2 and 4 rows, 8 barely faster than whole; ResNet-18 (7.4 MB of its
 * stem's taps) by one. */
#define SUB_BATCH_BYTES ((int64_t)4 << 20)
static sj_status sub_batch_rows(const lowering *L, int64_t *out) {
    const sj_graph *g = L->g;
    bool independent = false;
    *out = 0;
    if (!g->sym_name || L->E < 2) return SJ_OK;
    SJ_TRY(sj_graph_rows_independent(g, &independent, NULL, 0));
    if (!independent) return SJ_OK;
    int64_t row_bytes = 0; /* at most: a buffer without the symbolic dim counts as one too */
    for (int b = 0; b < L->n_bufs; b++) {
        const lbuf *bb = &L->bufs[b];
        if (bb->kind == SJ_SLOT_ARENA && bb->def >= 0 && bb->bytes / L->E > row_bytes)
            row_bytes = bb->bytes / L->E;
    }
    int64_t rows = 1;
    while (rows < L->E && 2 * rows * row_bytes <= SUB_BATCH_BYTES) rows *= 2;
    *out = rows < L->E ? rows : 0;
    return SJ_OK;
}

static sj_status make_plan(lowering *L, sj_lowered *out) {
    sj_ctx *ctx = L->ctx;
    sj_launch_plan *p = &out->plan;
    p->extent = L->E;
    assign_arena(L, &p->arena_bytes, &out->arena_bytes_no_reuse);
    SJ_TRY(sub_batch_rows(L, &p->sub_rows));
    int n_slots = 0, n_ls = 0, n_words = 0;
    for (int b = 0; b < L->n_bufs; b++)
        if (L->bufs[b].def >= 0) L->bufs[b].slot = n_slots++;
    for (int k = 0; k < L->n_kernels; k++) {
        n_ls += L->kb[k].n;
        n_words += 1 + L->kernels[k].rank;
    }
    p->kernels = sj_calloc(ctx, (size_t)L->n_kernels, sizeof *p->kernels);
    p->slots = sj_calloc(ctx, (size_t)n_slots, sizeof *p->slots);
    p->launches = sj_calloc(ctx, (size_t)L->n_kernels, sizeof *p->launches);
    p->launch_slots = sj_calloc(ctx, (size_t)n_ls, sizeof *p->launch_slots);
    p->words = sj_calloc(ctx, (size_t)n_words, sizeof *p->words);
    if (!p->kernels || !p->slots || !p->launches || !p->launch_slots || !p->words)
        return sj_fail(ctx, SJ_E_NOMEM, "lowering: out of memory for the launch plan");
    for (int b = 0; b < L->n_bufs; b++) {
        const lbuf *bb = &L->bufs[b];
        if (bb->slot < 0) continue;
        p->slots[bb->slot] = (sj_buffer_slot){.kind = bb->kind, .index = bb->index,
                                              .offset = bb->kind == SJ_SLOT_ARENA ? bb->offset : 0,
                                              .bytes = bb->bytes};
        if (bb->kind == SJ_SLOT_PARAM) p->slots[bb->slot].offset = bb->storage;
    }
    p->n_slots = n_slots;
    for (int k = 0; k < L->n_kernels; k++) {
        const sj_kernel *kk = &L->kernels[k];
        memcpy(p->kernels[k].name, kk->name, sizeof kk->name);
        sj_launch *la = &p->launches[k];
        la->kernel = k;
        la->first_slot = p->n_launch_slots;
        la->n_slots = L->kb[k].n;
        for (int i = 0; i < L->kb[k].n; i++)
            p->launch_slots[p->n_launch_slots++] = L->bufs[L->kb[k].ids[i]].slot;
        /* Words: the space at E, for executors that size launches from it. */
        la->first_word = p->n_words;
        la->n_words = 1 + kk->rank;
        p->words[p->n_words++] = kk->rank;
        for (int d = 0; d < kk->rank; d++) p->words[p->n_words++] = kk->dims[d];
    }
    p->n_kernels = p->n_launches = L->n_kernels;
    return SJ_OK;
}

static void free_lowering(lowering *L) {
    sj_free(L->ctx, L->narrow);
    sj_free(L->ctx, L->v);
    sj_free(L->ctx, L->att);
    sj_free(L->ctx, L->win);
    sj_free(L->ctx, L->pad);
    sj_free(L->ctx, L->bufs);
    if (L->kb)
        for (int k = 0; k < L->n_kernels; k++) sj_free(L->ctx, L->kb[k].ids);
    sj_free(L->ctx, L->kb);
}

void sj__lowered_destroy(sj_lowered *l) {
    if (!l) return;
    for (int k = 0; k < l->n_kernels; k++) {
        sj_free(l->ctx, l->kernels[k].exprs);
        sj_free(l->ctx, l->kernels[k].loads);
    }
    sj_free(l->ctx, l->kernels);
    sj__plan_free(l->ctx, &l->plan);
    sj_free(l->ctx, l);
}

static sj_status mark_narrow(lowering *L) {
    L->narrow = sj_calloc(L->ctx, (size_t)(L->g->n_nodes ? L->g->n_nodes : 1), sizeof *L->narrow);
    if (!L->narrow || sj__precision_mark(L->g, L->o->precision, L->narrow, NULL) < 0)
        return sj_fail(L->ctx, SJ_E_NOMEM, "lowering: out of memory");
    return SJ_OK;
}

/* The value whose buffer v is read from when v is a view (layout ops and
 * gathers read their operand in place). */
static sj_value view_root(const sj_graph *g, sj_value v) {
    for (;;) {
        const sj_node *nd = &g->nodes[v];
        if (nd->op != SJ_OP_TRANSPOSE && nd->op != SJ_OP_RESHAPE && nd->op != SJ_OP_SLICE &&
            nd->op != SJ_OP_EXPAND && nd->op != SJ_OP_GATHER)
            return v;
        v = nd->inputs[0];
    }
}

/* The fused attention kernel reads its operands as float32 through raw
 * pointers: a chain with a narrowed param among them stays unfused (its
 * matmuls then read the param through widening loads). */
static void drop_narrow_attention(lowering *L) {
    const sj_graph *g = L->g;
    for (int n = 0; n < g->n_nodes; n++) {
        const sj_attention_match *m = &L->att[n];
        if (m->root != n) continue;
        sj_value ops[4] = {m->q, m->kt, m->v, m->mask};
        bool narrow = false;
        for (int i = 0; i < 4; i++)
            if (ops[i] != SJ_NO_VALUE && L->narrow[view_root(g, ops[i])]) narrow = true;
        if (!narrow) continue;
        for (int j = 0; j < g->n_nodes; j++)
            if (L->att[j].root == n) L->att[j].root = SJ_NO_VALUE;
    }
}

sj_status sj__lower(const sj_graph *g, int64_t extent, const sj_lower_options *o, sj_lowered **out) {
    sj_ctx *ctx = g->ctx;
    *out = NULL;
    if (g->sym_name && (extent < 1 || extent > SJ_MAX_EXTENT))
        return sj_fail(ctx, SJ_E_OUT_OF_RANGE, "lowering: extent %lld outside [1, %lld]",
                       (long long)extent, (long long)SJ_MAX_EXTENT);
    if (!g->n_outputs) return sj_fail(ctx, SJ_E_INVALID_ARG, "lowering: the graph has no outputs");
    lowering L = {.ctx = ctx, .g = g, .E = g->sym_name ? extent : 1, .o = o};
    for (int n = 0; n < g->n_nodes; n++) {
        if (numel_at(&L, &g->nodes[n].shape) > SJ_MAX_ELEMENTS / (int64_t)sizeof(float))
            return sj_fail(ctx, SJ_E_OUT_OF_RANGE, "lowering: value %d too large at extent %lld", n,
                           (long long)extent);
        const sj_node *nd = &g->nodes[n];
        if (nd->op == SJ_OP_SLICE && g->sym_name && L.E > sj__slice_extent_limit(g, nd))
            return sj_fail(ctx, SJ_E_OUT_OF_RANGE,
                           "lowering: value %d (slice%s%s) reads past its operand at extent %lld "
                           "(it fits up to %lld)",
                           n, nd->name ? " " : "", nd->name ? nd->name : "", (long long)extent,
                           (long long)sj__slice_extent_limit(g, nd));
    }
    sj_lowered *l = sj_calloc(ctx, 1, sizeof *l);
    L.v = sj_calloc(ctx, (size_t)g->n_nodes, sizeof *L.v);
    if (!l || !L.v) {
        sj_free(ctx, l);
        sj_free(ctx, L.v);
        return sj_fail(ctx, SJ_E_NOMEM, "lowering: out of memory");
    }
    l->ctx = ctx;
    sj_status st = SJ_OK;
    if (o->precision != SJ_PRECISION_FP32) st = mark_narrow(&L);
    if (st == SJ_OK && o->fusion && o->attention)
        st = sj__attention_find(g, L.E, o->attention_min_scores > 0 ? o->attention_min_scores : SJ_ATTENTION_MIN_SCORES,
                               &L.att);
    if (st == SJ_OK && L.att && L.narrow) drop_narrow_attention(&L);
    if (st == SJ_OK && o->fusion && o->windows) st = sj__window_find(g, &L.win, &L.pad);
    if (st != SJ_OK) {
        sj_free(ctx, l);
        sj_free(ctx, L.v);
        sj_free(ctx, L.narrow);
        sj_free(ctx, L.att);
        sj_free(ctx, L.win);
        sj_free(ctx, L.pad);
        return st;
    }
    count_uses(&L);
    decide_homes(&L);
    if (o->fusion) fuse_epilogues(&L);
    st = assign_buffers(&L);
    if (st == SJ_OK) st = build_kernels(&L);
    l->kernels = L.kernels;
    l->n_kernels = L.n_kernels;
    if (st == SJ_OK) st = make_plan(&L, l);
    free_lowering(&L);
    /* Repeated layers lower to the same kernels: each is emitted once. */
    if (st == SJ_OK) st = sj__lowered_share_kernels(l);
    if (st != SJ_OK) {
        sj__lowered_destroy(l);
        return st;
    }
    *out = l;
    return SJ_OK;
}

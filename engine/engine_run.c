/* sj_engine_run: named tensors in, checked against the model (names,
 * dtypes, shapes), N read off the symbolic dims, the bucket's executable
 * run at N, named tensors out. Every check happens before anything is
 * compiled or allocated, and each failure names the input. */
#include "engine/engine_impl.h"
#include "ir/graph_impl.h"

#include <stdio.h>
#include <string.h>

/* Small models keep their per-run arrays on the stack: the hit path then
 * allocates nothing but the outputs it returns. */
#define RUN_STACK_VALUES 16

static void format_tensor_shape(const sj_tensor *t, char *buf, size_t cap) {
    sj_shape s = {.rank = t->rank};
    memcpy(s.dims, t->dims, sizeof s.dims);
    sj_shape_format(&s, NULL, buf, cap);
}

static sj_status no_such_input(const sj_engine *e, const char *name) {
    char known[512] = "";
    size_t used = 0;
    for (int k = 0; k < e->n_inputs && used < sizeof known; k++) {
        int n =
            snprintf(known + used, sizeof known - used, "%s%s", k ? ", " : "", e->inputs[k].name);
        if (n > 0) used += (size_t)n;
    }
    return sj_fail(e->ctx, SJ_E_INVALID_ARG,
                   "engine: run: the model has no input '%s' (its inputs: %s)", name,
                   e->n_inputs ? known : "none");
}

/* The model's shape for d and the tensor's, formatted for a message:
 * only on a failure path, since formatting costs more than a small run. */
typedef struct shape_text {
    char want[128], got[128];
} shape_text;

static const shape_text *shapes_of(const sj_engine *e, const sj_value_desc *d, const sj_tensor *t,
                                   shape_text *s) {
    sj_shape_format(&d->shape, sj_graph_symbol(e->g), s->want, sizeof s->want);
    format_tensor_shape(t, s->got, sizeof s->got);
    return s;
}

/* One input against its description; *n / *n_from carry the symbolic
 * dim's value and the input that set it first. */
static sj_status check_input(const sj_engine *e, const sj_value_desc *d, const sj_tensor *t,
                             bool need_data, int64_t *n, const char **n_from) {
    const char *sym = sj_graph_symbol(e->g);
    shape_text s;
    if (t->dtype != d->dtype)
        return sj_fail(e->ctx, SJ_E_INVALID_ARG,
                       "engine: run: input '%s' is %s, the model wants %s", d->name,
                       sj_dtype_name(t->dtype) ? sj_dtype_name(t->dtype) : "an unknown dtype",
                       sj_dtype_name(d->dtype));
    if (t->rank < 0 || t->rank > SJ_MAX_RANK) {
        sj_shape_format(&d->shape, sym, s.want, sizeof s.want);
        return sj_fail(e->ctx, SJ_E_SHAPE,
                       "engine: run: input '%s' has rank %d, the model wants %s", d->name, t->rank,
                       s.want);
    }
    if (t->rank != d->shape.rank) {
        shapes_of(e, d, t, &s);
        return sj_fail(e->ctx, SJ_E_SHAPE,
                       "engine: run: input '%s' has shape %s, the model wants %s", d->name, s.got,
                       s.want);
    }
    for (int k = 0; k < t->rank; k++) {
        if (sj_dim_is_sym(d->shape.dims[k]) && d->shape.dims[k] != SJ_DIM_SYM)
            continue; /* k * N + c: checked once N is known (check_forms) */
        if (d->shape.dims[k] != SJ_DIM_SYM) {
            if (t->dims[k] != d->shape.dims[k]) {
                shapes_of(e, d, t, &s);
                return sj_fail(e->ctx, SJ_E_SHAPE,
                               "engine: run: input '%s' has shape %s, the model wants %s (dim %d)",
                               d->name, s.got, s.want, k);
            }
            continue;
        }
        if (t->dims[k] < 1 || t->dims[k] > SJ_MAX_EXTENT) {
            shapes_of(e, d, t, &s);
            return sj_fail(e->ctx, SJ_E_SHAPE,
                           "engine: run: input '%s' has shape %s: %s = %lld is outside 1..%lld",
                           d->name, s.got, sym, (long long)t->dims[k], (long long)SJ_MAX_EXTENT);
        }
        if (*n > 0 && t->dims[k] != *n) {
            shapes_of(e, d, t, &s);
            return sj_fail(
                e->ctx, SJ_E_SHAPE,
                "engine: run: input '%s' has shape %s, so %s = %lld, but input '%s' sets %s = %lld",
                d->name, s.got, sym, (long long)t->dims[k], *n_from, sym, (long long)*n);
        }
        if (*n == 0) *n_from = d->name; /* the first input carrying N is the one named */
        *n = t->dims[k];
    }
    if (need_data && !t->bytes && sj_tensor_numel(t) > 0)
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: run: input '%s' has no data", d->name);
    return SJ_OK;
}

/* Input dims k * N + c: N from the first of them when no input carries N
 * itself, then each one equal to k * N + c. */
static sj_status check_forms(const sj_engine *e, const sj_tensor *ordered, int64_t *n,
                             const char **n_from) {
    const char *sym = sj_graph_symbol(e->g);
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < e->n_inputs; i++) {
            const sj_value_desc *d = &e->inputs[i];
            for (int k = 0; k < d->shape.rank; k++) {
                int64_t w = d->shape.dims[k], f = sj_dim_factor(w), c = sj_dim_offset(w);
                if (!sj_dim_is_sym(w) || w == SJ_DIM_SYM) continue;
                int64_t got = ordered[i].dims[k];
                char form[96];
                sj_dim_format(w, sym, form, sizeof form);
                if (pass == 0 && *n == 0) {
                    if (got <= c || (got - c) % f || (got - c) / f > SJ_MAX_EXTENT)
                        return sj_fail(e->ctx, SJ_E_SHAPE,
                                       "engine: run: input '%s' dim %d is %lld, which is %s for no "
                                       "%s in 1..%lld",
                                       d->name, k, (long long)got, form, sym,
                                       (long long)SJ_MAX_EXTENT);
                    *n = (got - c) / f;
                    *n_from = d->name;
                }
                if (pass == 1 && got != f * *n + c)
                    return sj_fail(e->ctx, SJ_E_SHAPE,
                                   "engine: run: input '%s' dim %d is %lld, but %s = %lld (from "
                                   "input '%s') makes %s %lld",
                                   d->name, k, (long long)got, sym, (long long)*n, *n_from, form,
                                   (long long)(f * *n + c));
            }
        }
    return SJ_OK;
}

/* Puts the caller's tensors in the graph's input order and finds N. */
static sj_status bind(const sj_engine *e, const sj_named_tensor *inputs, int n_inputs, bool need_data,
                      sj_tensor *ordered, int64_t *n) {
    const char *n_from = NULL;
    *n = 0;
    bool seen_stack[RUN_STACK_VALUES] = {false};
    bool *seen = seen_stack;
    if (e->n_inputs > RUN_STACK_VALUES &&
        !(seen = sj_calloc(e->ctx, (size_t)e->n_inputs, sizeof *seen)))
        return sj_fail(e->ctx, SJ_E_NOMEM, "engine: run: out of memory");
    sj_status st = SJ_OK;
    for (int k = 0; st == SJ_OK && k < n_inputs; k++) {
        const char *name = inputs[k].name ? inputs[k].name : "";
        int i = sj_graph_find_input(e->g, name);
        if (i < 0)
            st = no_such_input(e, name);
        else if (seen[i])
            st = sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: run: input '%s' given twice", name);
        else {
            seen[i] = true;
            ordered[i] = inputs[k].tensor;
        }
    }
    for (int i = 0; st == SJ_OK && i < e->n_inputs; i++)
        if (!seen[i])
            st = sj_fail(e->ctx, SJ_E_INVALID_ARG,
                         "engine: run: input '%s' not given (%d of %d inputs given)",
                         e->inputs[i].name, n_inputs, e->n_inputs);
    /* In graph order, so the first input carrying N is the one named when
     * another disagrees. */
    for (int i = 0; st == SJ_OK && i < e->n_inputs; i++)
        st = check_input(e, &e->inputs[i], &ordered[i], need_data, n, &n_from);
    if (st == SJ_OK) st = check_forms(e, ordered, n, &n_from);
    if (seen != seen_stack) sj_free(e->ctx, seen);
    /* No input carries the symbolic dim: the model has one size. */
    if (st == SJ_OK && *n == 0) *n = 1;
    return st;
}

/* Sizes no bucket takes fail before any compile (one-offs take any). */
static sj_status check_size(const sj_engine *e, int64_t n) {
    if (e->cache->one_off_out_of_range) return SJ_OK;
    int bucket;
    sj_status st = sj_ladder_bucket_for(e->ladder, n, &bucket);
    if (st != SJ_OK)
        sj__error_prefix(e->ctx, "engine: run: %s = %lld",
                        sj_graph_symbol(e->g) ? sj_graph_symbol(e->g) : "N", (long long)n);
    return st;
}

sj_status sj_engine_check_inputs(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                                 int64_t *rows) {
    if (rows) *rows = 0;
    if (!e) return SJ_E_INVALID_ARG;
    if (n_inputs < 0 || (n_inputs && !inputs)) {
        atomic_fetch_add_explicit(&e->run_failures, 1, memory_order_relaxed);
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: run: %d inputs at %p", n_inputs,
                       (const void *)inputs);
    }
    sj_tensor stack[RUN_STACK_VALUES], *ordered = stack;
    if (e->n_inputs > RUN_STACK_VALUES && !(ordered = sj_calloc(e->ctx, (size_t)e->n_inputs, sizeof *ordered)))
        return sj_fail(e->ctx, SJ_E_NOMEM, "engine: run: out of memory");
    int64_t n = 0;
    sj_status st = bind(e, inputs, n_inputs, false, ordered, &n);
    if (st == SJ_OK) st = check_size(e, n);
    if (ordered != stack) sj_free(e->ctx, ordered);
    if (st == SJ_OK && rows) *rows = n;
    if (st != SJ_OK) atomic_fetch_add_explicit(&e->run_failures, 1, memory_order_relaxed);
    return st;
}

/* promote: run in the smallest ready bucket at or above n's when n's own
 * is not ready (sj_engine_run_ready); rep may be NULL. */
static sj_status run_checked(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                             sj_named_tensor *outputs, int n_outputs, sj_run_info *info,
                             sj_tensor *in, sj_tensor *out, bool promote,
                             sj_engine_run_report *rep) {
    int64_t n;
    SJ_TRY(bind(e, inputs, n_inputs, true, in, &n));
    SJ_TRY(check_size(e, n));
    memset(out, 0, (size_t)e->n_outputs * sizeof *out);
    int64_t extent, key = n;
    int own = sj_bucketed_cache_bucket_for(e->cache, n);
    bool promoted = false;
    if (promote && own >= 0) {
        int ready = sj_bucketed_cache_ready_at_least(e->cache, n);
        if (ready > own) {
            /* n's rows in a larger bucket: the key picks the bucket, the
             * kernels run at n, so the result is the one n's bucket gives. */
            SJ_TRY(sj_bucketed_cache_bucket(e->cache, ready, NULL, &key, NULL));
            promoted = true;
        }
    }
    sj_cache_made made;
    SJ_TRY(sj__cache_run(e->cache, key, n, in, out, &extent, &made));
    if (rep) {
        rep->own_bucket = own;
        rep->promoted = promoted;
    }
    for (int i = 0; i < e->n_outputs; i++)
        outputs[i] = (sj_named_tensor){e->outputs[i].name, out[i]};
    for (int i = e->n_outputs; i < n_outputs; i++) outputs[i] = (sj_named_tensor){NULL, {0}};
    if (info) {
        info->rows = n;
        info->bucket = extent;
        info->wait = made == SJ_CACHE_COMPILED ? SJ_RUN_COMPILED
                     : made == SJ_CACHE_LOADED ? SJ_RUN_LOADED
                                               : SJ_RUN_READY;
    }
    return SJ_OK;
}

static sj_status run(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                     sj_named_tensor *outputs, int n_outputs, sj_run_info *info, bool promote,
                     sj_engine_run_report *rep) {
    if (!e) return SJ_E_INVALID_ARG;
    sj_status st = SJ_OK;
    if (e->store_only)
        st = sj_fail(e->ctx, SJ_E_STATE,
                     "engine: run: the engine was opened store_only (it loads nothing)");
    else if (n_inputs < 0 || (n_inputs && !inputs))
        st = sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: run: %d inputs at %p", n_inputs,
                     (const void *)inputs);
    else if (n_outputs < e->n_outputs || (n_outputs && !outputs))
        st = sj_fail(e->ctx, SJ_E_INVALID_ARG, "engine: run: room for %d outputs, the model has %d",
                     n_outputs, e->n_outputs);
    sj_tensor in_stack[RUN_STACK_VALUES], out_stack[RUN_STACK_VALUES];
    sj_tensor *in = in_stack, *out = out_stack;
    if (st == SJ_OK && e->n_inputs > RUN_STACK_VALUES)
        in = sj_calloc(e->ctx, (size_t)e->n_inputs, sizeof *in);
    if (st == SJ_OK && e->n_outputs > RUN_STACK_VALUES)
        out = sj_calloc(e->ctx, (size_t)e->n_outputs, sizeof *out);
    if (st == SJ_OK && (!in || !out))
        st = sj_fail(e->ctx, SJ_E_NOMEM, "engine: run: out of memory");
    if (st == SJ_OK)
        st = run_checked(e, inputs, n_inputs, outputs, n_outputs, info, in, out, promote, rep);
    if (in != in_stack) sj_free(e->ctx, in);
    if (out != out_stack) sj_free(e->ctx, out);
    atomic_fetch_add_explicit(st == SJ_OK ? &e->runs : &e->run_failures, 1, memory_order_relaxed);
    return st;
}

sj_status sj_engine_run(sj_engine *e, const sj_named_tensor *inputs, int n_inputs, sj_named_tensor *outputs,
                        int n_outputs, sj_run_info *info) {
    return run(e, inputs, n_inputs, outputs, n_outputs, info, false, NULL);
}

sj_status sj_engine_run_ready(sj_engine *e, const sj_named_tensor *inputs, int n_inputs,
                              sj_named_tensor *outputs, int n_outputs, bool promote,
                              sj_engine_run_report *report) {
    sj_engine_run_report ignored;
    if (!report) report = &ignored;
    memset(report, 0, sizeof *report);
    report->own_bucket = -1;
    return run(e, inputs, n_inputs, outputs, n_outputs, &report->info, promote, report);
}

sj_status sj_engine_prepare_bucket(sj_engine *e, int i) {
    if (!e) return SJ_E_INVALID_ARG;
    if (e->store_only)
        return sj_fail(e->ctx, SJ_E_STATE, "engine: prepare: the engine was opened store_only (it loads nothing)");
    int64_t hi, extent;
    SJ_TRY(sj_bucketed_cache_bucket(e->cache, i, NULL, &hi, NULL));
    void *exe;
    return sj_bucketed_cache_get_or_compile(e->cache, hi, &extent, &exe);
}

/* run_padded / run_padded_mixed: flat row-major inputs in, the bucket's
 * executable run at the actual row count, outputs out. The executable pads
 * to its bucket extent and never lets padding rows into a result (the
 * compiler's run contract), so here the work is checking what the caller
 * says about rows and inner sizes against the graph's shapes. */
#include "cache/bucketed_cache_impl.h"

#include <stdio.h>
#include <string.h>

/* Elements per row of shape s at `rows` when its outer dim is the symbolic
 * one; -1 when it is not. */
static int64_t row_elements(const sj_shape *s, int64_t rows) {
    if (s->rank < 1 || s->dims[0] != SJ_DIM_SYM) return -1;
    int64_t n = sj_shape_numel(s, rows);
    return n < 0 ? -1 : n / rows;
}

static sj_status check_outputs(sj_bucketed_cache *c, int64_t rows, const int64_t *inners, int n_inners) {
    for (int i = 0; i < n_inners; i++) {
        if (inners[i] < 0)
            return sj_fail(c->ctx, SJ_E_INVALID_ARG, "run_padded: output #%d: inner %lld is negative", i,
                           (long long)inners[i]);
        if (inners[i] == 0 || i >= sj_graph_num_outputs(c->g)) continue;
        sj_value_desc d;
        SJ_TRY(sj_graph_output_desc(c->g, i, &d));
        int64_t row = row_elements(&d.shape, rows);
        if (row != inners[i]) {
            char buf[96];
            sj_shape_format(&d.shape, sj_graph_symbol(c->g), buf, sizeof buf);
            return sj_fail(c->ctx, SJ_E_SHAPE,
                           row < 0 ? "run_padded: output %s %s: inner %lld given, but its outer dim is not the key"
                                   : "run_padded: output %s %s: inner %lld given, rows hold %lld elements",
                           d.name ? d.name : "?", buf, (long long)inners[i], (long long)row);
        }
    }
    if (n_inners > sj_graph_num_outputs(c->g))
        return sj_fail(c->ctx, SJ_E_INVALID_ARG, "run_padded: %d output inners for %d outputs", n_inners,
                       sj_graph_num_outputs(c->g));
    return SJ_OK;
}

/* Fills t[] (graph input order) with tensors borrowing the callers' data. */
static sj_status bind_inputs(sj_bucketed_cache *c, int64_t rows, const sj_cache_input *in, int n, bool mixed,
                             sj_tensor *t, bool *seen) {
    int ng = sj_graph_num_inputs(c->g);
    for (int k = 0; k < n; k++) {
        const char *name = in[k].name ? in[k].name : "";
        int i = sj_graph_find_input(c->g, name);
        if (i < 0) return sj_fail(c->ctx, SJ_E_NOT_FOUND, "run_padded: the graph has no input named '%s'", name);
        if (seen[i]) return sj_fail(c->ctx, SJ_E_INVALID_ARG, "run_padded: input '%s' given twice", name);
        if (!in[k].data) return sj_fail(c->ctx, SJ_E_INVALID_ARG, "run_padded: input '%s' has no data", name);
        seen[i] = true;
        sj_value_desc d;
        SJ_TRY(sj_graph_input_desc(c->g, i, &d));
        if (!mixed || in[k].pad) {
            int64_t row = row_elements(&d.shape, rows);
            /* formatted only for a message: it costs more than a small run */
            char buf[96] = "";
            if (row < 0 || row != in[k].inner) sj_shape_format(&d.shape, sj_graph_symbol(c->g), buf, sizeof buf);
            if (row < 0)
                return sj_fail(c->ctx, SJ_E_SHAPE, "run_padded: input '%s' %s: its outer dim is not the key; "
                               "pass it unpadded (run_padded_mixed, pad = false)", name, buf);
            if (row != in[k].inner)
                return sj_fail(c->ctx, SJ_E_SHAPE, "run_padded: input '%s' %s: inner %lld given, rows hold %lld elements",
                               name, buf, (long long)in[k].inner, (long long)row);
        }
        sj_shape s = sj_shape_at(&d.shape, rows);
        t[i].rank = s.rank;
        memcpy(t[i].dims, s.dims, sizeof s.dims);
        t[i].data = (float *)in[k].data; /* read only: the executable copies inputs */
        t[i].dtype = d.dtype;            /* callers pass data in the input's own type */
    }
    for (int i = 0; i < ng; i++)
        if (!seen[i]) {
            sj_value_desc d;
            SJ_TRY(sj_graph_input_desc(c->g, i, &d));
            return sj_fail(c->ctx, SJ_E_INVALID_ARG, "run_padded: input '%s' not given", d.name ? d.name : "?");
        }
    return SJ_OK;
}

static sj_status run_common(sj_bucketed_cache *c, int64_t key, int64_t rows, const sj_cache_input *inputs,
                            int n_inputs, const int64_t *inners, int n_inners, sj_tensor *outputs,
                            int n_outputs, int64_t *extent_out, bool mixed) {
    if (!c) return SJ_E_INVALID_ARG; /* no context to tell */
    if ((n_inputs && !inputs) || (n_inners && !inners) || (n_outputs && !outputs) || n_inputs < 0 ||
        n_inners < 0)
        return sj_fail(c->ctx, SJ_E_INVALID_ARG,
                       "run_padded: NULL or negative argument (%d inputs, %d inners, %d outputs)",
                       n_inputs, n_inners, n_outputs);
    int ng_out = sj_graph_num_outputs(c->g), ng_in = sj_graph_num_inputs(c->g);
    if (n_outputs != ng_out)
        return sj_fail(c->ctx, SJ_E_INVALID_ARG, "run_padded: %d output tensors for a graph with %d outputs",
                       n_outputs, ng_out);
    SJ_TRY(check_outputs(c, rows, inners, n_inners));
    sj_tensor *t = sj_calloc(c->ctx, (size_t)ng_in + 1, sizeof *t);
    bool *seen = sj_calloc(c->ctx, (size_t)ng_in + 1, sizeof *seen);
    sj_status st = t && seen ? bind_inputs(c, rows, inputs, n_inputs, mixed, t, seen)
                             : sj_fail(c->ctx, SJ_E_NOMEM, "run_padded: out of memory");
    if (st == SJ_OK) {
        memset(outputs, 0, (size_t)n_outputs * sizeof *outputs);
        st = sj__cache_run(c, key, rows, t, outputs, extent_out, NULL);
    }
    sj_free(c->ctx, t);
    sj_free(c->ctx, seen);
    return st;
}

/* The bucket's (or one-off's) executable made again after its device lost
 * the context it was loaded in: from the artifact bytes the bucket kept
 * (a one-off from the store tiers, else a compile), swapped in for the
 * stale one, which only frees host memory. Caller holds the run lock. */
static sj_status reload(sj_bucketed_cache *c, int b, sj_one_off *one, int64_t extent, void **exe) {
    void *fresh;
    sj_status st;
    if (!one && c->buckets[b].art) {
        const sj_cache_bucket *bk = &c->buckets[b];
        st = c->comp.load(c->comp.ctx, c->g, extent, bk->art, bk->art_len, &fresh);
    } else {
        sj_cache_made made;
        int target;
        st = sj__cache_materialize(c, extent, true, &fresh, &made, &target, NULL, NULL);
    }
    if (st != SJ_OK) {
        sj__error_prefix(c->ctx, "bucket %lld: load again after the device was reset",
                        (long long)extent);
        return st;
    }
    void *old;
    if (one) {
        old = atomic_exchange(&one->exe, fresh);
    } else {
        sj_cache_bucket *bk = &c->buckets[b];
        pthread_mutex_lock(&bk->mu);
        old = atomic_exchange_explicit(&bk->exe, fresh, memory_order_acq_rel);
        pthread_mutex_unlock(&bk->mu);
    }
    c->comp.destroy(c->comp.ctx, old);
    atomic_fetch_add_explicit(&c->reloads, 1, memory_order_relaxed);
    *exe = fresh;
    return SJ_OK;
}

/* A run that lost the device (a kernel faulted; the device has reset
 * itself): its error can only name the launches that were in flight, so
 * the bucket is loaded again and the request rerun once launch by launch,
 * which faults again at the kernel to blame and names it. The request
 * fails either way (with the first error when the fault does not repeat);
 * other buckets reload at their next run. Caller holds the run lock. */
static sj_status pinpoint(sj_bucketed_cache *c, int b, sj_one_off *one, int64_t extent, void **exe,
                          int64_t rows, const sj_tensor *inputs, sj_tensor *outputs) {
    atomic_fetch_add_explicit(&c->device_lost, 1, memory_order_relaxed);
    char first[512];
    snprintf(first, sizeof first, "%s", sj_ctx_last_error(c->ctx));
    if (!c->comp.run_stepwise) return sj_fail(c->ctx, SJ_E_DEVICE_LOST, "%s", first);
    if (reload(c, b, one, extent, exe) != SJ_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", sj_ctx_last_error(c->ctx));
        return sj_fail(c->ctx, SJ_E_DEVICE_LOST, "%s; then %s", first, why);
    }
    sj_status st = c->comp.run_stepwise(c->comp.ctx, *exe, rows, inputs, outputs);
    if (st == SJ_E_DEVICE_LOST) {
        snprintf(first, sizeof first, "%s", sj_ctx_last_error(c->ctx));
        return sj_fail(c->ctx, st,
                       "%s; found by running the request again launch by launch; the device was "
                       "reset and its buckets load again",
                       first);
    }
    if (st == SJ_OK)
        for (int i = 0; i < sj_graph_num_outputs(c->g); i++) sj_tensor_free(c->ctx, &outputs[i]);
    return sj_fail(c->ctx, SJ_E_DEVICE_LOST,
                   "%s; the device was reset; run again launch by launch, the request %s", first,
                   st == SJ_OK ? "did not fault" : sj_ctx_last_error(c->ctx));
}

/* Tries at a run whose executable keeps going stale: each failed one
 * means another bucket's fault reset the device meanwhile, so a device
 * faulting without pause cannot make a bucket wait for ever, and a burst of
 * fewer resets never fails a healthy bucket's request. */
#define STALE_TRIES 8

/* comp.run, for executables that can go stale: a stale one (its device was
 * reset since it was loaded, before or while this run waited for the
 * device) is loaded again and run; a run that loses the device itself is
 * pinpointed. Caller holds the run lock. */
static sj_status run_current(sj_bucketed_cache *c, int b, sj_one_off *one, int64_t extent,
                             void **exe, int64_t rows, const sj_tensor *inputs,
                             sj_tensor *outputs) {
    if (!c->comp.stale) return c->comp.run(c->comp.ctx, *exe, rows, inputs, outputs);
    sj_status st = SJ_E_STATE;
    for (int tries = 0; tries < STALE_TRIES; tries++) {
        if (c->comp.stale(c->comp.ctx, *exe)) {
            st = reload(c, b, one, extent, exe);
            if (st == SJ_E_STATE || (st == SJ_OK && c->comp.stale(c->comp.ctx, *exe))) continue;
            if (st != SJ_OK) return st;
        }
        st = c->comp.run(c->comp.ctx, *exe, rows, inputs, outputs);
        if (st == SJ_E_STATE && c->comp.stale(c->comp.ctx, *exe)) continue;
        if (st == SJ_E_DEVICE_LOST) return pinpoint(c, b, one, extent, exe, rows, inputs, outputs);
        return st;
    }
    sj__error_prefix(c->ctx, "bucket %lld: the device was reset %d times while this request waited",
                    (long long)extent, STALE_TRIES);
    return st;
}

sj_status sj__cache_run(sj_bucketed_cache *c, int64_t key, int64_t rows, const sj_tensor *inputs,
                       sj_tensor *outputs, int64_t *extent_out, sj_cache_made *made) {
    int64_t extent;
    void *exe;
    int b;
    sj_one_off *one; /* held across the run: eviction cannot free it under us */
    SJ_TRY(sj__cache_lookup_run(c, key, &extent, &exe, &b, made, &one));
    sj_status st;
    if (rows < 1 || rows > extent) {
        st = sj_fail(c->ctx, SJ_E_OUT_OF_RANGE, "run_padded: %lld actual rows do not fit key %lld's bucket (1..%lld)",
                     (long long)rows, (long long)key, (long long)extent);
    } else {
        if (!one) sj__cache_resident_touch(c, b);
        pthread_mutex_t *mu = one ? &one->run_mu : &c->buckets[b].run_mu;
        pthread_mutex_lock(mu);
        /* A native_after swap or a reload may have replaced the executable
         * while this run waited for the lock (and freed the old one). */
        exe = one ? atomic_load(&one->exe)
                  : atomic_load_explicit(&c->buckets[b].exe, memory_order_acquire);
        st = run_current(c, b, one, extent, &exe, rows, inputs, outputs);
        if (!one) sj__cache_resident_after_run(c, b, exe);
        if (!one && st == SJ_OK) {
            /* runs before rows: sj_bucketed_cache_bucket_padding relies on it */
            atomic_fetch_add_explicit(&c->buckets[b].runs, 1, memory_order_seq_cst);
            atomic_fetch_add_explicit(&c->buckets[b].rows, (uint64_t)rows, memory_order_seq_cst);
        }
        pthread_mutex_unlock(mu);
        if (!one && st == SJ_OK) sj__cache_specialise_note_run(c, b);
    }
    sj__cache_release(c, one);
    if (st == SJ_OK && extent_out) *extent_out = extent;
    return st;
}

sj_status sj_bucketed_cache_run_padded(sj_bucketed_cache *c, int64_t key, int64_t actual_rows,
                                       const sj_cache_input *inputs, int n_inputs,
                                       const int64_t *output_inners, int n_inners,
                                       sj_tensor *outputs, int n_outputs, int64_t *extent) {
    return run_common(c, key, actual_rows, inputs, n_inputs, output_inners, n_inners, outputs, n_outputs,
                      extent, false);
}

sj_status sj_bucketed_cache_run_padded_mixed(sj_bucketed_cache *c, int64_t key, int64_t actual_rows,
                                             const sj_cache_input *inputs, int n_inputs,
                                             const int64_t *output_inners, int n_inners,
                                             sj_tensor *outputs, int n_outputs, int64_t *extent) {
    return run_common(c, key, actual_rows, inputs, n_inputs, output_inners, n_inners, outputs, n_outputs,
                      extent, true);
}

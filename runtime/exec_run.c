/* The launch path: check the request, pad inputs in, launch (eagerly through
 * the op cache and the metadata info cache, or by replaying the capture),
 * slice outputs out. In steady state nothing here allocates. */
#include "runtime/executor_impl.h"
#include "runtime/padding_impl.h"

#include "ir/graph_impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static sj_status check_tensor(sj_executable *e, const char *what, int i, const exe_io *io,
                              const sj_tensor *t, int64_t active, bool need_data) {
    if (t->data && t->dtype != io->dtype)
        return sj_fail(e->ctx, SJ_E_SHAPE, "run: %s #%d '%s' holds %s elements, the graph wants %s",
                       what, i, io->name, sj_dtype_name(t->dtype), sj_dtype_name(io->dtype));
    bool ok = t->rank == io->shape.rank && (t->data || !need_data);
    for (int d = 0; ok && d < t->rank; d++)
        ok = t->dims[d] == sj_dim_at(io->shape.dims[d], active);
    if (ok) return SJ_OK;
    char want[96], got[96];
    sj_shape expected = sj_shape_at(&io->shape, active);
    sj_shape actual = {.rank = t->rank < 0 || t->rank > SJ_MAX_RANK ? 0 : t->rank};
    memcpy(actual.dims, t->dims, sizeof actual.dims);
    sj_shape_format(&expected, NULL, want, sizeof want);
    sj_shape_format(&actual, NULL, got, sizeof got);
    if (!t->data && need_data)
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "run: %s #%d '%s' has no data", what, i,
                       io->name);
    return sj_fail(e->ctx, SJ_E_SHAPE,
                   "run: %s #%d '%s' must be %s at active extent %" PRId64 ", got %s%s", what, i,
                   io->name, want, active, got,
                   t->rank != io->shape.rank ? " (rank differs)" : "");
}

static sj_status check_request(sj_executable *e, int64_t active, const sj_tensor *inputs,
                               const sj_tensor *outputs) {
    if (e->has_sym && (active < 1 || active > e->extent))
        return sj_fail(e->ctx, SJ_E_OUT_OF_RANGE,
                       "run: active extent %" PRId64 " outside the bucket 1..%" PRId64, active,
                       e->extent);
    if ((e->n_inputs && !inputs) || (e->n_outputs && !outputs))
        return sj_fail(e->ctx, SJ_E_INVALID_ARG, "run: NULL inputs or outputs array");
    for (int i = 0; i < e->n_inputs; i++)
        SJ_TRY(check_tensor(e, "input", i, &e->inputs[i], &inputs[i], active, true));
    for (int i = 0; i < e->n_outputs; i++)
        if (outputs[i].data)
            SJ_TRY(check_tensor(e, "output", i, &e->outputs[i], &outputs[i], active, true));
    return SJ_OK;
}

/* Outputs the caller left without data get tensors of their own. */
static sj_status alloc_outputs(sj_executable *e, int64_t active, sj_tensor *outputs,
                               bool *allocated) {
    for (int i = 0; i < e->n_outputs; i++) {
        allocated[i] = false;
        if (outputs[i].data) continue;
        sj_shape s = sj_shape_at(&e->outputs[i].shape, active);
        sj_status st = sj_tensor_alloc_typed(e->ctx, e->outputs[i].dtype, s.rank, s.dims, &outputs[i]);
        if (st != SJ_OK) return st;
        allocated[i] = true;
    }
    return SJ_OK;
}

typedef struct copy_job {
    char *dense;
    char *padded;
    int64_t es; /* bytes per element */
} copy_job;

static void chunk_in(void *u, int64_t dense, int64_t padded, int64_t count) {
    copy_job *j = u;
    memcpy(j->padded + padded * j->es, j->dense + dense * j->es, (size_t)(count * j->es));
}

static void chunk_out(void *u, int64_t dense, int64_t padded, int64_t count) {
    copy_job *j = u;
    memcpy(j->dense + dense * j->es, j->padded + padded * j->es, (size_t)(count * j->es));
}

/* Host-visible memory is written in place; otherwise a single-chunk tensor is
 * one device copy, and a multi-chunk one goes through the staging buffer as
 * one copy of the span the chunks cover. */
static sj_status copy_in(sj_executable *e, const exe_io *io, const sj_tensor *t, int64_t active) {
    sj_device *dev = e->dev;
    int64_t numel = sj_tensor_numel(t);
    if (dev->ops->flags & SJ_DEVICE_HOST_VISIBLE) {
        copy_job j = {(char *)t->data, io->buffer, (int64_t)io->esize};
        sj__pad_chunks(&io->shape, active, e->extent, chunk_in, &j);
        return SJ_OK;
    }
    if (sj__pad_chunk_count(&io->shape, active) <= 1)
        return dev->ops->copy(dev->impl, io->buffer, t->data, (size_t)numel * io->esize, SJ_COPY_H2D);
    copy_job j = {(char *)t->data, (char *)e->staging, (int64_t)io->esize};
    sj__pad_chunks(&io->shape, active, e->extent, chunk_in, &j);
    return dev->ops->copy(dev->impl, io->buffer, e->staging, io->bytes, SJ_COPY_H2D);
}

static sj_status copy_out(sj_executable *e, const exe_io *io, sj_tensor *t, int64_t active) {
    sj_device *dev = e->dev;
    int64_t numel = sj_tensor_numel(t);
    if (dev->ops->flags & SJ_DEVICE_HOST_VISIBLE) {
        copy_job j = {(char *)t->data, io->buffer, (int64_t)io->esize};
        sj__pad_chunks(&io->shape, active, e->extent, chunk_out, &j);
        return SJ_OK;
    }
    if (sj__pad_chunk_count(&io->shape, active) <= 1)
        return dev->ops->copy(dev->impl, t->data, io->buffer, (size_t)numel * io->esize, SJ_COPY_D2H);
    SJ_TRY(dev->ops->copy(dev->impl, e->staging, io->buffer, io->bytes, SJ_COPY_D2H));
    copy_job j = {(char *)t->data, (char *)e->staging, (int64_t)io->esize};
    sj__pad_chunks(&io->shape, active, e->extent, chunk_out, &j);
    return SJ_OK;
}

/* The info buffer for launch l: the cached one when the cache keeps it (a
 * miss builds and stores it), else the executable's own upload of the same
 * words, which lives as long as the executable and so as any capture of it. */
static const int64_t *info_for(sj_executable *e, const exe_launch *l) {
    if (l->n_words == 0) return NULL;
    sj_mdcache *mc = e->dev->mdcache;
    void *buf;
    switch (sj_mdcache_lookup(mc, l->words, l->n_words, &buf)) {
    case SJ_MDCACHE_HIT: return buf;
    case SJ_MDCACHE_BUILD_FORGET: return l->info_owned;
    case SJ_MDCACHE_BUILD_STORE: break;
    }
    sj_device *dev = e->dev;
    size_t bytes = l->n_words * sizeof *l->words;
    if (dev->ops->alloc(dev->impl, bytes, &buf) != SJ_OK) return l->info_owned;
    if (dev->ops->copy(dev->impl, buf, l->words, bytes, SJ_COPY_H2D) != SJ_OK ||
        sj_mdcache_store(mc, l->words, l->n_words, buf) != SJ_OK) {
        dev->ops->free(dev->impl, buf);
        return l->info_owned;
    }
    return buf;
}

/* Naming the kernel a device error belongs to. Launches are asynchronous:
 * an error cuLaunchKernel returns (bad geometry, out of resources) is that
 * launch's, but a kernel that faults (illegal address, trap) is reported
 * by the next call that waits for the device, when every launch of the run
 * may be in flight. Such an error names them all ("bucket E: 5 launches in
 * flight (k0, k1, ...)"); a stepwise run (sj_executable_run_stepwise), which
 * waits after each launch, names the one: the cache reruns a request that
 * lost the device that way once to say which kernel faulted. */
static sj_status name_launch(sj_executable *e, sj_status st, int32_t i) {
    sj__error_prefix(e->ctx, "kernel %s (launch #%d of bucket %lld)",
                    e->kernels[e->launches[i].kernel].name, i, (long long)e->extent);
    return st;
}

static sj_status name_in_flight(sj_executable *e, sj_status st, int32_t count) {
    if (st == SJ_OK || count < 1) return st;
    if (count == 1) return name_launch(e, st, 0);
    char names[200] = "";
    size_t used = 0;
    for (int32_t i = 0; i < count; i++) {
        const char *k = e->kernels[e->launches[i].kernel].name;
        if (used + strlen(k) + sizeof ", , ..." > sizeof names) { /* room for the ellipsis */
            memcpy(names + used, ", ...", sizeof ", ...");
            break;
        }
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", k);
    }
    sj__error_prefix(e->ctx, "bucket %lld: %d launches in flight (%s)", (long long)e->extent, count,
                    names);
    return st;
}

/* Caller holds the device lock. Eager, or recording when a capture is on;
 * stepwise waits for each launch before the next. */
static sj_status launch_all(sj_executable *e, int64_t active, bool stepwise) {
    sj_device *dev = e->dev;
    for (int32_t i = 0; i < e->n_launches; i++) {
        const exe_launch *l = &e->launches[i];
        sj_status st = dev->ops->launch(dev->impl, e->handles[l->kernel], &l->dims, l->buffers,
                                        info_for(e, l), active);
        if (st == SJ_OK && stepwise) st = dev->ops->sync(dev->impl);
        if (st == SJ_OK) continue;
        /* a lost device at a later launch: an earlier kernel of the run may be the one */
        if (st == SJ_E_DEVICE_LOST && !stepwise && !dev->capturing)
            return name_in_flight(e, st, i + 1);
        return name_launch(e, st, i);
    }
    return SJ_OK;
}

typedef enum run_kind { RUN_EAGER, RUN_REPLAY, RUN_STEPWISE } run_kind;

static sj_status dispatch(sj_executable *e, run_kind kind, int64_t n) {
    sj_device *dev = e->dev;
    if (kind != RUN_REPLAY) return launch_all(e, n, kind == RUN_STEPWISE);
    sj_status st = e->sub_rows > 0 && e->sub_rows < n && dev->ops->replay_rows
                       ? dev->ops->replay_rows(dev->impl, e->graph, n, e->sub_rows)
                       : dev->ops->replay(dev->impl, e->graph, n);
    if (st == SJ_E_DEVICE_LOST) return name_in_flight(e, st, e->n_launches);
    if (st != SJ_OK)
        sj__error_prefix(e->ctx, "bucket %lld: replay of its %d captured launches",
                        (long long)e->extent, e->n_launches);
    return st;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* run_locked's dispatch and sync with sj_device_set_timing on: the host
 * time of the dispatch, and the device's own time of the kernels. */
static sj_status timed_dispatch(sj_executable *e, run_kind kind, int64_t n) {
    sj_device *dev = e->dev;
    sj_status (*timer)(void *, int, uint64_t *) = dev->ops->kernel_timer;
    if (timer) SJ_TRY(timer(dev->impl, SJ_KERNEL_TIMER_START, NULL));
    uint64_t t0 = now_ns();
    SJ_TRY(dispatch(e, kind, n));
    dev->timed.dispatch_ns += now_ns() - t0;
    if (timer)
        SJ_TRY(name_in_flight(e, timer(dev->impl, SJ_KERNEL_TIMER_STOP, NULL), e->n_launches));
    SJ_TRY(name_in_flight(e, dev->ops->sync(dev->impl), e->n_launches));
    if (timer) SJ_TRY(timer(dev->impl, SJ_KERNEL_TIMER_READ, &dev->timed.kernel_ns));
    dev->timed.runs++;
    return SJ_OK;
}

/* SJ_E_STATE for an executable whose handles went with a lost context. */
static sj_status check_current(sj_executable *e, const char *what) {
    SJ_TRY(sj__device_check_usable_locked(e->dev, what));
    if (sj_exe_current(e)) return SJ_OK;
    return sj_fail(e->ctx, SJ_E_STATE,
                   "%s: bucket %lld was loaded before device '%s' lost its context; load it again",
                   what, (long long)e->extent, e->dev->ops->name);
}

static sj_status run_locked(sj_executable *e, run_kind kind, int64_t active,
                            const sj_tensor *inputs, sj_tensor *outputs, bool *allocated) {
    sj_device *dev = e->dev;
    SJ_TRY(check_current(e, "run"));
    if (kind == RUN_REPLAY && !e->graph)
        return sj_fail(e->ctx, SJ_E_STATE, "replay: the executable has no capture");
    if (dev->capturing)
        return sj_fail(e->ctx, SJ_E_STATE, "run: device '%s' is recording a capture",
                       dev->ops->name);
    SJ_TRY(check_request(e, active, inputs, outputs));
    /* Params read in place from files: checked before the kernels touch a
     * page (a truncated file would fault them) and again after they ran, so
     * a file rewritten during the run fails it instead of answering. */
    SJ_TRY(sj__exe_check_mapped(e));
    SJ_TRY(sj__exe_make_resident(e));
    int64_t n = e->has_sym ? active : e->extent;
    SJ_TRY(alloc_outputs(e, n, outputs, allocated));
    for (int i = 0; i < e->n_inputs; i++) SJ_TRY(copy_in(e, &e->inputs[i], &inputs[i], n));
    if (dev->timing && kind != RUN_STEPWISE) {
        SJ_TRY(timed_dispatch(e, kind, n));
    } else {
        SJ_TRY(dispatch(e, kind, n));
        if (kind != RUN_STEPWISE)
            SJ_TRY(name_in_flight(e, dev->ops->sync(dev->impl), e->n_launches));
    }
    SJ_TRY(sj__exe_check_mapped(e));
    for (int i = 0; i < e->n_outputs; i++) SJ_TRY(copy_out(e, &e->outputs[i], &outputs[i], n));
    /* What ran: every launch above was given n, and a kernel touches the
     * first n rows only, so n rows were computed for the request's active. */
    e->runs++;
    e->rows_requested += (uint64_t)(e->has_sym ? active : e->extent);
    e->rows_computed += (uint64_t)n;
    return SJ_OK;
}

#define MAX_STACK_OUTPUTS 64

static sj_status run(sj_executable *e, run_kind kind, int64_t active, const sj_tensor *inputs,
                     sj_tensor *outputs) {
    if (!e) return SJ_E_INVALID_ARG;
    /* Which outputs this call allocated, so a failure frees exactly those.
     * On the stack for the usual output counts: the launch path stays free
     * of allocations. */
    bool local[MAX_STACK_OUTPUTS];
    bool *allocated = local;
    if (e->n_outputs > MAX_STACK_OUTPUTS) {
        allocated = sj_calloc(e->ctx, (size_t)e->n_outputs, sizeof *allocated);
        if (!allocated) return sj_fail(e->ctx, SJ_E_NOMEM, "run: out of memory");
    } else {
        memset(local, 0, sizeof local);
    }
    sj__device_lock(e->dev);
    sj_status st = sj__device_recover_locked(e->dev, run_locked(e, kind, active, inputs, outputs,
                                                                allocated));
    sj__device_unlock(e->dev);
    if (st != SJ_OK && outputs)
        for (int i = 0; i < e->n_outputs; i++)
            if (allocated[i]) sj_tensor_free(e->ctx, &outputs[i]);
    if (allocated != local) sj_free(e->ctx, allocated);
    return st;
}

sj_status sj_executable_run(sj_executable *e, int64_t active, const sj_tensor *inputs,
                            sj_tensor *outputs) {
    return run(e, RUN_EAGER, active, inputs, outputs);
}

sj_status sj_executable_replay(sj_executable *e, int64_t active, const sj_tensor *inputs,
                               sj_tensor *outputs) {
    return run(e, RUN_REPLAY, active, inputs, outputs);
}

sj_status sj_executable_run_stepwise(sj_executable *e, int64_t active, const sj_tensor *inputs,
                                     sj_tensor *outputs) {
    return run(e, RUN_STEPWISE, active, inputs, outputs);
}

sj_status sj_executable_run_or_replay(sj_executable *e, int64_t active, const sj_tensor *inputs,
                                      sj_tensor *outputs) {
    if (!e) return SJ_E_INVALID_ARG;
    return run(e, e->graph ? RUN_REPLAY : RUN_EAGER, active, inputs, outputs);
}

/* Caller holds the device lock. */
static sj_status capture_locked(sj_executable *e) {
    sj_device *dev = e->dev;
    SJ_TRY(check_current(e, "capture"));
    if (e->graph) return sj_fail(e->ctx, SJ_E_STATE, "capture: the executable already has one");
    SJ_TRY(sj__exe_check_mapped(e)); /* the capture's launches run the kernels */
    SJ_TRY(sj__exe_make_resident(e));
    SJ_TRY(sj_mdcache_capture_begin(dev->mdcache));
    sj_status st = sj__device_begin_capture_locked(dev);
    if (st != SJ_OK) {
        sj_mdcache_capture_discard(dev->mdcache);
        return st;
    }
    /* The extent recorded here is never used: replay passes its own. */
    sj_status launched = launch_all(e, e->extent, false);
    sj_graph_handle g = NULL;
    st = sj__device_end_capture_locked(dev, &g);
    if (launched != SJ_OK || st != SJ_OK) {
        if (g) dev->ops->destroy_graph(dev->impl, g);
        sj_mdcache_capture_discard(dev->mdcache);
        return launched != SJ_OK ? launched : st;
    }
    uint64_t id = dev->next_graph_id++;
    st = sj_mdcache_capture_commit(dev->mdcache, id);
    if (st != SJ_OK) {
        dev->ops->destroy_graph(dev->impl, g);
        sj_mdcache_capture_discard(dev->mdcache);
        return st;
    }
    e->graph = g;
    e->graph_id = id;
    return SJ_OK;
}

sj_status sj_executable_capture(sj_executable *e) {
    if (!e) return SJ_E_INVALID_ARG;
    sj__device_lock(e->dev);
    sj_status st = sj__device_recover_locked(e->dev, capture_locked(e));
    sj__device_unlock(e->dev);
    return st;
}

void sj_executable_release_capture(sj_executable *e) {
    if (!e || !e->graph) return;
    sj_device *dev = e->dev;
    sj__device_lock(dev);
    if (sj_exe_current(e)) { /* else the graph and its pins went with the context */
        dev->ops->destroy_graph(dev->impl, e->graph);
        sj_mdcache_graph_release(dev->mdcache, e->graph_id);
    }
    sj__device_unlock(dev);
    e->graph = NULL;
}

/* engine.c — shapejit._Engine: one sj_engine and its context.
 *
 * The Python class shapejit.Engine derives from this type and only adds
 * argument handling (the default store path rule, progress bars); run() is
 * this C method, so a call costs one dict walk, one buffer request per
 * input and one small object per output on top of sj_engine_run.
 *
 * Threads: the GIL is released around every library call that can take
 * time (open, run, precompile), so runs from several Python threads proceed
 * in parallel, as sj_engine_run allows. close() may race with runs in other
 * threads: each call counts itself in `inflight` before checking `closed`,
 * and close() sets `closed` before waiting for `inflight` to drain, so the
 * engine is destroyed only once no call is inside it (sj_engine_close's
 * contract).
 *
 * Every engine of the process shares one context, made by the first and
 * never destroyed: a context holds a pthread key (its per-thread error
 * messages), a process has 1024 of them, and an engine per context ran out
 * at about 945 engines with a bare MemoryError, closed engines still
 * referenced keeping theirs. On one context a closed engine holds nothing
 * of the library's, output arrays outliving their engine still free into
 * the context their memory came from, and engines share one weight pool.
 * (The module is not the library: this process-wide state is the
 * embedding's, as the rules ask.)
 */
#include "sjpy.h"

#include "shapejit/remote.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    sj_ctx *ctx;
    sj_engine *e;
    atomic_int inflight;
    atomic_int closed;
    int in_callback; /* progress callbacks running (read and written under the GIL) */
    int n_in, n_out;
    PyObject **in_names; /* str, the model's input names */
    int *in_dtypes;
    PyObject **out_names;
    PyObject *keep; /* the init arguments: the config borrows their strings */
    PyObject *dict; /* for Python subclasses' attributes */
} engine_obj;

sj_ctx *sjpy_engine_ctx(PyObject *engine) {
    return ((engine_obj *)engine)->ctx;
}

/* Under the GIL, so made once. */
static sj_ctx *shared_ctx;

static sj_ctx *process_ctx(void) {
    if (shared_ctx)
        return shared_ctx;
    sj_status st = sj_ctx_create(NULL, &shared_ctx);
    if (st != SJ_OK) {
        shared_ctx = NULL;
        sjpy_raise_named(st == SJ_E_NOMEM ? "OutOfMemoryError" : "Error", st,
                         "cannot create the shapejit context (sj_ctx_create: %s): the process is "
                         "out of memory or of pthread keys (1024 per process, one per context)",
                         sj_status_str(st));
    }
    return shared_ctx;
}

/* ---- the in-flight guard */

static int enter(engine_obj *s) {
    atomic_fetch_add(&s->inflight, 1);
    if (atomic_load(&s->closed) || !s->e) {
        atomic_fetch_sub(&s->inflight, 1);
        sjpy_raise_named("ClosedError", SJ_E_STATE,
                         s->e || atomic_load(&s->closed) ? "the engine is closed"
                                                         : "the engine was never opened");
        return -1;
    }
    return 0;
}

static void leave(engine_obj *s) {
    atomic_fetch_sub(&s->inflight, 1);
}

static void close_engine(engine_obj *s) {
    if (atomic_exchange(&s->closed, 1) || !s->e)
        return;
    sj_engine *e = s->e;
    Py_BEGIN_ALLOW_THREADS
    while (atomic_load(&s->inflight) > 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    sj_engine_close(e);
    Py_END_ALLOW_THREADS
    s->e = NULL;
}

static void free_names(engine_obj *s) {
    for (int i = 0; s->in_names && i < s->n_in; i++)
        Py_XDECREF(s->in_names[i]);
    for (int i = 0; s->out_names && i < s->n_out; i++)
        Py_XDECREF(s->out_names[i]);
    PyMem_Free(s->in_names);
    PyMem_Free(s->out_names);
    PyMem_Free(s->in_dtypes);
    s->in_names = s->out_names = NULL;
    s->in_dtypes = NULL;
    s->n_in = s->n_out = 0;
}

static void engine_dealloc(engine_obj *s) {
    PyObject_GC_UnTrack(s);
    close_engine(s);
    free_names(s);
    s->ctx = NULL; /* the process's, not this engine's */
    Py_CLEAR(s->keep);
    Py_CLEAR(s->dict);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int engine_traverse(engine_obj *s, visitproc visit, void *arg) {
    Py_VISIT(s->dict);
    Py_VISIT(s->keep);
    Py_VISIT(Py_TYPE(s));
    return 0;
}

static int engine_clear(engine_obj *s) {
    Py_CLEAR(s->dict);
    return 0;
}

/* ---- open */

/* Parses dims: a sequence of (name, value) pairs, into out (PyMem); a
 * value is a size or a str tying the dim to the dynamic one, dyn
 * ("past+1", sj_dim_parse). */
static int parse_dims(PyObject *dims, const char *dyn, sj_dim_value **out, int *n) {
    *out = NULL;
    *n = 0;
    if (dims == Py_None)
        return 0;
    PyObject *seq = PySequence_Fast(dims, "dims must be a sequence of (name, value) pairs");
    if (!seq)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    *out = PyMem_Calloc(len ? (size_t)len : 1, sizeof **out);
    if (!*out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        const char *name;
        PyObject *v;
        int64_t value = 0;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "sO;dims entries are (name, value)",
                              &name, &v)) {
            Py_DECREF(seq);
            return -1;
        }
        if (PyUnicode_Check(v)) {
            const char *text = PyUnicode_AsUTF8(v);
            if (!text || sj_dim_parse(text, dyn, &value) != SJ_OK) {
                char msg[512];
                snprintf(msg, sizeof msg,
                         "dims['%s'] is '%.200s': a size, or [K*]%s[+C] tying it to the dynamic dim",
                         name, text ? text : "?", dyn ? dyn : "DYNAMIC");
                Py_DECREF(seq);
                if (text) sjpy_raise(SJ_E_INVALID_ARG, SJPY_PHASE_CALL, msg);
                return -1;
            }
        } else {
            long long ll = PyLong_AsLongLong(v);
            if (ll == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
            value = (int64_t)ll;
        }
        (*out)[i].name = name; /* borrowed from the str, which `keep` holds */
        (*out)[i].value = value;
    }
    *n = (int)len;
    Py_DECREF(seq);
    return 0;
}

static int cache_io(engine_obj *s) {
    s->n_in = sj_engine_num_inputs(s->e);
    s->n_out = sj_engine_num_outputs(s->e);
    s->in_names = PyMem_Calloc((size_t)s->n_in + 1, sizeof *s->in_names);
    s->in_dtypes = PyMem_Calloc((size_t)s->n_in + 1, sizeof *s->in_dtypes);
    s->out_names = PyMem_Calloc((size_t)s->n_out + 1, sizeof *s->out_names);
    if (!s->in_names || !s->in_dtypes || !s->out_names) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < s->n_in; i++) {
        sj_value_desc d;
        if (sj_engine_input(s->e, i, &d) != SJ_OK)
            return sjpy_raise(SJ_E_INTERNAL, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx)), -1;
        s->in_dtypes[i] = (int)d.dtype;
        if (!(s->in_names[i] = PyUnicode_FromString(d.name)))
            return -1;
        PyUnicode_InternInPlace(&s->in_names[i]);
    }
    for (int i = 0; i < s->n_out; i++) {
        sj_value_desc d;
        if (sj_engine_output(s->e, i, &d) != SJ_OK)
            return sjpy_raise(SJ_E_INTERNAL, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx)), -1;
        if (!(s->out_names[i] = PyUnicode_FromString(d.name)))
            return -1;
        PyUnicode_InternInPlace(&s->out_names[i]);
    }
    return 0;
}

static int engine_init(engine_obj *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"model", "ladder", "store", "backend", "dynamic_name",
                             "dynamic_input", "dynamic_axis", "dims", "threads", "workers",
                             "remote", "remote_secret", "remote_read_only",
                             "one_off_out_of_range", "cpu", "gpu_emit", "arch",
                             "store_fallback_to_memory", "tune", "tune_budget_ms", NULL};
    const char *model, *ladder = NULL, *store = NULL, *backend = NULL, *dyn_name = NULL,
                       *dyn_input = NULL, *remote = NULL, *cpu = NULL, *gpu_emit = NULL,
                       *arch = NULL;
    int dyn_axis = 0, threads = 0, workers = 0, ro = 0, one_off = 0, fallback = 0, tune = 0;
    int tune_budget_ms = -1; /* -1: the library's default */
    PyObject *dims = Py_None;
    Py_buffer secret = {0};
    if (s->ctx || s->e) {
        sjpy_raise_named("StateError", SJ_E_STATE, "the engine is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$zzzzziOiizz*ppzzzppi", kwlist, &model, &ladder,
                                     &store, &backend, &dyn_name, &dyn_input, &dyn_axis, &dims,
                                     &threads, &workers, &remote, &secret, &ro, &one_off, &cpu,
                                     &gpu_emit, &arch, &fallback, &tune, &tune_budget_ms))
        return -1;
    int rc = -1;
    sj_dim_value *fixed = NULL;
    int n_fixed = 0;
    s->keep = PyTuple_Pack(2, args, kw ? kw : Py_None);
    if (!s->keep || parse_dims(dims, dyn_name, &fixed, &n_fixed) < 0)
        goto out;
    if (!(s->ctx = process_ctx()))
        goto out;
    sj_engine_config cfg;
    sj_engine_config_init(&cfg);
    cfg.ladder = ladder;
    cfg.store_path = store;
    cfg.backend = backend;
    cfg.threads = threads;
    cfg.workers = workers;
    cfg.cpu = cpu;
    cfg.gpu_emit = gpu_emit;
    cfg.arch = arch;
    cfg.remote_url = remote;
    cfg.remote_secret = secret.buf;
    cfg.remote_secret_len = secret.buf ? (size_t)secret.len : 0;
    cfg.remote_read_only = ro;
    cfg.one_off_out_of_range = one_off;
    cfg.store_fallback_to_memory = fallback;
    cfg.tune = tune;
    if (tune_budget_ms != -1) cfg.tune_budget_ms = tune_budget_ms;
    cfg.model.dynamic_name = dyn_name;
    cfg.model.dynamic_input = dyn_input;
    cfg.model.dynamic_axis = dyn_axis;
    cfg.model.fixed_dims = fixed;
    cfg.model.n_fixed_dims = n_fixed;

    /* Load, then open: a failure in the first step is the model's
     * (ModelError) whatever its status; the second is the store's, the
     * remote's or the config's. */
    sj_graph *g = NULL;
    sj_status st;
    sjpy_phase phase = SJPY_PHASE_LOAD;
    Py_BEGIN_ALLOW_THREADS
    st = sj_model_load(s->ctx, model, &cfg.model, &g);
    if (st == SJ_OK) {
        phase = SJPY_PHASE_OPEN;
        st = sj_engine_open_graph(s->ctx, g, &cfg, &s->e);
    }
    Py_END_ALLOW_THREADS
    if (st != SJ_OK) {
        sjpy_raise(st, phase, sj_ctx_last_error(s->ctx));
        s->e = NULL;
        goto out;
    }
    rc = cache_io(s);
out:
    PyMem_Free(fixed);
    if (secret.obj)
        PyBuffer_Release(&secret);
    return rc;
}

/* ---- run */

#define SMALL 8

static PyObject *engine_run(engine_obj *s, PyObject *feed) {
    if (!PyDict_Check(feed))
        return sjpy_raise_named("InvalidArgumentError", SJ_E_INVALID_ARG,
                                "run() takes a dict of input name -> array, got %s",
                                Py_TYPE(feed)->tp_name);
    if (enter(s) < 0)
        return NULL;
    Py_ssize_t n = PyDict_GET_SIZE(feed);
    sjpy_input in_small[SMALL];
    sj_named_tensor t_small[SMALL], o_small[SMALL];
    sjpy_input *in = in_small;
    sj_named_tensor *ts = t_small, *os = o_small;
    PyObject *result = NULL;
    int n_done = 0;
    if (n > SMALL) {
        in = PyMem_Calloc((size_t)n, sizeof *in);
        ts = PyMem_Calloc((size_t)n, sizeof *ts);
    }
    if (s->n_out > SMALL)
        os = PyMem_Calloc((size_t)s->n_out, sizeof *os);
    if (!in || !ts || !os) {
        PyErr_NoMemory();
        goto out;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(feed, &pos, &key, &value)) {
        if (n_done == n) { /* a buffer exporter written in Python resized the dict */
            sjpy_raise_named("InvalidArgumentError", SJ_E_INVALID_ARG,
                             "the input dict changed while run() read it");
            goto out;
        }
        if (!PyUnicode_Check(key)) {
            sjpy_raise_named("InvalidArgumentError", SJ_E_INVALID_ARG,
                             "input names are str, got a key of type %s", Py_TYPE(key)->tp_name);
            goto out;
        }
        const char *name = PyUnicode_AsUTF8(key);
        if (!name)
            goto out;
        int want = -1;
        for (int i = 0; i < s->n_in; i++)
            if (s->in_names[i] == key || strcmp(PyUnicode_AsUTF8(s->in_names[i]), name) == 0) {
                want = s->in_dtypes[i];
                break;
            }
        ts[n_done].name = name;
        int rc = sjpy_input_from_object(key, value, name, want, &in[n_done], &ts[n_done].tensor);
        n_done++;
        if (rc < 0)
            goto out;
    }
    /* Shapes before copies: a strided input is copied only once every
     * input is known to fit (sjpy_input_from_object). */
    sj_status st = sj_engine_check_inputs(s->e, ts, n_done, NULL);
    if (st != SJ_OK) {
        sjpy_raise(st, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx));
        goto out;
    }
    for (int i = 0; i < n_done; i++)
        if (sjpy_input_contiguous(&in[i], &ts[i].tensor) < 0)
            goto out;
    Py_BEGIN_ALLOW_THREADS
    st = sj_engine_run(s->e, ts, n_done, os, s->n_out, NULL);
    Py_END_ALLOW_THREADS
    if (st != SJ_OK) {
        sjpy_raise(st, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx));
        goto out;
    }
    for (int i = 0; i < n_done; i++)
        sjpy_input_release(&in[i]);
    n_done = 0;
    result = PyDict_New();
    for (int i = 0; i < s->n_out; i++) {
        PyObject *arr = result ? sjpy_array_from_tensor((PyObject *)s, s->ctx, &os[i].tensor)
                               : (sj_tensor_free(s->ctx, &os[i].tensor), NULL);
        if (result && (!arr || PyDict_SetItem(result, s->out_names[i], arr) < 0))
            Py_CLEAR(result);
        Py_XDECREF(arr);
    }
out:
    for (int i = 0; i < n_done; i++)
        sjpy_input_release(&in[i]);
    if (in != in_small)
        PyMem_Free(in);
    if (ts != t_small)
        PyMem_Free(ts);
    if (os != o_small)
        PyMem_Free(os);
    leave(s);
    return result;
}

/* ---- precompile */

typedef struct {
    engine_obj *engine;
    PyObject *cb;
    /* the first exception the callback raised */
    PyObject *exc_type, *exc_value, *exc_tb;
} progress_state;

/* Called on the library's compile threads: takes the GIL for the callback;
 * an exception is kept (the first one) and raised when precompile returns,
 * since a compile in progress cannot be cancelled. */
static void progress_cb(void *user, int done, int total, int64_t extent) {
    progress_state *p = user;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!p->exc_type) {
        p->engine->in_callback++;
        PyObject *r = PyObject_CallFunction(p->cb, "iiL", done, total, (long long)extent);
        p->engine->in_callback--;
        if (r)
            Py_DECREF(r);
        else
            PyErr_Fetch(&p->exc_type, &p->exc_value, &p->exc_tb);
    }
    PyGILState_Release(g);
}

static PyObject *engine_precompile(engine_obj *s, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"jobs", "progress", NULL};
    int jobs = 0;
    PyObject *cb = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|iO", kwlist, &jobs, &cb))
        return NULL;
    if (jobs < 0)
        return sjpy_raise_named("InvalidArgumentError", SJ_E_INVALID_ARG,
                                "precompile: jobs is %d, must be >= 0 (0 = the CPU count)", jobs);
    if (cb != Py_None && !PyCallable_Check(cb))
        return sjpy_raise_named("InvalidArgumentError", SJ_E_INVALID_ARG,
                                "precompile: progress must be callable(done, total, extent)");
    if (enter(s) < 0)
        return NULL;
    progress_state p = {s, cb, NULL, NULL, NULL};
    sj_status st;
    Py_BEGIN_ALLOW_THREADS
    st = sj_engine_precompile(s->e, jobs, cb == Py_None ? NULL : progress_cb, &p);
    Py_END_ALLOW_THREADS
    PyObject *r = NULL;
    if (st != SJ_OK) {
        Py_XDECREF(p.exc_type);
        Py_XDECREF(p.exc_value);
        Py_XDECREF(p.exc_tb);
        sjpy_raise(st, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx));
    } else if (p.exc_type) {
        PyErr_Restore(p.exc_type, p.exc_value, p.exc_tb);
    } else {
        r = Py_NewRef(Py_None);
    }
    leave(s);
    return r;
}

/* ---- inspection */

/* The fleet tier's counters: an unreachable Redis is not an error for a
 * run (the tier is best-effort; the local store and the compiler still
 * serve), so this is where it shows. */
static PyObject *remote_stats(sj_remote *r) {
    if (!r)
        Py_RETURN_NONE;
    sj_remote_stats rs;
    sj_remote_stats_get(r, &rs);
    return Py_BuildValue("{sssKsKsKsKsKsKsKsKsKsKsKsKsK}", "url", sj_remote_url(r), "hits",
                         (unsigned long long)rs.hits, "misses", (unsigned long long)rs.misses,
                         "errors", (unsigned long long)rs.errors, "timeouts",
                         (unsigned long long)rs.timeouts, "rejected",
                         (unsigned long long)rs.rejected, "backoff_skips",
                         (unsigned long long)rs.backoff_skips, "puts",
                         (unsigned long long)rs.puts, "dropped_puts",
                         (unsigned long long)rs.dropped_puts, "leases_won",
                         (unsigned long long)rs.leases_won, "lease_waits",
                         (unsigned long long)rs.lease_waits, "lease_waited_hits",
                         (unsigned long long)rs.lease_waited_hits, "lease_waited_compiles",
                         (unsigned long long)rs.lease_waited_compiles, "lease_errors",
                         (unsigned long long)rs.lease_errors);
}

static PyObject *engine_stats(engine_obj *s, PyObject *unused) {
    if (enter(s) < 0)
        return NULL;
    sj_engine_stats st;
    sj_engine_stats_get(s->e, &st);
    PyObject *remote = remote_stats(sj_engine_remote(s->e));
    leave(s);
    if (!remote)
        return NULL;
    /* weight_bytes: the loaded buckets' weights, one copy; weight_mapped_bytes:
     * of those, read in place from the model's external-data file (page
     * cache, not allocated): as the CLI's --stats says them. */
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsdsisisKsKsKsN}", "runs", (unsigned long long)st.runs, "run_failures",
        (unsigned long long)st.run_failures, "memory_hits", (unsigned long long)st.memory_hits,
        "store_hits", (unsigned long long)st.store_hits, "remote_hits",
        (unsigned long long)st.remote_hits, "compiles", (unsigned long long)st.compiles,
        "corrupt", (unsigned long long)st.corrupt, "store_errors",
        (unsigned long long)st.store_errors, "one_offs", (unsigned long long)st.one_offs,
        "compile_ms", st.compile_ms, "buckets", st.buckets, "buckets_ready", st.buckets_ready,
        "evictions", (unsigned long long)st.evictions, "weight_bytes",
        (unsigned long long)st.weight_bytes, "weight_mapped_bytes",
        (unsigned long long)st.weight_mapped_bytes, "remote", remote);
}

static PyObject *engine_buckets(engine_obj *s, PyObject *unused) {
    if (enter(s) < 0)
        return NULL;
    int n = sj_engine_num_buckets(s->e);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        int64_t lo, hi;
        bool ready;
        if (sj_engine_bucket(s->e, i, &lo, &hi, &ready) != SJ_OK) {
            Py_CLEAR(list);
            sjpy_raise(SJ_E_INTERNAL, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx));
            break;
        }
        PyObject *b = Py_BuildValue("(LLO)", (long long)lo, (long long)hi,
                                    ready ? Py_True : Py_False);
        if (!b)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, b);
    }
    leave(s);
    return list;
}

/* [(name, dtype name, shape tuple with None for the dynamic dim)] */

/* A dim tied to the symbolic one, k * N + c, spelled as a dim_param is
 * ("past+1", "4*batch"), as onnxruntime's NodeArg shapes give names. */
static PyObject *dim_form(sj_engine *e, int64_t v) {
    const char *sym = sj_graph_symbol(sj_engine_graph(e));
    char text[64];
    sj_dim_format(v, sym ? sym : "N", text, sizeof text);
    return PyUnicode_FromString(text);
}

static PyObject *describe(engine_obj *s, int outputs) {
    int n = outputs ? sj_engine_num_outputs(s->e) : sj_engine_num_inputs(s->e);
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        sj_value_desc d;
        sj_status st = outputs ? sj_engine_output(s->e, i, &d) : sj_engine_input(s->e, i, &d);
        if (st != SJ_OK) {
            Py_CLEAR(list);
            sjpy_raise(st, SJPY_PHASE_CALL, sj_ctx_last_error(s->ctx));
            break;
        }
        PyObject *shape = PyTuple_New(d.shape.rank);
        for (int k = 0; shape && k < d.shape.rank; k++) {
            int64_t v = d.shape.dims[k];
            PyObject *dim = v == SJ_DIM_SYM ? Py_NewRef(Py_None) : !sj_dim_is_sym(v) ? PyLong_FromLongLong(v)
                                                                 : dim_form(s->e, v);
            if (!dim)
                Py_CLEAR(shape);
            else
                PyTuple_SET_ITEM(shape, k, dim);
        }
        PyObject *item = shape ? Py_BuildValue("(ssN)", d.name, sjpy_dtype_name(d.dtype), shape)
                               : NULL;
        if (!item)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *engine_io(engine_obj *s, PyObject *unused) {
    if (enter(s) < 0)
        return NULL;
    const char *sym = sj_graph_symbol(sj_engine_graph(s->e));
    PyObject *ins = describe(s, 0);
    PyObject *outs = ins ? describe(s, 1) : NULL;
    leave(s);
    if (!outs) {
        Py_XDECREF(ins);
        return NULL;
    }
    return Py_BuildValue("(zNN)", sym, ins, outs);
}

static PyObject *engine_close(engine_obj *s, PyObject *unused) {
    /* From a progress callback, close() would wait for the precompile that
     * is waiting for the callback. */
    if (s->in_callback)
        return sjpy_raise_named("StateError", SJ_E_STATE,
                                "close() from a precompile progress callback: close after "
                                "precompile() returns");
    close_engine(s);
    Py_RETURN_NONE;
}

static PyObject *engine_closed(engine_obj *s, void *unused) {
    return PyBool_FromLong(atomic_load(&s->closed) || !s->e);
}

static PyMethodDef engine_methods[] = {
    {"run", (PyCFunction)engine_run, METH_O,
     "run(inputs: dict[str, array]) -> dict[str, numpy.ndarray]\n\n"
     "Runs one request; every model input once, by name. The GIL is released while it runs."},
    {"_precompile", (PyCFunction)(void (*)(void))engine_precompile, METH_VARARGS | METH_KEYWORDS,
     "_precompile(jobs=0, progress=None): sj_engine_precompile."},
    {"stats", (PyCFunction)engine_stats, METH_NOARGS,
     "stats() -> dict: the engine's counters (the figures of the CLI's --stats)."},
    {"_buckets", (PyCFunction)engine_buckets, METH_NOARGS, "[(lo, hi, ready)] per bucket."},
    {"_io", (PyCFunction)engine_io, METH_NOARGS,
     "(symbol, inputs, outputs): [(name, dtype, shape with None for the dynamic dim)]."},
    {"close", (PyCFunction)engine_close, METH_NOARGS,
     "close(): waits for calls in flight, then frees everything; later calls raise "
     "ClosedError. Arrays already returned stay valid. Calling it twice is harmless."},
    {NULL, NULL, 0, NULL},
};

/* Strings the engine keeps for its lifetime (target, fallback warning). */
static PyObject *engine_string(engine_obj *s, const char *(*get)(const sj_engine *)) {
    if (enter(s) < 0)
        return NULL;
    PyObject *r = PyUnicode_FromString(get(s->e));
    leave(s);
    return r;
}

static PyObject *engine_target(engine_obj *s, void *unused) {
    return engine_string(s, sj_engine_target);
}

static PyObject *engine_warning(engine_obj *s, void *unused) {
    return engine_string(s, sj_engine_warning);
}

static PyGetSetDef engine_getset[] = {
    {"target", (getter)engine_target, NULL,
     "What the engine compiles for: \"host\", \"interp\", \"nvptx sm_90\", ...", NULL},
    {"_warning", (getter)engine_warning, NULL,
     "Why the default store fell back to memory; \"\" when it did not.", NULL},
    {"closed", (getter)engine_closed, NULL, "True once close() ran (or opening failed).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject engine_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shapejit._Engine",
    .tp_basicsize = sizeof(engine_obj),
    .tp_dictoffset = offsetof(engine_obj, dict),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_traverse = (traverseproc)engine_traverse,
    .tp_clear = (inquiry)engine_clear,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C core of shapejit.Engine (use that class).",
    .tp_methods = engine_methods,
    .tp_getset = engine_getset,
    .tp_init = (initproc)engine_init,
    .tp_new = PyType_GenericNew,
};

int sjpy_engine_init(PyObject *module) {
    if (PyType_Ready(&engine_type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "_Engine", (PyObject *)&engine_type);
}

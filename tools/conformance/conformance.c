/* The ONNX backend node-test runner: load each test's model, feed every
 * data set through a backend, compare with the expected outputs. */
#include "formats/onnx/onnx_impl.h"
#include "tools/conformance/conformance.h"

#include <dirent.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MSG_LEN 1024

void sj_onnx_conformance_options_init(sj_onnx_conformance_options *o) {
    memset(o, 0, sizeof *o);
    o->rtol = 1e-3;
    o->atol = 1e-7;
}

/* One test's state: what it found and how it ended. */
typedef struct test_run {
    sj_ctx *ctx;
    const sj_onnx_backend *backend;
    const sj_onnx_conformance_options *o;
    const char *dir; /* the test folder */
    sj_onnx_test_outcome outcome;
    char msg[MSG_LEN];
} test_run;

static void set_outcome(test_run *t, sj_onnx_test_outcome oc, const char *fmt, ...)
    SJ_PRINTF(3, 4);
static void set_outcome(test_run *t, sj_onnx_test_outcome oc, const char *fmt, ...) {
    t->outcome = oc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->msg, sizeof t->msg, fmt, ap);
    va_end(ap);
}

static void from_status(test_run *t, sj_status st, const char *what) {
    char m[MSG_LEN];
    snprintf(m, sizeof m, "%s%s", what, sj_ctx_last_error(t->ctx));
    set_outcome(t, st == SJ_E_UNSUPPORTED ? SJ_ONNX_TEST_UNSUPPORTED : SJ_ONNX_TEST_FAILED, "%s", m);
}

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* dir + "/" + name; false when it does not fit (such a path is skipped). */
static bool join(char *buf, size_t len, const char *dir, const char *name) {
    int n = snprintf(buf, len, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < len;
}

static int is_data_set(const struct dirent *d) {
    return !strncmp(d->d_name, "test_data_set_", 14);
}

/* Reads <set>/<prefix>_<k>.pb for k = 0, 1, ... until one is missing. */
static sj_status read_tensors(test_run *t, const char *set, const char *prefix,
                              sj_onnx_tensor **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    sj_ctx *ctx = t->ctx;
    int cap = 0;
    for (int k = 0;; k++) {
        char path[4096], file[64];
        snprintf(file, sizeof file, "%s_%d.pb", prefix, k);
        if (!join(path, sizeof path, set, file) || !file_exists(path)) return SJ_OK;
        char *bytes;
        size_t len;
        SJ_TRY(sj__read_file(ctx, path, &bytes, &len));
        Onnx__TensorProto *tp;
        sj_onnx_pb_alloc pa;
        sj__onnx_pb_alloc_init(&pa, ctx);
        sj_status st = sj__onnx_tensor_unpack(&pa, bytes, len, path, &tp);
        sj_free(ctx, bytes);
        if (st != SJ_OK) return st;
        if (*n_out == cap) {
            int nc = cap ? 2 * cap : 4;
            sj_onnx_tensor *grown = sj_realloc(ctx, *out, (size_t)nc * sizeof **out);
            if (!grown) st = sj_fail(ctx, SJ_E_NOMEM, "out of memory");
            else {
                *out = grown;
                cap = nc;
            }
        }
        if (st == SJ_OK) st = sj__onnx_tensor_decode(ctx, tp, path, NULL, &(*out)[*n_out]);
        onnx__tensor_proto__free_unpacked(tp, &pa.base);
        if (st != SJ_OK) return st;
        (*n_out)++;
    }
}

static void free_tensors(sj_ctx *ctx, sj_onnx_tensor *ts, int n) {
    for (int i = 0; i < n; i++) sj__onnx_tensor_release(ctx, &ts[i]);
    sj_free(ctx, ts);
}

static void format_dims(const int64_t *dims, int rank, char *buf, size_t len) {
    size_t used = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (used < len) snprintf(buf + used, len - used, "]");
}

/* Compares one output; on a mismatch writes the worst element into t. */
static bool compare(test_run *t, const char *set, const char *name, const sj_tensor *got,
                    const sj_onnx_tensor *want) {
    char m[MSG_LEN];
    bool same_shape = got->rank == want->rank;
    for (int i = 0; same_shape && i < got->rank; i++) same_shape = got->dims[i] == want->dims[i];
    if (!same_shape) {
        char g[128], w[128];
        format_dims(got->dims, got->rank, g, sizeof g);
        format_dims(want->dims, want->rank, w, sizeof w);
        snprintf(m, sizeof m, "%s: output '%s' has shape %s, expected %s", set, name, g, w);
        set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m);
        return false;
    }
    sj_dtype wt;
    if (!sj__onnx_dtype_to_sj(want->dtype, &wt) || wt != got->dtype) {
        snprintf(m, sizeof m, "%s: output '%s' is %s, expected %s", set, name,
                 sj_dtype_name(got->dtype), sj__onnx_dtype_name(want->dtype));
        set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m);
        return false;
    }
    if (wt != SJ_F32) { /* integers and bools: exact */
        for (int64_t i = 0; i < want->numel; i++) {
            int64_t g = wt == SJ_I64 ? got->i64[i] : wt == SJ_I32 ? got->i32[i] : got->b8[i];
            if (g == want->i[i]) continue;
            snprintf(m, sizeof m, "%s: output '%s' index %lld: got %lld, expected %lld", set,
                     name, (long long)i, (long long)g, (long long)want->i[i]);
            set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m);
            return false;
        }
        return true;
    }
    int64_t bad = 0, worst = -1;
    double worst_err = 0;
    for (int64_t i = 0; i < want->numel; i++) {
        double e = want->f[i], g = got->data[i];
        bool ok;
        if (isnan(e))
            ok = isnan(g);
        else if (isinf(e))
            ok = g == e;
        else
            ok = !isnan(g) && fabs(g - e) <= t->o->atol + t->o->rtol * fabs(e);
        if (ok) continue;
        bad++;
        double err = isnan(g) || isnan(e) || isinf(g) || isinf(e) ? INFINITY : fabs(g - e);
        if (worst < 0 || err > worst_err) {
            worst = i;
            worst_err = err;
        }
    }
    if (!bad) return true;
    snprintf(m, sizeof m,
             "%s: output '%s' index %lld: got %.9g, expected %.9g (error %.3g; %lld of %lld "
             "elements outside rtol %g atol %g)",
             set, name, (long long)worst, (double)got->data[worst], (double)want->f[worst],
             worst_err, (long long)bad, (long long)want->numel, t->o->rtol, t->o->atol);
    set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m);
    return false;
}

/* The model's runtime inputs (not initialisers), in order. */
static int runtime_inputs(const Onnx__ModelProto *m, const char **names, int max) {
    const Onnx__GraphProto *gp = m->graph;
    int n = 0;
    for (size_t i = 0; gp && i < gp->n_input; i++) {
        const char *name = gp->input[i]->name;
        bool init = false;
        for (size_t j = 0; name && j < gp->n_initializer && !init; j++)
            init = gp->initializer[j]->name && !strcmp(gp->initializer[j]->name, name);
        if (!name || init) continue;
        if (n < max) names[n] = name;
        n++;
    }
    return n;
}

#define MAX_IO 64

/* Whether every node reading graph input `name` reads it as an operator
 * parameter that a model would hold as a constant (Resize's roi, scales
 * and sizes, Upsample's scales), and some node does. Node tests feed such
 * parameters as inputs; a served model has them in its initialisers. */
static bool only_parameter_input(const Onnx__ModelProto *m, const char *name) {
    const Onnx__GraphProto *gp = m->graph;
    bool used = false;
    for (size_t i = 0; gp && i < gp->n_node; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        for (size_t k = 0; k < nd->n_input; k++) {
            if (!nd->input[k] || strcmp(nd->input[k], name)) continue;
            bool param = (!strcmp(nd->op_type, "Resize") && k >= 1) ||
                         (!strcmp(nd->op_type, "Upsample") && k == 1);
            if (!param) return false;
            used = true;
        }
    }
    return used;
}

/* Runs one data set; returns false once the test's outcome is settled. */
static bool run_set(test_run *t, const char *model_path, const void *bytes, size_t len,
                    const Onnx__ModelProto *m, const char *set_dir, const char *set_name) {
    sj_ctx *ctx = t->ctx;
    sj_onnx_tensor *ins = NULL, *wants = NULL;
    int n_in = 0, n_want = 0;
    sj_graph *g = NULL;
    sj_tensor feeds[MAX_IO], outs[MAX_IO];
    int n_outs = 0, n_feeds = 0;
    bool go_on = false;
    char m_[MSG_LEN];

    sj_status st = read_tensors(t, set_dir, "input", &ins, &n_in);
    if (st != SJ_OK) {
        from_status(t, st, "");
        goto done;
    }
    const char *names[MAX_IO];
    int n_names = runtime_inputs(m, names, MAX_IO);
    if (n_names != n_in || n_in > MAX_IO) {
        snprintf(m_, sizeof m_, "%s: %d input files for %d model inputs", set_name, n_in, n_names);
        set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m_);
        goto done;
    }
    /* small int64 vectors are shapes, axes and bounds, and an op's
     * parameter inputs are parameters: bind them as constants; other
     * tensors (int and bool data) are fed at run time */
    sj_onnx_binding bound[MAX_IO];
    int n_bound = 0;
    for (int i = 0; i < n_in; i++)
        if ((ins[i].dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && ins[i].rank <= 1 &&
             ins[i].numel <= 8) ||
            (ins[i].rank <= 1 && only_parameter_input(m, names[i])))
            bound[n_bound++] = (sj_onnx_binding){names[i], &ins[i]};
    /* node tests have no dim_param: no symbolic dim, a single bucket */
    sj_model_options mo = {.size = sizeof mo, .dynamic_name = NULL, .dynamic_input = NULL};
    st = sj__onnx_load_bound(ctx, bytes, len, model_path, &mo, n_bound, bound, &g);
    if (st != SJ_OK) {
        from_status(t, st, "");
        goto done;
    }
    int gi = sj_graph_num_inputs(g);
    n_outs = sj_graph_num_outputs(g);
    if (gi > MAX_IO || n_outs > MAX_IO) {
        set_outcome(t, SJ_ONNX_TEST_UNSUPPORTED, "%s", "too many inputs or outputs");
        n_outs = 0;
        goto done;
    }
    int64_t extent = 1;
    for (int j = 0; j < gi; j++) {
        sj_value_desc d;
        sj_graph_input_desc(g, j, &d);
        int k = 0;
        while (k < n_in && strcmp(names[k], d.name)) k++;
        if (k == n_in) {
            snprintf(m_, sizeof m_, "%s: no input file for '%s'", set_name, d.name);
            set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m_);
            n_outs = 0;
            goto done;
        }
        if (ins[k].rank > SJ_MAX_RANK) {
            set_outcome(t, SJ_ONNX_TEST_UNSUPPORTED, "input '%s' has too high a rank", d.name);
            n_outs = 0;
            goto done;
        }
        st = sj__onnx_tensor_to_host(ctx, &ins[k], names[k], &feeds[j]);
        if (st != SJ_OK) {
            from_status(t, st, "");
            n_outs = 0;
            n_feeds = j;
            goto done;
        }
        n_feeds = j + 1;
        for (int a = 0; a < d.shape.rank && a < ins[k].rank; a++)
            if (d.shape.dims[a] == SJ_DIM_SYM) extent = ins[k].dims[a];
    }
    st = t->backend->run(t->backend->user, g, extent, feeds, outs);
    if (st != SJ_OK) {
        n_outs = 0;
        snprintf(m_, sizeof m_, "%s: backend %s: ", set_name, t->backend->name);
        from_status(t, st, m_);
        goto done;
    }
    st = read_tensors(t, set_dir, "output", &wants, &n_want);
    if (st != SJ_OK) {
        from_status(t, st, "");
        goto done;
    }
    if (n_want != n_outs) {
        snprintf(m_, sizeof m_, "%s: the graph has %d outputs, the data set %d", set_name, n_outs,
                 n_want);
        set_outcome(t, SJ_ONNX_TEST_FAILED, "%s", m_);
        goto done;
    }
    for (int j = 0; j < n_outs; j++) {
        sj_dtype wt;
        if (!sj__onnx_dtype_to_sj(wants[j].dtype, &wt)) {
            set_outcome(t, SJ_ONNX_TEST_UNSUPPORTED, "expected output of dtype %s",
                        sj__onnx_dtype_name(wants[j].dtype));
            goto done;
        }
        sj_value_desc d;
        sj_graph_output_desc(g, j, &d);
        if (!compare(t, set_name, d.name, &outs[j], &wants[j])) goto done;
    }
    go_on = true;
done:
    for (int j = 0; j < n_outs; j++) sj_tensor_free(ctx, &outs[j]);
    for (int j = 0; j < n_feeds; j++) sj_tensor_free(ctx, &feeds[j]);
    sj_graph_destroy(g);
    free_tensors(ctx, ins, n_in);
    free_tensors(ctx, wants, n_want);
    return go_on;
}

static void run_test(test_run *t) {
    sj_ctx *ctx = t->ctx;
    char model_path[4096];
    if (!join(model_path, sizeof model_path, t->dir, "model.onnx")) {
        set_outcome(t, SJ_ONNX_TEST_FAILED, "%s: path too long", t->dir);
        return;
    }
    char *bytes = NULL;
    size_t len = 0;
    sj_status st = sj__read_file(ctx, model_path, &bytes, &len);
    if (st != SJ_OK) {
        from_status(t, st, "");
        return;
    }
    sj_onnx_pb_alloc pa;
    sj__onnx_pb_alloc_init(&pa, ctx);
    Onnx__ModelProto *m;
    st = sj__onnx_model_unpack(&pa, bytes, len, model_path, &m);
    struct dirent **sets = NULL;
    int n_sets = m ? scandir(t->dir, &sets, is_data_set, alphasort) : 0;
    t->outcome = SJ_ONNX_TEST_PASSED;
    t->msg[0] = 0;
    if (!m) {
        from_status(t, st, "");
    } else if (n_sets <= 0) {
        set_outcome(t, SJ_ONNX_TEST_FAILED, "%s: no test_data_set_* folder", t->dir);
    } else {
        for (int i = 0; i < n_sets; i++) {
            char set_dir[4096];
            if (!join(set_dir, sizeof set_dir, t->dir, sets[i]->d_name)) continue;
            if (!run_set(t, model_path, bytes, len, m, set_dir, sets[i]->d_name)) break;
        }
    }
    for (int i = 0; i < n_sets; i++) free(sets[i]);
    free(sets);
    if (m) onnx__model_proto__free_unpacked(m, &pa.base);
    sj_free(ctx, bytes);
}

sj_status sj_onnx_conformance_run(sj_ctx *ctx, const char *dir, const sj_onnx_backend *backend,
                                  const sj_onnx_conformance_options *o,
                                  sj_onnx_conformance_summary *out) {
    memset(out, 0, sizeof *out);
    sj_onnx_conformance_options defaults;
    if (!o) {
        sj_onnx_conformance_options_init(&defaults);
        o = &defaults;
    }
    if (!backend || !backend->run) return sj_fail(ctx, SJ_E_INVALID_ARG, "no backend given");
    regex_t re;
    if (o->only) {
        int rc = regcomp(&re, o->only, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[256];
            regerror(rc, &re, why, sizeof why);
            return sj_fail(ctx, SJ_E_INVALID_ARG, "bad regular expression '%s': %s", o->only, why);
        }
    }
    struct dirent **tests = NULL;
    int n = scandir(dir, &tests, NULL, alphasort);
    if (n < 0) {
        if (o->only) regfree(&re);
        return sj_fail(ctx, SJ_E_IO, "%s: cannot list the folder", dir);
    }
    for (int i = 0; i < n; i++) {
        const char *name = tests[i]->d_name;
        char test_dir[4096], model[4096];
        if (name[0] == '.' || !join(test_dir, sizeof test_dir, dir, name) ||
            !join(model, sizeof model, test_dir, "model.onnx") || !file_exists(model))
            continue;
        if (o->only && regexec(&re, name, 0, NULL, 0) != 0) continue;
        test_run t = {.ctx = ctx, .backend = backend, .o = o, .dir = test_dir};
        run_test(&t);
        if (t.outcome == SJ_ONNX_TEST_PASSED) out->passed++;
        else if (t.outcome == SJ_ONNX_TEST_FAILED) out->failed++;
        else out->unsupported++;
        if (o->report) {
            sj_onnx_test_result r = {name, t.outcome, t.msg};
            o->report(o->report_user, &r);
        }
    }
    for (int i = 0; i < n; i++) free(tests[i]);
    free(tests);
    if (o->only) regfree(&re);
    sj_ctx_clear_error(ctx);
    return SJ_OK;
}

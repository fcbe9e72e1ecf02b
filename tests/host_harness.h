/* Test helpers for the host backend: run an artifact's launch plan on the
 * host device the way an executor does (pad inputs to the bucket extent,
 * launch every kernel with the active extent, slice outputs), with every
 * padded element, the arena and the outputs poisoned with NaN first so that
 * any read of padding shows up in the results; compare against the
 * interpreter. Included by cmocka test_*.c files only, after <cmocka.h>. */
#ifndef SJ_TESTS_HOST_HARNESS_H
#define SJ_TESTS_HOST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shapejit/ext/compile.h"
#include "shapejit/ext/interp.h"
#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"
#include "shapejit/model.h"
#include "plan/artifact_impl.h"
#include "runtime/host_code/host_code.h"
#include "ir/graph_impl.h"

/* All-ones bytes: NaN as float32, -1 as int64/int32, 0xff (true) as bool. */
static void h_poison(float *p, int64_t n) { memset(p, 0xff, (size_t)n * sizeof *p); }

/* Copies between a dense tensor of shape s at n and its padded layout at E,
 * elements of es bytes. */
static void h_copy_padded_es(const sj_shape *s, int64_t n, int64_t E, void *padded, void *dense,
                             int to_padded, size_t es) {
    int64_t dn[SJ_MAX_RANK], st[SJ_MAX_RANK], idx[SJ_MAX_RANK] = {0}, total = 1, acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        dn[i] = sj_dim_at(s->dims[i], n);
        st[i] = acc;
        acc *= sj_dim_at(s->dims[i], E);
        total *= dn[i];
    }
    for (int64_t f = 0; f < total; f++) {
        int64_t rem = f, off = 0;
        for (int i = s->rank - 1; i >= 0; i--) {
            idx[i] = rem % dn[i];
            rem /= dn[i];
            off += idx[i] * st[i];
        }
        if (to_padded) memcpy((char *)padded + off * es, (char *)dense + f * es, es);
        else memcpy((char *)dense + f * es, (char *)padded + off * es, es);
    }
}


/* What the executor checks before it pads (runtime/exec_run.c): n inside the
 * bucket and every input at n. The copies below trust both: n past E wrote
 * n rows into E-row buffers (the heap corrupted, seen first as BERT's
 * [1, seq] ids at seq 100 in a 64 bucket). */
static sj_status h_check_request(const sj_graph *g, int64_t E, int64_t n, const sj_tensor *inputs) {
    if (n < 1 || n > E)
        return sj_fail(g->ctx, SJ_E_OUT_OF_RANGE, "h_run: active extent %lld outside the bucket 1..%lld",
                       (long long)n, (long long)E);
    for (int i = 0; i < g->n_inputs; i++) {
        const sj_node *in = &g->nodes[g->inputs[i]];
        sj_shape at = sj_shape_at(&in->shape, n);
        if (inputs[i].dtype != in->dtype || inputs[i].rank != at.rank ||
            memcmp(inputs[i].dims, at.dims, (size_t)at.rank * sizeof *at.dims))
            return sj_fail(g->ctx, SJ_E_SHAPE, "h_run: input %d is not the graph's %s at extent %lld",
                           i, sj_dtype_name(in->dtype), (long long)n);
    }
    return SJ_OK;
}

/* Runs artifact a (compiled from g) at active extent n. outputs are allocated. */
static sj_status h_run(sj_device *dev, const sj_artifact *a, const sj_graph *g, int64_t n,
                       const sj_tensor *inputs, sj_tensor *outputs) {
    sj_ctx *ctx = g->ctx;
    const sj_launch_plan *p = sj__artifact_plan(a);
    int64_t E = p->extent;
    const uint8_t *code;
    size_t len;
    SJ_TRY(sj_artifact_check_host(a));
    SJ_TRY(h_check_request(g, E, n, inputs));
    SJ_TRY(sj_artifact_find_code(a, SJ_CODE_HOST_OBJECT, &code, &len));
    sj_module *mod;
    SJ_TRY(sj_device_load_module(dev, SJ_CODE_HOST_OBJECT, code, len, &mod));
    float **slot = calloc((size_t)p->n_slots + 1, sizeof *slot);
    float *arena = malloc((size_t)p->arena_bytes + 4);
    h_poison(arena, p->arena_bytes / 4);
    for (int i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        if (s->kind == SJ_SLOT_ARENA) {
            slot[i] = arena + s->offset / 4;
            continue;
        }
        slot[i] = malloc((size_t)s->bytes + 4);
        h_poison(slot[i], (s->bytes + 3) / 4);
        if (s->kind == SJ_SLOT_INPUT) {
            const sj_node *in = &g->nodes[g->inputs[s->index]];
            h_copy_padded_es(&in->shape, n, E, slot[i], inputs[s->index].data, 1,
                             sj_dtype_size(in->dtype));
        } else if (s->kind == SJ_SLOT_PARAM) {
            sj_precision storage = (sj_precision)sj_slot_storage(s);
            if (storage != SJ_PRECISION_FP32) /* narrowed as the runtime narrows it */
                sj__precision_round(storage, g->nodes[s->index].data, slot[i], s->bytes / 2);
            else
                memcpy(slot[i], g->nodes[s->index].data, (size_t)s->bytes);
        } else if (s->kind == SJ_SLOT_PACKED) { /* packed as the runtime packs it */
            const int64_t *w = p->words + s->offset;
            sj__host_gemm_pack_slot(w, (const float *)g->nodes[s->index].data, slot[i]);
        }
    }
    sj_status st = SJ_OK;
    void *bufs[256];
    for (int l = 0; l < p->n_launches && st == SJ_OK; l++) {
        const sj_launch *la = &p->launches[l];
        sj_kernel_handle k;
        sj_kernel_attrs at;
        st = sj_module_kernel(mod, p->kernels[la->kernel].name, &k, &at);
        for (int i = 0; i < la->n_slots; i++) bufs[i] = slot[p->launch_slots[la->first_slot + i]];
        sj_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
        if (st == SJ_OK)
            st = sj_device_launch(dev, k, &dims, bufs, p->words + la->first_word, n);
    }
    for (int o = 0; o < g->n_outputs && st == SJ_OK; o++) {
        const sj_node *on = &g->nodes[g->outputs[o].value];
        const sj_shape *s = &on->shape;
        sj_shape at = sj_shape_at(s, n);
        st = sj_tensor_alloc_typed(ctx, on->dtype, at.rank, at.dims, &outputs[o]);
        for (int i = 0; i < p->n_slots && st == SJ_OK; i++)
            if (p->slots[i].kind == SJ_SLOT_OUTPUT && p->slots[i].index == o)
                h_copy_padded_es(s, n, E, slot[i], outputs[o].data, 0, sj_dtype_size(on->dtype));
    }
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].kind != SJ_SLOT_ARENA) free(slot[i]);
    free(slot);
    free(arena);
    sj_module_destroy(mod);
    return st;
}

/* Equal within tolerance; NaN matches NaN, an infinity matches itself. */
static int h_close(float got, float want, double tol) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want || fabs((double)got - want) <= tol * fabs(want);
    return fabs((double)got - want) <= tol * (1.0 + fabs(want));
}

/* Compares host vs interpreter for every output; prints the first mismatch. */
static int h_compare(const sj_graph *g, const sj_tensor *got, const sj_tensor *want, double tol,
                     const char *what) {
    for (int o = 0; o < g->n_outputs; o++) {
        int64_t count = sj_tensor_numel(&want[o]);
        if (sj_tensor_numel(&got[o]) != count) {
            printf("%s: output %d element count %lld vs %lld\n", what, o,
                   (long long)sj_tensor_numel(&got[o]), (long long)count);
            return 0;
        }
        if (got[o].dtype != want[o].dtype) {
            printf("%s: output %d is %s, the interpreter's %s\n", what, o,
                   sj_dtype_name(got[o].dtype), sj_dtype_name(want[o].dtype));
            return 0;
        }
        if (want[o].dtype != SJ_F32) { /* ints and bools: exact */
            size_t es = sj_dtype_size(want[o].dtype);
            for (int64_t i = 0; i < count; i++)
                if (memcmp((char *)got[o].bytes + i * es, (char *)want[o].bytes + i * es, es)) {
                    printf("%s: output %d element %lld differs (%s)\n", what, o, (long long)i,
                           sj_dtype_name(want[o].dtype));
                    return 0;
                }
            continue;
        }
        for (int64_t i = 0; i < count; i++)
            if (!h_close(got[o].data[i], want[o].data[i], tol)) {
                printf("%s: output %d element %lld: host %.9g, interpreter %.9g\n", what, o,
                       (long long)i, got[o].data[i], want[o].data[i]);
                return 0;
            }
    }
    return 1;
}

static uint64_t h_rng(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static float h_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)((h_rng(s) >> 11) * (1.0 / 9007199254740992.0));
}

/* Random inputs for g at n (caller frees with h_free_tensors): floats in
 * [-2, 2), ints in [-3, 9) (ids past either end of small tables), bools. */
static void h_inputs(const sj_graph *g, int64_t n, uint64_t *seed, sj_tensor *in) {
    for (int i = 0; i < g->n_inputs; i++) {
        const sj_node *nd = &g->nodes[g->inputs[i]];
        sj_shape at = sj_shape_at(&nd->shape, n);
        sj_tensor_alloc_typed(g->ctx, nd->dtype, at.rank, at.dims, &in[i]);
        for (int64_t j = 0; j < sj_tensor_numel(&in[i]); j++) {
            int64_t r = (int64_t)(h_rng(seed) % 12) - 3;
            if (nd->dtype == SJ_I64) in[i].i64[j] = r;
            else if (nd->dtype == SJ_I32) in[i].i32[j] = (int32_t)r;
            else if (nd->dtype == SJ_BOOL) in[i].b8[j] = (uint8_t)(r & 1);
            else in[i].data[j] = h_uniform(seed, -2, 2);
        }
    }
}

static void h_free_tensors(sj_ctx *ctx, sj_tensor *t, int n) {
    for (int i = 0; i < n; i++) sj_tensor_free(ctx, &t[i]);
}

/* h_check with the interpreter run on ref (g itself, or g under a policy). */
static int h_check_against(sj_device *dev, const sj_graph *g, const sj_graph *ref, int64_t E,
                           const int64_t *ns, int n_ns, const sj_compile_options *o, uint64_t seed,
                           double tol, const char *what) {
    sj_artifact *a;
    if (sj_compile(g, E, o, &a) != SJ_OK) {
        printf("%s: compile at %lld failed: %s\n", what, (long long)E, sj_ctx_last_error(g->ctx));
        return 0;
    }
    sj_executable *exe = NULL;
    if (sj_artifact_load(a, dev, g, &exe) != SJ_OK) {
        printf("%s: load at %lld failed: %s\n", what, (long long)E, sj_ctx_last_error(g->ctx));
        sj_artifact_destroy(a);
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < n_ns && ok; i++) {
        sj_tensor in[8] = {0}, got[8] = {0}, want[8] = {0}, ran[8] = {0};
        h_inputs(g, ns[i], &seed, in);
        char label[160];
        snprintf(label, sizeof label, "%s (E=%lld, n=%lld)", what, (long long)E, (long long)ns[i]);
        if (sj_interp_run(ref, ns[i], in, want) != SJ_OK) {
            printf("%s: interpreter failed: %s\n", label, sj_ctx_last_error(g->ctx));
            ok = 0;
        } else if (h_run(dev, a, g, ns[i], in, got) != SJ_OK) {
            printf("%s: host run failed: %s\n", label, sj_ctx_last_error(g->ctx));
            ok = 0;
            h_free_tensors(g->ctx, want, g->n_outputs);
        } else if (sj_executable_run(exe, ns[i], in, ran) != SJ_OK) {
            printf("%s: executable run failed: %s\n", label, sj_ctx_last_error(g->ctx));
            ok = 0;
            h_free_tensors(g->ctx, got, g->n_outputs);
            h_free_tensors(g->ctx, want, g->n_outputs);
        } else {
            ok = h_compare(g, got, want, tol, label) && h_compare(g, ran, want, tol, label);
            h_free_tensors(g->ctx, got, g->n_outputs);
            h_free_tensors(g->ctx, ran, g->n_outputs);
            h_free_tensors(g->ctx, want, g->n_outputs);
        }
        h_free_tensors(g->ctx, in, g->n_inputs);
    }
    sj_executable_destroy(exe);
    sj_artifact_destroy(a);
    return ok;
}

/* Compiles g at E and checks host == interpreter at every extent in ns, both
 * through the poisoning harness and through the runtime's executable
 * (sj_artifact_load + sj_executable_run), which is what serving uses. Under
 * a precision policy the interpreter runs the policy's graph
 * (sj_graph_apply_precision), the rounding-aware reference. */
static inline int h_check(sj_device *dev, const sj_graph *g, int64_t E, const int64_t *ns, int n_ns,
                   const sj_compile_options *o, uint64_t seed, double tol, const char *what) {
    sj_graph *rounded = NULL;
    const sj_graph *ref = g;
    if (o && o->precision != SJ_PRECISION_FP32) {
        if (sj_graph_apply_precision(g, o->precision, &rounded) != SJ_OK) {
            printf("%s: precision transform failed: %s\n", what, sj_ctx_last_error(g->ctx));
            return 0;
        }
        ref = rounded;
    }
    int ok = h_check_against(dev, g, ref, E, ns, n_ns, o, seed, tol, what);
    sj_graph_destroy(rounded);
    return ok;
}

/* An exporter's model, read as the tests read them: batch 1, seq the
 * symbolic dim. */
static inline sj_graph *h_load_exported(sj_ctx *ctx, const char *path) {
    sj_model_options mo;
    sj_model_options_init(&mo);
    sj_dim_value batch[] = {{"batch", 1}};
    mo.dynamic_name = "seq";
    mo.fixed_dims = batch;
    mo.n_fixed_dims = 1;
    sj_graph *g = NULL;
    if (sj_model_load(ctx, path, &mo, &g) != SJ_OK) fail_msg("%s: %s", path, sj_ctx_last_error(ctx));
    return g;
}

/* A test group's state: a context, a host device and an empty graph with
 * the symbolic dim N; seed feeds the group's random inputs. */
typedef struct fixture {
    sj_ctx *ctx;
    sj_device *dev;
    sj_graph *g;
    uint64_t seed;
} fixture;

static inline int h_fixture_setup(void **state, uint64_t seed) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    if (sj_host_device_create(f->ctx, NULL, &f->dev) != SJ_OK) return -1;
    if (sj_graph_create(f->ctx, "N", &f->g) != SJ_OK) return -1;
    f->seed = seed;
    *state = f;
    return 0;
}

static inline int h_fixture_teardown(void **state) {
    fixture *f = *state;
    sj_graph_destroy(f->g);
    sj_device_destroy(f->dev);
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

static inline sj_value input(fixture *f, const char *name, int rank, const int64_t *dims) {
    sj_value v;
    assert_int_equal(sj_graph_input(f->g, name, rank, dims, &v), SJ_OK);
    return v;
}

/* A param of seeded values uniform in [-1, 1). */
static inline sj_value param(fixture *f, const char *name, int rank, const int64_t *dims) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    float *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = h_uniform(&f->seed, -1, 1);
    sj_value v;
    assert_int_equal(sj_graph_param(f->g, name, rank, dims, d, &v), SJ_OK);
    free(d);
    return v;
}

#endif

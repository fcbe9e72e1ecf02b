/* The CUDA C emitter's kernels executed on the host, without a GPU: the
 * generated source is compiled as C++ against a small emulation of the CUDA
 * built-ins (one OS thread per CUDA thread, blocks one after another, a
 * barrier for __syncthreads, __shared__ as block-wide statics) and the launch
 * plan runs with the plan's own grid and block sizes at several active
 * extents. Padding, arena and outputs are poisoned with NaN first, so a
 * kernel that reads padding or misses an active element shows up against the
 * interpreter. Catches schedule, indexing, bounds, reduction-tree and tiling
 * bugs that "it compiles" cannot. Skips where no C++ compiler is found. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shapejit/interp.h"
#include "jit/graph/graph_impl.h"
#include "jit/lower/lower.h"
#include "jit/nvrtc/gpu_emit.h"
#include "jit/nvrtc/gpu_schedule.h"
#include "gpu_graphs.h"

extern char **environ;

#define CXX "/usr/bin/c++"
#define TOL 1e-3
#define N_RANDOM 10

static const char emu_prelude[] =
    "#include <math.h>\n"
    "#include <pthread.h>\n"
    "#include <string.h>\n"
    "struct sj_dim3 { unsigned x, y, z; };\n"
    "static thread_local sj_dim3 threadIdx, blockIdx;\n"
    "static sj_dim3 blockDim, gridDim;\n"
    "static pthread_barrier_t sj_bar;\n"
    "#define __global__\n"
    "#define __device__\n"
    "#define __forceinline__ inline\n"
    "#define __launch_bounds__(x)\n"
    "#define __shared__ static\n"
    "#define __restrict__ __restrict\n"
    "static inline void __syncthreads() { pthread_barrier_wait(&sj_bar); }\n"
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }\n";

static const char emu_runner[] =
    "typedef void (*sj_kfn)(void *const *, const long long *, long long);\n"
    "struct sj_targ { sj_kfn fn; void *const *b; const long long *info; long long n; sj_dim3 t, blk; };\n"
    "static void *sj_thread(void *p) {\n"
    "    sj_targ *a = (sj_targ *)p;\n"
    "    threadIdx = a->t;\n"
    "    blockIdx = a->blk;\n"
    "    a->fn(a->b, a->info, a->n);\n"
    "    return 0;\n"
    "}\n"
    "extern \"C\" int sj_emu_launch(sj_kfn fn, const unsigned *grid, const unsigned *block,\n"
    "                              void *const *b, const long long *info, long long n) {\n"
    "    blockDim = {block[0], block[1], block[2]};\n"
    "    gridDim = {grid[0], grid[1], grid[2]};\n"
    "    unsigned T = block[0] * block[1] * block[2];\n"
    "    pthread_t *th = new pthread_t[T];\n"
    "    sj_targ *args = new sj_targ[T];\n"
    "    int rc = 0;\n"
    "    for (unsigned bz = 0; bz < grid[2]; bz++)\n"
    "    for (unsigned by = 0; by < grid[1]; by++)\n"
    "    for (unsigned bx = 0; bx < grid[0]; bx++) {\n"
    "        pthread_barrier_init(&sj_bar, 0, T);\n"
    "        for (unsigned t = 0; t < T; t++) {\n"
    "            args[t] = {fn, b, info, n, {t % block[0], (t / block[0]) % block[1], t / (block[0] * block[1])}, {bx, by, bz}};\n"
    "            if (pthread_create(&th[t], 0, sj_thread, &args[t])) { rc = -1; T = t; break; }\n"
    "        }\n"
    "        for (unsigned t = 0; t < T; t++) pthread_join(th[t], 0);\n"
    "        pthread_barrier_destroy(&sj_bar);\n"
    "        if (rc) break;\n"
    "    }\n"
    "    delete[] th;\n"
    "    delete[] args;\n"
    "    return rc;\n"
    "}\n";

typedef int (*emu_launch_fn)(void (*)(void *const *, const long long *, long long), const unsigned *,
                             const unsigned *, void *const *, const long long *, long long);

typedef struct fixture {
    sj_ctx *ctx;
    int have_cxx;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    f->have_cxx = access(CXX, X_OK) == 0;
    if (!f->have_cxx) printf("no C++ compiler at %s: emulation tests skip\n", CXX);
    *state = f;
    return 0;
}
static int teardown(void **state) {
    fixture *f = *state;
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

/* Compiles prelude + source + runner into a shared object; returns its
 * dlopen handle. */
static void *build_emulation(const char *source, const char *what) {
    char base[] = "/tmp/sj_emu_XXXXXX", cpp[64], so[64], log[64];
    int fd = mkstemp(base);
    assert_true(fd >= 0);
    close(fd);
    snprintf(cpp, sizeof cpp, "%s.cpp", base);
    snprintf(so, sizeof so, "%s.so", base);
    snprintf(log, sizeof log, "%s.log", base);
    FILE *out = fopen(cpp, "w");
    assert_non_null(out);
    fputs(emu_prelude, out);
    fputs(source, out);
    fputs(emu_runner, out);
    fclose(out);
    char *argv[] = {CXX, "-std=c++17", "-O1", "-w", "-shared", "-fPIC", "-o", so, cpp, "-lpthread", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int status = -1;
    if (posix_spawn(&pid, CXX, &fa, NULL, argv, environ) == 0) waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&fa);
    void *h = NULL;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        char text[2048] = "";
        FILE *lf = fopen(log, "r");
        if (lf) {
            text[fread(text, 1, sizeof text - 1, lf)] = '\0';
            fclose(lf);
        }
        fail_msg("%s: emulation build failed: %s", what, text);
    }
    unlink(base);
    unlink(cpp);
    unlink(so);
    unlink(log);
    return h;
}

static void poison(float *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
}

/* Dense tensor of shape s at n <-> its padded layout at E. */
static void copy_padded(const sj_shape *s, int64_t n, int64_t E, float *padded, float *dense,
                        int to_padded) {
    int64_t dn[SJ_MAX_RANK], st[SJ_MAX_RANK], total = 1, acc = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        dn[i] = s->dims[i] == SJ_DIM_SYM ? n : s->dims[i];
        st[i] = acc;
        acc *= s->dims[i] == SJ_DIM_SYM ? E : s->dims[i];
        total *= dn[i];
    }
    for (int64_t flat = 0; flat < total; flat++) {
        int64_t rem = flat, off = 0;
        for (int i = s->rank - 1; i >= 0; i--) {
            off += (rem % dn[i]) * st[i];
            rem /= dn[i];
        }
        if (to_padded)
            padded[off] = dense[flat];
        else
            dense[flat] = padded[off];
    }
}

static int close_enough(float got, float want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs((double)got - want) <= TOL * (1.0 + fabs(want));
}

/* Runs the plan at active extent n with the emulated kernels and compares
 * every output with the interpreter. */
static void run_and_compare(fixture *f, const sj_graph *g, const sj_lowered *l, void *so, int64_t n,
                            uint64_t seed, const char *what) {
    const sj_launch_plan *p = &l->plan;
    int64_t E = p->extent;
    emu_launch_fn launch = (emu_launch_fn)dlsym(so, "sj_emu_launch");
    assert_non_null(launch);
    sj_tensor in[8] = {0}, want[8] = {0};
    assert_true(g->n_inputs <= 8 && g->n_outputs <= 8);
    for (int i = 0; i < g->n_inputs; i++) {
        sj_shape at = sj_shape_at(&g->nodes[g->inputs[i]].shape, n);
        assert_int_equal(sj_tensor_alloc(f->ctx, at.rank, at.dims, &in[i]), SJ_OK);
        for (int64_t j = 0; j < sj_tensor_numel(&in[i]); j++) in[i].data[j] = gg_uniform(&seed, -2, 2);
    }
    assert_int_equal(sj_interp_run(g, n, in, want), SJ_OK);
    float **slot = calloc((size_t)p->n_slots + 1, sizeof *slot);
    float *arena = malloc((size_t)p->arena_bytes + 4);
    poison(arena, p->arena_bytes / 4);
    for (int i = 0; i < p->n_slots; i++) {
        const sj_buffer_slot *s = &p->slots[i];
        if (s->kind == SJ_SLOT_ARENA) {
            slot[i] = arena + s->offset / 4;
            continue;
        }
        slot[i] = malloc((size_t)s->bytes + 4);
        poison(slot[i], s->bytes / 4);
        if (s->kind == SJ_SLOT_INPUT)
            copy_padded(&g->nodes[g->inputs[s->index]].shape, n, E, slot[i], in[s->index].data, 1);
        else if (s->kind == SJ_SLOT_PARAM)
            memcpy(slot[i], g->nodes[s->index].data, (size_t)s->bytes);
    }
    void *bufs[256];
    for (int li = 0; li < p->n_launches; li++) {
        const sj_launch *la = &p->launches[li];
        for (int i = 0; i < la->n_slots; i++) bufs[i] = slot[p->launch_slots[la->first_slot + i]];
        void *k = dlsym(so, p->kernels[la->kernel].name);
        if (!k) fail_msg("%s: no kernel %s in the emulation", what, p->kernels[la->kernel].name);
        void (*fn)(void *const *, const long long *, long long);
        memcpy(&fn, &k, sizeof k);
        assert_int_equal(launch(fn, la->grid, la->block, bufs, (const long long *)p->words + la->first_word, n), 0);
    }
    for (int o = 0; o < g->n_outputs; o++) {
        const sj_shape *s = &g->nodes[g->outputs[o].value].shape;
        sj_tensor got;
        sj_shape at = sj_shape_at(s, n);
        assert_int_equal(sj_tensor_alloc(f->ctx, at.rank, at.dims, &got), SJ_OK);
        int found = 0;
        for (int i = 0; i < p->n_slots; i++)
            if (p->slots[i].kind == SJ_SLOT_OUTPUT && p->slots[i].index == o) {
                copy_padded(s, n, E, slot[i], got.data, 0);
                found = 1;
            }
        assert_true(found);
        for (int64_t j = 0; j < sj_tensor_numel(&want[o]); j++)
            if (!close_enough(got.data[j], want[o].data[j]))
                fail_msg("%s at n=%lld: output %d [%lld]: emulated %.9g, interpreter %.9g", what,
                         (long long)n, o, (long long)j, got.data[j], want[o].data[j]);
        sj_tensor_free(f->ctx, &got);
    }
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].kind != SJ_SLOT_ARENA) free(slot[i]);
    free(slot);
    free(arena);
    for (int i = 0; i < g->n_inputs; i++) sj_tensor_free(f->ctx, &in[i]);
    for (int o = 0; o < g->n_outputs; o++) sj_tensor_free(f->ctx, &want[o]);
}

/* Every graph of the test, lowered with its own kernel prefix so that all
 * their CUDA C goes into one emulation build (a C++ compile is the slow
 * part); each source sits in its own namespace for its static helpers. */
#define MAX_CASES 32

typedef struct emu_case {
    sj_graph *g;
    sj_lowered *l;
    char what[48];
    uint64_t seed;
} emu_case;

static void add_case(fixture *f, emu_case *c, int *n, int model, uint64_t seed, int64_t E, bool fusion) {
    assert_true(*n < MAX_CASES);
    emu_case *k = &c[(*n)++];
    const char *name = "";
    assert_int_equal(gg_build(f->ctx, model, seed, &k->g, &name), SJ_OK);
    snprintf(k->what, sizeof k->what, "%s #%d (E=%lld%s)", name, *n - 1, (long long)E,
             fusion ? "" : ", unfused");
    k->seed = seed * 31 + (uint64_t)*n;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "sj_c%d_", *n - 1);
    sj_lower_options o = {.fusion = fusion, .prefix = prefix};
    if (sj_lower(k->g, E, &o, &k->l) != SJ_OK) fail_msg("%s: lower: %s", k->what, sj_ctx_last_error(f->ctx));
    assert_int_equal(sj_gpu_schedule_plan(f->ctx, k->l->kernels, k->l->n_kernels, &k->l->plan), SJ_OK);
}

static void run_cases(fixture *f, emu_case *c, int n) {
    size_t cap = 1 << 16, len = 0;
    char *all = malloc(cap);
    all[0] = '\0';
    for (int i = 0; i < n; i++) {
        char *src;
        size_t slen;
        if (sj_cuda_c_emit(f->ctx, c[i].l, &src, &slen) != SJ_OK)
            fail_msg("%s: emit: %s", c[i].what, sj_ctx_last_error(f->ctx));
        while (len + slen + 64 >= cap) all = realloc(all, cap *= 2);
        len += (size_t)sprintf(all + len, "namespace case%d {\n%s}\n", i, src);
        sj_free(f->ctx, src);
    }
    void *so = build_emulation(all, "emulation build");
    free(all);
    for (int i = 0; i < n; i++) {
        int64_t E = c[i].l->plan.extent, ns[3] = {E, E / 2 + 1, 1};
        for (int j = 0; j < (E > 1 ? 3 : 1); j++)
            run_and_compare(f, c[i].g, c[i].l, so, ns[j], c[i].seed + (uint64_t)j, c[i].what);
        sj_lowered_destroy(c[i].l);
        sj_graph_destroy(c[i].g);
    }
    dlclose(so);
}

/* The model blocks at a bucket that is not a multiple of any tile or block,
 * and at the one-element bucket; then the random graphs at assorted buckets,
 * every third unfused. */
static void test_models_and_random_graphs(void **state) {
    fixture *f = *state;
    if (!f->have_cxx) skip();
    emu_case c[MAX_CASES];
    int n = 0;
    for (int i = 0; i < GG_N_MODELS; i++) add_case(f, c, &n, i, 2, 20, true);
    for (int i = 0; i < GG_N_MODELS; i += 2) add_case(f, c, &n, i, 3, 1, true);
    for (int i = 0; i < N_RANDOM; i++)
        add_case(f, c, &n, GG_N_MODELS + i, 9, 1 + (int64_t)(i * 5 % 17), i % 3 != 2);
    run_cases(f, c, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_and_random_graphs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

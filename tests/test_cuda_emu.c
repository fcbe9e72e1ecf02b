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

#include "tests/skip.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/gpu/gpu_emit.h"
#include "compile/gpu/gpu_schedule.h"
#include "tests/gpu_emu_harness.h"
#include "shapejit/model.h"

extern char **environ;

#define CXX "/usr/bin/c++"
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

/* Every graph of the test, lowered with its own kernel prefix so that all
 * their CUDA C goes into one emulation build (a C++ compile is the slow
 * part); each source sits in its own namespace for its static helpers. */
#define MAX_CASES 40

typedef struct emu_case {
    sj_graph *g;
    sj_lowered *l;
    char what[48];
    uint64_t seed;
} emu_case;

/* Lowers g (the case takes it over) at E into the next case. */
static void add_graph_case(fixture *f, emu_case *c, int *n, sj_graph *g, const char *name,
                           uint64_t seed, int64_t E, bool fusion) {
    assert_true(*n < MAX_CASES);
    emu_case *k = &c[(*n)++];
    k->g = g;
    snprintf(k->what, sizeof k->what, "%s #%d (E=%lld%s)", name, *n - 1, (long long)E,
             fusion ? "" : ", unfused");
    k->seed = seed * 31 + (uint64_t)*n;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "sj_c%d_", *n - 1);
    sj_lower_options o = {.fusion = fusion, .prefix = prefix};
    if (sj__lower(k->g, E, &o, &k->l) != SJ_OK) fail_msg("%s: lower: %s", k->what, sj_ctx_last_error(f->ctx));
    assert_int_equal(sj__gpu_schedule_plan(f->ctx, k->l->kernels, k->l->n_kernels, &k->l->plan), SJ_OK);
}

static void add_case(fixture *f, emu_case *c, int *n, int model, uint64_t seed, int64_t E, bool fusion) {
    sj_graph *g = NULL;
    const char *name = "";
    assert_int_equal(gg_build(f->ctx, model, seed, &g, &name), SJ_OK);
    add_graph_case(f, c, n, g, name, seed, E, fusion);
}

/* The float-only exported transformer layers (tests/data/real_models). */
static void add_real_models(fixture *f, emu_case *c, int *n) {
    static const char *const models[] = {"tel_prenorm_gelu_dynamo", "tel_postnorm_relu_dynamo",
                                         "mha_residual_ln_dynamo"};
    for (int i = 0; i < 3; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/tests/data/real_models/%s/model.onnx", SJ_SOURCE_DIR,
                 models[i]);
        sj_model_options o;
        sj_model_options_init(&o);
        o.dynamic_name = "seq";
        sj_dim_value batch = {"batch", 1};
        o.fixed_dims = &batch;
        o.n_fixed_dims = 1;
        sj_graph *g;
        if (sj_model_load(f->ctx, path, &o, &g) != SJ_OK) fail_msg("%s", sj_ctx_last_error(f->ctx));
        add_graph_case(f, c, n, g, models[i], 17, 20, true);
    }
}

static emu_kernel_fn resolve_in_so(void *so, const char *name) {
    void *sym = dlsym(so, name);
    emu_kernel_fn fn = NULL;
    if (sym) memcpy(&fn, &sym, sizeof sym);
    return fn;
}

static void run_cases(fixture *f, emu_case *c, int n) {
    size_t cap = 1 << 16, len = 0;
    char *all = malloc(cap);
    all[0] = '\0';
    for (int i = 0; i < n; i++) {
        char *src;
        size_t slen;
        if (sj__cuda_c_emit(f->ctx, c[i].l, &src, &slen) != SJ_OK)
            fail_msg("%s: emit: %s", c[i].what, sj_ctx_last_error(f->ctx));
        while (len + slen + 64 >= cap) all = realloc(all, cap *= 2);
        len += (size_t)sprintf(all + len, "namespace case%d {\n%s}\n", i, src);
        sj_free(f->ctx, src);
    }
    void *so = build_emulation(all, "emulation build");
    free(all);
    emu_backend be = {.resolve = resolve_in_so, .user = so};
    void *launch = dlsym(so, "sj_emu_launch");
    assert_non_null(launch);
    memcpy(&be.launch, &launch, sizeof launch);
    for (int i = 0; i < n; i++) {
        int64_t E = c[i].l->plan.extent, ns[3] = {E, E / 2 + 1, 1};
        for (int j = 0; j < (E > 1 ? 3 : 1); j++)
            emu_run_and_compare(f->ctx, c[i].g, c[i].l, &be, ns[j], c[i].seed + (uint64_t)j, c[i].what);
        sj__lowered_destroy(c[i].l);
        sj_graph_destroy(c[i].g);
    }
    dlclose(so);
}

/* The model blocks at a bucket that is not a multiple of any tile or block,
 * and at the one-element bucket; then the random graphs at assorted buckets,
 * every third unfused. */
static void test_models_and_random_graphs(void **state) {
    fixture *f = *state;
    if (!f->have_cxx) SJ_SKIP("no C++ compiler to build the CUDA emulation with");
    emu_case c[MAX_CASES];
    int n = 0;
    for (int i = 0; i < GG_N_MODELS; i++) add_case(f, c, &n, i, 2, 20, true);
    for (int i = 0; i < GG_N_MODELS; i += 2) add_case(f, c, &n, i, 3, 1, true);
    /* the layout models (last two) unfused too: slices copied, not views */
    for (int i = GG_N_MODELS - 2; i < GG_N_MODELS; i++) add_case(f, c, &n, i, 5, 16, false);
    add_real_models(f, c, &n);
    for (int i = 0; i < N_RANDOM; i++)
        add_case(f, c, &n, GG_N_MODELS + i, 9, 1 + (int64_t)(i * 5 % 17), i % 3 != 2);
    run_cases(f, c, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_and_random_graphs),
    };
    return sj_run_tests(tests, setup, teardown);
}

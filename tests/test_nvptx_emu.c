/* The NVPTX emitter's kernels executed on the host, without a GPU: the same
 * IR the NVPTX path compiles to PTX is JIT-compiled for this CPU instead,
 * with its GPU intrinsics bound to an emulation (special registers read from
 * per-thread state, barrier0 a pthread barrier, libdevice math the libm
 * functions, shared memory one block at a time). Launches use the plan's
 * grid and block, one host thread per GPU thread, and the results are
 * compared with the interpreter with NaN-poisoned padding, as for the CUDA C
 * kernels (test_cuda_emu.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>

#include "compile/gpu/gpu_emit.h"
#include "compile/gpu/gpu_schedule.h"
#include "tests/gpu_emu_harness.h"
#include "shapejit/model.h"

#define N_RANDOM 10

/* --- the emulated GPU: one launch at a time */
static _Thread_local unsigned emu_tid[3], emu_ctaid[3];
static unsigned emu_ntid[3], emu_nctaid[3];
static pthread_barrier_t emu_bar;

#define EMU_SREG(reg, dim, i)                                                                      \
    static unsigned emu_##reg##_##dim(void) { return emu_##reg[i]; }
#define EMU_SREGS(reg) EMU_SREG(reg, x, 0) EMU_SREG(reg, y, 1) EMU_SREG(reg, z, 2)
EMU_SREGS(tid)
EMU_SREGS(ctaid)
EMU_SREGS(ntid)
EMU_SREGS(nctaid)
static void emu_barrier(void) { pthread_barrier_wait(&emu_bar); }

typedef struct emu_thread {
    emu_kernel_fn fn;
    void *const *buffers;
    const int64_t *info;
    int64_t n;
    unsigned tid[3], ctaid[3];
} emu_thread;

static void *emu_thread_main(void *p) {
    emu_thread *t = p;
    memcpy(emu_tid, t->tid, sizeof emu_tid);
    memcpy(emu_ctaid, t->ctaid, sizeof emu_ctaid);
    t->fn(t->buffers, t->info, t->n);
    return NULL;
}

static int emu_launch(emu_kernel_fn fn, const uint32_t *grid, const uint32_t *block,
                      void *const *buffers, const int64_t *info, int64_t n) {
    unsigned T = block[0] * block[1] * block[2];
    memcpy(emu_ntid, block, sizeof emu_ntid);
    memcpy(emu_nctaid, grid, sizeof emu_nctaid);
    pthread_t *th = calloc(T, sizeof *th);
    emu_thread *args = calloc(T, sizeof *args);
    int rc = 0;
    for (unsigned bz = 0; bz < grid[2] && !rc; bz++)
        for (unsigned by = 0; by < grid[1] && !rc; by++)
            for (unsigned bx = 0; bx < grid[0] && !rc; bx++) {
                pthread_barrier_init(&emu_bar, NULL, T);
                unsigned started = 0;
                for (unsigned t = 0; t < T; t++, started++) {
                    args[t] = (emu_thread){fn, buffers, info, n,
                                           {t % block[0], (t / block[0]) % block[1], t / (block[0] * block[1])},
                                           {bx, by, bz}};
                    if (pthread_create(&th[t], NULL, emu_thread_main, &args[t])) {
                        rc = -1;
                        break;
                    }
                }
                for (unsigned t = 0; t < started; t++) pthread_join(th[t], NULL);
                pthread_barrier_destroy(&emu_bar);
            }
    free(th);
    free(args);
    return rc;
}

/* --- binding the NVPTX module's GPU calls to the emulation */

typedef struct binding {
    const char *gpu_name; /* as the emitter declares it */
    const char *host_name;
    void (*fn)(void);
} binding;

#define BIND_SREG(reg, dim)                                                                        \
    {"llvm.nvvm.read.ptx.sreg." #reg "." #dim, "sj_emu_" #reg "_" #dim, (void (*)(void))emu_##reg##_##dim}
#define BIND_SREGS(reg) BIND_SREG(reg, x), BIND_SREG(reg, y), BIND_SREG(reg, z)
#define BIND_MATH(f) {"__nv_" #f, "sj_emu_" #f, (void (*)(void))f}

static const binding bindings[] = {
    BIND_SREGS(tid),  BIND_SREGS(ctaid), BIND_SREGS(ntid), BIND_SREGS(nctaid),
    {"llvm.nvvm.barrier0", "sj_emu_barrier", emu_barrier},
    BIND_MATH(expf),  BIND_MATH(logf),   BIND_MATH(tanhf), BIND_MATH(erff), BIND_MATH(powf),
    BIND_MATH(sinf),  BIND_MATH(cosf),   BIND_MATH(tanf),  BIND_MATH(asinf), BIND_MATH(acosf),
    BIND_MATH(atanf), BIND_MATH(sinhf),  BIND_MATH(coshf), BIND_MATH(asinhf), BIND_MATH(acoshf),
    BIND_MATH(atanhf),
};
#define N_BINDINGS ((int)(sizeof bindings / sizeof bindings[0]))

/* Replaces each GPU declaration the module uses by a host one of the same
 * type; fails on any declaration the emulation does not know. */
static void bind_module(LLVMModuleRef m) {
    for (LLVMValueRef fn = LLVMGetFirstFunction(m), next; fn; fn = next) {
        next = LLVMGetNextFunction(fn);
        if (!LLVMIsDeclaration(fn)) continue;
        size_t len;
        const char *name = LLVMGetValueName2(fn, &len);
        if (strncmp(name, "llvm.", 5) == 0 && strncmp(name, "llvm.nvvm.", 10) != 0) continue;
        if (strncmp(name, "sj_emu_", 7) == 0) continue; /* bound already */
        int b = 0;
        while (b < N_BINDINGS && strcmp(bindings[b].gpu_name, name) != 0) b++;
        if (b == N_BINDINGS) fail_msg("emulation: no host binding for %s", name);
        LLVMValueRef host = LLVMAddFunction(m, bindings[b].host_name, LLVMGlobalGetValueType(fn));
        LLVMReplaceAllUsesWith(fn, host);
        LLVMDeleteFunction(fn);
    }
}

static void check_error(LLVMErrorRef e, const char *what) {
    if (!e) return;
    char *msg = LLVMGetErrorMessage(e);
    char copy[512];
    snprintf(copy, sizeof copy, "%s", msg);
    LLVMDisposeErrorMessage(msg);
    fail_msg("%s: %s", what, copy);
}

typedef struct jit {
    LLVMOrcLLJITRef lljit;
} jit;

static emu_kernel_fn resolve_in_jit(void *user, const char *name) {
    jit *j = user;
    LLVMOrcExecutorAddress addr = 0;
    if (LLVMOrcLLJITLookup(j->lljit, &addr, name)) return NULL;
    emu_kernel_fn fn;
    uintptr_t a = (uintptr_t)addr;
    memcpy(&fn, &a, sizeof fn);
    return fn;
}

static void jit_create(jit *j) {
    check_error(LLVMOrcCreateLLJIT(&j->lljit, NULL), "create LLJIT");
    LLVMOrcCSymbolMapPair pairs[N_BINDINGS];
    for (int i = 0; i < N_BINDINGS; i++) {
        uintptr_t a;
        memcpy(&a, &bindings[i].fn, sizeof a);
        pairs[i].Name = LLVMOrcLLJITMangleAndIntern(j->lljit, bindings[i].host_name);
        pairs[i].Sym = (LLVMJITEvaluatedSymbol){(LLVMOrcExecutorAddress)a,
                                                {LLVMJITSymbolGenericFlagsExported |
                                                     LLVMJITSymbolGenericFlagsCallable,
                                                 0}};
    }
    check_error(LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j->lljit),
                                      LLVMOrcAbsoluteSymbols(pairs, N_BINDINGS)),
                "define the emulation's symbols");
}

/* Emits the NVPTX kernels of l, binds them and adds them to the JIT. */
static void jit_add(jit *j, sj_ctx *ctx, const sj_lowered *l, const char *what) {
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextRef lc = LLVMOrcThreadSafeContextGetContext(tsc);
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("emu", lc);
    if (sj__nvptx_emit_kernels(ctx, m, l) != SJ_OK) fail_msg("%s: emit: %s", what, sj_ctx_last_error(ctx));
    bind_module(m);
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMSetTarget(m, triple);
    LLVMDisposeMessage(triple);
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, tsc);
    LLVMOrcDisposeThreadSafeContext(tsc);
    check_error(LLVMOrcLLJITAddLLVMIRModule(j->lljit, LLVMOrcLLJITGetMainJITDylib(j->lljit), tsm),
                what);
}

typedef struct fixture {
    sj_ctx *ctx;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || sj_ctx_create(NULL, &f->ctx) != SJ_OK) return -1;
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    *state = f;
    return 0;
}
static int teardown(void **state) {
    fixture *f = *state;
    sj_ctx_destroy(f->ctx);
    free(f);
    return 0;
}

/* Lowers g (owned) at E, runs it emulated at E, E/2+1 and 1 against the
 * interpreter, destroys it. */
static void check_lowered_at(fixture *f, jit *j, sj_graph *g, const char *name, uint64_t seed,
                             int64_t E, bool fusion, int id, sj_precision precision) {
    char what[96], prefix[32];
    snprintf(what, sizeof what, "%s #%d (E=%lld%s, %s)", name, id, (long long)E, fusion ? "" : ", unfused",
             sj_precision_name(precision));
    snprintf(prefix, sizeof prefix, "sj_c%d_", id);
    sj_lowered *l;
    sj_lower_options o = {.fusion = fusion, .prefix = prefix, .precision = precision};
    if (sj__lower(g, E, &o, &l) != SJ_OK) fail_msg("%s: lower: %s", what, sj_ctx_last_error(f->ctx));
    assert_int_equal(sj__gpu_schedule_plan(f->ctx, l->kernels, l->n_kernels, &l->plan), SJ_OK);
    jit_add(j, f->ctx, l, what);
    emu_backend be = {.resolve = resolve_in_jit, .launch = emu_launch, .user = j};
    int64_t ns[3] = {E, E / 2 + 1, 1};
    for (int i = 0; i < (E > 1 ? 3 : 1); i++)
        emu_run_and_compare(f->ctx, g, l, &be, ns[i], seed * 31 + (uint64_t)(id + i), what);
    sj__lowered_destroy(l);
    sj_graph_destroy(g);
}

static void check_lowered(fixture *f, jit *j, sj_graph *g, const char *name, uint64_t seed,
                          int64_t E, bool fusion, int id) {
    check_lowered_at(f, j, g, name, seed, E, fusion, id, SJ_PRECISION_FP32);
}

static void check_graph(fixture *f, jit *j, int model, uint64_t seed, int64_t E, bool fusion, int id) {
    sj_graph *g = NULL;
    const char *name = "";
    assert_int_equal(gg_build(f->ctx, model, seed, &g, &name), SJ_OK);
    check_lowered(f, j, g, name, seed, E, fusion, id);
}

/* The float-only exported transformer layers (tests/data/real_models) on
 * the emulated GPU: exporters' slices, constant gathers and reshapes at a
 * bucket with padding. */
static void test_real_models(void **state) {
    fixture *f = *state;
    static const char *const models[] = {"tel_prenorm_gelu_dynamo", "tel_postnorm_relu_dynamo",
                                         "mha_residual_ln_dynamo"};
    jit j;
    jit_create(&j);
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
        check_lowered(f, &j, g, models[i], 17, 20, true, 100 + i);
    }
    LLVMOrcDisposeLLJIT(j.lljit);
}

/* Same cases as the CUDA C emulation: the models at an odd bucket and at
 * the one-element bucket, then random graphs, every third unfused. */
static void test_models_and_random_graphs(void **state) {
    fixture *f = *state;
    jit j;
    jit_create(&j);
    int id = 0;
    for (int i = 0; i < GG_N_MODELS; i++) check_graph(f, &j, i, 2, 20, true, id++);
    for (int i = 0; i < GG_N_MODELS; i += 2) check_graph(f, &j, i, 3, 1, true, id++);
    /* the layout models (last two) unfused too: slices copied, not views */
    for (int i = GG_N_MODELS - 2; i < GG_N_MODELS; i++) check_graph(f, &j, i, 5, 16, false, id++);
    for (int i = 0; i < N_RANDOM; i++)
        check_graph(f, &j, GG_N_MODELS + i, 9, 1 + (int64_t)(i * 5 % 17), i % 3 != 2, id++);
    LLVMOrcDisposeLLJIT(j.lljit);
}

/* bf16 and fp16 weights (the precision policy) through the NVPTX
 * emitter's widening loads, against the interpreter on the policy's graph
 * with NaN-poisoned padding: every model that narrows a weight, fused and
 * unfused, and an exported encoder layer. */
static void test_precision(void **state) {
    fixture *f = *state;
    jit j;
    jit_create(&j);
    int id = 200, narrowed = 0;
    for (int p = SJ_PRECISION_BF16; p <= SJ_PRECISION_FP16; p++)
        for (int i = 0; i < GG_N_MODELS; i++) {
            sj_graph *g = NULL;
            const char *name = "";
            assert_int_equal(gg_build(f->ctx, i, 4, &g, &name), SJ_OK);
            if (sj_graph_precision_narrowed(g, (sj_precision)p) == 0) {
                sj_graph_destroy(g);
                continue;
            }
            narrowed++;
            check_lowered_at(f, &j, g, name, 4, 20, i % 2 == 0, id++, (sj_precision)p);
        }
    assert_true(narrowed >= 4); /* the suite has matmuls with weights */
    char path[512];
    snprintf(path, sizeof path, "%s/tests/data/real_models/tel_prenorm_gelu_dynamo/model.onnx",
             SJ_SOURCE_DIR);
    sj_model_options o;
    sj_model_options_init(&o);
    o.dynamic_name = "seq";
    sj_dim_value batch = {"batch", 1};
    o.fixed_dims = &batch;
    o.n_fixed_dims = 1;
    sj_graph *g;
    if (sj_model_load(f->ctx, path, &o, &g) != SJ_OK) fail_msg("%s", sj_ctx_last_error(f->ctx));
    assert_true(sj_graph_precision_narrowed(g, SJ_PRECISION_BF16) > 0);
    check_lowered_at(f, &j, g, "tel_prenorm_gelu_dynamo", 17, 20, true, id++, SJ_PRECISION_BF16);
    LLVMOrcDisposeLLJIT(j.lljit);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision),
        cmocka_unit_test(test_models_and_random_graphs),
        cmocka_unit_test(test_real_models),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

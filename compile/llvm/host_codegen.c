/* Target machine, new-pass-manager pipeline and output for the host emitter. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/blake3.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "core/clock.h"
#include "compile/llvm/llvm_impl.h"
#include "plan/code_bundle.h"

static sj_status make_target_machine(sj_ctx *ctx, const sj_llvm_target *t, LLVMTargetMachineRef *tm) {
    char *triple, *host_cpu, *host_features, *cpu = NULL, *features = NULL;
    SJ_TRY(sj__llvm_host_info(ctx, &triple, &host_cpu, &host_features));
    const char *tr = t->triple ? t->triple : triple;
    LLVMTargetRef target;
    char *err = NULL;
    sj_status st = sj__llvm_host_target(ctx, t->cpu, t->features, &cpu, &features);
    if (st == SJ_OK && LLVMGetTargetFromTriple(tr, &target, &err)) {
        st = sj_fail(ctx, SJ_E_UNSUPPORTED, "host target: triple %s: %s", tr, err ? err : "unknown");
        LLVMDisposeMessage(err);
    } else if (st == SJ_OK) {
        static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                                     LLVMCodeGenLevelDefault, LLVMCodeGenLevelAggressive};
        *tm = LLVMCreateTargetMachine(target, tr, cpu, features, levels[t->opt_level], LLVMRelocPIC,
                                      LLVMCodeModelDefault);
        if (!*tm) st = sj_fail(ctx, SJ_E_UNSUPPORTED, "host target: no target machine for %s", tr);
    }
    sj_free(ctx, cpu);
    sj_free(ctx, features);
    sj_free(ctx, triple);
    sj_free(ctx, host_cpu);
    sj_free(ctx, host_features);
    return st;
}

/* Whether the pipeline unrolls loops. LLVM's unrollers copy out every short
 * loop of constant trip count, and a graph of small dims is made of them:
 * in a hidden-32 BERT bucket, a matmul kernel became 4,000 lines of IR and
 * the bucket's optimise + codegen 1.4-1.9 s. With 16-float vectors
 * (AVX-512) the loops are a few iterations already: without the unrollers
 * the test models' buckets compile in 0.13-0.52x the time and their
 * requests run as fast or faster (bench/compile_levels.py: a hidden-32
 * encoder layer at 64 rows 82 -> 44 us, a reduced ResNet-18 at batch 4 815 -> 683 us).
 * The one kernel that needed the copies, emit_ikj's narrow columns, asks
 * for them itself (host_emit.c, rloop_close_unrolled). With 8- or 4-float
 * vectors the unrolled copies are the register blocking more kernels rely
 * on (attention + layernorm at 64 rows 44 -> 64 us on x86-64-v3, an FFN at
 * 8 rows 21 -> 30 us on x86-64-v2 without them), so those targets keep
 * them. */
static bool unrolls_loops(int vector_floats) { return vector_floats < 16; }

static sj_status optimise(sj_ctx *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm, int level, bool unroll) {
    char *msg = NULL;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "host emitter produced invalid IR: %s", msg);
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", level);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(po, level >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(po, level >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(po, unroll);
    LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (err) {
        char *em = LLVMGetErrorMessage(err);
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "LLVM pipeline %s: %s", pipeline, em);
        LLVMDisposeErrorMessage(em);
        return st;
    }
    return SJ_OK;
}

static sj_status copy_out(sj_ctx *ctx, const char *p, size_t n, uint8_t **out, size_t *len) {
    *out = sj_alloc(ctx, n ? n : 1);
    if (!*out) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory for %zu bytes", n);
    memcpy(*out, p, n);
    *len = n;
    return SJ_OK;
}

static sj_status print_module(sj_ctx *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm,
                              sj_llvm_output what, uint8_t **out, size_t *len) {
    if (what == SJ_LLVM_IR) {
        char *s = LLVMPrintModuleToString(m);
        sj_status st = copy_out(ctx, s, strlen(s), out, len);
        LLVMDisposeMessage(s);
        return st;
    }
    LLVMMemoryBufferRef mb = NULL;
    char *err = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, what == SJ_LLVM_OBJECT ? LLVMObjectFile : LLVMAssemblyFile,
                                            &err, &mb)) {
        sj_status st = sj_fail(ctx, SJ_E_COMPILE, "LLVM code generation: %s", err ? err : "failed");
        LLVMDisposeMessage(err);
        return st;
    }
    sj_status st = copy_out(ctx, LLVMGetBufferStart(mb), LLVMGetBufferSize(mb), out, len);
    LLVMDisposeMemoryBuffer(mb);
    return st;
}

/* Whether the comma-separated feature list has "+name". */
static bool enables(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strchr(p, '+')); p++)
        if (!strncmp(p + 1, name, n) && (p[n + 1] == ',' || !p[n + 1])) return true;
    return false;
}

int sj__llvm_gemm_level(const char *fs) {
    if (enables(fs, "avx512f") && enables(fs, "avx512vl") && enables(fs, "avx512dq") &&
        enables(fs, "avx512bw"))
        return 4;
    return enables(fs, "avx2") && enables(fs, "fma") ? 3 : 2;
}

/* What every module of one compile shares. */
typedef struct module_build {
    sj_ctx *ctx;
    const sj_lowered *l;
    const sj_llvm_target *t;
    LLVMTargetMachineRef tm;
    LLVMContextRef C;
    int vector_floats, gemm_level;
    sj_llvm_emitted *emitted;
    uint64_t emit_ns, optimise_ns, codegen_ns;
    uint64_t objects_compiled, objects_found;
} module_build;

/* BLAKE3 of the module's IR text as emitted: the whole input of its
 * optimisation and code generation, whose other inputs (target, options,
 * LLVM) the object's store name adds. Text, not bitcode: bitcode lists
 * every metadata kind its LLVM context has seen, so one kernel's bitcode
 * differs with the kernels compiled before it on the same thread. */
static sj_status code_key(sj_ctx *ctx, LLVMModuleRef m, uint8_t key[32]) {
    char *ir = LLVMPrintModuleToString(m);
    if (!ir) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: a kernel's IR text");
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, ir, strlen(ir));
    llvm_blake3_hasher_finalize(&h, key, 32);
    LLVMDisposeMessage(ir);
    return SJ_OK;
}

/* The object compiled before (t->objects) from a module with this code
 * key: the emitted module still notes its packs and externs for the plan,
 * but is neither optimised nor compiled. */
static bool found_object(module_build *mb, const uint8_t key[32], uint8_t **out, size_t *len) {
    const sj_kernel_objects *o = mb->t->objects;
    if (!o) return false;
    void *bytes = NULL;
    size_t n = 0;
    if (o->find(o->user, key, &bytes, &n) != SJ_OK || !bytes || !n) {
        sj_free(mb->ctx, bytes);
        return false;
    }
    *out = bytes;
    *len = n;
    return true;
}

/* Kernels first..last-1 as one module, optimised and printed. An object
 * build of one kernel gives its code key (key non-NULL). */
static sj_status build_module(module_build *mb, int first, int last, sj_llvm_output what, uint8_t **out,
                              size_t *len, uint8_t *key) {
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("shapejit", mb->C);
    char *triple = LLVMGetTargetMachineTriple(mb->tm);
    LLVMSetTarget(m, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(mb->tm);
    char *dl = LLVMCopyStringRepOfTargetData(td);
    LLVMSetDataLayout(m, dl);
    LLVMDisposeMessage(dl);
    LLVMDisposeTargetData(td);
    uint64_t t0 = sj__now_ns();
    sj_status st = sj__llvm_emit_kernels(mb->ctx, m, mb->l, first, last, mb->t, mb->vector_floats,
                                        mb->gemm_level, mb->emitted);
    if (st == SJ_OK && key) st = code_key(mb->ctx, m, key);
    uint64_t t1 = sj__now_ns();
    bool found = st == SJ_OK && key && found_object(mb, key, out, len);
    if (st == SJ_OK && !found)
        st = optimise(mb->ctx, m, mb->tm, mb->t->opt_level, unrolls_loops(mb->vector_floats));
    uint64_t t2 = sj__now_ns();
    if (st == SJ_OK && !found) st = print_module(mb->ctx, m, mb->tm, what, out, len);
    if (st == SJ_OK && what == SJ_LLVM_OBJECT) *(found ? &mb->objects_found : &mb->objects_compiled) += 1;
    mb->emit_ns += t1 - t0;
    mb->optimise_ns += t2 - t1;
    mb->codegen_ns += sj__now_ns() - t2;
    LLVMDisposeModule(m);
    return st;
}

/* Kernels compiled at once: past a few, the objects are small and the
 * threads' LLVM set-up outweighs what they share. */
#define MAX_COMPILE_THREADS 8

/* One compile thread's share of build_objects: kernels taken one at a time
 * from *next, each in its own module, on the thread's own LLVM context and
 * target machine (LLVM's are not shared across threads). The calling
 * thread's worker is lent the compile's own (mb.tm and mb.C set), which it
 * does not dispose of; the others make theirs. */
typedef struct object_worker {
    module_build mb;
    atomic_int *next;
    uint8_t **objs;
    size_t *lens;
    uint8_t (*keys)[32];
    sj_status st;
    char why[512]; /* the message of st, which lives in the thread's error slot */
    pthread_t thread;
} object_worker;

static void *object_worker_run(void *arg) {
    object_worker *w = arg;
    bool lent = w->mb.tm != NULL;
    w->st = lent ? SJ_OK : make_target_machine(w->mb.ctx, w->mb.t, &w->mb.tm);
    if (w->st == SJ_OK && !lent) w->mb.C = LLVMContextCreate();
    for (int i; w->st == SJ_OK && (i = atomic_fetch_add(w->next, 1)) < w->mb.l->n_kernels;)
        w->st = build_module(&w->mb, i, i + 1, SJ_LLVM_OBJECT, &w->objs[i], &w->lens[i], w->keys[i]);
    if (w->st != SJ_OK) snprintf(w->why, sizeof w->why, "%s", sj_ctx_last_error(w->mb.ctx));
    if (!lent && w->mb.C) LLVMContextDispose(w->mb.C);
    if (!lent && w->mb.tm) LLVMDisposeTargetMachine(w->mb.tm);
    return NULL;
}

static int compile_threads(int wanted, int kernels) {
    int n = wanted;
    if (n <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 0 ? (int)(cpus < MAX_COMPILE_THREADS ? cpus : MAX_COMPILE_THREADS) : 1;
    }
    if (n > MAX_COMPILE_THREADS) n = MAX_COMPILE_THREADS;
    return n < kernels ? n : kernels;
}

/* The packs the workers found, in kernel order whatever thread found them,
 * so the plan (and the artifact's bytes) do not depend on the threads. */
static sj_status merge_emitted(sj_ctx *ctx, object_worker *w, int n, sj_llvm_emitted *out) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        out->externs |= w[i].mb.emitted->externs;
        total += w[i].mb.emitted->n_packs;
    }
    if (!total) return SJ_OK;
    out->packs = sj_alloc(ctx, (size_t)total * sizeof *out->packs);
    if (!out->packs) return sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory");
    out->cap_packs = total;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < w[i].mb.emitted->n_packs; j++) {
            sj_llvm_pack p = w[i].mb.emitted->packs[j];
            int k = out->n_packs++;
            while (k > 0 && out->packs[k - 1].kernel > p.kernel) {
                out->packs[k] = out->packs[k - 1];
                k--;
            }
            out->packs[k] = p;
        }
    return SJ_OK;
}

/* One object file per kernel, bundled; the kernels compiled on up to
 * t->threads threads. Each object is the same bytes on any number of
 * threads: a kernel is its own module either way. */
static sj_status build_objects(module_build *mb, uint8_t **out, size_t *len) {
    sj_ctx *ctx = mb->ctx;
    int n = mb->l->n_kernels;
    int threads = compile_threads(mb->t->threads, n);
    uint8_t **objs = sj_calloc(ctx, (size_t)n + 1, sizeof *objs);
    size_t *lens = sj_calloc(ctx, (size_t)n + 1, sizeof *lens);
    uint8_t (*keys)[32] = sj_calloc(ctx, (size_t)n, sizeof *keys);
    object_worker *w = sj_calloc(ctx, (size_t)threads, sizeof *w);
    sj_llvm_emitted *em = sj_calloc(ctx, (size_t)threads, sizeof *em);
    sj_status st = objs && lens && keys && w && em ? SJ_OK
                                                   : sj_fail(ctx, SJ_E_NOMEM, "host emitter: out of memory");
    atomic_int next;
    atomic_init(&next, 0);
    int used = 0; /* workers that ran: the threads started, then this one */
    if (st == SJ_OK) {
        for (int i = 0; i < threads; i++)
            w[i] = (object_worker){.mb = {.ctx = ctx, .l = mb->l, .t = mb->t, .vector_floats = mb->vector_floats,
                                          .gemm_level = mb->gemm_level, .emitted = &em[i]},
                                   .next = &next, .objs = objs, .lens = lens, .keys = keys};
        while (used < threads - 1 && pthread_create(&w[used].thread, NULL, object_worker_run, &w[used]) == 0)
            used++;
        int started = used;
        w[used].mb.tm = mb->tm;
        w[used].mb.C = mb->C;
        object_worker_run(&w[used++]);
        for (int i = 0; i < started; i++) pthread_join(w[i].thread, NULL);
    }
    for (int i = 0; i < used && st == SJ_OK; i++)
        if (w[i].st != SJ_OK) st = sj_fail(ctx, w[i].st, "%s", w[i].why);
    for (int i = 0; i < used; i++) {
        mb->emit_ns += w[i].mb.emit_ns;
        mb->optimise_ns += w[i].mb.optimise_ns;
        mb->codegen_ns += w[i].mb.codegen_ns;
        mb->objects_compiled += w[i].mb.objects_compiled;
        mb->objects_found += w[i].mb.objects_found;
    }
    if (st == SJ_OK) st = merge_emitted(ctx, w, used, mb->emitted);
    if (st == SJ_OK) st = sj__code_bundle_pack(ctx, (const uint8_t *const *)objs, lens, n, out, len);
    if (st == SJ_OK) {
        mb->emitted->code_keys = keys;
        keys = NULL;
    }
    sj_free(ctx, keys);
    for (int i = 0; em && i < threads; i++) sj__llvm_emitted_free(ctx, &em[i]);
    for (int i = 0; objs && i < n; i++) sj_free(ctx, objs[i]);
    sj_free(ctx, objs);
    sj_free(ctx, lens);
    sj_free(ctx, w);
    sj_free(ctx, em);
    return st;
}

sj_status sj__llvm_compile(sj_ctx *ctx, const sj_lowered *l, const sj_llvm_target *t,
                          sj_llvm_output what, uint8_t **out, size_t *len, sj_llvm_emitted *emitted,
                          sj_compile_times *times) {
    memset(emitted, 0, sizeof *emitted);
    if (t->opt_level < 0 || t->opt_level > 3)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "host emitter: opt level %d not in 0..3", t->opt_level);
    if (what == SJ_LLVM_OBJECT && l->n_kernels < 1)
        return sj_fail(ctx, SJ_E_INTERNAL, "host emitter: a plan without kernels");
    module_build mb = {.ctx = ctx, .l = l, .t = t, .emitted = emitted};
    SJ_TRY(make_target_machine(ctx, t, &mb.tm));
    mb.C = LLVMContextCreate();
    char *fs = LLVMGetTargetMachineFeatureString(mb.tm);
    mb.vector_floats = enables(fs, "avx512f") ? 16 : enables(fs, "avx") ? 8 : 4;
    mb.gemm_level = sj__llvm_gemm_level(fs);
    LLVMDisposeMessage(fs);
    sj_status st = what == SJ_LLVM_OBJECT ? build_objects(&mb, out, len)
                                          : build_module(&mb, 0, l->n_kernels, what, out, len, NULL);
    if (times) {
        times->emit_ns = mb.emit_ns;
        times->optimise_ns = mb.optimise_ns;
        times->codegen_ns = mb.codegen_ns;
        times->objects_compiled = mb.objects_compiled;
        times->objects_found = mb.objects_found;
    }
    LLVMContextDispose(mb.C);
    LLVMDisposeTargetMachine(mb.tm);
    if (st != SJ_OK) sj__llvm_emitted_free(ctx, emitted);
    return st;
}

/* Host object files through LLVM ORC LLJIT. */
#include "runtime/host_code/host_jit_impl.h"

#include "core/core_impl.h"
#include "runtime/host_code/host_code.h"

#include <llvm-c/Core.h>
#include <llvm-c/blake3.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The JITDylib of one object file's bytes, found by their BLAKE3. It
 * outlives the code: when the module goes, the code is removed and the
 * empty JITDylib kept for the next load of the same bytes (the LLVM C API
 * cannot remove a JITDylib). Which objects are loaded, and for how many
 * holders, is the device's registry's (runtime/code_registry.h): it loads
 * each distinct object here once per device. */
typedef struct jit_object {
    uint8_t digest[32];
    LLVMOrcJITDylibRef dylib;
    LLVMOrcResourceTrackerRef tracker; /* NULL while no module holds it */
    struct jit_object *next;
} jit_object;

struct sj_host_jit {
    sj_ctx *ctx;
    LLVMOrcLLJITRef jit;
    uint64_t next_dylib; /* JITDylib names must be unique per session */
    jit_object *objects; /* the JITDylib of every object ever loaded */
    /* What the session reported while linking (e.g. "Symbols not found"),
     * which the failed lookup itself only summarises; LLVM would otherwise
     * print it to stderr. Written under the device's lock. */
    char report[512];
};

/* A loaded object file. */
struct sj_host_jit_module {
    jit_object *object;
    LLVMOrcCJITDylibSearchOrderElement order;
};

/* Turns an LLVM error into a message on ctx (consuming it). */
static sj_status fail_llvm(sj_ctx *ctx, sj_status st, LLVMErrorRef err, const char *what) {
    char *msg = LLVMGetErrorMessage(err);
    sj_status r = sj_fail(ctx, st, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return r;
}

static void keep_report(void *ctx, LLVMErrorRef err) {
    sj_host_jit *j = ctx;
    char *msg = LLVMGetErrorMessage(err);
    snprintf(j->report, sizeof j->report, "%s", msg);
    LLVMDisposeErrorMessage(msg);
}

sj_status sj__host_jit_create(sj_ctx *ctx, sj_host_jit **out) {
    *out = NULL;
    if (!sj__llvm_init())
        return sj_fail(ctx, SJ_E_NO_DEVICE, "host JIT: LLVM has no native target in this build");
    sj_host_jit *j = sj_calloc(ctx, 1, sizeof *j);
    if (!j) return sj_fail(ctx, SJ_E_NOMEM, "host JIT: out of memory");
    j->ctx = ctx;
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&j->jit, NULL);
    if (err) {
        sj_free(ctx, j);
        return fail_llvm(ctx, SJ_E_NO_DEVICE, err, "host JIT: cannot create LLJIT");
    }
    LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(j->jit), keep_report,
                                            j);
    *out = j;
    return SJ_OK;
}

void sj__host_jit_destroy(sj_host_jit *j) {
    if (!j) return;
    LLVMErrorRef err = LLVMOrcDisposeLLJIT(j->jit);
    if (err) LLVMConsumeError(err);
    for (jit_object *o = j->objects, *next; o; o = next) {
        next = o->next;
        sj_free(j->ctx, o);
    }
    sj_free(j->ctx, j);
}

/* A JITDylib that resolves what kernels call: libm and the C runtime from
 * the process, shapejit's own extern kernels by address. */
static sj_status new_dylib(sj_host_jit *j, LLVMOrcJITDylibRef *out) {
    char name[48];
    snprintf(name, sizeof name, "sj_object_%llu", (unsigned long long)j->next_dylib++);
    LLVMOrcExecutionSessionRef es = LLVMOrcLLJITGetExecutionSession(j->jit);
    LLVMOrcJITDylibRef d = LLVMOrcExecutionSessionCreateBareJITDylib(es, name);
    LLVMOrcDefinitionGeneratorRef gen;
    LLVMErrorRef err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
        &gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL);
    if (err) return fail_llvm(j->ctx, SJ_E_NO_DEVICE, err, "host JIT: process symbol generator");
    LLVMOrcJITDylibAddGenerator(d, gen);
    /* A program that links the library statically does not export these
     * for the process generator. */
    static const char *const own_names[] = {"sj__host_attention_rows", "sj__host_gemm",
                                            "sj__host_gemm_packed"};
    enum { N_OWN = sizeof own_names / sizeof own_names[0] };
    LLVMOrcCSymbolMapPair own[N_OWN];
    for (int i = 0; i < N_OWN; i++)
        own[i] = (LLVMOrcCSymbolMapPair){
            LLVMOrcLLJITMangleAndIntern(j->jit, own_names[i]),
            {(LLVMOrcExecutorAddress)(uintptr_t)sj__host_extern_symbol(own_names[i]),
             {LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable, 0}}};
    err = LLVMOrcJITDylibDefine(d, LLVMOrcAbsoluteSymbols(own, N_OWN));
    if (err) return fail_llvm(j->ctx, SJ_E_NO_DEVICE, err, "host JIT: shapejit's extern kernels");
    *out = d;
    return SJ_OK;
}

/* The object with these bytes, loaded now in its JITDylib (made at the
 * first load of the bytes). SJ_E_STATE when it is loaded already: the
 * device's registry loads each distinct object once. */
static sj_status load_object(sj_host_jit *j, const uint8_t *bytes, size_t len, jit_object **out) {
    uint8_t digest[32];
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, bytes, len);
    llvm_blake3_hasher_finalize(&h, digest, sizeof digest);
    jit_object *o = j->objects;
    while (o && memcmp(o->digest, digest, sizeof digest)) o = o->next;
    if (o && o->tracker)
        return sj_fail(j->ctx, SJ_E_STATE, "host JIT: the object file is loaded already");
    if (!o) {
        o = sj_calloc(j->ctx, 1, sizeof *o);
        if (!o) return sj_fail(j->ctx, SJ_E_NOMEM, "host JIT: out of memory");
        sj_status st = new_dylib(j, &o->dylib);
        if (st != SJ_OK) {
            sj_free(j->ctx, o);
            return st;
        }
        memcpy(o->digest, digest, sizeof digest);
        o->next = j->objects;
        j->objects = o;
    }
    o->tracker = LLVMOrcJITDylibCreateResourceTracker(o->dylib);
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)bytes, len,
                                                                        "shapejit-host-object");
    LLVMErrorRef err = LLVMOrcLLJITAddObjectFileWithRT(j->jit, o->tracker, buf);
    if (err) {
        LLVMOrcReleaseResourceTracker(o->tracker);
        o->tracker = NULL;
        return fail_llvm(j->ctx, SJ_E_PARSE, err, "host JIT: cannot load the object file");
    }
    *out = o;
    return SJ_OK;
}

sj_status sj__host_jit_add_object(sj_host_jit *j, const void *obj, size_t len,
                                 sj_host_jit_module **out) {
    *out = NULL;
    sj_host_jit_module *m = sj_calloc(j->ctx, 1, sizeof *m);
    if (!m) return sj_fail(j->ctx, SJ_E_NOMEM, "host JIT: out of memory");
    sj_status st = load_object(j, obj, len, &m->object);
    if (st != SJ_OK) {
        sj_free(j->ctx, m);
        return st;
    }
    m->order = (LLVMOrcCJITDylibSearchOrderElement){
        m->object->dylib, LLVMOrcJITDylibLookupFlagsMatchExportedSymbolsOnly};
    *out = m;
    return SJ_OK;
}

void sj__host_jit_remove(sj_host_jit *j, sj_host_jit_module *m) {
    if (!m) return;
    LLVMErrorRef err = LLVMOrcResourceTrackerRemove(m->object->tracker);
    if (err) LLVMConsumeError(err);
    LLVMOrcReleaseResourceTracker(m->object->tracker);
    m->object->tracker = NULL;
    sj_free(j->ctx, m);
}

/* The lookup answers through a callback, possibly on another thread. */
typedef struct lookup_wait {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    LLVMErrorRef err;
    uint64_t addr;
} lookup_wait;

static void lookup_done(LLVMErrorRef err, LLVMOrcCSymbolMapPairs result, size_t n, void *ctx) {
    lookup_wait *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->err = err;
    if (!err && n > 0) w->addr = result[0].Sym.Address;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

sj_status sj__host_jit_lookup(sj_host_jit *j, sj_host_jit_module *m, const char *name,
                             int required, uint64_t *addr) {
    *addr = 0;
    LLVMOrcExecutionSessionRef es = LLVMOrcLLJITGetExecutionSession(j->jit);
    /* Always weak: an absent symbol is then an empty answer, not an error,
     * and a real error means linking failed. */
    j->report[0] = '\0';
    LLVMOrcCLookupSetElement sym = {LLVMOrcLLJITMangleAndIntern(j->jit, name),
                                    LLVMOrcSymbolLookupFlagsWeaklyReferencedSymbol};
    lookup_wait w = {.done = false, .err = NULL, .addr = 0};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    LLVMOrcExecutionSessionLookup(es, LLVMOrcLookupKindStatic, &m->order, 1, &sym, 1, lookup_done, &w);
    pthread_mutex_lock(&w.lock);
    while (!w.done) pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    if (w.err) {
        char what[640];
        snprintf(what, sizeof what, "host JIT: cannot link the module%s%s",
                 j->report[0] ? ": " : "", j->report);
        return fail_llvm(j->ctx, SJ_E_COMPILE, w.err, what);
    }
    if (w.addr == 0 && required)
        return sj_fail(j->ctx, SJ_E_NOT_FOUND, "host JIT: no symbol '%s' in the module", name);
    *addr = w.addr;
    return SJ_OK;
}

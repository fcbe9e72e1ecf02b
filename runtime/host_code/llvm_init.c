/* One place that registers every LLVM target shapejit uses and reads the
 * host CPU's identity.
 *
 * LLVM's target registry is a process-wide list that its initialisers link
 * into without a lock, so two of them running at once (a compile on one
 * thread, a module load on another, an NVPTX compile on a third) can corrupt
 * it: all registration happens here, once, under one pthread_once. The
 * host's triple, CPU name and features cannot change while the process runs
 * and cost ~200 us to query (LLVM parses /proc/cpuinfo and runs cpuid), which
 * used to be paid on every artifact load; they are read once here too. This
 * state is LLVM's and the machine's, written once and immutable after. */
#include <pthread.h>
#include <stdio.h>

#include <llvm-c/Core.h>
#include <llvm-c/ErrorHandling.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "runtime/host_code/host_code.h"

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;
static bool llvm_native_ok;
static char host_triple[128], host_cpu[128], host_features[4096];

static void copy_llvm_message(char *dst, size_t cap, char *msg) {
    snprintf(dst, cap, "%s", msg ? msg : "");
    LLVMDisposeMessage(msg);
}

/* LLVM ends the process after a fatal error whatever a handler does; the
 * options LLVM is known to abort on are refused before they reach it
 * (host_target.c), so this is for what remains: say that the exit is
 * LLVM's, inside shapejit, and why, rather than a bare "LLVM ERROR". */
static void report_llvm_fatal(const char *reason) {
    fprintf(stderr, "shapejit: LLVM fatal error (the process exits): %s\n", reason);
    fflush(stderr);
}

static void llvm_init_once(void) {
    LLVMInstallFatalErrorHandler(report_llvm_fatal);
    llvm_native_ok = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();

    char *def = LLVMGetDefaultTargetTriple();
    copy_llvm_message(host_triple, sizeof host_triple, LLVMNormalizeTargetTriple(def));
    LLVMDisposeMessage(def);
    copy_llvm_message(host_cpu, sizeof host_cpu, LLVMGetHostCPUName());
    copy_llvm_message(host_features, sizeof host_features, LLVMGetHostCPUFeatures());
}

bool sj__llvm_init(void) {
    pthread_once(&llvm_once, llvm_init_once);
    return llvm_native_ok;
}

sj_status sj__llvm_host_info(sj_ctx *ctx, char **triple, char **cpu, char **features) {
    sj__llvm_init();
    *triple = sj_strdup(ctx, host_triple);
    *cpu = sj_strdup(ctx, host_cpu);
    *features = sj_strdup(ctx, host_features);
    if (!*triple || !*cpu || !*features) {
        sj_free(ctx, *triple);
        sj_free(ctx, *cpu);
        sj_free(ctx, *features);
        *triple = *cpu = *features = NULL;
        return sj_fail(ctx, SJ_E_NOMEM, "host target: out of memory");
    }
    return SJ_OK;
}

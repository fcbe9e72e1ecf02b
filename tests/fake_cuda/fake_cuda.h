/* The fake CUDA driver's controls (tests/fake_cuda/fake_cuda.c): a test
 * opens the device on the fake through sj_cuda_device_config.driver_path,
 * then finds these with dlsym on the same library.
 *
 *   void *lib = dlopen(SJ_FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
 *   fake_cuda_inject_fn inject = (fake_cuda_inject_fn)dlsym(lib, "fake_cuda_inject");
 *   inject("k2_matmul", CUDA_ERROR_ILLEGAL_ADDRESS, 1); // every launch of it faults
 *   ...                                                 // run: SJ_E_DEVICE_LOST
 *   inject(NULL, 0, 0);                                 // clears every fault
 *
 * Not part of the library: a test fixture standing in for libcuda.so.1,
 * so it keeps driver-like process-wide state. */
#ifndef SJ_TESTS_FAKE_CUDA_H
#define SJ_TESTS_FAKE_CUDA_H

#include <stdint.h>

typedef struct fake_cuda_counters {
    uint64_t resets;        /* primary context resets */
    uint64_t contexts;      /* primary contexts made (the first, and one after each reset) */
    uint64_t module_loads;  /* modules loaded (PTX or cubin) */
    uint64_t function_lookups; /* cuModuleGetFunction calls that found the kernel */
    uint64_t launches;      /* kernels that ran: eager launches and graph nodes replayed */
    uint64_t captured;      /* launches recorded into graphs instead */
    uint64_t graph_launches;
    uint64_t faults;        /* injected faults the driver reported */
    uint64_t live_allocs;   /* device allocations not freed (nor reset away) */
    uint64_t live_modules;
    /* allocations, modules, graphs and streams a healthy context still
     * held when its last user released it (the driver frees them; a clean
     * user left none) */
    uint64_t left_at_release;
    /* Misuse the fake caught: a pointer outside every live allocation (a
     * copy, a free, a launch's buffer table or info), or a handle that is
     * not live (freed, or of a context that was reset). */
    uint64_t bad_pointers, bad_handles;
} fake_cuda_counters;

/* From now on every launch of `kernel` (eager, captured, or in a replayed
 * graph) whose active extent (its third parameter) is at least min_extent
 * fails with `error` (a CUresult): a sticky one (a fault: illegal address,
 * trap, timeout, ...) when it runs, reported by the next call that waits for
 * the device, after which the context answers every call with it until it
 * is reset; any other at the launch (or capture) itself, leaving the
 * context usable. Error 0 clears the kernel's fault; kernel NULL clears all.
 * A kernel "*SUFFIX" matches every kernel whose name ends in SUFFIX. A
 * process out of a test's reach (the CLI) takes one fault from the
 * environment at cuInit: FAKE_CUDA_FAULT=KERNEL:ERROR:MIN_EXTENT. */
typedef void (*fake_cuda_inject_fn)(const char *kernel, int error, int64_t min_extent);
/* The next n primary context resets fail with CUDA_ERROR_CONTAINED (what a
 * GPU whose error containment tripped answers until the process restarts). */
typedef void (*fake_cuda_fail_resets_fn)(int n);
/* The counters since the library was loaded. */
typedef void (*fake_cuda_counters_fn)(fake_cuda_counters *out);
/* The kernel the i-th launch counted in `launches` ran (0-based; the last
 * 4096 are kept), or NULL. */
typedef const char *(*fake_cuda_launched_fn)(uint64_t i);

#endif

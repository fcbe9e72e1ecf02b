/* shapejit/backends.h — compilers for the bucketed cache beyond the
 * interpreter: the host backend (LLVM, this CPU).
 *
 *   sj_host_compiler_config hcfg;
 *   sj_host_compiler_config_init(&hcfg);                 // O3, fusion, replay, one device
 *   sj_host_compiler *hc;
 *   if (sj_host_compiler_create(ctx, &hcfg, &hc) != SJ_OK) return 1;
 *   sj_compiler comp;
 *   sj_host_compiler_table(hc, &comp);
 *   sj_bucketed_cache_config cfg;
 *   sj_bucketed_cache_config_init(&cfg);
 *   sj_host_compiler_cache_config(hc, &cfg);             // the compile options go into the key
 *   sj_bucketed_cache *c;
 *   sj_bucketed_cache_create(g, ladder, &comp, store, &cfg, &c);
 *   ...                                                  // get_or_compile, run_padded
 *   sj_bucketed_cache_destroy(c);
 *   sj_host_compiler_destroy(hc);                        // after every cache that uses it
 *
 * compile = sj_compile for the host + sj_artifact_serialize; load =
 * sj_artifact_deserialize + the CPU-feature check + an executable on one of
 * the compiler's host devices, params uploaded once; run = a replay of the
 * executable's captured launches (captured at load when `replay` is on),
 * else eager launches. The store key's target strings are this machine's
 * triple, CPU and enabled CPU features (or the ones the options name) and
 * the toolchain is the LLVM version the library was built with.
 *
 * Runs on one device are serialised by the device, so a server with several
 * workers gives the compiler as many devices: executables are spread over
 * them round robin, and runs of different buckets then overlap.
 *
 * Ownership: the compiler owns its devices; it must outlive every cache
 * (and so every executable) made with its table. Any number of threads may
 * use the table at once.
 */
#ifndef SHAPEJIT_BACKENDS_H
#define SHAPEJIT_BACKENDS_H

#include "shapejit/bucketed_cache.h"
#include "shapejit/compile.h"
#include "shapejit/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sj_host_compiler_config {
    sj_compile_options options;      /* target must be SJ_TARGET_HOST */
    int devices;                     /* host devices to spread executables over; default 1 */
    bool replay;                     /* capture at load, replay on run; default true */
    const sj_mdcache_policy *policy; /* the devices' metadata cache policy; NULL = defaults */
} sj_host_compiler_config;

void sj_host_compiler_config_init(sj_host_compiler_config *cfg);

typedef struct sj_host_compiler sj_host_compiler;

/* cfg may be NULL for defaults. SJ_E_INVALID_ARG for a non-host target or
 * devices outside 1..256. */
sj_status sj_host_compiler_create(sj_ctx *ctx, const sj_host_compiler_config *cfg,
                                  sj_host_compiler **out);
void sj_host_compiler_destroy(sj_host_compiler *hc); /* NULL is a no-op */

/* The compiler table; its strings and ctx are owned by hc. */
void sj_host_compiler_table(sj_host_compiler *hc, sj_compiler *out);
/* Sets cfg->options to the compiler's canonical options (borrowed from hc):
 * compile refuses any other bytes, so two option sets never share a key. */
void sj_host_compiler_cache_config(const sj_host_compiler *hc, sj_bucketed_cache_config *cfg);

int sj_host_compiler_num_devices(const sj_host_compiler *hc);
sj_device *sj_host_compiler_device(sj_host_compiler *hc, int i);

#ifdef __cplusplus
}
#endif
#endif

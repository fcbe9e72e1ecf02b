/* shapejit/ext/cuda_device.h — the CUDA device: an NVIDIA GPU behind the device
 * interface (shapejit/ext/device.h), driven through the CUDA driver API, which is
 * opened at run time so a build or a machine without a GPU still works.
 *
 *   sj_cuda_device_config cfg;
 *   sj_cuda_device_config_init(&cfg);          // ordinal 0, "libcuda.so.1"
 *   sj_cuda_device_info info;
 *   if (sj_cuda_probe(ctx, &cfg, &info) != SJ_OK) {      // SJ_E_NO_DEVICE: no driver / GPU
 *       puts(sj_ctx_last_error(ctx));
 *       return;
 *   }
 *   sj_device *dev;
 *   sj_cuda_device_create(ctx, &cfg, NULL, &dev);         // NULL = default cache policy
 *   sj_module *m;
 *   sj_cuda_load_code(dev, cubin, cubin_len, ptx, ptx_len, &m); // SASS if it fits, else PTX
 *   ...
 *   sj_device_destroy(dev);
 *
 * The device owns a retained primary context of the GPU and one stream; all
 * its work goes to that stream. Capture records launches with stream capture
 * into a CUDA graph; replaying at another active extent rewrites the
 * extent parameter of the graph's kernel nodes, so one capture serves a
 * whole bucket. Memory is plain device memory (not host visible).
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_CUDA_DEVICE_H
#define SHAPEJIT_CUDA_DEVICE_H

#include "shapejit/ext/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sj_cuda_device_config {
    int ordinal;             /* which GPU (0-based) */
    const char *driver_path; /* the driver library to open; NULL = "libcuda.so.1" */
} sj_cuda_device_config;

SJ_API void sj_cuda_device_config_init(sj_cuda_device_config *cfg);

typedef struct sj_cuda_device_info {
    int ordinal;
    int sm;             /* compute capability as major * 10 + minor, e.g. 90 */
    int driver_version; /* e.g. 13000 */
    int multiprocessors;
    size_t total_memory; /* bytes */
    char name[128];
} sj_cuda_device_info;

/* Opens the driver and describes GPU `cfg->ordinal` without keeping anything.
 * SJ_E_NO_DEVICE, with a message naming what is missing (the driver library,
 * a driver entry point, any GPU, that ordinal), where it cannot be used.
 * cfg NULL = defaults. */
SJ_API sj_status sj_cuda_probe(sj_ctx *ctx, const sj_cuda_device_config *cfg, sj_cuda_device_info *out);

/* A device on GPU `cfg->ordinal` (cfg NULL = defaults); errors as for
 * sj_cuda_probe. Destroy with sj_device_destroy. */
SJ_API sj_status sj_cuda_device_create(sj_ctx *ctx, const sj_cuda_device_config *cfg,
                                       const sj_mdcache_policy *policy, sj_device **out);

/* The arch a cubin was built for (major * 10 + minor, read from its ELF
 * header), or SJ_E_PARSE for bytes that are not a CUDA binary. */
SJ_API sj_status sj_cubin_arch(sj_ctx *ctx, const void *cubin, size_t len, int *sm);

/* Loads an artifact's GPU code on a CUDA device: the cubin when its arch runs
 * on the device (same major, minor not above the device's), else the PTX
 * (JIT-compiled by the driver). SJ_E_MISMATCH naming both arches when the
 * cubin does not fit and there is no PTX. Either code may be absent (NULL). */
SJ_API sj_status sj_cuda_load_code(sj_device *dev, const void *cubin, size_t cubin_len, const char *ptx,
                                   size_t ptx_len, sj_module **out);

#ifdef __cplusplus
}
#endif
#endif

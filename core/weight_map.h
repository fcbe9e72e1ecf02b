/* A weights file mapped read-only (ONNX external data), shared by the
 * graph params that lie in it and the weight-pool entries that lend those
 * bytes to executables in place of a copy. Not installed.
 *
 *   sj_weight_map *m;
 *   sj_weight_map_open(ctx, "/models/bert/model.onnx.data", &m);  // mmap + BLAKE3
 *   const float *w = (const float *)(sj_weight_map_data(m) + offset);
 *   ...
 *   sj_weight_map_check(m, ctx);    // before (and after) kernels read w: fstat,
 *                                   // re-hash only when size/mtime/ctime moved
 *   sj_weight_map_release(m);       // the last reference unmaps
 *
 * Reference counted: each holder (a graph, a pool entry) takes one, so the
 * mapping lives exactly as long as something may read it, whichever of
 * graph, engine or executable goes last.
 *
 * A file that changes under the mapping is caught, never read as silently
 * wrong weights: the size and timestamps seen when the bytes last hashed
 * equal are kept, a check compares them with fstat (cheap), and only when
 * they moved hashes the mapped bytes again; a different hash or a file now
 * shorter than the mapping is SJ_E_CORRUPT naming the file, for every check
 * until the file holds the mapped bytes again. What a check cannot close:
 * the file truncated between a check and a kernel's read of a page past the
 * new end raises SIGBUS in the reader (the library installs no signal
 * handler); bytes rewritten within the same timestamp tick as the last
 * verified state look unchanged until a verify. docs/weights.md says it. */
#ifndef SJ_CORE_WEIGHT_MAP_H
#define SJ_CORE_WEIGHT_MAP_H

#include "core_impl.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sj_weight_map sj_weight_map;

/* Maps all of the regular file at path (read-only, private) and hashes it.
 * SJ_E_IO naming the file when it cannot be opened, is empty or cannot be
 * mapped (callers then read it instead). One reference, the caller's. */
sj_status sj_weight_map_open(sj_ctx *ctx, const char *path, sj_weight_map **out);
void sj_weight_map_retain(sj_weight_map *m);
/* Drops a reference; the last unmaps and closes. NULL is a no-op. */
void sj_weight_map_release(sj_weight_map *m);

const uint8_t *sj_weight_map_data(const sj_weight_map *m);
size_t sj_weight_map_size(const sj_weight_map *m);
const char *sj_weight_map_path(const sj_weight_map *m);

/* SJ_OK when the file still holds the bytes mapped: fstat, and a re-hash
 * only when its size or timestamps differ from the last verified state.
 * SJ_E_CORRUPT (truncated, or bytes changed) or SJ_E_IO naming the file,
 * recorded on ctx. Thread-safe. */
sj_status sj_weight_map_check(sj_weight_map *m, sj_ctx *ctx);
/* As check, but always re-hashes (an explicit verify). */
sj_status sj_weight_map_verify(sj_weight_map *m, sj_ctx *ctx);
/* How often the mapped bytes were hashed again after the map-time hash. */
uint64_t sj_weight_map_rehashes(const sj_weight_map *m);

#endif

/* A weights file held read-only (ONNX external data), shared by the graph
 * params that lie in it and the weight-pool entries that lend those bytes
 * to executables in place of a copy. Not installed.
 *
 *   sj_weight_map *m;
 *   sj__weight_map_open(ctx, "/models/bert/model.onnx.data", &m);  // hold (+ BLAKE3 in place)
 *   const float *w = (const float *)(sj__weight_map_data(m) + offset);
 *   ...
 *   sj__weight_map_check(m, ctx);    // before (and after) kernels read w
 *   sj__weight_map_release(m);       // the last reference unmaps
 *
 * sj__weight_map_adopt holds a block of memory the same way (no file).
 *
 * Reference counted: each holder (a graph, a pool entry) takes one, so the
 * bytes live exactly as long as something may read them, whichever of
 * graph, engine or executable goes last.
 *
 * A mapped page of a file truncated later raises SIGBUS in its reader, and
 * a reader here is a kernel on a request thread: a file `cp` rewrites in
 * place killed `serve --listen`. So only an immutable file (chattr +i,
 * which no process may write or truncate while it is set) is mapped in
 * place (and a file this library wrote once and never rewrites,
 * sj__weight_map_open_owned); any other is copied at open into a sealed memfd (no write, shrink
 * or growth, ours included) and mapped from that: nothing done to the file
 * afterwards reaches the weights, and check is SJ_OK for it.
 *
 * Mapped in place, a change (root cleared the flag) is caught, never read
 * as silently wrong weights: the size and timestamps seen when the bytes
 * last hashed equal are kept, a check compares them with fstat (cheap),
 * and only when they moved hashes the file again with pread (not through
 * the mapping, so the check itself cannot fault); a different hash or a
 * shorter file is SJ_E_CORRUPT naming the file, for every check until the
 * file holds the mapped bytes again. docs/weights.md says what is left. */
#ifndef SJ_CORE_WEIGHT_MAP_H
#define SJ_CORE_WEIGHT_MAP_H

#include "core/core_impl.h"
#include "core/file_identity.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sj_weight_map sj_weight_map;

/* Holds all of the regular file at path read-only (mapped in place when
 * immutable, and then hashed for the checks; else a sealed copy). SJ_E_IO naming the file
 * when it cannot be opened, is empty or cannot be held (callers then read
 * it instead); SJ_E_CORRUPT when it kept changing while it was copied.
 * One reference, the caller's. */
sj_status sj__weight_map_open(sj_ctx *ctx, const char *path, sj_weight_map **out);
/* Holds buf (size bytes, sj_alloc'ed on ctx, never written again) the
 * same way: a model's weights decoded into memory (an ONNX file's
 * raw_data) are shared by graph, pool and executables in place instead of
 * copied into each. The last reference sj_frees buf. SJ_E_NOMEM (buf is
 * still the caller's) when the holder cannot be made. */
sj_status sj__weight_map_adopt(sj_ctx *ctx, void *buf, size_t size, sj_weight_map **out);
/* Maps in place, read-only, the file open as fd (taken: closed with the
 * map, or on failure), one this library wrote and never writes again (a
 * store's packed weights: written whole under another name, then renamed
 * into place read-only), whose bytes [offset, offset + size) its writer
 * recorded as hashing to `hash`; path names it in messages. They are trusted without being
 * read, as a file with an unchanged identity is. Nothing of ours writes
 * such a file, so check (on every run) trusts it; verify hashes that range
 * again. SJ_E_CORRUPT when the file is not offset + size bytes,
 * SJ_E_IO when it cannot be opened or mapped. */
sj_status sj__weight_map_open_owned(sj_ctx *ctx, int fd, const char *path, size_t offset, size_t size,
                                   const uint8_t hash[32], sj_weight_map **out);
void sj__weight_map_retain(sj_weight_map *m);
/* Drops a reference; the last unmaps and closes. NULL is a no-op. */
void sj__weight_map_release(sj_weight_map *m);

const uint8_t *sj__weight_map_data(const sj_weight_map *m);
size_t sj__weight_map_size(const sj_weight_map *m);
const char *sj__weight_map_path(const sj_weight_map *m); /* NULL when adopted */
/* Whether the bytes come from a file (mapped or sealed copy), not adopted. */
bool sj__weight_map_is_file(const sj_weight_map *m);
/* The file's identity when its bytes were taken (a copy's, checked equal
 * before and after the copy); NULL when adopted. */
const sj_file_identity *sj__weight_map_identity(const sj_weight_map *m);

/* SJ_OK when the bytes held are still the file's (always, for a copy):
 * fstat, and a re-hash only when its size or timestamps differ from the
 * last verified state.
 * SJ_E_CORRUPT (truncated, or bytes changed) or SJ_E_IO naming the file,
 * recorded on ctx. Thread-safe. */
sj_status sj__weight_map_check(sj_weight_map *m, sj_ctx *ctx);
/* As check, but always re-hashes (an explicit verify). */
sj_status sj__weight_map_verify(sj_weight_map *m, sj_ctx *ctx);
/* How often the mapped bytes were hashed again after the map-time hash. */
uint64_t sj__weight_map_rehashes(const sj_weight_map *m);

#endif

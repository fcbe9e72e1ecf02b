/* shapejit/ext/artifact.h — one compiled bucket as self-describing bytes.
 *
 *   sj_artifact *a;
 *   sj_compile(g, 64, &opts, &a);                        // shapejit/ext/compile.h
 *   uint8_t *bytes; size_t len;
 *   sj_artifact_serialize(a, &bytes, &len);             // what the store keeps
 *   sj_artifact *b;
 *   if (sj_artifact_deserialize(ctx, bytes, len, &b) != SJ_OK)   // SJ_E_CORRUPT:
 *       fprintf(stderr, "%s\n", sj_ctx_last_error(ctx));          // never run it
 *   if (sj_artifact_check_host(b) != SJ_OK) ...         // SJ_E_MISMATCH: another CPU
 *   sj_executable *exe;
 *   sj_artifact_load(b, dev, g, &exe);                  // checks, then the runtime loads it
 *   sj_free(ctx, bytes); sj_artifact_destroy(a); sj_artifact_destroy(b);
 *
 * Layout (little-endian), format version SJ_ARTIFACT_FORMAT_VERSION:
 *   "SJARTIFC" u32 version, u32 0, u64 body length, body, u64 FNV-1a-64 of
 *   everything before it. Body: strings (u32 length + bytes) for target,
 *   triple, CPU, CPU features, shapejit version, LLVM version and the extern
 *   symbols the code calls beyond libm, and the tuning record (what
 *   precompile --tune timed and chose; "" when not tuned); the graph hash (32 bytes) and the
 *   options hash (u64); the launch plan (extent, arena bytes, sub-batch rows, kernel table:
 *   each kernel's symbol and its 32-byte code key, buffer slots, launches,
 *   launch slots, words); the code blobs (u32 format, u64 length, bytes; a
 *   host, PTX or cubin blob is a bundle of one module per kernel of the
 *   plan, in its order: "SJOBJS01", u32 count, count times u64 length +
 *   bytes; a GPU plan without kernels holds its one empty module whole,
 *   told apart by the magic). Every count, offset and size is checked against the
 *   bytes that remain and the plan is validated, so a truncated or altered
 *   artifact is SJ_E_CORRUPT (any single changed byte fails the checksum).
 *
 * An artifact owns copies of everything it holds.
 *
 * Extension tier (include/shapejit/ext/): for backends, tools and tests
 * that work below sj_engine; it may change between minor versions.
 */
#ifndef SHAPEJIT_ARTIFACT_H
#define SHAPEJIT_ARTIFACT_H

#include "shapejit/ext/device.h"
#include "shapejit/ext/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SJ_ARTIFACT_FORMAT_VERSION 9u /* 2: the tuning record; 3: host kernels with row entries; 4: packed weight slots; 5: host code as one object per kernel, kernels named by their code; 6: a packed weight slot holds a batch of matrices; 7: packed weight panels of 16-bit elements (a storage word); 8: each kernel's code key (what its object is compiled from); 9: the plan's sub-batch rows */

typedef struct sj_artifact sj_artifact;

/* Strings are borrowed from the artifact. */
typedef struct sj_artifact_info {
    uint32_t format_version;
    const char *target;   /* "host", "nvptx", "nvrtc" */
    const char *triple;   /* e.g. "x86_64-pc-linux-gnu" */
    const char *cpu;      /* e.g. "znver3" */
    const char *features; /* LLVM feature string, "+avx2,+fma,-avx512f,..." */
    const char *shapejit_version, *llvm_version;
    const char *externs;  /* comma-separated symbols beyond libm, "" = none */
    const char *tuning;   /* the schedules precompile --tune timed, and which won; "" = not tuned */
    uint8_t graph_hash[32];
    uint64_t options_hash;
    int64_t extent;       /* the bucket extent */
    int n_kernels, n_launches, n_code;
    /* Memory, from the launch plan, so a store can say what a bucket costs
     * without loading it: the intermediates' arena, the padded inputs and
     * outputs, and run_bytes, all the bucket holds while it serves (those
     * two and its slot tables; see sj_executable_memory_info). Weights are
     * apart: every bucket of a graph shares one copy. */
    int64_t arena_bytes, io_bytes, run_bytes, weight_bytes;
} sj_artifact_info;

SJ_API void sj_artifact_destroy(sj_artifact *a); /* NULL is a no-op */
/* Records what tuning timed and chose (copied; under 64 KiB), so it
 * travels with the artifact through the store and the fleet tier. */
SJ_API sj_status sj_artifact_set_tuning(sj_artifact *a, const char *record);
SJ_API void sj_artifact_get_info(const sj_artifact *a, sj_artifact_info *out);
/* Code blob i (0 <= i < n_code); bytes borrowed from the artifact. */
SJ_API sj_status sj_artifact_code(const sj_artifact *a, int i, sj_code_format *fmt, const uint8_t **bytes,
                                  size_t *len);
/* The first blob of format fmt; SJ_E_NOT_FOUND when there is none. */
SJ_API sj_status sj_artifact_find_code(const sj_artifact *a, sj_code_format fmt, const uint8_t **bytes,
                                       size_t *len);

/* *out is allocated with sj_alloc (free with sj_free). */
SJ_API sj_status sj_artifact_serialize(const sj_artifact *a, uint8_t **out, size_t *len);

/* Where compiled code lies in an artifact's bytes, and a key naming it:
 * the BLAKE3 of those bytes. A host artifact's code is one object file per
 * kernel, named by the kernel's code rather than its graph or bucket, so
 * a kernel that compiles alike in several buckets or models is the same
 * part in each; a store keeps it once (sj_store_put_parts takes these as
 * they are). */
typedef struct sj_artifact_part {
    uint64_t offset, len;
    uint8_t key[32];
} sj_artifact_part;
/* The parts of serialised artifact bytes that are code, in increasing
 * offset order (*parts sj_alloc'ed; NULL when *n_parts is 0). The bytes
 * are checked as sj_artifact_deserialize checks them (SJ_E_CORRUPT). */
SJ_API sj_status sj_artifact_code_parts(sj_ctx *ctx, const void *bytes, size_t len,
                                        sj_artifact_part **parts, int *n_parts);
SJ_API sj_status sj_artifact_deserialize(sj_ctx *ctx, const void *bytes, size_t len, sj_artifact **out);

/* SJ_OK when this machine can run a host artifact: same architecture and
 * every CPU feature the code was built with present here. Otherwise
 * SJ_E_MISMATCH naming the target or the missing features. */
SJ_API sj_status sj_artifact_check_host(const sj_artifact *a);

/* Checks the artifact against the device (host: sj_artifact_check_host) and
 * loads it as an executable (shapejit/ext/runtime.h) for graph g, whose hash
 * must be the artifact's (else SJ_E_MISMATCH). */
SJ_API sj_status sj_artifact_load(const sj_artifact *a, sj_device *dev, const sj_graph *g,
                                  sj_executable **out);

#ifdef __cplusplus
}
#endif
#endif

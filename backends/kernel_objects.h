/* Names for compiled kernel objects by what decides their bytes, so a
 * compile of another bucket or model (or of the same bucket again) finds a
 * kernel's object in the store before compiling it. Private to the
 * backends.
 *
 *   sj_compiler comp;  sj_host_compiler_table(hc, &comp);
 *   uint8_t name[32];
 *   sj__kernel_object_name(&comp, plan->kernels[i].code, name);
 *
 * A kernel's code key (sj_kernel_desc.code) is BLAKE3 of its module as
 * emitted, before optimisation: the whole of what LLVM compiles it from,
 * whatever the emitter read to make it (the bucket extent for few-row
 * matmuls and row splits included). A name hashes that key with what the
 * code is compiled for and with: the target triple, CPU and features, the
 * compiler (LLVM and the codegen revision), the artifact format and the
 * canonical options. Code generation is deterministic (each kernel is its
 * own module, the same bytes on any number of threads), so equal names mean
 * equal bytes, and a kernel emitted alike in ten buckets is compiled once.
 * The store keeps parts by content and names beside them
 * (sj_store_name_parts). */
#ifndef SJ_BACKENDS_KERNEL_OBJECTS_H
#define SJ_BACKENDS_KERNEL_OBJECTS_H

#include "shapejit/ext/bucketed_cache.h"

void sj__kernel_object_name(const sj_compiler *comp, const uint8_t code[32], uint8_t name[32]);

/* For each code part of artifact bytes (sj_artifact_code_parts' order), its
 * kernel's name, when the code is one object per kernel of the plan, in its
 * order (how the host emitter bundles them), each with its code key;
 * otherwise none (*n 0). */
sj_status sj__kernel_object_names(const sj_compiler *comp, sj_ctx *ctx, const void *artifact,
                                 size_t len, uint8_t (**names)[32], int *n);

#endif

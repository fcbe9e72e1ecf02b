/* Host object files loaded by one LLVM ORC LLJIT per host device. A module
 * is one object file (the device's registry, runtime/code_registry.h,
 * splits a bundle and loads each distinct object once), in a JITDylib of
 * its own, so two objects may define the same symbol; a module's lookups
 * search its own object only. Calls on one sj_host_jit are serialised by
 * the device's lock. Not installed. */
#ifndef SJ_RUNTIME_HOST_JIT_IMPL_H
#define SJ_RUNTIME_HOST_JIT_IMPL_H

#include "shapejit/common.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sj_host_jit sj_host_jit;
typedef struct sj_host_jit_module sj_host_jit_module;

sj_status sj__host_jit_create(sj_ctx *ctx, sj_host_jit **out);
/* Frees every module's code still loaded. */
void sj__host_jit_destroy(sj_host_jit *j);

/* Loads one object file, copying its bytes; SJ_E_PARSE when LLVM cannot
 * read it. */
sj_status sj__host_jit_add_object(sj_host_jit *j, const void *obj, size_t len,
                                 sj_host_jit_module **out);
/* Frees the module's code (its JITDylib stays, empty, for the next load of
 * the same bytes: the LLVM C API cannot remove a JITDylib). */
void sj__host_jit_remove(sj_host_jit *j, sj_host_jit_module *m);
/* Address of `name` in module m (links the module on first use).
 * required: SJ_E_NOT_FOUND when absent; optional: *addr = 0 when absent.
 * SJ_E_COMPILE when linking fails (e.g. an unresolved external). */
sj_status sj__host_jit_lookup(sj_host_jit *j, sj_host_jit_module *m, const char *name,
                             int required, uint64_t *addr);

#endif

/* What the host and GPU compilers share: both compile to sj_artifact bytes
 * and load them as sj_executables, so they trim, measure, estimate and
 * destroy their executables the same way. Not installed. */
#ifndef SJ_CACHE_ARTIFACT_EXE_H
#define SJ_CACHE_ARTIFACT_EXE_H

#include "shapejit/ext/bucketed_cache.h"

/* Fills out's trim, memory, estimate, parts and destroy. */
void sj__artifact_exe_ops(sj_compiler *out);

#endif

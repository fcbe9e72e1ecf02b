/* LLVM CPU feature strings ("+avx2,+fma,-avx512f,..."): which features one
 * needs that another lacks. Both the load-time check of a host artifact and
 * the host compiler's choice of a stored CPU level ask this. Not installed. */
#ifndef SJ_RUNTIME_CPU_FEATURES_H
#define SJ_RUNTIME_CPU_FEATURES_H

#include <stddef.h>

/* The number of features `need` enables ('+') that `have` does not; their
 * names, space-separated, go to missing (cap bytes, truncated to fit) when
 * missing is not NULL. */
int sj__cpu_features_missing(const char *need, const char *have, char *missing, size_t cap);

#endif

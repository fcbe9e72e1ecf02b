/* The extern kernels host code may call besides libm. Naming them here (by
 * address) keeps their libraries linked into every program that loads host
 * artifacts, so the ORC loader finds them in the process. */
#include <cblas.h>
#include <string.h>

#include "runtime/host_code/host_code.h"

void *sj__host_extern_symbol(const char *name) {
    if (!strcmp(name, "cblas_sgemm")) return (void *)cblas_sgemm;
    if (!strcmp(name, "sj__host_attention_rows")) return (void *)sj__host_attention_rows;
    if (!strcmp(name, "sj__host_gemm")) return (void *)sj__host_gemm;
    if (!strcmp(name, "sj__host_gemm_packed")) return (void *)sj__host_gemm_packed;
    return NULL;
}

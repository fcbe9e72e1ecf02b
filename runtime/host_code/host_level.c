/* The code level this CPU runs, for the C kernels host code calls (the
 * packed GEMM, fused attention): each is built for AVX-512, AVX2+FMA and
 * baseline x86-64 and runs the level its artifact was compiled for, lowered
 * here to what the CPU has. */
#include "runtime/host_code/host_code.h"

int sj__host_kernel_level(int64_t wanted) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (wanted >= 4 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
        return 4;
    if (wanted >= 3 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 3;
#else
    (void)wanted;
#endif
    return 2;
}

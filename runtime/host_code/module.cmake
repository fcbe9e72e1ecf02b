# Running host object code (runtime/host_code): the extern kernels it may
# call, and the options those kernels are built with.
# Host matmuls above the BLAS threshold call cblas_sgemm; linking OpenBLAS into
# the library puts the symbol in the process, where the ORC loader finds it.
find_library(SJ_OPENBLAS_LIB NAMES openblas)
if(NOT SJ_OPENBLAS_LIB)
  message(FATAL_ERROR "shapejit: missing dependency libopenblas (Debian: libopenblas-dev)")
endif()
list(APPEND SJ_EXTRA_LIBS ${SJ_OPENBLAS_LIB})
# The fused attention kernel's clones for FMA CPUs use FMA for a*b+c.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/host_attention.c PROPERTIES
  COMPILE_OPTIONS -ffp-contract=fast)
# The packed GEMM: FMA for a*b+c in its FMA levels, and -O3 in every build
# type (its microkernel's register block needs the unrolling; a Debug build
# of it at -O0 would be what the sanitizer suite spends its time in).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/host_gemm.c PROPERTIES
  COMPILE_OPTIONS "-ffp-contract=fast;-O3")

# Host matmuls above the BLAS threshold call cblas_sgemm; linking OpenBLAS into
# the library puts the symbol in the process, where the ORC loader finds it.
find_library(SJ_OPENBLAS_LIB NAMES openblas)
if(NOT SJ_OPENBLAS_LIB)
  message(FATAL_ERROR "shapejit: missing dependency libopenblas (Debian: libopenblas-dev)")
endif()
list(APPEND SJ_EXTRA_LIBS ${SJ_OPENBLAS_LIB})

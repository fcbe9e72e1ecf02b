# The GPU toolchain (compile/gpu): NVRTC is linked by the top-level CMakeLists
# when the toolkit is found; nvJitLink (PTX -> cubin for LLVM's PTX) is found
# here because CMake 3.25's FindCUDAToolkit has no CUDA::nvJitLink target.
# What it finds is a build definition (SJ_BUILD_DEFINITIONS: the library and
# everything linking it, so the GPU tests know which paths to expect), not a
# definition for every target of the project.
if(SJ_HAVE_CUDA)
  if(TARGET CUDA::nvJitLink)
    list(APPEND SJ_EXTRA_LIBS CUDA::nvJitLink)
    list(APPEND SJ_BUILD_DEFINITIONS SJ_HAVE_NVJITLINK=1)
  else()
    find_library(SJ_NVJITLINK_LIB nvJitLink HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_ROOT}/lib64)
    if(SJ_NVJITLINK_LIB)
      list(APPEND SJ_EXTRA_LIBS ${SJ_NVJITLINK_LIB})
      list(APPEND SJ_BUILD_DEFINITIONS SJ_HAVE_NVJITLINK=1)
    else()
      message(STATUS "shapejit: libnvJitLink not found: PTX -> cubin linking OFF (artifacts keep PTX only)")
    endif()
  endif()
endif()

# libdevice: the math library the NVPTX emitter links for exp, log, tanh, erf.
find_file(SJ_LIBDEVICE libdevice.10.bc
  PATHS ${CUDAToolkit_ROOT}/nvvm/libdevice /usr/local/cuda/nvvm/libdevice /usr/lib/nvidia-cuda-toolkit/libdevice
  NO_DEFAULT_PATH)
if(SJ_LIBDEVICE)
  list(APPEND SJ_BUILD_DEFINITIONS SJ_CUDA_LIBDEVICE="${SJ_LIBDEVICE}")
else()
  message(STATUS "shapejit: libdevice.10.bc not found: NVPTX kernels with transcendental math will not compile")
endif()

# ptxas: the GPU tests assemble every emitted PTX with it (never the library).
find_program(SJ_PTXAS ptxas HINTS ${CUDAToolkit_BIN_DIR} ${CUDAToolkit_ROOT}/bin /usr/local/cuda/bin)
if(SJ_PTXAS)
  list(APPEND SJ_TEST_DEFINITIONS SJ_PTXAS="${SJ_PTXAS}")
endif()

# The runtime-only build (-DSJ_COMPILERS=OFF): the deploy artifact for GPU
# nodes. No LLVM, NVRTC or nvJitLink; it loads GPU artifacts (cubin, else PTX
# through the driver's JIT) that a build machine precompiled into a store,
# and keeps the interpreter as the reference. SQLite, zstd, hiredis and
# protobuf-c are linked from Debian's static archives, so the binary needs
# only glibc and, at run time, the NVIDIA driver (dlopen("libcuda.so.1")).
# Included by the top-level CMakeLists.txt before the library is defined.

# Sources left out: the compilers (compile/, whole), the host code that runs
# through LLVM's ORC (runtime/host_code/) and the host backend that makes it
# (backends/host*.c). Nothing stands in for them: the backend registry keeps
# the host's row with the reason it is absent, and the few places that would
# load host code refuse under SJ_RUNTIME_ONLY.
set(SJ_COMPILER_SOURCES_REGEX
  "/compile/|/runtime/host_code/|/backends/host(_tune)?\\.c$")
# The tests that hold without compilers: the store, the interpreter, the
# runtime-only behaviour, and the GPU programs that run precompiled stores.
set(SJ_RUNTIME_ONLY_TESTS_REGEX "/tests/(test_(store|interp|npy|ladder|metadata_cache|runtime_only)\\.c|runtime_only\\.cmake)$")

# BLAKE3 (graph hashes, store digests, remote MACs) is the one piece of LLVM
# kept: its C implementation, linked from LLVM's static support archive. Only
# the blake3 objects are pulled in (the rest of LLVMSupport is C++ nothing
# here references); tests/runtime_only.cmake checks that no other LLVM
# symbol reaches the binary.
find_library(SJ_BLAKE3_ARCHIVE NAMES libLLVMSupport.a PATHS ${SJ_LLVM_LIBDIR} NO_DEFAULT_PATH)
if(NOT SJ_BLAKE3_ARCHIVE)
  message(FATAL_ERROR "shapejit runtime-only: libLLVMSupport.a (BLAKE3) not found under ${SJ_LLVM_LIBDIR} (Debian: llvm-19-dev)")
endif()

set(SJ_STATIC_LIBS "")
foreach(lib sqlite3 zstd hiredis protobuf-c)
  string(MAKE_C_IDENTIFIER "SJ_STATIC_${lib}" var)
  find_library(${var} NAMES lib${lib}.a)
  if(NOT ${var})
    message(FATAL_ERROR "shapejit runtime-only: lib${lib}.a not found (Debian: lib${lib}-dev)")
  endif()
  list(APPEND SJ_STATIC_LIBS ${${var}})
endforeach()

# Store keys name the toolchain that compiled an artifact. This build has
# none, so it looks up the build machine's: the versions found when it was
# configured (LLVM from llvm-config, NVRTC and nvJitLink from the CUDA
# toolkit), which must be the ones `shapejit precompile` used there.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  set(sj_cuda_mm "${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}")
  set(sj_link "nvjitlink-${sj_cuda_mm}")
else()
  set(sj_cuda_mm "")
  set(sj_link "ptx-only")
endif()
set(SJ_RUNTIME_TOOLCHAIN_NVPTX "llvm-${SJ_LLVM_VERSION}+${sj_link}" CACHE STRING
  "runtime-only: the toolchain of the NVPTX artifacts to load")
set(SJ_RUNTIME_TOOLCHAIN_NVRTC "nvrtc-${sj_cuda_mm}" CACHE STRING
  "runtime-only: the toolchain of the NVRTC artifacts to load")
message(STATUS "shapejit: runtime-only build (SJ_COMPILERS=OFF); loads artifacts of "
               "${SJ_RUNTIME_TOOLCHAIN_NVPTX} and ${SJ_RUNTIME_TOOLCHAIN_NVRTC}")

# The driver API's header is all the CUDA device needs at build time.
if(SJ_WITH_CUDA AND CUDAToolkit_FOUND)
  set(SJ_HAVE_CUDA ON)
else()
  set(SJ_HAVE_CUDA OFF)
endif()
# The library, the CLI, the tools and the tests that link it all see it
# (SJ_BUILD_DEFINITIONS travels with shapejit_static).
list(APPEND SJ_BUILD_DEFINITIONS SJ_RUNTIME_ONLY=1)
set(SJ_RUNTIME_ONLY_DEFS
  SJ_RUNTIME_TOOLCHAIN_NVPTX="${SJ_RUNTIME_TOOLCHAIN_NVPTX}"
  SJ_RUNTIME_TOOLCHAIN_NVRTC="${SJ_RUNTIME_TOOLCHAIN_NVRTC}")
set(SJ_RUNTIME_ONLY_LIBS ${SJ_STATIC_LIBS} ${SJ_BLAKE3_ARCHIVE} Threads::Threads
  ${CMAKE_DL_LIBS} m)
set(SJ_RUNTIME_ONLY_SHARED_LIBS PkgConfig::ZSTD PkgConfig::HIREDIS PkgConfig::PROTOBUFC
  SQLite::SQLite3 ${SJ_BLAKE3_ARCHIVE} Threads::Threads ${CMAKE_DL_LIBS} m)

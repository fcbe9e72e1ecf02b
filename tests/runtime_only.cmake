# Tests of the runtime-only build (-DSJ_COMPILERS=OFF), run by
# scripts/test-runtime-only.sh: the binary carries no compiler and no shared
# dependency beyond glibc (its size is printed), the commands refuse what
# needs a compiler with what to do instead, and a store precompiled by a full
# build (SJ_TEST_GPU_STORE) loads up to the device.
#
# Script mode (cmake -DCHECK=binary -DBIN=... -P runtime_only.cmake): the
# binary checks.

if(CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND readelf -d "${BIN}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${BIN} failed")
  endif()
  string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dyn}")
  foreach(n IN LISTS needed)
    # glibc; the sanitizer runtimes of an SJ_SANITIZE build.
    if(NOT n MATCHES "\\[(libc|libm|libpthread|libdl|ld-linux-x86-64|libasan|libubsan)\\.so")
      message(FATAL_ERROR "${BIN} needs ${n}: only glibc may be shared")
    endif()
  endforeach()
  execute_process(COMMAND nm "${BIN}" OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
  # LLVM's C API and C++ (mangled llvm::), NVRTC, nvJitLink; BLAKE3 is kept.
  string(REGEX MATCHALL "[^\n]* [TtDdBbRr] [^\n]*(LLVM[A-Z][a-z]|_ZN4llvm|nvrtc[A-Z]|nvJitLink[A-Z])[^\n]*"
    compiler "${syms}")
  foreach(s IN LISTS compiler)
    if(NOT s MATCHES "blake3|BLAKE3")
      message(FATAL_ERROR "${BIN} carries a compiler symbol: ${s}")
    endif()
  endforeach()
  # compile/ is left out whole: no compile entry point is in the binary
  # (the CLI refuses emit itself), and nothing stands in for one.
  string(REGEX MATCHALL "[^\n]* [Tt] (sj_compile|sj_emit_text|sj_compile_kernel_counts?|sj__[a-z_]*emitter[a-z_]*|sj__lower[a-z_]*)\n"
    compile_syms "${syms}\n")
  if(compile_syms)
    message(FATAL_ERROR "${BIN} carries compile code: ${compile_syms}")
  endif()
  if(NOT syms MATCHES " T sj_compile_options_hash\n")
    message(FATAL_ERROR "${BIN}: nm found no sj_compile_options_hash (store keys need it): the compile-symbol check saw nothing")
  endif()
  if(NOT syms MATCHES "llvm_blake3_hasher_init")
    message(FATAL_ERROR "${BIN}: nm found no BLAKE3: the symbol check saw nothing")
  endif()
  file(SIZE "${BIN}" size)
  math(EXPR kib "${size} / 1024")
  message("runtime-only ${BIN}: ${kib} KiB, shared: ${needed}")
  return()
endif()

set(SJ_TEST_GPU_STORE "" CACHE FILEPATH
  "a store a full build precompiled (ffn.sjg, list:8,32, --target all; nvptx sm_80) for test_runtime_only")
if(SJ_TEST_GPU_STORE)
  target_compile_definitions(test_runtime_only PRIVATE SJ_TEST_GPU_STORE="${SJ_TEST_GPU_STORE}")
endif()
set_tests_properties(test_runtime_only PROPERTIES LABELS "gpu;runtime-only")

add_test(NAME runtime_only_binary COMMAND ${CMAKE_COMMAND} -DBIN=$<TARGET_FILE:shapejit_cli>
  -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(runtime_only_binary PROPERTIES LABELS runtime-only)

# The commands, through the CLI test script of tests/cli.cmake.
set(rt_models ${PROJECT_SOURCE_DIR}/examples/models)
set(rt_dir ${PROJECT_BINARY_DIR}/runtime_only_tests)
function(rt_cli_test name)
  cmake_parse_arguments(T "" "RC;OUT;ERR" "ARGS;NO_FILES" ${ARGN})
  list(JOIN T_ARGS "|" args)
  list(JOIN T_NO_FILES "|" no_files)
  set(defs -DSJ_CLI=$<TARGET_FILE:shapejit_cli> "-DARGS=${args}" -DEXPECT_RC=${T_RC}
    "-DNO_FILES=${no_files}")
  if(DEFINED T_OUT)
    list(APPEND defs "-DEXPECT_OUT=${T_OUT}")
  endif()
  if(DEFINED T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${T_ERR}")
  endif()
  add_test(NAME rt_cli_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${PROJECT_SOURCE_DIR}/tests/cli.cmake)
  set_tests_properties(rt_cli_${name} PROPERTIES TIMEOUT 60 LABELS "cli;runtime-only")
endfunction()

rt_cli_test(interp RC 0 ARGS run ${rt_models}/attention.sjg --rows 5 --backend interp --store none
  --out ${rt_dir}/interp OUT "out: \\[5, 32\\]")
rt_cli_test(host_refused RC 1 ARGS run ${rt_models}/ffn.sjg --rows 5 --backend host --store none
  --out ${rt_dir}/host ERR "neither compiles nor loads host code; host artifacts run on a full build"
  NO_FILES ${rt_dir}/host/y.npy)
rt_cli_test(emit_refused RC 1 ARGS emit ${rt_models}/ffn.sjg --rows 5 --target nvptx
  ERR "compiles nothing; run `shapejit precompile MODEL --ladder SPEC --target nvptx --arch sm_90` on a build machine")
rt_cli_test(emit_host_refused RC 1 ARGS emit ${rt_models}/ffn.sjg --rows 5 --target llvm-ir
  ERR "compile \\(host\\): this runtime-only build \\(SJ_COMPILERS=OFF\\) compiles nothing; run `shapejit precompile MODEL --ladder SPEC --target host` on a build machine")
rt_cli_test(emit_nvrtc_refused RC 1 ARGS emit ${rt_models}/ffn.sjg --rows 5 --target cuda-c --arch sm_80
  ERR "compiles nothing; run `shapejit precompile MODEL --ladder SPEC --target nvrtc --arch sm_80` on a build machine")
rt_cli_test(bench_refused RC 1 ARGS bench ${rt_models}/ffn.sjg
  ERR "has no host backend to time")
rt_cli_test(precompile_refused RC 1 ARGS precompile ${rt_models}/ffn.sjg --ladder list:8 --target nvrtc
  --store ${rt_dir}/p.db ERR "not precompiled for sm_90|compiles nothing")
rt_cli_test(cuda_no_driver RC 1 ARGS run ${rt_models}/ffn.sjg --rows 5 --backend cuda --store none
  --out ${rt_dir}/cuda ERR "needs a GPU \\(no device\\): cuda: cannot open the driver library libcuda.so.1"
  NO_FILES ${rt_dir}/cuda/y.npy)
if(SJ_TEST_GPU_STORE)
  rt_cli_test(store_ls RC 0 ARGS store ls --store ${SJ_TEST_GPU_STORE} OUT "nvptx64-nvidia-cuda/sm_90")
  rt_cli_test(store_verify RC 0 ARGS store verify --store ${SJ_TEST_GPU_STORE} OUT " 0 corrupt")
endif()

# The GPU-machine half of scripts/gpu-check.sh (tools/gpu_check.c).
add_executable(sj_gpu_check ${PROJECT_SOURCE_DIR}/tools/gpu_check.c)
target_compile_options(sj_gpu_check PRIVATE ${SJ_WARNINGS})
target_compile_definitions(sj_gpu_check PRIVATE _GNU_SOURCE)
target_include_directories(sj_gpu_check PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(sj_gpu_check PRIVATE sj_conformance shapejit_static)

# GPU targets on the command line: precompile on a machine without a GPU
# (compile + store, nothing loaded), then `run --backend cuda`, which reads
# the store on a GPU machine and fails with the driver named on one without.
if(CMAKE_SCRIPT_MODE_FILE AND SERVE)
  # Script mode, serve: the serving loop on the GPU over the precompiled
  # store (buckets 8 and 32, so a warm start compiles nothing), or, without
  # a driver, the failure at start naming it, before a store is opened.
  execute_process(COMMAND "${SJ_CLI}" serve "${MODEL}" --backend cuda --emit ${EMIT}
    --ladder list:8,32 --synthetic uniform:1:32:40:3 --store "${STORE}" --stats
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(report "--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(rc EQUAL 0)
    if(NOT err MATCHES "\"compiles\": 0," OR NOT out MATCHES "backend cuda")
      message(FATAL_ERROR "serve --backend cuda compiled or did not serve on cuda\n${report}")
    endif()
  elseif(NOT rc EQUAL 1 OR NOT err MATCHES "backend cuda needs a GPU \\(no device\\): cuda: cannot open the driver library libcuda.so.1")
    message(FATAL_ERROR "expected success on a GPU or the no-device (SJ_E_NO_DEVICE) message naming libcuda.so.1\n${report}")
  elseif(out MATCHES "p50")
    message(FATAL_ERROR "serve printed figures after failing\n${report}")
  else()
    # Without a driver it fails before the store is opened: no file made.
    set(fresh "${STORE}.serve-fresh.db")
    file(REMOVE "${fresh}")
    execute_process(COMMAND "${SJ_CLI}" serve "${MODEL}" --backend cuda --emit ${EMIT}
      --synthetic uniform:1:32:5:1 --store "${fresh}" RESULT_VARIABLE rc2 ERROR_VARIABLE err2)
    if(NOT rc2 EQUAL 1 OR EXISTS "${fresh}")
      message(FATAL_ERROR "serve without a driver: exit ${rc2}, store made: ${err2}")
    endif()
  endif()
  return()
endif()
if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode (cmake -DSJ_CLI=... -DMODEL=... -DSTORE=... -DOUT=... -DEMIT=...
  # -P gpu_cli.cmake): one run --backend cuda over the precompiled store.
  execute_process(COMMAND "${SJ_CLI}" run "${MODEL}" --rows 20 --backend cuda --emit ${EMIT}
    --ladder list:8,32 --store "${STORE}" --out "${OUT}" --stats
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(report "--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(rc EQUAL 0)
    # A GPU: the bucket comes from the store the CPU precompile filled.
    if(NOT err MATCHES "\"store_hits\": 1,.*\"compiles\": 0," OR NOT EXISTS "${OUT}/y.npy")
      message(FATAL_ERROR "run --backend cuda did not load the precompiled bucket\n${report}")
    endif()
  elseif(NOT rc EQUAL 1 OR NOT err MATCHES "backend cuda needs a GPU \\(no device\\): cuda: ")
    message(FATAL_ERROR "expected success on a GPU or the no-device message\n${report}")
  elseif(EXISTS "${OUT}/y.npy")
    message(FATAL_ERROR "a failed run left ${OUT}/y.npy\n${report}")
  endif()
  return()
endif()

set(SJ_GPU_CLI_DIR ${PROJECT_BINARY_DIR}/cli_tests/gpu)
set(G ${SJ_GPU_CLI_DIR}/s.db)
set(ffn ${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg)

# Every target, two buckets each: six rows, each target compiled once.
sj_cli_test(gpu_precompile_all RC 0 CLEAN ${SJ_GPU_CLI_DIR} SETUP gpu_store
  ARGS precompile ${ffn} --ladder list:8,32 --target all --store ${G} --jobs 2
  OUT "for host in [0-9.]+ s: 2 compiled.*for nvptx sm_90 in [0-9.]+ s: 2 compiled.*for nvrtc sm_90 in [0-9.]+ s: 2 compiled"
  FILES ${G})
sj_cli_test(gpu_precompile_all_again RC 0 REQUIRES gpu_store SETUP gpu_store_again
  ARGS precompile ${ffn} --ladder list:8,32 --target all --store ${G}
  OUT "for host .*: 0 compiled, 2 from the store.*for nvptx sm_90 .*: 0 compiled, 2 from the store.*for nvrtc sm_90 .*: 0 compiled, 2 from the store")
sj_cli_test(gpu_store_ls RC 0 REQUIRES gpu_store_again ARGS store ls --store ${G}
  OUT " 32 .*nvptx64-nvidia-cuda/sm_90  fmt [0-9]+  shapejit [^ ]+  llvm-[0-9.]+\\+.* 32 .*nvptx64-nvidia-cuda/sm_90  fmt [0-9]+  shapejit [^ ]+  nvrtc-")
sj_cli_test(gpu_store_verify RC 0 REQUIRES gpu_store_again ARGS store verify --store ${G}
  OUT "^6 checked, 0 corrupt")
sj_cli_test(gpu_explain_nvrtc RC 0 REQUIRES gpu_store_again
  ARGS store explain ${ffn} --rows 20 --ladder list:8,32 --backend cuda --emit nvrtc --store ${G} --limit 1
  OUT "^identical \\(the key is stored\\): .*nvptx64-nvidia-cuda/sm_90 .*nvrtc-")
sj_cli_test(gpu_precompile_sm80 RC 0 CLEAN ${SJ_GPU_CLI_DIR}/sm80
  ARGS precompile ${ffn} --ladder list:8 --target nvptx --arch sm_80 --store ${SJ_GPU_CLI_DIR}/sm80/s.db --stats
  OUT "for nvptx sm_80 in [0-9.]+ s: 1 compiled.*\nrun memory per bucket once it serves \\(extent: bytes\\): 8: [0-9.]+ KiB"
  # stored, not loaded (no GPU here): the figures are read from the artifact
  ERR "\"bucket_memory\": \\[{\"extent\": 8, \"weights_shared\": 132864, \"weights_mapped\": 0, \"arena_bytes\": [0-9]+, \"io_bytes\": 4096, \"peak_bytes\": [1-9][0-9]*, \"resident\": false, \"estimated\": true}")
sj_cli_test(gpu_precompile_no_store RC 1 ARGS precompile ${ffn} --ladder list:8 --target nvptx --store none
  ERR "needs a store or a remote tier")
sj_cli_test(gpu_precompile_bad_arch RC 2 ARGS precompile ${ffn} --ladder list:8 --target nvptx --arch sm_70
  ERR "unknown --arch 'sm_70' \\(sm_80 or sm_90\\)")
sj_cli_test(gpu_precompile_arch_host RC 2 ARGS precompile ${ffn} --ladder list:8 --arch sm_80
  ERR "--arch is for the GPU targets")
sj_cli_test(gpu_run_emit_without_cuda RC 2 ARGS run ${ffn} --rows 2 --emit nvrtc --backend host
  ERR "--emit is for --backend cuda")

foreach(emit llvm nvrtc)
  add_test(NAME cli_gpu_run_${emit} COMMAND ${CMAKE_COMMAND} -DSJ_CLI=$<TARGET_FILE:shapejit_cli>
    -DMODEL=${ffn} -DSTORE=${G} -DOUT=${SJ_GPU_CLI_DIR}/out_${emit} -DEMIT=${emit}
    -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(cli_gpu_run_${emit} PROPERTIES FIXTURES_REQUIRED gpu_store_again LABELS cli
    TIMEOUT 120)
endforeach()

# serve --backend cuda: the same precompiled store, no compile either way.
foreach(emit llvm nvrtc)
  add_test(NAME cli_gpu_serve_${emit} COMMAND ${CMAKE_COMMAND} -DSERVE=1 -DSJ_CLI=$<TARGET_FILE:shapejit_cli>
    -DMODEL=${ffn} -DSTORE=${G} -DEMIT=${emit} -P ${CMAKE_CURRENT_LIST_FILE})
  set_tests_properties(cli_gpu_serve_${emit} PROPERTIES FIXTURES_REQUIRED gpu_store_again LABELS cli
    TIMEOUT 120)
endforeach()
sj_cli_test(gpu_serve_emit_without_cuda RC 2 ARGS serve ${ffn} --emit nvrtc --backend host
  ERR "--emit is for --backend cuda")

# The build-machine half of scripts/gpu-check.sh (tools/gpu_pack.c).
add_executable(sj_gpu_pack ${PROJECT_SOURCE_DIR}/tools/gpu_pack.c)
target_compile_options(sj_gpu_pack PRIVATE ${SJ_WARNINGS})
target_compile_definitions(sj_gpu_pack PRIVATE _GNU_SOURCE)
target_include_directories(sj_gpu_pack PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(sj_gpu_pack PRIVATE sj_conformance shapejit_static)
# tools/gpu_check.c through the host backend: prepare runs it over the pack,
# so the GPU run's whole flow (and the pack's expected outputs) is exercised
# on the build machine.
add_executable(sj_gpu_check_host ${PROJECT_SOURCE_DIR}/tools/gpu_check.c)
target_compile_options(sj_gpu_check_host PRIVATE ${SJ_WARNINGS})
target_compile_definitions(sj_gpu_check_host PRIVATE _GNU_SOURCE GPU_CHECK_ON_HOST=1)
target_include_directories(sj_gpu_check_host PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(sj_gpu_check_host PRIVATE sj_conformance shapejit_static)

# An ONNX model whose input names two dims (tests/data/models/batch_seq.onnx,
# x [batch, seq, 16]) through the CLI: without a choice it fails saying how
# to make one (--dynamic and --dim); with one dim fixed by --dim it loads in
# every command that reads a model, and runs on both backends to the same
# numbers.
#
# In script mode (cmake -P) this file runs one case: the CLI, then the
# checks of exit status, stdout and stderr.

if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" args "${ARGS}")
  execute_process(COMMAND "${SJ_CLI}" ${args}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(report "shapejit ${args}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "expected exit status ${EXPECT_RC}\n${report}")
  endif()
  if(DEFINED EXPECT_ERR AND NOT err MATCHES "${EXPECT_ERR}")
    message(FATAL_ERROR "stderr does not match '${EXPECT_ERR}'\n${report}")
  endif()
  if(DEFINED EXPECT_OUT AND NOT out MATCHES "${EXPECT_OUT}")
    message(FATAL_ERROR "stdout does not match '${EXPECT_OUT}'\n${report}")
  endif()
  return()
endif()

set(SJ_DIMS_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")
set(SJ_DIMS_MODEL "${PROJECT_SOURCE_DIR}/tests/data/models/batch_seq.onnx")
set(SJ_DIMS_OUT "${PROJECT_BINARY_DIR}/onnx_dims_tests")

# sj_dims_test(NAME RC n [ERR regex] [OUT regex] ARGS ...)
function(sj_dims_test name)
  cmake_parse_arguments(T "" "RC;ERR;OUT" "ARGS" ${ARGN})
  list(JOIN T_ARGS "|" args)
  set(defs -DSJ_CLI=$<TARGET_FILE:shapejit_cli> "-DARGS=${args}" -DEXPECT_RC=${T_RC})
  if(DEFINED T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${T_ERR}")
  endif()
  if(DEFINED T_OUT)
    list(APPEND defs "-DEXPECT_OUT=${T_OUT}")
  endif()
  add_test(NAME onnx_dims_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${SJ_DIMS_SCRIPT})
  set_tests_properties(onnx_dims_${name} PROPERTIES TIMEOUT 120 LABELS models)
endfunction()

set(m ${SJ_DIMS_MODEL})
set(o ${SJ_DIMS_OUT})
sj_dims_test(no_choice RC 1 ARGS run ${m} --rows 3 --store none --out ${o}/no_choice
  ERR "several dim_params \\('batch', 'seq'\\).*--dynamic NAME.*--dim NAME=VALUE")
sj_dims_test(dynamic_only RC 1 ARGS run ${m} --rows 3 --dynamic seq --store none --out ${o}/dyn
  ERR "input 'x' dim 0 is 'batch', but the symbolic dim is 'seq'.*--dim batch=VALUE")
sj_dims_test(seq_batch1 RC 0 OUT "y: \\[1, 5, 8\\]"
  ARGS run ${m} --rows 5 --dynamic seq --dim batch=1 --store none --out ${o}/seq_batch1)
sj_dims_test(batch_seq8 RC 0 OUT "y: \\[3, 8, 8\\]"
  ARGS run ${m} --rows 3 --dynamic batch --dim seq=8 --store none --out ${o}/batch_seq8)
# the remaining dim_param is the symbolic one without --dynamic
sj_dims_test(implied_dynamic RC 0 OUT "y: \\[2, 7, 8\\]"
  ARGS run ${m} --rows 7 --dim=batch=2 --store none --out ${o}/implied)
sj_dims_test(bad_value RC 2 ERR "--dim expects NAME=VALUE with VALUE >= 1, or NAME=.*got 'batch=0'"
  ARGS run ${m} --rows 3 --dim batch=0 --store none --out ${o}/bad_value)
# a dim tied to the dynamic one: batch = 2 * seq, so x is [6, 3, 8] at seq 3
sj_dims_test(tied RC 0 OUT "y: \\[6, 3, 8\\]"
  ARGS run ${m} --rows 3 --dynamic seq --dim batch=2*seq --store none --out ${o}/tied)
sj_dims_test(bad_tie RC 2 ERR "NAME=\\[K\\*\\]seq\\[\\+C\\] tying it to the dynamic dim, got 'batch=2\\*tokens'"
  ARGS run ${m} --rows 3 --dynamic seq --dim batch=2*tokens --store none --out ${o}/bad_tie)
sj_dims_test(no_name RC 2 ERR "--dim expects NAME=VALUE"
  ARGS run ${m} --rows 3 --dim =4 --store none --out ${o}/no_name)
sj_dims_test(unknown_name RC 1 ERR "no input dim is named 'tokens', so it cannot be fixed"
  ARGS run ${m} --rows 3 --dim tokens=4 --store none --out ${o}/unknown)
sj_dims_test(fixed_and_dynamic RC 1 ERR "'seq' is both the symbolic dim and fixed to 4"
  ARGS run ${m} --rows 3 --dynamic seq --dim seq=4 --store none --out ${o}/both)
# every command that reads a model takes --dim
sj_dims_test(hash RC 0 OUT "^[0-9a-f]+\n$" ARGS hash ${m} --dynamic seq --dim batch=1)
sj_dims_test(print RC 0 OUT "input x: \\[1, seq, 16\\]" ARGS print ${m} --dim batch=1)
sj_dims_test(emit RC 0 OUT "define"
  ARGS emit ${m} --rows 5 --target llvm-ir --dim batch=1)
sj_dims_test(store_explain RC 0
  ARGS store explain ${m} --rows 5 --dim batch=1 --store ${o}/explain.db)

# host and interpreter agree on the same random inputs at a padded extent
add_test(NAME onnx_dims_host_matches_interp
  COMMAND sh -c "set -e; rm -rf $2; \"$0\" run $3 --rows 17 --dim batch=2 --store none --out $2/interp; \"$0\" run $3 --rows 17 --dim batch=2 --backend host --store none --out $2/host; \"$1\" --compare $2/interp $2/host"
          $<TARGET_FILE:shapejit_cli> $<TARGET_FILE:test_models> ${o}/host_vs_interp ${m})
set_tests_properties(onnx_dims_host_matches_interp PROPERTIES TIMEOUT 120 LABELS models)

# `shapejit run` on the ONNX models of tests/data/models (made by
# tools/gen_models.py): every model at several extents on each backend,
# outputs compared with onnxruntime's by `test_models --compare`; then bad
# models, bad inputs and unwritable output folders, each of which must exit
# 1 (2 for usage) naming what failed and leave no output file.
#
# In script mode (cmake -P) this file runs one case: the CLI, then either the
# comparison or the checks of exit status, stderr and absent files.

if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" args "${ARGS}")
  file(REMOVE_RECURSE "${OUT}")
  set(ENV{SHAPEJIT_STORE} "${OUT}.store.db")
  set(ENV{XDG_CACHE_HOME} "${OUT}.cache")
  execute_process(COMMAND "${SJ_CLI}" ${args} --out "${OUT}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(report "shapejit ${args} --out ${OUT}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "expected exit status ${EXPECT_RC}\n${report}")
  endif()
  if(DEFINED EXPECT_ERR AND NOT err MATCHES "${EXPECT_ERR}")
    message(FATAL_ERROR "stderr does not match '${EXPECT_ERR}'\n${report}")
  endif()
  if(WANT)
    # TOL "ATOL|RTOL": a precision policy's tolerances, the errors printed
    set(compare --compare)
    if(TOL)
      string(REPLACE "|" ";" compare "--compare-tol|${TOL}")
    endif()
    execute_process(COMMAND "${SJ_COMPARE}" ${compare} "${WANT}" "${OUT}"
      RESULT_VARIABLE crc OUTPUT_VARIABLE cout ERROR_VARIABLE cerr)
    if(NOT crc EQUAL 0)
      message(FATAL_ERROR "outputs differ from ${WANT}\n${cout}${cerr}\n${report}")
    endif()
    if(TOL)
      message("${cout}")
    endif()
  elseif(NOT EXPECT_RC EQUAL 0)
    file(GLOB left "${OUT}/*")
    if(left)
      message(FATAL_ERROR "a failed run left files: ${left}\n${report}")
    endif()
  endif()
  return()
endif()

set(SJ_MODELS_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")
set(SJ_MODEL_DATA "${PROJECT_SOURCE_DIR}/tests/data/models")
set(SJ_MODEL_OUT "${PROJECT_BINARY_DIR}/model_tests")

# sj_model_test(NAME RC n [ERR regex] [WANT dir] ARGS ...)
function(sj_model_test name)
  cmake_parse_arguments(T "" "RC;ERR;WANT" "ARGS" ${ARGN})
  list(JOIN T_ARGS "|" args)
  set(defs -DSJ_CLI=$<TARGET_FILE:shapejit_cli> -DSJ_COMPARE=$<TARGET_FILE:test_models>
    "-DARGS=${args}" -DEXPECT_RC=${T_RC} "-DOUT=${SJ_MODEL_OUT}/${name}" "-DWANT=${T_WANT}")
  if(DEFINED T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${T_ERR}")
  endif()
  add_test(NAME model_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${SJ_MODELS_SCRIPT})
  set_tests_properties(model_${name} PROPERTIES TIMEOUT 120 LABELS models)
endfunction()

# --- every model against onnxruntime. mlp_static declares fixed sizes and
# needs --dynamic-axis; the others name their dynamic dim with a dim_param.
set(sj_model_names mlp_matmul mlp_gemm ffn_decomposed_ln_op13 ffn_decomposed_ln_op18
  ffn_layernorm_op17 classifier_op13 classifier_op18 attention_2d attention_batch1_op17
  two_inputs seq_pooling gram_gemm mlp_ir3 constant_attrs layernorm_over_seq_op17 mlp_static)
foreach(model ${sj_model_names})
  set(extra "")
  if(model STREQUAL "mlp_static")
    set(extra --dynamic-axis x:0)
  endif()
  foreach(backend interp host)
    if(backend STREQUAL "interp")
      set(sizes 1 3 8 17 64)
    else()
      set(sizes 1 17 64)
    endif()
    foreach(size ${sizes})
      set(dir ${SJ_MODEL_DATA}/${model}/${size})
      file(GLOB inputs RELATIVE ${dir}/in ${dir}/in/*.npy)
      set(input_args "")
      foreach(f ${inputs})
        string(REGEX REPLACE "\\.npy$" "" input "${f}")
        list(APPEND input_args --input ${input}=${dir}/in/${f})
      endforeach()
      sj_model_test(${model}_${backend}_${size} RC 0 WANT ${dir}/out
        ARGS run ${SJ_MODEL_DATA}/${model}.onnx ${input_args} ${extra} --backend ${backend})
    endforeach()
  endforeach()
endforeach()

# Each model printed as .sjg hashes like the .onnx and runs to the same
# outputs (extent 17, interpreter).
foreach(model ${sj_model_names})
  if(model STREQUAL "mlp_static")
    continue()
  endif()
  set(dir ${SJ_MODEL_DATA}/${model}/17)
  file(GLOB inputs RELATIVE ${dir}/in ${dir}/in/*.npy)
  set(input_args "")
  foreach(f ${inputs})
    string(REGEX REPLACE "\\.npy$" "" input "${f}")
    string(APPEND input_args " --input ${input}=${dir}/in/${f}")
  endforeach()
  set(o ${SJ_MODEL_OUT}/sjg_${model})
  add_test(NAME model_${model}_sjg_round_trip
    COMMAND sh -c "set -e; rm -rf $2; mkdir -p $2; \"$0\" print $3 > $2.sjg; a=$(\"$0\" hash $3); b=$(\"$0\" hash $2.sjg); [ \"$a\" = \"$b\" ] || { echo \"hash $a != $b\"; exit 1; }; \"$0\" run $2.sjg ${input_args} --store none --out $2; \"$1\" --compare ${dir}/out $2"
            $<TARGET_FILE:shapejit_cli> $<TARGET_FILE:test_models> ${o} ${SJ_MODEL_DATA}/${model}.onnx)
  set_tests_properties(model_${model}_sjg_round_trip PROPERTIES TIMEOUT 120 LABELS models)
endforeach()

# A long sequence: bucket 8192, scores of 2 x 4097 x 4097.
sj_model_test(attention_seq4097_host RC 0
  ARGS run ${SJ_MODEL_DATA}/attention_2d.onnx --rows 4097 --backend host)

# --- failures: exit 1 (2 for usage), a message naming what and where, no files
set(mlp ${SJ_MODEL_DATA}/mlp_matmul.onnx)
set(bad ${SJ_MODEL_DATA}/bad)
foreach(backend interp host)
  set(b --backend ${backend})
  sj_model_test(truncated_model_${backend} RC 1
    ARGS run ${bad}/truncated.onnx --rows 3 ${b}
    ERR "truncated.onnx: not a valid ONNX model")
  sj_model_test(garbage_model_${backend} RC 1 ARGS run ${bad}/garbage.onnx --rows 3 ${b}
    ERR "garbage.onnx: not a valid ONNX model")
  sj_model_test(empty_model_${backend} RC 1 ARGS run ${bad}/empty.onnx --rows 3 ${b}
    ERR "empty.onnx: ")
  sj_model_test(input_float64_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_f64.npy ${b}
    ERR "input x: .*x_f64.npy: header field 'descr' is '<f8'")
  sj_model_test(input_int32_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_i32.npy ${b}
    ERR "input x: .*x_i32.npy holds int32 elements but the model wants float32")
  sj_model_test(input_big_endian_${backend} RC 1
    ARGS run ${mlp} --input x=${bad}/x_big_endian.npy ${b} ERR "x_big_endian.npy: .*'>f4'")
  sj_model_test(input_fortran_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_fortran.npy ${b}
    ERR "x_fortran.npy: header field 'fortran_order'")
  sj_model_test(input_truncated_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_short.npy ${b}
    ERR "x_short.npy: payload is 182 bytes .* needs 192")
  sj_model_test(input_not_npy_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_not_npy.npy ${b}
    ERR "x_not_npy.npy: not an .npy file")
  sj_model_test(input_huge_header_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_huge.npy ${b}
    ERR "x_huge.npy: header field 'shape'")
  sj_model_test(input_extent0_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_rows0.npy ${b}
    ERR "input x: .*x_rows0.npy sets batch = 0")
  sj_model_test(input_wrong_width_${backend} RC 1
    ARGS run ${mlp} --input x=${bad}/x_cols15.npy ${b}
    ERR "input x: .*x_cols15.npy has shape \\[3, 15\\] but the model wants \\[batch, 16\\]")
  sj_model_test(input_wrong_rank_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_rank3.npy ${b}
    ERR "x_rank3.npy has shape \\[1, 3, 16\\] but the model wants \\[batch, 16\\]")
  sj_model_test(input_rank1_${backend} RC 1 ARGS run ${mlp} --input x=${bad}/x_rank1.npy ${b}
    ERR "x_rank1.npy has shape \\[16\\]")
  sj_model_test(input_unknown_name_${backend} RC 2 ARGS run ${mlp} --input y=${bad}/x_ok.npy ${b}
    ERR "the model has no input 'y' \\(its inputs: x\\)")
  sj_model_test(input_missing_${backend} RC 1
    ARGS run ${SJ_MODEL_DATA}/two_inputs.onnx --input x=${bad}/x_ok.npy ${b}
    ERR "missing --input gain=FILE")
  sj_model_test(input_file_absent_${backend} RC 1
    ARGS run ${mlp} --input x=${bad}/absent.npy ${b} ERR "input x: .*absent.npy: cannot open")
  # the attention input is [1, seq, 24]: rows in the wrong axis
  sj_model_test(input_seq_in_wrong_axis_${backend} RC 1
    ARGS run ${SJ_MODEL_DATA}/attention_batch1_op17.onnx
         --input x=${SJ_MODEL_DATA}/attention_2d/3/in/x.npy ${b}
    ERR "input x: .* has shape \\[3, 16\\] but the model wants \\[1, seq, 24\\]")
  sj_model_test(rows_too_many_${backend} RC 2 ARGS run ${mlp} --rows 1073741825 ${b}
    ERR "--rows must be in 1..1073741824")
  # a ladder that holds 2^30, else the bucket check refuses first
  sj_model_test(rows_out_of_memory_${backend} RC 1
    ARGS run ${mlp} --rows 1073741824 --ladder pow2:1:1073741824 ${b} ERR "out of memory")
  sj_model_test(rows_negative_${backend} RC 2 ARGS run ${mlp} --rows -3 ${b}
    ERR "--rows must be in 1")
  # --rows on a model with no symbolic dim would be silently ignored (the
  # output has the declared 4 rows, not 3): a usage error naming the fix
  sj_model_test(rows_without_symbolic_dim_${backend} RC 2
    ARGS run ${SJ_MODEL_DATA}/mlp_static.onnx --rows 3 ${b} ERR "--dynamic-axis")
  sj_model_test(output_declared_dim_param_${backend} RC 1
    ARGS run ${bad}/out_declared_batch.onnx --rows 3 ${b}
    ERR "output 'y' dim 0 is declared as batch but computes \\[1, 8\\]")
  sj_model_test(two_dim_params_${backend} RC 1 ARGS run ${SJ_MODEL_DATA}/batch_seq.onnx --rows 3 ${b}
    ERR "several dim_params \\('batch', 'seq'\\).*choose one \\(--dynamic NAME\\)")
  sj_model_test(two_dim_params_pick_one_${backend} RC 1
    ARGS run ${SJ_MODEL_DATA}/batch_seq.onnx --rows 3 --dynamic seq ${b}
    ERR "input 'x' dim 0 is 'batch', but the symbolic dim is 'seq'")
  sj_model_test(dynamic_unknown_name_${backend} RC 1 ARGS run ${mlp} --rows 3 --dynamic seq ${b}
    ERR "no input dim is named 'seq' \\(the model's dim_params: 'batch'\\)")
  sj_model_test(dynamic_axis_unknown_input_${backend} RC 1
    ARGS run ${SJ_MODEL_DATA}/mlp_static.onnx --rows 3 --dynamic-axis q:0 ${b}
    ERR "mlp_static.onnx: the model has no input named 'q'")
  sj_model_test(dynamic_axis_out_of_rank_${backend} RC 1
    ARGS run ${SJ_MODEL_DATA}/mlp_static.onnx --rows 3 --dynamic-axis x:2 ${b}
    ERR "dynamic axis 2 is out of range for input 'x' of rank 2")
  sj_model_test(dynamic_axis_syntax_${backend} RC 2
    ARGS run ${SJ_MODEL_DATA}/mlp_static.onnx --rows 3 --dynamic-axis x ${b}
    ERR "--dynamic-axis expects INPUT:AXIS")
endforeach()

# Output folders that cannot be written (these pick their own --out, so they
# call the CLI directly): exit 1 naming the folder, nothing written.
add_test(NAME model_out_dir_is_file
  COMMAND sh -c "f=$1/out_is_file; mkdir -p $1; : > $f; \"$0\" run \"$2\" --rows 3 --out $f 2>$1/err.txt; rc=$?; cat $1/err.txt; [ $rc -eq 1 ] && grep -q 'out_is_file' $1/err.txt && [ ! -s $f ]"
          $<TARGET_FILE:shapejit_cli> ${SJ_MODEL_OUT}/out_dir_is_file ${mlp})
add_test(NAME model_out_dir_under_dev_null
  COMMAND sh -c "\"$0\" run \"$1\" --rows 3 --out /dev/null/x 2>$2.err; rc=$?; cat $2.err; [ $rc -eq 1 ] && grep -q '/dev/null/x' $2.err"
          $<TARGET_FILE:shapejit_cli> ${mlp} ${SJ_MODEL_OUT}/dev_null)
# The second output's file name is taken by a folder: the first output must
# not be left behind either.
add_test(NAME model_out_second_output_blocked
  COMMAND sh -c "d=$1; rm -rf $d; mkdir -p $d/probs.npy; \"$0\" run \"$2\" --rows 3 --out $d; rc=$?; ls $d; [ $rc -eq 1 ] && [ -z \"$(ls $d | grep -v '^probs.npy$')\" ]"
          $<TARGET_FILE:shapejit_cli> ${SJ_MODEL_OUT}/second_blocked ${SJ_MODEL_DATA}/classifier_op13.onnx)
set_tests_properties(model_out_dir_is_file model_out_dir_under_dev_null
  model_out_second_output_blocked PROPERTIES TIMEOUT 60 LABELS models)

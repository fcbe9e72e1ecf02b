# ONNX backend node tests (Debian: libonnx-testdata) through the CLI, once
# per backend: any failing test fails the ctest, and so does a pass count
# other than SJ_ONNX_NODE_PASSED (a regression, or new passes nobody pinned).
# Backends join by appending to SJ_ONNX_CONFORMANCE_BACKENDS. Without the
# data the tests report skipped.
set(SJ_ONNX_NODE_DIR /usr/share/libonnx-testdata/data/node)
set(SJ_ONNX_NODE_PASSED 657)
list(APPEND SJ_ONNX_CONFORMANCE_BACKENDS interp host)
list(REMOVE_DUPLICATES SJ_ONNX_CONFORMANCE_BACKENDS)
set(SJ_SKIP_CODE 77)
foreach(backend ${SJ_ONNX_CONFORMANCE_BACKENDS})
  add_test(NAME onnx_conformance_${backend}
    COMMAND sh -c "if [ ! -d \"$1\" ]; then echo \"skipped: $1 not found (Debian: libonnx-testdata)\"; exit ${SJ_SKIP_CODE}; fi; exec \"$0\" onnx-conformance \"$1\" --backend \"$2\""
            $<TARGET_FILE:shapejit_cli> ${SJ_ONNX_NODE_DIR} ${backend})
  set_tests_properties(onnx_conformance_${backend} PROPERTIES SKIP_RETURN_CODE ${SJ_SKIP_CODE} TIMEOUT 600
    PASS_REGULAR_EXPRESSION "(^|\n)${SJ_ONNX_NODE_PASSED} passed, 0 failed"
    SKIP_REGULAR_EXPRESSION "skipped: ")
endforeach()

# Models with a dim_param (MLP, FFN with decomposed layer norm and erf-GELU,
# classifier head, attention scores), one data set per extent; made by
# tests/data/onnx/gen_models.py, expected outputs from onnx's reference.
foreach(backend ${SJ_ONNX_CONFORMANCE_BACKENDS})
  add_test(NAME onnx_dynamic_models_${backend}
    COMMAND shapejit_cli onnx-conformance ${PROJECT_SOURCE_DIR}/tests/data/onnx/models --backend ${backend})
endforeach()

# `shapejit run` fed ONNX TensorProto .pb inputs.
set(SJ_ONNX_GEMM_TEST ${SJ_ONNX_NODE_DIR}/test_gemm_all_attributes)
add_test(NAME onnx_cli_run_pb_inputs
  COMMAND sh -c "if [ ! -d \"$1\" ]; then echo \"skipped: $1 not found\"; exit ${SJ_SKIP_CODE}; fi; d=$1/test_data_set_0; exec \"$0\" run \"$1/model.onnx\" --input a=$d/input_0.pb --input b=$d/input_1.pb --input c=$d/input_2.pb --out \"$2\""
          $<TARGET_FILE:shapejit_cli> ${SJ_ONNX_GEMM_TEST} ${PROJECT_BINARY_DIR}/onnx_cli_run_out)
set_tests_properties(onnx_cli_run_pb_inputs PROPERTIES SKIP_RETURN_CODE ${SJ_SKIP_CODE})

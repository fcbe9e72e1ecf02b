# CLI tests. Included by CMakeLists.txt, this file registers ctest tests;
# each test runs this same file in script mode (cmake -P) to call the
# shapejit binary and check its exit status, stdout, stderr, and which files
# exist afterwards (a failed run must leave no output file).

if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" args "${ARGS}")
  string(REPLACE "|" ";" files "${FILES}")
  string(REPLACE "|" ";" no_files "${NO_FILES}")
  if(CLEAN)
    # a store's packed weights folder goes with it (docs/weights.md)
    file(REMOVE_RECURSE "${CLEAN}" "${CLEAN}-weights")
  endif()
  execute_process(COMMAND "${SJ_CLI}" ${args}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(report "shapejit ${args}\n--- exit: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
    message(FATAL_ERROR "expected exit status ${EXPECT_RC}\n${report}")
  endif()
  if(DEFINED EXPECT_OUT AND NOT out MATCHES "${EXPECT_OUT}")
    message(FATAL_ERROR "stdout does not match '${EXPECT_OUT}'\n${report}")
  endif()
  if(DEFINED EXPECT_ERR AND NOT err MATCHES "${EXPECT_ERR}")
    message(FATAL_ERROR "stderr does not match '${EXPECT_ERR}'\n${report}")
  endif()
  foreach(f IN LISTS files)
    if(NOT EXISTS "${f}")
      message(FATAL_ERROR "expected file ${f} is missing\n${report}")
    endif()
  endforeach()
  foreach(f IN LISTS no_files)
    if(EXISTS "${f}")
      message(FATAL_ERROR "file ${f} must not exist after this run\n${report}")
    endif()
  endforeach()
  return()
endif()

set(SJ_CLI_TEST_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")
set(SJ_CLI_DIR "${PROJECT_BINARY_DIR}/cli_tests")
set(SJ_MODELS "${PROJECT_SOURCE_DIR}/examples/models")

# sj_cli_test(NAME RC n [OUT regex] [ERR regex] [CLEAN dir] ARGS ... [FILES ...]
#             [NO_FILES ...] [SETUP fixture] [REQUIRES fixture...])
function(sj_cli_test name)
  cmake_parse_arguments(T "" "RC;OUT;ERR;CLEAN;SETUP" "ARGS;FILES;NO_FILES;REQUIRES" ${ARGN})
  list(JOIN T_ARGS "|" args)
  list(JOIN T_FILES "|" files)
  list(JOIN T_NO_FILES "|" no_files)
  set(defs -DSJ_CLI=$<TARGET_FILE:shapejit_cli> "-DARGS=${args}" -DEXPECT_RC=${T_RC}
    "-DFILES=${files}" "-DNO_FILES=${no_files}" "-DCLEAN=${T_CLEAN}")
  if(DEFINED T_OUT)
    list(APPEND defs "-DEXPECT_OUT=${T_OUT}")
  endif()
  if(DEFINED T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${T_ERR}")
  endif()
  add_test(NAME cli_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${SJ_CLI_TEST_SCRIPT})
  set_tests_properties(cli_${name} PROPERTIES TIMEOUT 120 LABELS cli)
  if(T_SETUP)
    set_tests_properties(cli_${name} PROPERTIES FIXTURES_SETUP ${T_SETUP})
  endif()
  if(T_REQUIRES)
    set_tests_properties(cli_${name} PROPERTIES FIXTURES_REQUIRED "${T_REQUIRES}")
  endif()
endfunction()

# --- top level
sj_cli_test(help RC 0 ARGS --help OUT "usage: shapejit COMMAND.*run .*print .*hash ")
sj_cli_test(version RC 0 ARGS --version OUT "^shapejit ${PROJECT_VERSION}\n$")
sj_cli_test(no_args RC 2 ARGS "" ERR "usage: shapejit COMMAND")
sj_cli_test(unknown_command RC 2 ARGS frobnicate ERR "unknown command 'frobnicate'")
sj_cli_test(help_run RC 0 ARGS help run OUT "usage: shapejit run MODEL")

# --- usage errors exit 2
sj_cli_test(run_help RC 0 ARGS run --help OUT "usage: shapejit run MODEL.*--rows N")
sj_cli_test(run_no_model RC 2 ARGS run ERR "missing argument")
sj_cli_test(run_unknown_option RC 2 ARGS run ${SJ_MODELS}/ffn.sjg --bogus
  ERR "unknown option '--bogus'")
sj_cli_test(run_rows_not_int RC 2 ARGS run ${SJ_MODELS}/ffn.sjg --rows five
  ERR "--rows expects an integer, got 'five'")
sj_cli_test(run_rows_zero RC 2 ARGS run ${SJ_MODELS}/ffn.sjg --rows 0 ERR "--rows must be in 1")
sj_cli_test(run_needs_rows RC 2 ARGS run ${SJ_MODELS}/ffn.sjg
  ERR "symbolic dim N needs --rows N or --input")
sj_cli_test(run_unknown_backend RC 2 ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --backend tpu
  ERR "unknown backend 'tpu'")
# the ONNX dim flags on a .sjg model: refused, not ignored (issue 29 item 17)
sj_cli_test(run_sjg_dim RC 1 ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --dim N=3 --store none
  ERR "ffn.sjg: --dim / dims= \\('N'\\) is for ONNX models")
sj_cli_test(run_sjg_dynamic RC 1 ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --dynamic N --store none
  ERR "ffn.sjg: --dynamic / dynamic= \\('N'\\) is for ONNX models")
sj_cli_test(run_sjg_dynamic_axis RC 1 ARGS hash ${SJ_MODELS}/ffn.sjg --dynamic-axis x:0
  ERR "ffn.sjg: --dynamic-axis / dynamic=\\(input, axis\\) \\('x'\\) is for ONNX models")
sj_cli_test(run_input_syntax RC 2 ARGS run ${SJ_MODELS}/ffn.sjg --input x.npy
  ERR "--input expects NAME=FILE, got 'x.npy'")

# --- running models
set(rows_dir ${SJ_CLI_DIR}/rows)
sj_cli_test(run_ffn_rows RC 0 CLEAN ${rows_dir} SETUP ffn_rows_out
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 5 --backend interp --out ${rows_dir} --stats
  OUT "y: \\[5, 64\\] -> .*/rows/y.npy" ERR "\"backend\": \"interp\", \"extent\": 5"
  FILES ${rows_dir}/y.npy)
sj_cli_test(run_ffn_input RC 0 CLEAN ${SJ_CLI_DIR}/input REQUIRES ffn_rows_out
  ARGS run ${SJ_MODELS}/ffn.sjg --input x=${rows_dir}/y.npy --out=${SJ_CLI_DIR}/input/nested
  OUT "y: \\[5, 64\\]" FILES ${SJ_CLI_DIR}/input/nested/y.npy)
sj_cli_test(run_mlp RC 0 CLEAN ${SJ_CLI_DIR}/mlp
  ARGS run ${SJ_MODELS}/mlp.sjg --rows 3 --out ${SJ_CLI_DIR}/mlp OUT "logits: \\[3, 10\\]"
  FILES ${SJ_CLI_DIR}/mlp/logits.npy)
sj_cli_test(run_attention RC 0 CLEAN ${SJ_CLI_DIR}/attention
  ARGS run ${SJ_MODELS}/attention.sjg --rows 7 --seed 3 --out ${SJ_CLI_DIR}/attention
  OUT "out: \\[7, 32\\]" FILES ${SJ_CLI_DIR}/attention/out.npy)

# --- failures exit 1, name what failed, and write nothing
sj_cli_test(run_unknown_input RC 2 CLEAN ${SJ_CLI_DIR}/bad1 REQUIRES ffn_rows_out
  ARGS run ${SJ_MODELS}/ffn.sjg --input q=${rows_dir}/y.npy --out ${SJ_CLI_DIR}/bad1
  ERR "the model has no input 'q' \\(its inputs: x\\)" NO_FILES ${SJ_CLI_DIR}/bad1/y.npy)
sj_cli_test(run_input_wrong_shape RC 1 CLEAN ${SJ_CLI_DIR}/bad2 REQUIRES ffn_rows_out
  ARGS run ${SJ_MODELS}/mlp.sjg --input x=${rows_dir}/y.npy --out ${SJ_CLI_DIR}/bad2
  ERR "input x: .*y.npy has shape \\[5, 64\\] but the model wants \\[batch, 32\\]"
  NO_FILES ${SJ_CLI_DIR}/bad2/logits.npy)
sj_cli_test(run_input_missing_file RC 1 CLEAN ${SJ_CLI_DIR}/bad3
  ARGS run ${SJ_MODELS}/ffn.sjg --input x=${SJ_CLI_DIR}/absent.npy --out ${SJ_CLI_DIR}/bad3
  ERR "input x: .*absent.npy: cannot open" NO_FILES ${SJ_CLI_DIR}/bad3/y.npy)
sj_cli_test(run_rows_disagree RC 1 CLEAN ${SJ_CLI_DIR}/bad4 REQUIRES ffn_rows_out
  ARGS run ${SJ_MODELS}/ffn.sjg --input x=${rows_dir}/y.npy --rows 4 --out ${SJ_CLI_DIR}/bad4
  ERR "so N = 5, but --rows sets N = 4" NO_FILES ${SJ_CLI_DIR}/bad4/y.npy)
sj_cli_test(run_missing_model RC 1 ARGS run ${SJ_CLI_DIR}/absent.sjg --rows 2
  ERR "shapejit run: .*absent.sjg: cannot open")
sj_cli_test(run_unknown_format RC 1 ARGS run ${SJ_MODELS}/../README.txt --rows 2
  ERR "unknown model format '.txt'")

# Two inputs that must agree on N, and every input must be given.
set(two "${SJ_CLI_DIR}/two.sjg")
file(WRITE ${two} "graph two(N) {\n  input a: [N, 4]\n  input b: [N, 4]\n  z = add(a, b)\n  output z\n}\n")
sj_cli_test(two_rows5 RC 0 CLEAN ${SJ_CLI_DIR}/two5 SETUP two_out
  ARGS run ${two} --rows 5 --out ${SJ_CLI_DIR}/two5)
sj_cli_test(two_rows3 RC 0 CLEAN ${SJ_CLI_DIR}/two3 SETUP two_out
  ARGS run ${two} --rows 3 --out ${SJ_CLI_DIR}/two3)
sj_cli_test(two_disagree RC 1 CLEAN ${SJ_CLI_DIR}/two_bad REQUIRES two_out
  ARGS run ${two} --input a=${SJ_CLI_DIR}/two5/z.npy --input b=${SJ_CLI_DIR}/two3/z.npy
       --out ${SJ_CLI_DIR}/two_bad
  ERR "input b: .*two3/z.npy has shape \\[3, 4\\], so N = 3, but .*two5/z.npy sets N = 5"
  NO_FILES ${SJ_CLI_DIR}/two_bad/z.npy)
sj_cli_test(two_missing_input RC 1 CLEAN ${SJ_CLI_DIR}/two_bad2 REQUIRES two_out
  ARGS run ${two} --input a=${SJ_CLI_DIR}/two5/z.npy --out ${SJ_CLI_DIR}/two_bad2
  ERR "missing --input b=FILE" NO_FILES ${SJ_CLI_DIR}/two_bad2/z.npy)
sj_cli_test(two_agree RC 0 CLEAN ${SJ_CLI_DIR}/two_ok REQUIRES two_out
  ARGS run ${two} --input b=${SJ_CLI_DIR}/two5/z.npy --input a=${SJ_CLI_DIR}/two5/z.npy
       --out ${SJ_CLI_DIR}/two_ok
  OUT "z: \\[5, 4\\]" FILES ${SJ_CLI_DIR}/two_ok/z.npy)

# --- print and hash
sj_cli_test(print RC 0 ARGS print ${SJ_MODELS}/attention.sjg
  OUT "graph model\\(S\\) {.*p = softmax\\(scores, axis=1\\)")
sj_cli_test(hash RC 0 ARGS hash ${SJ_MODELS}/ffn.sjg OUT "^[0-9a-f]+\n$")
sj_cli_test(print_missing_file RC 1 ARGS print ${SJ_CLI_DIR}/absent.sjg ERR "absent.sjg: cannot open")
file(WRITE ${SJ_CLI_DIR}/bad.sjg "graph g(N) {\n  input x: [N, 4]\n  y = relu(h)\n}\n")
sj_cli_test(print_parse_error RC 1 ARGS print ${SJ_CLI_DIR}/bad.sjg
  ERR "shapejit print: .*bad.sjg:3:12: undefined name 'h'")

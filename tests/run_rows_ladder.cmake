# `shapejit run --rows N` with N outside every bucket fails before making N
# rows of random inputs (uses sj_cli_test from cli.cmake, included first).
# The model is wide enough that at N = 2^30 making the inputs would fail
# another way (more than 2^40 elements), so the message shows which check
# came first.
set(SJ_WIDE_MODEL "${PROJECT_BINARY_DIR}/cli_tests/wide.sjg")
file(WRITE "${SJ_WIDE_MODEL}" "graph wide(N) {\n  input x: [N, 2048]\n  y = relu(x)\n  output y\n}\n")
# A usage error (exit 2) in the user's words: --rows and --ladder, not "key".
sj_cli_test(run_rows_outside_ladder RC 2
  ARGS run ${SJ_WIDE_MODEL} --rows 1073741824 --ladder pow2:1:64 --store none
       --out ${PROJECT_BINARY_DIR}/cli_tests/wide_out
  ERR "--rows 1073741824 is above the largest bucket \\(64 rows\\) of --ladder pow2:1:64"
  NO_FILES ${PROJECT_BINARY_DIR}/cli_tests/wide_out/y.npy)
sj_cli_test(run_rows_inside_ladder RC 0
  ARGS run ${SJ_WIDE_MODEL} --rows 33 --ladder pow2:1:64 --store none
       --out ${PROJECT_BINARY_DIR}/cli_tests/wide_out_ok
  OUT "y: \\[33, 2048\\]" FILES ${PROJECT_BINARY_DIR}/cli_tests/wide_out_ok/y.npy)

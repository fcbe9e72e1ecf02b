# `shapejit store explain` with the host compiler's keys (the default backend)
# and the interpreter's, over a store that a host precompile filled.
set(SJ_EXPLAIN_DIR "${PROJECT_BINARY_DIR}/cli_tests/explain")
set(E "${SJ_EXPLAIN_DIR}/s.db")

sj_cli_test(explain_setup RC 0 CLEAN ${SJ_EXPLAIN_DIR} SETUP explain_store
  ARGS precompile ${SJ_MODELS}/ffn.sjg --ladder list:8,32 --store ${E} --jobs 2
  OUT "precompiled 2 buckets" FILES ${E})
# rows 20 under the default ladder (pow2:1:32) is bucket 32: stored by the host precompile.
sj_cli_test(explain_host_stored RC 0 REQUIRES explain_store
  ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 20 --store ${E} --limit 1
  OUT "^identical \\(the key is stored\\): [0-9a-f]+ +32 ")
sj_cli_test(explain_host_extent RC 0 REQUIRES explain_store
  ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 20 --ladder list:16,64 --store ${E} --limit 1
  OUT "^extent: [0-9a-f]+ +(8|32) ")
# The interpreter's key differs from the host's in what the compiler brings.
sj_cli_test(explain_interp_vs_host RC 0 REQUIRES explain_store
  ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 20 --backend interp --store ${E} --limit 1 --json
  OUT "\"differs\": \\[\"options hash\", \"target triple\".*\"compiler version\"\\]")
sj_cli_test(explain_bad_backend RC 2 ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 20 --backend tpu
  --store ${E} ERR "unknown backend 'tpu' \\(host, interp or cuda\\)")

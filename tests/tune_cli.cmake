# Tuned buckets on the command line (issue 19 items 1-2): precompile --tune
# times the attention and matmul schedules per bucket and stores the winner with its
# timings (store ls shows them); serve --tune on that store compiles
# nothing; the flags are checked before anything runs.
set(SJ_TUNE_DIR "${PROJECT_BINARY_DIR}/cli_tests/tune")
set(SJ_TUNE_MODEL "${PROJECT_SOURCE_DIR}/examples/models/attention.sjg")
sj_cli_test(tune_precompile RC 0 CLEAN ${SJ_TUNE_DIR} SETUP tuned_store
  ARGS precompile ${SJ_TUNE_MODEL} --ladder list:8,64 --tune --tune-budget-ms 20 --jobs 1
       --store ${SJ_TUNE_DIR}/s.db
  OUT "precompiled 2 buckets of list:8,64 for host in [0-9.]+ s: 2 compiled")
sj_cli_test(tune_store_ls RC 0 REQUIRES tuned_store ARGS store ls --store ${SJ_TUNE_DIR}/s.db
  OUT "    tuned: schedules at rows 8 and 4 \\(budget 20 ms\\): fused\\+rows [0-9.]+ \\+ [0-9.]+ ms.*, fused\\+tiled [0-9.]+ \\+ [0-9.]+ ms.*, unfused\\+rows [0-9.]+ \\+ [0-9.]+ ms.*, unfused\\+tiled [0-9.]+ \\+ [0-9.]+ ms.*\n.*    tuned: schedules at rows 64 and 32 \\(budget 20 ms\\): fused [0-9.]+ \\+ [0-9.]+ ms.*, unfused [0-9.]+ ")
sj_cli_test(tune_serve_warm RC 0 REQUIRES tuned_store
  ARGS serve ${SJ_TUNE_MODEL} --ladder list:8,64 --tune --synthetic uniform:1:64:40 --workers 1
       --store ${SJ_TUNE_DIR}/s.db
  OUT "compiles         0 ")
sj_cli_test(tune_budget_without_tune RC 2 ARGS run ${SJ_TUNE_MODEL} --rows 3 --store none --tune-budget-ms 5
  ERR "--tune-budget-ms needs --tune")
sj_cli_test(tune_budget_zero RC 2 ARGS run ${SJ_TUNE_MODEL} --rows 3 --store none --backend host --tune --tune-budget-ms 0
  ERR "--tune-budget-ms must be a count of milliseconds in 1..600000, got '0'")
sj_cli_test(tune_not_host RC 2 ARGS run ${SJ_TUNE_MODEL} --rows 3 --store none --tune --backend interp
  ERR "--tune is for --backend host")
sj_cli_test(tune_gpu_target RC 2 ARGS precompile ${SJ_TUNE_MODEL} --ladder list:8 --target nvptx --tune
  ERR "--tune is for the host target")
sj_cli_test(tune_other_cpu RC 2 ARGS precompile ${SJ_TUNE_MODEL} --ladder list:8 --tune --cpu x86-64-v3 --store none
  ERR "--tune times the code on this machine, so it takes --cpu native only")
sj_cli_test(tune_listen_budget_without_tune RC 2
  ARGS serve --listen 0 ${SJ_TUNE_MODEL} --store none --tune-budget-ms 5
  ERR "--tune-budget-ms needs --tune")

# CPU levels on the command line: a store precompiled for x86-64-v2 and v3
# serves this machine with no compile, from the highest level it runs (v3
# where it has AVX2 and FMA, else v2), and says so in --stats and in
# `store explain`. Levels and CPU names are checked before anything runs.
set(SJ_LEVELS_DIR "${PROJECT_BINARY_DIR}/cli_tests/levels")
set(L "${SJ_LEVELS_DIR}/s.db")

sj_cli_test(levels_precompile RC 0 CLEAN ${SJ_LEVELS_DIR} SETUP levels_store
  ARGS precompile ${SJ_MODELS}/ffn.sjg --ladder list:8,32 --cpu x86-64-v2,x86-64-v3 --store ${L} --jobs 2
  OUT "precompiled 2 buckets of list:8,32 for host x86-64-v2 .*: 2 compiled.*\nprecompiled 2 buckets of list:8,32 for host x86-64-v3 .*: 2 compiled"
  FILES ${L})
sj_cli_test(levels_run_compiles_nothing RC 0 REQUIRES levels_store
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 20 --backend host --ladder list:8,32 --store ${L} --stats
  --out ${SJ_LEVELS_DIR}/out
  ERR "\"compiles\": 0,.*\"level_hits\": 1, \"bucket_cpus\": {\"x86-64-v[23]\": 1}")
sj_cli_test(levels_serve_compiles_nothing RC 0 REQUIRES levels_store
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:200:1 --ladder list:8,32 --store ${L}
  --workers 1 --stats
  ERR "\"compiles\": 0,.*\"level_hits\": 2, \"bucket_cpus\": {\"x86-64-v[23]\": 2}")
sj_cli_test(levels_explain RC 0 REQUIRES levels_store
  ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 20 --ladder list:8,32 --store ${L} --limit 1
  OUT "this host \\([^;]+; levels it runs: [^)]*x86-64-v2\\) takes x86-64-v[23]: no artifact for its own CPU")
# A level named at run time is loaded as it is stored, under its own key.
sj_cli_test(levels_run_named_level RC 0 REQUIRES levels_store
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 5 --backend host --cpu x86-64-v2 --ladder list:8,32
  --store ${L} --stats --out ${SJ_LEVELS_DIR}/out2
  ERR "\"backend\": \"host\".*\"store_hits\": 1,.*\"compiles\": 0,.*\"bucket_cpus\": {\"x86-64-v2\": 1}")
sj_cli_test(levels_unknown_cpu RC 1
  ARGS precompile ${SJ_MODELS}/ffn.sjg --ladder list:8 --cpu x86-64-v9 --store none
  ERR "CPU 'x86-64-v9' is not one LLVM")
# A 32-bit CPU LLVM knows: refused with a message, not an abort (exit 134)
sj_cli_test(levels_cpu_without_64bit RC 1
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 5 --backend host --cpu i386 --store none --out ${SJ_LEVELS_DIR}/out32
  ERR "CPU 'i386' has no 64-bit mode .*cannot run code for x86_64" NO_FILES ${SJ_LEVELS_DIR}/out32)
sj_cli_test(levels_cpu_needs_host RC 2
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 5 --backend interp --cpu x86-64-v2 --store none
  ERR "--cpu is for --backend host")
sj_cli_test(levels_cpu_needs_host_target RC 2
  ARGS precompile ${SJ_MODELS}/ffn.sjg --ladder list:8 --target nvptx --cpu x86-64-v2 --store none
  ERR "--cpu is for the host target")
# v3 code uses AVX2's 256-bit registers, whatever this machine has.
sj_cli_test(levels_emit RC 0
  ARGS emit ${SJ_MODELS}/ffn.sjg --rows 5 --target host-asm --cpu x86-64-v3 --ladder list:8
  OUT "%ymm")

# --native-after: a fleet serving from a portable store converges to code
# for its own CPU. A store holding only x86-64-v2; serve recompiles each
# bucket for this CPU after 3 runs on the level, stores it, and a restart
# loads the native rows with no compile and no level.
# Its own folder: levels_precompile cleans SJ_LEVELS_DIR, perhaps meanwhile.
set(SJ_LEVELS_NATIVE_DIR "${PROJECT_BINARY_DIR}/cli_tests/levels_native")
set(NV "${SJ_LEVELS_NATIVE_DIR}/s.db")
sj_cli_test(levels_native_precompile RC 0 CLEAN ${SJ_LEVELS_NATIVE_DIR} SETUP levels_native_store
  ARGS precompile ${SJ_MODELS}/ffn.sjg --ladder list:8,32 --cpu x86-64-v2 --store ${NV}
  OUT "2 compiled" FILES ${NV})
sj_cli_test(levels_native_after_serve RC 0 REQUIRES levels_native_store SETUP levels_native_served
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:200:1 --ladder list:8,32 --store ${NV}
  --workers 2 --native-after 3 --stats
  OUT "native code +2 buckets recompiled for this CPU after 3 runs on a stored level, 0 failed"
  ERR "\"compile_stalls\": 0,.*\"level_hits\": 2, .*\"specialised\": 2, \"specialise_failures\": 0, \"bucket_levels\": \\[\\{\"extent\": 8, \"cpu\": \"[^\"]+\", \"native_after\": \"done\"\\}, \\{\"extent\": 32, \"cpu\": \"[^\"]+\", \"native_after\": \"done\"\\}\\]")
# The native rows beside the level's (a CPU name that is not x86-64-v2).
sj_cli_test(levels_native_store_ls RC 0 REQUIRES levels_native_served
  ARGS store ls --store ${NV}
  OUT " 8  opt [0-9a-f]+  x86_64[^/]*/x86-64-v2/.* 8  opt [0-9a-f]+  x86_64[^/]*/([^x]|x[^8])[^/]*/|  8  opt [0-9a-f]+  x86_64[^/]*/([^x]|x[^8])[^/]*/.* 8  opt [0-9a-f]+  x86_64[^/]*/x86-64-v2/")
sj_cli_test(levels_native_restart RC 0 REQUIRES levels_native_served
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:50:1 --ladder list:8,32 --store ${NV}
  --workers 1 --stats
  ERR "\"store_hits\": 2, \"remote_hits\": 0, \"compiles\": 0,.*\"level_hits\": 0, .*\"specialised\": 0")
sj_cli_test(levels_native_after_zero RC 2
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:20:1 --store none --native-after 0
  ERR "--native-after must be a count of runs of at least 1, got '0'")
sj_cli_test(levels_native_after_negative RC 2
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:20:1 --store none --native-after -3
  ERR "--native-after must be a count of runs of at least 1, got '-3'")
sj_cli_test(levels_native_after_level RC 2
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:20:1 --store none --native-after 3
  --cpu x86-64-v3
  ERR "--native-after recompiles for this CPU; --cpu x86-64-v3 compiles every bucket")

# The same through serve --listen: /metrics names each bucket's CPU and
# counts the recompiles.
find_program(SJ_CURL curl)
find_program(SJ_BASH bash)
if(SJ_CURL AND SJ_BASH AND TARGET shapejit_cli)
  add_test(NAME server_native_after COMMAND ${SJ_BASH} ${PROJECT_SOURCE_DIR}/tests/server_native_after.sh
    $<TARGET_FILE:shapejit_cli> ${SJ_MODELS} ${PROJECT_BINARY_DIR}/server_native_after)
  set_tests_properties(server_native_after PROPERTIES TIMEOUT 120 LABELS server)
endif()

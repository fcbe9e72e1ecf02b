# CLI tests of the serving commands (serve, precompile, run --backend host
# with a store, emit). Uses sj_cli_test from cli.cmake (included before).
if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode (cmake -DJSON=FILE -P serve.cmake): checks that the JSON of
  # `shapejit bench` has every key docs/cli.md lists, each a number.
  file(READ "${JSON}" j)
  foreach(key hit_path_ns metadata_hit_ns warm_load_us_per_artifact warm_vs_cold_ready_ratio
              replay_vs_eager_dispatch)
    string(JSON v ERROR_VARIABLE err GET "${j}" ${key})
    if(err OR NOT v MATCHES "^[0-9.e+-]+$")
      message(FATAL_ERROR "${JSON}: ${key} missing or not a number (${v}${err})")
    endif()
  endforeach()
  foreach(n 16 4096 65536)
    string(JSON v ERROR_VARIABLE err GET "${j}" metadata_evict_insert_ns ${n})
    if(err OR NOT v MATCHES "^[0-9.e+-]+$")
      message(FATAL_ERROR "${JSON}: metadata_evict_insert_ns.${n} missing (${err})")
    endif()
  endforeach()
  string(JSON v ERROR_VARIABLE err GET "${j}" cold_compile_ms_per_bucket host)
  if(err OR NOT v MATCHES "^[0-9.e+-]+$")
    message(FATAL_ERROR "${JSON}: cold_compile_ms_per_bucket.host missing (${err})")
  endif()
  return()
endif()

set(SJ_SERVE_DIR ${PROJECT_BINARY_DIR}/serve_tests)
set(SJ_FFN ${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg)
file(MAKE_DIRECTORY ${SJ_SERVE_DIR})

# The same stream twice against one store: the second process compiles nothing.
set(stream --synthetic uniform:1:40:60:3 --workers 2 --ladder pow2:1:64)
sj_cli_test(serve_cold RC 0 CLEAN ${SJ_SERVE_DIR}/twice SETUP serve_store
  ARGS serve ${SJ_FFN} ${stream} --store ${SJ_SERVE_DIR}/twice/s.db
  OUT "60 requests from uniform:1:40:60:3.*compiles +[1-9][0-9]* \\(.*store hits +0 "
  FILES ${SJ_SERVE_DIR}/twice/s.db)
sj_cli_test(serve_warm RC 0 REQUIRES serve_store
  ARGS serve ${SJ_FFN} ${stream} --store ${SJ_SERVE_DIR}/twice/s.db --stats
  OUT "compiles +0 \\(0.0 ms compiling\\), compile stalls 0.*store hits +[1-9]"
  ERR "\"compiles\": 0,")

# Kernel threads: as given, else the CPUs over the workers (at least 1 each:
# 64 workers get 1 on any machine with fewer than 128 CPUs).
sj_cli_test(serve_threads_given RC 0
  ARGS serve ${SJ_FFN} --synthetic uniform:1:40:4:3 --workers 2 --threads 3 --store none --backend host
  OUT "4 requests from uniform:1:40:4:3, 2 workers x 3 threads, backend host")
sj_cli_test(serve_threads_default_shared RC 0
  ARGS serve ${SJ_FFN} --synthetic uniform:1:40:4:3 --workers 64 --store none --backend host
  OUT "64 workers x 1 threads, backend host")
sj_cli_test(serve_threads_interp RC 0
  ARGS serve ${SJ_FFN} --synthetic uniform:1:40:4:3 --workers 1 --store none --backend interp
  OUT "1 workers x 1 threads, backend interp")

# precompile at deploy, then a run that only reads the store.
sj_cli_test(precompile RC 0 CLEAN ${SJ_SERVE_DIR}/deploy SETUP deploy_store
  ARGS precompile ${SJ_FFN} --ladder pow2:1:64 --store ${SJ_SERVE_DIR}/deploy/s.db --jobs 2
  OUT "^precompiled 7 buckets of pow2:1:64 for host in [0-9.]+ s: 7 compiled, 0 from the store"
  ERR "precompile host: 7/7 buckets")
sj_cli_test(run_after_precompile RC 0 REQUIRES deploy_store
  ARGS run ${SJ_FFN} --rows 20 --backend host --ladder pow2:1:64 --store ${SJ_SERVE_DIR}/deploy/s.db
       --out ${SJ_SERVE_DIR}/deploy/out --stats
  OUT "y: \\[20, 64\\]" ERR "\"bucket_extent\": 32.*\"store_hits\": 1,.*\"compiles\": 0,"
  FILES ${SJ_SERVE_DIR}/deploy/out/y.npy)
sj_cli_test(precompile_again RC 0 REQUIRES deploy_store
  ARGS precompile ${SJ_FFN} --ladder pow2:1:64 --store ${SJ_SERVE_DIR}/deploy/s.db
  OUT ": 0 compiled, 7 from the store")
sj_cli_test(precompile_needs_ladder RC 2 ARGS precompile ${SJ_FFN} ERR "--ladder SPEC is required")
sj_cli_test(precompile_bad_ladder RC 2 ARGS precompile ${SJ_FFN} --ladder pow3:1:8 --store none
  ERR "--ladder: .*pow3")

# Traces: good ones run, a bad line is named with its number.
file(WRITE ${SJ_SERVE_DIR}/good.trace "# sizes\n5\n12\n\n3\n")
sj_cli_test(serve_trace RC 0 ARGS serve ${SJ_FFN} --trace ${SJ_SERVE_DIR}/good.trace --backend interp
  --store none --requests 7 OUT "7 requests from .*good.trace.*ladder pow2:1:12")
file(WRITE ${SJ_SERVE_DIR}/bad.trace "5\n12\n# fine so far\n\n12x\n")
sj_cli_test(serve_bad_trace RC 1 ARGS serve ${SJ_FFN} --trace ${SJ_SERVE_DIR}/bad.trace --store none
  ERR "trace .*bad.trace:5: '12x' is not a request size")
sj_cli_test(serve_missing_trace RC 1 ARGS serve ${SJ_FFN} --trace ${SJ_SERVE_DIR}/absent.trace
  ERR "absent.trace: cannot open")
sj_cli_test(serve_bad_synthetic RC 2 ARGS serve ${SJ_FFN} --synthetic pareto:1:2
  ERR "unknown distribution 'pareto'")
sj_cli_test(serve_above_ladder RC 1 ARGS serve ${SJ_FFN} --synthetic uniform:1:100:20:1 --ladder pow2:1:16
  --store none ERR "size [0-9]+, above the ladder's largest bucket 16")

# emit
sj_cli_test(emit_ir RC 0 ARGS emit ${SJ_FFN} --rows 5 --target llvm-ir OUT "define .*@sjk_[0-9a-f]+")
sj_cli_test(emit_asm RC 0 CLEAN ${SJ_SERVE_DIR}/emit
  ARGS emit ${SJ_FFN} --rows 5 --target host-asm --out ${SJ_SERVE_DIR}/emit.s FILES ${SJ_SERVE_DIR}/emit.s)
sj_cli_test(emit_bad_target RC 2 ARGS emit ${SJ_FFN} --rows 5 --target wasm ERR "unknown target 'wasm'")

# No test writes to the user's cache: commands that fall back on the default
# store get one in the build tree.
get_property(sj_all_tests DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY TESTS)
set_property(TEST ${sj_all_tests} APPEND PROPERTY ENVIRONMENT
  "SHAPEJIT_STORE=${PROJECT_BINARY_DIR}/test_default_store.db")

# bench --quick writes the JSON keys other tools read (docs/cli.md) and, with
# gnuplot installed, the charts next to it. Figures are not checked here:
# speed goals are measured by bench, never by tests.
set(bench_json ${SJ_SERVE_DIR}/bench.json)
file(REMOVE ${bench_json})
sj_cli_test(bench_quick RC 0 SETUP bench_json
  ARGS bench --quick --json ${bench_json} --model ${SJ_MODELS}/ffn.sjg --threads 2
  OUT "on the host backend \\(2 kernel threads\\).*warm_vs_cold_ready_ratio .*replay_vs_eager_dispatch .*json: .*bench.json"
  FILES ${bench_json})
# --json naming something rename would replace (here a folder) is refused
# before the bench runs (issue 29 item 1)
sj_cli_test(bench_json_not_a_file RC 1 ARGS bench --quick --json ${SJ_SERVE_DIR} --model ${SJ_MODELS}/ffn.sjg
  ERR "--json: .* exists and is not a regular file \\(a folder\\): refused")
sj_cli_test(bench_bad_threads RC 2 ARGS bench --quick --threads 300
  ERR "--threads must be a count in 1..256, got '300'")
add_test(NAME cli_bench_json_keys COMMAND ${CMAKE_COMMAND} -DJSON=${bench_json}
  -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(cli_bench_json_keys PROPERTIES FIXTURES_REQUIRED bench_json LABELS cli)

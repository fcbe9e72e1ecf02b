# Hostile-input CLI cases run by tests/hostile_cli.sh (one ctest per case).
foreach(case precompile_disk_full trace_comment control_bytes input_exit_codes import_reasons
    special_out_targets stdout_full config_fifo
    remote_not_redis read_only_store)
  add_test(NAME cli_hostile_${case}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/hostile_cli.sh $<TARGET_FILE:shapejit_cli>
            ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/hostile_cli_tests ${case})
  set_tests_properties(cli_hostile_${case} PROPERTIES TIMEOUT 120 LABELS cli SKIP_RETURN_CODE 77)
endforeach()

# Arguments that used to be accepted silently (issue 13 item 16); uses
# sj_cli_test from cli.cmake.
set(SJ_HOSTILE_STORE "${PROJECT_BINARY_DIR}/hostile_cli_tests/args.db")
sj_cli_test(hostile_gc_negative_max_bytes RC 2 ARGS store gc --max-bytes -1 --store ${SJ_HOSTILE_STORE}
  ERR "--max-bytes must be >= 0")
sj_cli_test(hostile_explain_limit_zero RC 2
  ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 3 --limit 0 --store ${SJ_HOSTILE_STORE}
  ERR "--limit must be in 1..1000, got 0")
sj_cli_test(hostile_explain_limit_negative RC 2
  ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 3 --limit -1 --store ${SJ_HOSTILE_STORE}
  ERR "--limit must be in 1..1000, got -1")
sj_cli_test(hostile_serve_zero_requests RC 2
  ARGS serve ${SJ_MODELS}/ffn.sjg --requests 0 --store none ERR "--requests must be in 1..10000000, got 0")

# The fleet tier on the command line (--remote, --remote-secret-file,
# --remote-read-only, store stats --remote) against a real redis-server that
# tests/remote_cli.sh starts and stops. Skipped where redis-server is absent.
add_test(NAME cli_remote_fleet
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/remote_cli.sh $<TARGET_FILE:shapejit_cli>
          ${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg ${PROJECT_BINARY_DIR}/remote_cli_tests)
set_tests_properties(cli_remote_fleet PROPERTIES TIMEOUT 120 LABELS cli SKIP_RETURN_CODE 77)

# Usage errors need no server.
sj_cli_test(remote_secret_without_remote RC 2
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --store none --remote-secret-file /dev/null
  ERR "--remote-secret-file without a remote tier")
sj_cli_test(remote_bad_url RC 1
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --store none --remote http://example
  ERR "--remote: .*redis://")
sj_cli_test(remote_empty_secret RC 1
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --store none --remote redis://127.0.0.1:1
       --remote-secret-file /dev/null
  ERR "--remote-secret-file /dev/null: empty")
sj_cli_test(remote_only_stats RC 2 ARGS store ls --remote redis://127.0.0.1:1
  ERR "'ls' has no fleet tier options")

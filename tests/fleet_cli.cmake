# One compile per fleet through the CLI: concurrent precompiles against a
# real redis-server that tests/fleet_cli.sh starts and stops (compile
# leases, hand-taken leases, a holder killed with SIGKILL). Skipped where
# redis-server is absent.
add_test(NAME cli_fleet_leases
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/fleet_cli.sh $<TARGET_FILE:shapejit_cli>
          ${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg ${PROJECT_BINARY_DIR}/fleet_cli_tests)
set_tests_properties(cli_fleet_leases PROPERTIES TIMEOUT 180 LABELS cli SKIP_RETURN_CODE 77)

sj_cli_test(remote_lease_without_remote RC 2
  ARGS run ${SJ_MODELS}/ffn.sjg --rows 2 --store none --remote-lease-ms 100
  ERR "--remote-lease-ms without a remote tier")

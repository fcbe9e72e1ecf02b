# Hostile-input CLI cases run by tests/hostile_cli.sh (one ctest per case).
foreach(case precompile_disk_full)
  add_test(NAME cli_hostile_${case}
    COMMAND bash ${PROJECT_SOURCE_DIR}/tests/hostile_cli.sh $<TARGET_FILE:shapejit_cli>
            ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/hostile_cli_tests ${case})
  set_tests_properties(cli_hostile_${case} PROPERTIES TIMEOUT 120 LABELS cli)
endforeach()

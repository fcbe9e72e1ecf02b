# `shapejit store` CLI tests (uses sj_cli_test from cli.cmake, included first).
set(SJ_STORE_CLI_DIR "${PROJECT_BINARY_DIR}/cli_tests/store")
file(MAKE_DIRECTORY "${SJ_STORE_CLI_DIR}")
file(WRITE "${SJ_STORE_CLI_DIR}/not_a_db.db" "plain text, not an SQLite database\n")
set(S "${SJ_STORE_CLI_DIR}/s.db")

sj_cli_test(store_help RC 0 ARGS store --help OUT "usage: shapejit store SUBCOMMAND.*explain MODEL")
sj_cli_test(store_unknown_sub RC 2 ARGS store frob --store ${S} ERR "unknown subcommand 'frob'")
sj_cli_test(store_rm_not_hex RC 2 ARGS store rm zz --store ${S} ERR "'zz' is not hex")
sj_cli_test(store_ls_extra_arg RC 2 ARGS store ls extra --store ${S} ERR "'ls' takes no arguments")
sj_cli_test(store_stats_empty RC 0 ARGS store stats --json --store ${S}
  OUT "\"entries\": 0, \"stored_bytes\": 0")
sj_cli_test(store_verify_empty RC 0 ARGS store verify --store ${S} OUT "0 checked, 0 corrupt")
sj_cli_test(store_not_a_db RC 1 ARGS store ls --store ${SJ_STORE_CLI_DIR}/not_a_db.db
  ERR "not_a_db.db is not a shapejit store \\(not an SQLite database\\)")
sj_cli_test(store_export_empty RC 0 ARGS store export ${SJ_STORE_CLI_DIR}/e.sjs --store ${S}
  OUT "exported 0" FILES ${SJ_STORE_CLI_DIR}/e.sjs SETUP store_export)
sj_cli_test(store_import_empty RC 0 ARGS store import ${SJ_STORE_CLI_DIR}/e.sjs --store ${S}
  OUT "imported 0, rejected 0" REQUIRES store_export)
sj_cli_test(store_import_missing RC 1 ARGS store import ${SJ_STORE_CLI_DIR}/nope.sjs --store ${S}
  ERR "cannot open")
sj_cli_test(store_explain_empty RC 0 ARGS store explain ${SJ_MODELS}/ffn.sjg --rows 37 --store ${S}
  OUT "the store is empty")
sj_cli_test(store_explain_no_rows RC 2 ARGS store explain ${SJ_MODELS}/ffn.sjg --store ${S}
  ERR "--rows N")

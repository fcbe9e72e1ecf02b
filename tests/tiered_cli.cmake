# --tiered: a bucket no store holds serves -O0 code at once while its -O3
# code compiles in the background, is stored and swapped in; serve waits
# for the tier-ups its stream started before it reports them. A restart
# over the same store loads the -O3 rows: no compile of either kind.
set(SJ_TIERED_DIR "${PROJECT_BINARY_DIR}/cli_tests/tiered")
set(TS "${SJ_TIERED_DIR}/s.db")
sj_cli_test(tiered_serve RC 0 CLEAN ${SJ_TIERED_DIR} SETUP tiered_served
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:200:1 --ladder list:8,32 --store ${TS}
  --workers 2 --tiered --stats
  OUT "tiered +2 buckets served -O0 code first, 2 swapped to the full code, 0 failed"
  ERR "\"compiles\": 2,.*\"quick_compiles\": 2, \"tier_ups\": 2, \"tier_up_failures\": 0"
  FILES ${TS})
sj_cli_test(tiered_restart RC 0 REQUIRES tiered_served
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:50:1 --ladder list:8,32 --store ${TS}
  --workers 1 --tiered --stats
  ERR "\"store_hits\": 2, \"remote_hits\": 0, \"compiles\": 0,.*\"quick_compiles\": 0, \"tier_ups\": 0, \"tier_up_failures\": 0")
sj_cli_test(tiered_not_host RC 2
  ARGS serve ${SJ_MODELS}/ffn.sjg --synthetic uniform:1:32:20:1 --store none --tiered --backend interp
  ERR "--tiered is for --backend host")
sj_cli_test(tiered_listen_not_host RC 2
  ARGS serve --listen 0 ${SJ_MODELS}/ffn.sjg --store none --tiered --backend interp
  ERR "--tiered is for --backend host")
sj_cli_test(tiered_help RC 0 ARGS serve --help OUT "--tiered +host: a bucket no store holds is compiled at -O0")

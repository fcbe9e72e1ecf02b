# serve --ladder fit:K (issue 19 item 4); the CLI tests use sj_cli_test from
# cli.cmake (included first). The switch itself (serve/ladder_switch.c) is
# tested by test_ladder_switch; the HTTP server's fit by server_fit.sh.

set(SJ_LS_DIR "${PROJECT_BINARY_DIR}/cli_tests/ladder_serve")
set(SJ_LS_FFN "${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg")
# Two modes, 1..6 and 300..310 rows, alternating: the rows cost fits
# list:6,310, neither of them a pow2 extent, so the fitted buckets are
# compiles of their own. 3000 requests keep the warm replay running well
# after the switch (loading two buckets takes milliseconds).
set(modes "")
foreach(i RANGE 0 2999)
  math(EXPR half "${i} / 2")
  math(EXPR small "1 + ${half} % 6")
  math(EXPR large "300 + ${half} % 11")
  math(EXPR odd "${i} % 2")
  if(odd)
    string(APPEND modes "${small}\n")
  else()
    string(APPEND modes "${large}\n")
  endif()
endforeach()
file(WRITE "${SJ_LS_DIR}/modes.txt" "${modes}")
file(WRITE "${SJ_LS_DIR}/one_size.txt" "37\n")

set(fit_modes serve ${SJ_LS_FFN} --trace ${SJ_LS_DIR}/modes.txt --ladder fit:2 --fit-window 100
  --fit-cost rows --workers 2 --store ${SJ_LS_DIR}/store/s.db --stats)
# Cold: the window's 100 requests run on pow2:1:310 while list:6,310 is
# fitted and compiled behind them; the switch is told and counted.
sj_cli_test(serve_fit_cold RC 0 CLEAN ${SJ_LS_DIR}/store SETUP ladder_serve_store ARGS ${fit_modes}
  OUT "ladder fit:2 from provisional pow2:1:310\n.*ladder fit +list:6,310 fitted to the first 100 requests \\(sizes 1..310, 17 distinct. cost rows\\): 2 buckets, expected [0-9.]+ rows per request\n +fitted in [0-9.]+ ms, ready in [0-9.]+ ms \\(2 compiles, 0 store hits, 2 of 2 buckets ready\\)"
  ERR "shapejit serve: ladder fit: switched to list:6,310 \\(2 buckets fitted to the first 100 requests in .*\"ladder_fit\": {\"k\": 2, \"window\": 100, \"window_seen\": 100, \"cost\": \"rows\", \"provisional\": \"pow2:1:310\", \"fitted\": \"list:6,310\", \"buckets\": 2, \"distinct_sizes\": 17, .*\"switched\": true, .*\"fitted_compiles\": 2, \"fitted_store_hits\": 0, \"fitted_buckets_ready\": 2, \"error\": \"\"}")
# Warm: the fitted buckets load from the store, the switch comes within
# milliseconds of the window filling, and the rest of the replay runs on
# list:6,310 (its buckets' runs are in the padding figures).
sj_cli_test(serve_fit_warm RC 0 REQUIRES ladder_serve_store ARGS ${fit_modes}
  OUT "compiles +0 .*switched after [0-9]+ requests: [1-9][0-9]* ran on it, 0 above its top on pow2:1:310\n.*bucket 6 +fitted [1-9][0-9]* runs.*bucket 310 +fitted [1-9][0-9]* runs"
  ERR "\"switched\": true, \"switched_after\": [0-9]+, \"requests_on_fitted\": [1-9][0-9]*, .*\"fitted_compiles\": 0, \"fitted_store_hits\": 2, \"fitted_buckets_ready\": 2")
# A stream shorter than the window: nothing is fitted, the provisional
# ladder serves every request (the documented choice: a partial window
# is not fitted at shutdown, when no request would run on it).
sj_cli_test(serve_fit_window_not_filled RC 0
  ARGS serve ${SJ_LS_FFN} --synthetic uniform:1:8:30 --ladder fit:2 --backend interp --store none --stats
  OUT "ladder fit +the window did not fill \\(30 of 1000 requests\\): nothing fitted, pow2:1:8 served every request"
  ERR "\"window_seen\": 30, \"cost\": \"measured\", \"provisional\": \"pow2:1:8\", \"fitted\": null, .*\"switched\": false")
# Every request one size, K = 3: one bucket at that size, and why not 3.
sj_cli_test(serve_fit_one_size RC 0
  ARGS serve ${SJ_LS_FFN} --trace ${SJ_LS_DIR}/one_size.txt --requests 40 --ladder fit:3 --fit-window 20
       --fit-cost rows --backend interp --store none
  OUT "ladder fit +list:37 fitted to the first 20 requests \\(sizes 37..37, 1 distinct. cost rows\\): 1 bucket, expected 37 rows per request \\(not 3: the window held 1 distinct size\\)")
# The cost model measured as `ladder fit MODEL` does, in the background.
sj_cli_test(serve_fit_measured RC 0
  ARGS serve ${SJ_LS_FFN} --synthetic uniform:1:16:80:2 --ladder fit:2 --fit-window 40 --backend interp
       --store none --workers 1
  OUT "ladder fit +list:[0-9]+(,16)? fitted to the first 40 requests \\(sizes [0-9]+..16, [0-9]+ distinct. cost measured\\): [12] buckets?, expected [0-9.e+-]+ us per request")
sj_cli_test(serve_fit_k_zero RC 2 ARGS serve ${SJ_LS_FFN} --ladder fit:0
  ERR "--ladder fit:K: K must be a bucket count in 1..4096, got '0'")
sj_cli_test(serve_fit_k_not_int RC 2 ARGS serve ${SJ_LS_FFN} --ladder fit:many
  ERR "--ladder fit:K: K must be a bucket count in 1..4096, got 'many'")
sj_cli_test(serve_fit_k_too_big RC 2 ARGS serve ${SJ_LS_FFN} --ladder fit:4097
  ERR "K must be a bucket count in 1..4096, got '4097'")
sj_cli_test(serve_fit_window_zero RC 2 ARGS serve ${SJ_LS_FFN} --ladder fit:2 --fit-window 0
  ERR "--fit-window must be in 1..10000000 requests, got 0")
sj_cli_test(serve_fit_window_needs_fit RC 2 ARGS serve ${SJ_LS_FFN} --fit-window 10
  ERR "--fit-window and --fit-cost need --ladder fit:K")
sj_cli_test(serve_fit_cost_bad RC 2 ARGS serve ${SJ_LS_FFN} --ladder fit:2 --fit-cost guess
  ERR "--fit-cost must be measured or rows, got 'guess'")

# The same through serve --listen (server/model_fit.c): curl against a
# live server, the switch awaited through /metrics (tests/server_fit.sh).
find_program(SJ_CURL curl)
find_program(SJ_BASH bash)
if(SJ_CURL AND SJ_BASH AND TARGET shapejit_server)
  add_test(NAME server_fit COMMAND ${SJ_BASH} ${PROJECT_SOURCE_DIR}/tests/server_fit.sh
    $<TARGET_FILE:shapejit_cli> ${PROJECT_SOURCE_DIR}/examples/models ${PROJECT_BINARY_DIR}/server_fit)
  set_tests_properties(server_fit PROPERTIES TIMEOUT 240 LABELS server)
endif()
set(listen serve --listen 127.0.0.1:0 ${SJ_LS_FFN} --store none)
sj_cli_test(listen_fit_k_zero RC 2 ARGS ${listen} --ladder fit:0
  ERR "--ladder fit:K: K must be a bucket count in 1..4096, got '0'")
sj_cli_test(listen_fit_k_not_int RC 2 ARGS ${listen} --ladder fit:abc
  ERR "--ladder fit:K: K must be a bucket count in 1..4096, got 'abc'")
sj_cli_test(listen_fit_window_zero RC 2 ARGS ${listen} --ladder fit:2 --fit-window 0
  ERR "--fit-window must be in 1..10000000 requests, got 0")
sj_cli_test(listen_fit_window_needs_fit RC 2 ARGS ${listen} --fit-window 10
  ERR "--fit-window and --fit-cost need --ladder fit:K")
sj_cli_test(listen_fit_cost_bad RC 2 ARGS ${listen} --ladder fit:2 --fit-cost guess
  ERR "--fit-cost must be measured or rows, got 'guess'")

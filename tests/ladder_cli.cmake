# `shapejit ladder fit` (issue 19 item 4): the ladder fitted to a trace.
# A bimodal trace (1..8 and 500..512, 100 requests each) under the rows cost
# gets one bucket at the top of each mode; one size gets one bucket whatever
# K; a MODEL's cost is measured and its run memory bounds the fit. Traces
# are written at configure time.
set(SJ_LF_DIR "${PROJECT_BINARY_DIR}/cli_tests/ladder_fit")
set(SJ_LF_FFN "${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg")
set(bimodal "# two modes\n")
foreach(i RANGE 0 99)
  math(EXPR small "1 + ${i} % 8")
  math(EXPR large "500 + ${i} % 13")
  string(APPEND bimodal "${small}\n${large}\n")
endforeach()
file(WRITE "${SJ_LF_DIR}/bimodal.txt" "${bimodal}")
file(WRITE "${SJ_LF_DIR}/one_size.txt" "37\n37\n37\n")
file(WRITE "${SJ_LF_DIR}/empty.txt" "# nothing\n")

sj_cli_test(ladder_fit_bimodal RC 0
  ARGS ladder fit --trace ${SJ_LF_DIR}/bimodal.txt --buckets 2
  OUT "trace: 200 requests, sizes 1..512, 21 distinct sizes considered\nfitted  list:8,512  expected 260 rows per request \\(2 buckets\\)\npow2    list:256,512  expected 384 rows per request \\(2 buckets\\)\nthe fitted ladder's expected cost is 0.677x pow2's")
sj_cli_test(ladder_fit_one_size RC 0
  ARGS ladder fit --trace ${SJ_LF_DIR}/one_size.txt --buckets 6
  OUT "fitted  list:37  expected 37 rows per request \\(1 bucket\\).*note: 1 bucket, not 6: the fit chooses among 1 extent \\(the trace's distinct sizes")
sj_cli_test(ladder_fit_lognormal RC 0
  ARGS ladder fit --synthetic lognormal:64:1:1024:2000:3 --buckets 5
  OUT "fitted  list:[0-9,]+  expected [0-9.]+ rows per request \\(5 buckets\\)\npow2    list:64,128,256,512,1024 ")
sj_cli_test(ladder_fit_measured RC 0
  ARGS ladder fit ${SJ_LF_FFN} --synthetic uniform:1:64:200 --buckets 3 --memory 1 --store none
  OUT "^cost model \\(host, measured here over [0-9]+ runs at extents 1, 4, 16, 64\\): cost\\(n, E\\) = .* us. run memory\\(E\\) = .* bytes\n.*fitted  list:[0-9,]*64  expected [0-9.]+ us per request, run memory [0-9.]+ KiB")
sj_cli_test(ladder_fit_memory_too_small RC 1
  ARGS ladder fit ${SJ_LF_FFN} --synthetic uniform:1000:1024:50 --buckets 2 --memory 1 --store none
  ERR "ladder fit: the largest size \\(10[0-9][0-9]\\) alone needs [0-9]+ bytes in its bucket, more than the budget of 1048576")
sj_cli_test(ladder_fit_empty RC 1 ARGS ladder fit --trace ${SJ_LF_DIR}/empty.txt --buckets 2
  ERR "no request sizes in it")
sj_cli_test(ladder_fit_no_buckets RC 2 ARGS ladder fit --trace ${SJ_LF_DIR}/one_size.txt
  ERR "--buckets must be in 1..4096, got 0")
sj_cli_test(ladder_fit_memory_needs_model RC 2
  ARGS ladder fit --trace ${SJ_LF_DIR}/one_size.txt --buckets 2 --memory 64
  ERR "--memory needs a MODEL")
sj_cli_test(ladder_fit_two_traces RC 2
  ARGS ladder fit --trace ${SJ_LF_DIR}/one_size.txt --synthetic uniform:1:8 --buckets 2
  ERR "give one of --trace FILE or --synthetic SPEC")
sj_cli_test(ladder_no_subcommand RC 2 ARGS ladder ERR "a subcommand is needed: fit")
# Every extent of a long fitted ladder is printed (the spec is not cut).
sj_cli_test(ladder_fit_long_spec RC 0 ARGS ladder fit --synthetic uniform:1:1000000:20000:3 --buckets 600
  OUT "fitted  list:1832,3547,[0-9,]+,999931  expected .*note: 512 buckets, not 600: the fit chooses among 512 extents")
# A backend that reports no run memory cannot bound it.
sj_cli_test(ladder_fit_memory_interp RC 1
  ARGS ladder fit ${SJ_LF_FFN} --synthetic uniform:1:64:100 --buckets 2 --memory 1 --backend interp
  ERR "--memory: backend interp does not report run memory")
# The contract's spelling: --model MODEL.
sj_cli_test(ladder_fit_model_flag RC 0
  ARGS ladder fit --model ${SJ_LF_FFN} --synthetic uniform:1:16:50 --buckets 2
  OUT "^cost model \\(host, measured here")
sj_cli_test(ladder_fit_model_twice RC 2
  ARGS ladder fit ${SJ_LF_FFN} --model ${SJ_LF_FFN} --synthetic uniform:1:16:50 --buckets 2
  ERR "give the model once")

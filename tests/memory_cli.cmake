# Memory flags on the command line (issue 21): a resident-bucket bound of
# zero (or not a count) is a usage error naming the flag; a bound of one on a
# stream over several buckets trims (resident_evictions > 0) and still
# answers; --stats and the serve report say the weights shared, the run
# memory per bucket and the process's peak RSS.
set(SJ_MEM_FFN "${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg")
sj_cli_test(run_resident_zero RC 2
  ARGS run ${SJ_MEM_FFN} --rows 3 --store none --backend host --max-resident-buckets 0
  ERR "--max-resident-buckets must be a count of at least 1, got '0'")
sj_cli_test(serve_resident_not_a_count RC 2
  ARGS serve ${SJ_MEM_FFN} --store none --max-resident-buckets 2x
  ERR "--max-resident-buckets must be a count of at least 1, got '2x'")
sj_cli_test(run_memory_stats RC 0
  ARGS run ${SJ_MEM_FFN} --rows 5 --store none --backend host --stats --out ${SJ_CLI_DIR}/mem_run
  ERR "\"weight_bytes\": [1-9][0-9]*, \"weight_mapped_bytes\": 0, \"weight_packed_bytes\": 0, \"run_bytes\": [1-9][0-9]*, \"resident_buckets\": 1, .*\"peak_rss_bytes\": [1-9][0-9]*, \"bucket_memory\": \\[{\"extent\": 8, \"weights_shared\": [1-9][0-9]*, \"weights_mapped\": 0, \"arena_bytes\": [0-9]+, \"io_bytes\": [1-9][0-9]*, \"peak_bytes\": [1-9][0-9]*, \"resident\": true, \"estimated\": false}\\]")
# A bucket of 64 rows runs ffn's matmuls through the packed GEMM, which
# reads both weights packed once at load (the bias and layernorm params
# stay as they are); at 5 rows above they are read in place.
sj_cli_test(run_memory_packed RC 0
  ARGS run ${SJ_MEM_FFN} --rows 40 --store none --backend host --stats --out ${SJ_CLI_DIR}/mem_run_packed
  ERR "\"weight_bytes\": [1-9][0-9]*, \"weight_mapped_bytes\": 0, \"weight_packed_bytes\": 131072, ")
sj_cli_test(serve_resident_bound RC 0
  ARGS serve ${SJ_MEM_FFN} --store none --synthetic uniform:1:40:60:3 --workers 2 --ladder pow2:1:64
       --max-resident-buckets 1 --stats
  OUT "memory           weights [0-9.]+ MiB \\(shared by every bucket; [0-9.]+ MiB of them mapped from the model's files, [0-9.]+ MiB packed for the GEMM\\), run memory [0-9.]+ MiB in 1 resident buckets \\([1-9][0-9]* trimmed\\), peak RSS [1-9][0-9.]* MiB"
  ERR "\"resident_buckets\": 1, \"resident_evictions\": [1-9][0-9]*, \"peak_rss_bytes\": [1-9]")
# A precompile says what each bucket will need once it serves (issue 13
# item 9; a store-only GPU precompile reads it from the artifacts, see
# gpu_cli.cmake): ffn.sjg's input and output are [N, 64] floats, so bucket
# 64 pads 64 x 64 x 4 bytes each; store ls has the same figures per row,
# read from the stored artifacts.
sj_cli_test(precompile_bucket_memory RC 0 CLEAN ${SJ_CLI_DIR}/mem_store.db SETUP mem_store
  ARGS precompile ${SJ_MEM_FFN} --ladder list:8,64 --store ${SJ_CLI_DIR}/mem_store.db --stats
  OUT "run memory per bucket once it serves \\(extent: bytes\\): 8: [0-9.]+ (bytes|KiB|MiB), 64: [0-9.]+ (KiB|MiB). weights [0-9.]+ KiB, one copy shared by every bucket"
  ERR "{\"extent\": 64, \"weights_shared\": 132864, \"weights_mapped\": 0, \"arena_bytes\": [0-9]+, \"io_bytes\": 32768, \"peak_bytes\": [1-9][0-9]*, \"resident\": false, \"estimated\": false}")
sj_cli_test(store_ls_bucket_memory RC 0 REQUIRES mem_store
  ARGS store ls --store ${SJ_CLI_DIR}/mem_store.db --json
  OUT "\"extent\": 64, .*\"run_bytes\": [1-9][0-9]*, \"arena_bytes\": [0-9]+, \"io_bytes\": 32768, \"weight_bytes\": 132864, \"tuning\": \"\"}")

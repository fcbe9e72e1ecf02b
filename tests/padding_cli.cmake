# serve's padding figures on a stream whose work is known
# (tests/data/padding_known.trace on list:8,16): rows allocated past the
# requests per bucket and in total, none computed (host and interp kernels
# run over the active rows), and the arena one run of each bucket holds.
set(SJ_PADDING_TRACE ${PROJECT_SOURCE_DIR}/tests/data/padding_known.trace)
foreach(backend host interp)
  if(backend STREQUAL "host")
    set(arena "[1-9][0-9]*")
  else()
    set(arena "0")
  endif()
  sj_cli_test(serve_padding_${backend} RC 0
    ARGS serve ${SJ_MODELS}/ffn.sjg --trace ${SJ_PADDING_TRACE} --ladder list:8,16 --store none
         --workers 1 --backend ${backend} --stats
    OUT "padding +22 rows allocated past the requests \\(34\\.4% of the buckets' rows. memory\\), 0 rows computed past them \\(work\\)\n +bucket 8 +4 runs, 17 rows: 15 padded rows allocated, 0 computed. arena [0-9.]+ KiB\n +bucket 16 +2 runs, 25 rows: 7 padded rows allocated, 0 computed"
    ERR "\"padded_rows_allocated\": 22, \"padded_rows_computed\": 0, \"padding_buckets\": \\[{\"extent\": 8, \"runs\": 4, \"rows\": 17, \"padded_rows_allocated\": 15, \"padded_rows_computed\": 0, \"arena_bytes\": ${arena}}, {\"extent\": 16, \"runs\": 2, \"rows\": 25, \"padded_rows_allocated\": 7, \"padded_rows_computed\": 0, \"arena_bytes\": ${arena}}\\]")
endforeach()

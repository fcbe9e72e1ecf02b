# The precision policy on the command line (issue 21, item 3): a name that
# is not a policy is a usage error on every command that takes it; the
# NVRTC target, which cannot lower bf16, fails naming the op and the policy
# (never float32 code under a bf16 key), and precompile --target all leaves
# it out saying why; the policy is part of the store key (a store
# precompiled at fp32 serves fp32 warm and compiles bf16 afresh); host and
# NVPTX code read the narrowed weights as 16-bit words.
set(SJ_PREC_FFN "${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg")
set(SJ_PREC_DIR "${SJ_CLI_DIR}/precision")
foreach(cmd run serve precompile emit)
  set(extra --store none)
  if(cmd STREQUAL "precompile")
    list(APPEND extra --ladder pow2:1:8)
  elseif(cmd STREQUAL "emit")
    set(extra --rows 3 --target llvm-ir) # emit compiles, stores nothing
  endif()
  sj_cli_test(${cmd}_precision_unknown RC 2
    ARGS ${cmd} ${SJ_PREC_FFN} --precision bf8 ${extra}
    ERR "unknown --precision 'bf8' \\(fp32, bf16 or fp16\\)")
endforeach()
sj_cli_test(emit_precision_nvptx_bf16 RC 0
  ARGS emit ${SJ_PREC_FFN} --rows 3 --target nvptx --precision bf16
  OUT "ld\\.global(\\.nc)?\\.u16")
sj_cli_test(emit_precision_nvrtc_refused RC 1
  ARGS emit ${SJ_PREC_FFN} --rows 3 --target nvptx --emit nvrtc --precision fp16
  ERR "precision fp16 not supported by target nvrtc for op matmul")
sj_cli_test(emit_precision_bf16_ir RC 0
  ARGS emit ${SJ_PREC_FFN} --rows 3 --target llvm-ir --ladder pow2:1:8 --precision bf16
  OUT "load <[0-9]+ x i16>")
sj_cli_test(precompile_precision_all RC 0 CLEAN ${SJ_PREC_DIR}/all
  ARGS precompile ${SJ_PREC_FFN} --ladder pow2:1:4 --target all --precision bf16 --jobs 1
       --store ${SJ_PREC_DIR}/all/s.db
  ERR "target nvrtc skipped: precision bf16 not supported by target nvrtc"
  OUT "precompiled 3 buckets of pow2:1:4 for host.*precompiled 3 buckets of pow2:1:4 for nvptx")
sj_cli_test(precision_store_fp32 RC 0 CLEAN ${SJ_PREC_DIR}/key SETUP sj_precision_store
  ARGS precompile ${SJ_PREC_FFN} --ladder pow2:1:8 --store ${SJ_PREC_DIR}/key/s.db --jobs 1
  OUT "4 compiled, 0 from the store")
sj_cli_test(precision_store_fp32_warm RC 0 REQUIRES sj_precision_store
  ARGS run ${SJ_PREC_FFN} --rows 5 --backend host --ladder pow2:1:8 --store ${SJ_PREC_DIR}/key/s.db
       --precision fp32 --stats --out ${SJ_PREC_DIR}/key/fp32
  ERR "\"store_hits\": 1, .*\"compiles\": 0,")
sj_cli_test(precision_store_bf16_compiles RC 0 REQUIRES sj_precision_store
  ARGS run ${SJ_PREC_FFN} --rows 5 --backend host --ladder pow2:1:8 --store ${SJ_PREC_DIR}/key/s.db
       --precision bf16 --stats --out ${SJ_PREC_DIR}/key/bf16
  ERR "\"store_hits\": 0, .*\"compiles\": 1,")
sj_cli_test(serve_precision_bf16 RC 0
  ARGS serve ${SJ_PREC_FFN} --store none --synthetic uniform:1:40:20:3 --workers 2 --ladder pow2:1:64
       --precision bf16
  OUT "20 requests from")

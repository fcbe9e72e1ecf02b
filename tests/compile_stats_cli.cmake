# Compile sharing on the command line (issue 33): a BERT export's two
# encoder layers lower to kernels that launch once per layer, so a
# precompile's --stats counts kernels reused; it also says the time the
# model read took and the host compiler's time per stage.
sj_cli_test(precompile_kernels_reused RC 0
  ARGS precompile ${PROJECT_SOURCE_DIR}/tests/data/real_models/bert_dynamo/model.onnx
       --dynamic seq --dim batch=1 --ladder list:4 --store none --jobs 1 --stats
  ERR "\"import_ms\": [0-9]+\\.[0-9]+, .*\"kernels\": [1-9][0-9]*, \"launches\": [1-9][0-9]*, \"kernels_reused\": [1-9][0-9]*, \"stage_ms\": {\"lower\": [0-9]+\\.[0-9]+, \"emit\": [0-9]+\\.[0-9]+, \"optimise\": [0-9]+\\.[0-9]+, \"codegen\": [0-9]+\\.[0-9]+, \"load\": [0-9]+\\.[0-9]+}")
# The interpreter compiles no kernels: zeros, not missing members.
sj_cli_test(run_interp_stage_zeros RC 0
  ARGS run ${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg --rows 3 --store none --backend interp --stats
       --out ${SJ_CLI_DIR}/stage_zeros
  ERR "\"kernels\": 0, \"launches\": 0, \"kernels_reused\": 0, \"stage_ms\": {\"lower\": 0.000, \"emit\": 0.000, \"optimise\": 0.000, \"codegen\": 0.000, \"load\": 0.000}")

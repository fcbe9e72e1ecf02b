# The packed weights kept beside a store (docs/weights.md) on the command
# line: a run at 40 rows packs ffn.sjg's two weights and keeps them in
# STORE-weights, the next run maps them (weight_mapped_bytes), and
# `store gc --max-weight-bytes` bounds the folder; a negative bound, or the
# option on another subcommand, is a usage error.
set(SJ_WF_FFN "${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg")
set(SJ_WF_STORE "${SJ_CLI_DIR}/wf_store.db")
sj_cli_test(weight_files_first_run RC 0 CLEAN ${SJ_WF_STORE} SETUP wf_store
  ARGS run ${SJ_WF_FFN} --rows 40 --ladder list:64 --store ${SJ_WF_STORE} --stats --out ${SJ_CLI_DIR}/wf_out
  ERR "\"weight_mapped_bytes\": 0, \"weight_packed_bytes\": 131072, ")
sj_cli_test(weight_files_mapped RC 0 REQUIRES wf_store SETUP wf_mapped
  ARGS run ${SJ_WF_FFN} --rows 40 --ladder list:64 --store ${SJ_WF_STORE} --stats --out ${SJ_CLI_DIR}/wf_out
  ERR "\"compiles\": 0, .*\"weight_mapped_bytes\": 131072, \"weight_packed_bytes\": 131072, ")
sj_cli_test(weight_files_gc RC 0 REQUIRES wf_mapped
  ARGS store gc --max-weight-bytes 0 --store ${SJ_WF_STORE}
  OUT "removed 0 corrupt, evicted 0, freed 0 bytes; removed 2 packed weight files, freed [1-9][0-9]* bytes")
sj_cli_test(weight_files_gc_negative RC 2
  ARGS store gc --max-weight-bytes -1 --store ${SJ_WF_STORE}
  ERR "--max-weight-bytes must be >= 0")
sj_cli_test(weight_files_gc_other_subcommand RC 2
  ARGS store ls --max-weight-bytes 5 --store ${SJ_WF_STORE}
  ERR "--max-weight-bytes is an option of 'gc'")

# Models as PyTorch's and Hugging Face's exporters write them (issue 12):
# tests/data/real_models/<model>_<exporter>/, made by tools/export_models.py,
# each with a manifest.json naming its inputs, the dims to fix, the dynamic
# dim, the sequence lengths and the tolerances. For every model and length,
# `shapejit run` on the interpreter and the host backend must match torch's
# outputs (allclose, atol 1e-5, rtol 1e-3: the comparison of
# `test_models --compare`, run through models.cmake's script mode). Then
# precompile, run and serve on two of them (a warm process compiles nothing), and
# bad input: external data missing, truncated or outside the model's folder,
# .npy inputs of the wrong dtype.
#
# The manifests are read and checked at configure time whatever the option;
# the tests are added with -DSJ_REAL_MODEL_TESTS=ON (label real_models).

set(SJ_REAL_DATA "${PROJECT_SOURCE_DIR}/tests/data/real_models")
set(SJ_REAL_OUT "${PROJECT_BINARY_DIR}/real_model_tests")
set(SJ_REAL_SCRIPT "${PROJECT_SOURCE_DIR}/tests/models.cmake")

# sj_real_json(OUT json key...): a manifest field; a missing one is a
# configure error naming the manifest.
function(sj_real_json out json mf)
  string(JSON v ERROR_VARIABLE err GET "${json}" ${ARGN})
  if(err)
    message(FATAL_ERROR "${mf}: ${err}")
  endif()
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

# sj_real_input_args(OUT json mf folder last_input): `--input NAME=FILE` for
# each of the manifest's inputs 0..last_input, from folder/NAME.npy; a
# missing file is a configure error naming the manifest.
function(sj_real_input_args out json mf folder last_input)
  set(args "")
  foreach(ii RANGE ${last_input})
    sj_real_json(input "${json}" "${mf}" inputs ${ii} name)
    set(f "${folder}/${input}.npy")
    if(NOT EXISTS "${f}")
      message(FATAL_ERROR "${mf}: ${f} is missing")
    endif()
    list(APPEND args --input ${input}=${f})
  endforeach()
  set(${out} "${args}" PARENT_SCOPE)
endfunction()

# sj_real_test(NAME RC n [ERR regex] [WANT dir] ARGS ...): one CLI run through
# models.cmake's script mode (own store, exit status, stderr, comparison).
function(sj_real_test name)
  cmake_parse_arguments(T "" "RC;ERR;WANT;REQUIRES;TOL" "ARGS" ${ARGN})
  list(JOIN T_ARGS "|" args)
  set(defs -DSJ_CLI=$<TARGET_FILE:shapejit_cli> -DSJ_COMPARE=$<TARGET_FILE:test_models>
    "-DARGS=${args}" -DEXPECT_RC=${T_RC} "-DOUT=${SJ_REAL_OUT}/${name}" "-DWANT=${T_WANT}"
    "-DTOL=${T_TOL}")
  if(DEFINED T_ERR)
    list(APPEND defs "-DEXPECT_ERR=${T_ERR}")
  endif()
  add_test(NAME real_${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${SJ_REAL_SCRIPT})
  set_tests_properties(real_${name} PROPERTIES TIMEOUT 300 LABELS real_models)
  if(T_REQUIRES)
    set_tests_properties(real_${name} PROPERTIES FIXTURES_REQUIRED ${T_REQUIRES})
  endif()
endfunction()

file(GLOB sj_real_manifests "${SJ_REAL_DATA}/*/manifest.json")
list(SORT sj_real_manifests)
if(NOT sj_real_manifests)
  message(FATAL_ERROR "no manifest.json under ${SJ_REAL_DATA}")
endif()

set(sj_real_names "")
foreach(mf ${sj_real_manifests})
  get_filename_component(dir "${mf}" DIRECTORY)
  file(READ "${mf}" j)
  sj_real_json(name "${j}" "${mf}" name)
  sj_real_json(model "${j}" "${mf}" model)
  sj_real_json(dynamic "${j}" "${mf}" dynamic)
  sj_real_json(ext "${j}" "${mf}" external_data)
  sj_real_json(atol "${j}" "${mf}" atol)
  sj_real_json(rtol "${j}" "${mf}" rtol)
  # test_models --compare has its tolerances built in: a manifest asking for
  # others would be compared against the wrong ones.
  if(NOT atol EQUAL 1e-05 OR NOT rtol EQUAL 0.001)
    message(FATAL_ERROR "${mf}: atol ${atol} rtol ${rtol}, but test_models --compare uses 1e-5 / 1e-3")
  endif()
  if(NOT EXISTS "${dir}/${model}")
    message(FATAL_ERROR "${mf}: ${dir}/${model} is missing")
  endif()
  if(NOT ext STREQUAL "null" AND NOT EXISTS "${dir}/${ext}")
    message(FATAL_ERROR "${mf}: external data ${dir}/${ext} is missing")
  endif()
  set(flags --dynamic ${dynamic})
  string(JSON ndims LENGTH "${j}" dims)
  if(ndims GREATER 0)
    math(EXPR last "${ndims} - 1")
    foreach(i RANGE ${last})
      string(JSON dim MEMBER "${j}" dims ${i})
      sj_real_json(value "${j}" "${mf}" dims ${dim})
      list(APPEND flags --dim ${dim}=${value})
    endforeach()
  endif()
  string(JSON ninputs LENGTH "${j}" inputs)
  math(EXPR last_input "${ninputs} - 1")
  string(JSON nlengths LENGTH "${j}" lengths)
  math(EXPR last_length "${nlengths} - 1")
  set(lengths "")
  foreach(li RANGE ${last_length})
    sj_real_json(len "${j}" "${mf}" lengths ${li})
    list(APPEND lengths ${len})
    sj_real_input_args(input_args "${j}" "${mf}" "${dir}/${len}/in" ${last_input})
    file(GLOB want "${dir}/${len}/out/*.npy")
    if(NOT want)
      message(FATAL_ERROR "${mf}: no expected outputs in ${dir}/${len}/out")
    endif()
    # Each length is a compile of its bucket, most of a test's time. The
    # release suite runs the lengths that reach each kernel regime: 1 (an
    # exact bucket of one row), 3 and 7 (few rows, padded into 4 and 8) and
    # 37 (the tiled kernels, padded into 64). 16 and 64 stay in the data but
    # are not run: exact buckets as 1 is, 64 with 37's kernels, and the
    # suite must fit CI's 30 minutes. Under the sanitizers, one length per model (the
    # second, padded): the instrumented import, lowering and interpreter
    # paths are the same at every length, and the rest of a run is LLVM
    # compiling uninstrumented code (909 of the sanitizer pass's 2218 CPU
    # seconds went to this matrix).
    set(run_len ON)
    if((SJ_SANITIZE AND NOT li EQUAL 1) OR len EQUAL 16 OR len EQUAL 64)
      set(run_len OFF)
    endif()
    if(SJ_REAL_MODEL_TESTS AND run_len)
      foreach(backend interp host)
        sj_real_test(${name}_${backend}_${len} RC 0 WANT "${dir}/${len}/out"
          ARGS run "${dir}/${model}" ${flags} ${input_args} --backend ${backend})
      endforeach()
      # The precision policies (docs/precision.md) against torch's float32
      # outputs, within the tolerances documented there; the test log prints
      # the largest errors. bf16 on the host at 7 and 37 (the few-rows and
      # the tiled matmul kernels), the rest at 37.
      if((len EQUAL 7 OR len EQUAL 37) AND NOT SJ_SANITIZE)
        sj_real_test(${name}_host_bf16_${len} RC 0 WANT "${dir}/${len}/out" TOL "0.06|0.01"
          ARGS run "${dir}/${model}" ${flags} ${input_args} --backend host --precision bf16)
      endif()
      if(len EQUAL 37 AND NOT SJ_SANITIZE)
        sj_real_test(${name}_interp_bf16_${len} RC 0 WANT "${dir}/${len}/out" TOL "0.06|0.01"
          ARGS run "${dir}/${model}" ${flags} ${input_args} --backend interp --precision bf16)
        sj_real_test(${name}_host_fp16_${len} RC 0 WANT "${dir}/${len}/out" TOL "0.01|0.002"
          ARGS run "${dir}/${model}" ${flags} ${input_args} --backend host --precision fp16)
      endif()
    endif()
  endforeach()
  # Served by batch (text models): the batch bucketed, seq fixed at the
  # manifest's batch_seq. The exporters write the batch into reshapes as a
  # multiple of it ([batch, 4, seq, 8] to [4 * batch, seq, 8]); where one
  # merges it with the dims in front of it (nn.MultiheadAttention's
  # [seq, batch, d] to [seq * batch, d]) the result is built compact.
  string(JSON nbatches ERROR_VARIABLE no_batches LENGTH "${j}" batches)
  if(NOT no_batches AND nbatches GREATER 0)
    sj_real_json(batch_seq "${j}" "${mf}" batch_seq)
    math(EXPR last_batch "${nbatches} - 1")
    foreach(bi RANGE ${last_batch})
      sj_real_json(batch "${j}" "${mf}" batches ${bi})
      if(SJ_SANITIZE AND NOT bi EQUAL 0)
        continue()
      endif()
      sj_real_input_args(input_args "${j}" "${mf}" "${dir}/b${batch}/in" ${last_input})
      set(bflags --dynamic batch --dim seq=${batch_seq})
      if(NOT SJ_REAL_MODEL_TESTS)
      else()
        foreach(backend interp host)
          sj_real_test(${name}_${backend}_b${batch} RC 0 WANT "${dir}/b${batch}/out"
            ARGS run "${dir}/${model}" ${bflags} ${input_args} --backend ${backend})
        endforeach()
      endif()
    endforeach()
  endif()
  list(APPEND sj_real_names ${name})
  # what precompile and serve below need of a model
  set(sj_real_${name}_flags ${flags})
  set(sj_real_${name}_lengths ${lengths})
endforeach()

if(NOT SJ_REAL_MODEL_TESTS)
  return()
endif()

# A decode step whose mask is not past + 1 long is refused, naming both
# inputs, before anything runs.
set(dir "${SJ_REAL_DATA}/gpt2_step_torchscript")
set(bad_args "")
foreach(f input_ids past_key_0 past_value_0 past_key_1 past_value_1)
  list(APPEND bad_args --input ${f}=${dir}/4/in/${f}.npy)
endforeach()
sj_real_test(gpt2_step_mask_mismatch RC 1
  ERR "input 'attention_mask' dim 1 is 32, but past = 4 \\(from input 'past_key_0'\\) makes past\\+1 5"
  ARGS run "${dir}/model.onnx" ${sj_real_gpt2_step_torchscript_flags} ${bad_args}
       --input attention_mask=${dir}/31/in/attention_mask.npy --backend interp)

# --- precompile at deploy, then processes that only read the store (runs,
# and serve over a stream of lengths): a warm process compiles nothing. One model with float
# inputs, one with token ids and a mask whose weights are external data.
# precompile and serve take no --out: they go through cli.cmake's sj_cli_test.
foreach(name tel_prenorm_gelu_dynamo bert_torchscript)
  if(NOT name IN_LIST sj_real_names)
    message(FATAL_ERROR "real_models.cmake: no model ${name} under ${SJ_REAL_DATA}")
  endif()
  set(dir "${SJ_REAL_DATA}/${name}")
  set(model "${dir}/model.onnx")
  set(flags ${sj_real_${name}_flags})
  set(deploy "${SJ_REAL_OUT}/${name}_deploy")
  sj_cli_test(real_${name}_precompile RC 0 CLEAN ${deploy} SETUP real_${name}_store
    ARGS precompile ${model} ${flags} --ladder pow2:1:64 --store ${deploy}/s.db --jobs 2
    OUT "precompiled 7 buckets of pow2:1:64 for host .*: 7 compiled, 0 from the store"
    FILES ${deploy}/s.db)
  # External-data weights are read in place from their file (docs/weights.md).
  set(mapped "0")
  if(EXISTS "${dir}/model.onnx.data")
    set(mapped "[1-9][0-9]*")
  endif()
  sj_cli_test(real_${name}_serve_warm RC 0 REQUIRES real_${name}_store
    ARGS serve ${model} ${flags} --synthetic uniform:1:64:40:5 --workers 2 --ladder pow2:1:64
         --store ${deploy}/s.db --stats
    OUT "compiles +0 " ERR "\"compiles\": 0,.*\"weight_mapped_bytes\": ${mapped},")
  set_tests_properties(cli_real_${name}_precompile cli_real_${name}_serve_warm
    PROPERTIES LABELS "cli;real_models" TIMEOUT 300)
  foreach(len 3 37)
    file(GLOB inputs RELATIVE "${dir}/${len}/in" "${dir}/${len}/in/*.npy")
    set(input_args "")
    foreach(f ${inputs})
      string(REGEX REPLACE "\\.npy$" "" input "${f}")
      list(APPEND input_args --input ${input}=${dir}/${len}/in/${f})
    endforeach()
    sj_real_test(${name}_warm_run_${len} RC 0 REQUIRES real_${name}_store
      WANT "${dir}/${len}/out" ERR "\"store_hits\": 1,.*\"compiles\": 0,"
      ARGS run ${model} ${flags} ${input_args} --backend host --ladder pow2:1:64
           --store ${deploy}/s.db --stats)
  endforeach()
endforeach()

# --- bad input: exit 1 naming the file or tensor, nothing written
set(bad "${SJ_REAL_DATA}/bad")
set(tel_flags --dynamic seq --dim batch=1 --rows 7)
foreach(backend interp host)
  set(b --backend ${backend})
  sj_real_test(ext_missing_${backend} RC 1 ARGS run ${bad}/ext_missing/model.onnx ${tel_flags} ${b}
    ERR "model\\.onnx\\.data")
  sj_real_test(ext_truncated_${backend} RC 1
    ARGS run ${bad}/ext_truncated/model.onnx ${tel_flags} ${b} ERR "model\\.onnx\\.data")
  sj_real_test(ext_escape_${backend} RC 1 ARGS run ${bad}/ext_escape/model.onnx ${tel_flags} ${b}
    ERR "\\.\\./\\.\\./tel_postnorm_relu_dynamo/model\\.onnx\\.data")
  sj_real_test(ext_absolute_${backend} RC 1 ARGS run ${bad}/ext_absolute/model.onnx ${tel_flags} ${b}
    ERR "/dev/zero")
  set(bert "${SJ_REAL_DATA}/bert_torchscript")
  sj_real_test(mask_float32_${backend} RC 1
    ARGS run ${bert}/model.onnx --dynamic seq --dim batch=1 ${b}
         --input input_ids=${bert}/7/in/input_ids.npy --input attention_mask=${bad}/attention_mask_f32.npy
    ERR "attention_mask.*attention_mask_f32\\.npy")
  sj_real_test(ids_int32_${backend} RC 1
    ARGS run ${bert}/model.onnx --dynamic seq --dim batch=1 ${b}
         --input input_ids=${bad}/input_ids_i32.npy --input attention_mask=${bert}/7/in/attention_mask.npy
    ERR "input_ids.*input_ids_i32\\.npy")
  sj_real_test(src_int64_${backend} RC 1
    ARGS run ${SJ_REAL_DATA}/tel_postnorm_relu_dynamo/model.onnx --dynamic seq --dim batch=1 ${b}
         --input src=${bad}/src_i64.npy ERR "src.*src_i64\\.npy")
endforeach()

# The example programs (examples/*.c) run as tests, each against a store in
# the build tree: precompile fills a store, warm_start must then compile
# nothing from it, and request_loop serves from a store of its own.
set(SJ_EXAMPLE_DIR ${PROJECT_BINARY_DIR}/example_stores)
set(SJ_EXAMPLE_MODEL ${PROJECT_SOURCE_DIR}/examples/models/ffn.sjg)
file(GLOB SJ_EXAMPLE_PROGRAMS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.c)
foreach(src ${SJ_EXAMPLE_PROGRAMS})
  get_filename_component(name ${src} NAME_WE)
  if(name STREQUAL "warm_start")
    # Reads the store precompile wrote.
    add_test(NAME example_warm_start
      COMMAND example_warm_start ${SJ_EXAMPLE_MODEL} ${SJ_EXAMPLE_DIR}/deploy.db --expect-warm)
    set_tests_properties(example_warm_start PROPERTIES FIXTURES_REQUIRED example_deploy_store)
  elseif(name STREQUAL "precompile")
    add_test(NAME example_precompile_clean
      COMMAND ${CMAKE_COMMAND} -E rm -rf ${SJ_EXAMPLE_DIR}/deploy.db ${SJ_EXAMPLE_DIR}/deploy.db-wal
              ${SJ_EXAMPLE_DIR}/deploy.db-shm ${SJ_EXAMPLE_DIR}/deploy.db-sjlock)
    set_tests_properties(example_precompile_clean PROPERTIES FIXTURES_SETUP example_deploy_store)
    add_test(NAME example_precompile COMMAND example_precompile ${SJ_EXAMPLE_MODEL} ${SJ_EXAMPLE_DIR}/deploy.db)
    set_tests_properties(example_precompile PROPERTIES FIXTURES_SETUP example_deploy_store
      DEPENDS example_precompile_clean)
  elseif(name STREQUAL "generate")
    # Greedy generation from exported LM pairs (tools/export_generate.py):
    # the tokens torch's generate() picked, then a second process that finds
    # every bucket in the store.
    file(GLOB lm_dirs ${PROJECT_SOURCE_DIR}/tests/data/generate/*_lm_torchscript)
    foreach(dir ${lm_dirs})
      get_filename_component(lm ${dir} NAME)
      file(READ ${dir}/manifest.json mf)
      foreach(key prompt tokens)
        string(JSON n LENGTH "${mf}" ${key})
        math(EXPR last "${n} - 1")
        set(${key} "")
        foreach(i RANGE ${last})
          string(JSON v GET "${mf}" ${key} ${i})
          list(APPEND ${key} ${v})
        endforeach()
        list(JOIN ${key} "," ${key})
      endforeach()
      string(JSON new_tokens GET "${mf}" new_tokens)
      set(store ${SJ_EXAMPLE_DIR}/generate_${lm}.db)
      set(args ${dir}/prefill.onnx ${dir}/step.onnx ${store} ${prompt} ${new_tokens} ${tokens})
      add_test(NAME example_generate_${lm}_clean
        COMMAND ${CMAKE_COMMAND} -E rm -rf ${store} ${store}-wal ${store}-shm ${store}-sjlock)
      add_test(NAME example_generate_${lm} COMMAND example_generate ${args})
      add_test(NAME example_generate_${lm}_warm COMMAND example_generate ${args})
      set_tests_properties(example_generate_${lm}_clean PROPERTIES FIXTURES_SETUP gen_${lm})
      set_tests_properties(example_generate_${lm} PROPERTIES FIXTURES_REQUIRED gen_${lm}
        FIXTURES_SETUP gen_${lm}_store PASS_REGULAR_EXPRESSION "step buckets: [1-9][0-9]* compiled")
      set_tests_properties(example_generate_${lm}_warm PROPERTIES FIXTURES_REQUIRED gen_${lm}_store
        PASS_REGULAR_EXPRESSION "step buckets: 0 compiled, [1-9][0-9]* from the store")
      set_tests_properties(example_generate_${lm} example_generate_${lm}_warm PROPERTIES
        LABELS example TIMEOUT 120)
    endforeach()
    continue()
  else()
    add_test(NAME example_${name} COMMAND example_${name} ${SJ_EXAMPLE_MODEL} ${SJ_EXAMPLE_DIR}/${name}.db)
  endif()
  set_tests_properties(example_${name} PROPERTIES LABELS example TIMEOUT 120)
endforeach()

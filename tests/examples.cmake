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
  else()
    add_test(NAME example_${name} COMMAND example_${name} ${SJ_EXAMPLE_MODEL} ${SJ_EXAMPLE_DIR}/${name}.db)
  endif()
  set_tests_properties(example_${name} PROPERTIES LABELS example TIMEOUT 120)
endforeach()

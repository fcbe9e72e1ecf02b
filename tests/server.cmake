# serve --listen (server/): a curl-driven protocol test, and tritonclient
# from PyPI in a venv the project's script makes (scripts/server-test-venv.sh).
find_program(SJ_CURL curl)
find_program(SJ_BASH bash)
if(SJ_CURL AND SJ_BASH)
  add_test(NAME server_http COMMAND ${SJ_BASH} ${PROJECT_SOURCE_DIR}/tests/server_http.sh
    $<TARGET_FILE:shapejit_cli> ${PROJECT_SOURCE_DIR}/examples/models ${PROJECT_BINARY_DIR}/server_http)
  set_tests_properties(server_http PROPERTIES TIMEOUT 150 LABELS server)
  # Issue 29's limits, one test per section so each runs (and fails) alone.
  foreach(section values memory headers sigterm store weights)
    add_test(NAME server_limits_${section} COMMAND ${SJ_BASH} ${PROJECT_SOURCE_DIR}/tests/server_limits.sh
      $<TARGET_FILE:shapejit_cli> ${PROJECT_SOURCE_DIR}/examples/models
      ${PROJECT_BINARY_DIR}/server_limits_${section} ${section})
    set_tests_properties(server_limits_${section} PROPERTIES TIMEOUT 120 LABELS server)
  endforeach()
else()
  message(WARNING "shapejit: curl or bash not found: the server_http test is not registered "
                  "(scripts/install-deps.sh installs curl)")
endif()

set(SJ_SERVER_VENV ${PROJECT_BINARY_DIR}/venv-server-tests)
add_test(NAME server_venv COMMAND ${PROJECT_SOURCE_DIR}/scripts/server-test-venv.sh ${SJ_SERVER_VENV})
set_tests_properties(server_venv PROPERTIES TIMEOUT 300 LABELS server FIXTURES_SETUP server_venv)
add_test(NAME server_tritonclient COMMAND ${SJ_SERVER_VENV}/bin/python
  ${PROJECT_SOURCE_DIR}/tests/server_tritonclient.py $<TARGET_FILE:shapejit_cli>
  ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/server_tritonclient)
# The timeout is a hang guard only: on a loaded machine the warm-up of ten
# models (BERT and GPT-2 among them) took longer than 240 s, and the
# whole test 726 s beside a busy loop and other builds.
set_tests_properties(server_tritonclient PROPERTIES TIMEOUT 1500 LABELS server FIXTURES_REQUIRED server_venv)
add_test(NAME server_readme COMMAND ${SJ_SERVER_VENV}/bin/python
  ${PROJECT_SOURCE_DIR}/tests/server_readme.py $<TARGET_FILE:shapejit_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(server_readme PROPERTIES TIMEOUT 150 LABELS server FIXTURES_REQUIRED server_venv)

# deploy/: the KServe manifests parse and agree with the Dockerfile, and the
# ServingRuntime's args serve a model here (PyYAML: Debian python3-yaml;
# skipped without it).
find_program(SJ_PYTHON3 python3)
if(SJ_PYTHON3)
  add_test(NAME deploy_kserve COMMAND ${SJ_PYTHON3} ${PROJECT_SOURCE_DIR}/tests/deploy_kserve.py
    $<TARGET_FILE:shapejit_cli> ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/deploy_kserve)
  set_tests_properties(deploy_kserve PROPERTIES TIMEOUT 120 LABELS server SKIP_RETURN_CODE 77)
endif()

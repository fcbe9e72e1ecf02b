# Installs the build and compiles a consumer against it (find_package and pkg-config).
if(NOT SJ_SANITIZE)
  add_test(NAME packaging COMMAND ${PROJECT_SOURCE_DIR}/tests/packaging/check.sh
    ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
  set_tests_properties(packaging PROPERTIES TIMEOUT 300)
endif()

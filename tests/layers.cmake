# The layer check (docs/ARCHITECTURE.md "Layers"): no object file of the
# library uses a symbol from a layer above it or beside it. The objects are
# read with nm after the build (tests/check_layers.sh); the rules are
# tests/layer_rules.txt.
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/layers_objects.txt
  CONTENT "$<JOIN:$<TARGET_OBJECTS:sj_objects>,\n>\n")
add_test(NAME layers COMMAND sh ${PROJECT_SOURCE_DIR}/tests/check_layers.sh ${CMAKE_NM}
  ${PROJECT_BINARY_DIR}/layers_objects.txt)
set_tests_properties(layers PROPERTIES LABELS headers)
# The same rules over the includes: a header edge leaves no symbol to see.
add_test(NAME layer_headers COMMAND sh ${PROJECT_SOURCE_DIR}/tests/check_headers.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(layer_headers PROPERTIES LABELS headers)
# Names: a library symbol is exported (sj_) or internal (sj__), nothing between.
add_test(NAME internal_names COMMAND sh ${PROJECT_SOURCE_DIR}/tests/check_internal_names.sh ${CMAKE_NM}
  ${PROJECT_BINARY_DIR}/layers_objects.txt $<TARGET_FILE:shapejit>)
set_tests_properties(internal_names PROPERTIES LABELS headers)
# The clients (cli/, server/, python/src/, serve/) include public headers only.
add_test(NAME client_headers COMMAND sh ${PROJECT_SOURCE_DIR}/tests/check_client_headers.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(client_headers PROPERTIES LABELS headers)

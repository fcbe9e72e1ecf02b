# ONNX protobuf bindings, generated at build time from Debian's onnx.proto
# (libonnx-dev) so the checkout never carries generated code. The generated
# file is compiled without our warning flags: it is not our code.
set(SJ_ONNX_GEN_DIR ${PROJECT_BINARY_DIR}/formats/onnx/gen)
get_filename_component(SJ_ONNX_PROTO_DIR ${SJ_ONNX_PROTO} DIRECTORY)
file(MAKE_DIRECTORY ${SJ_ONNX_GEN_DIR})
add_custom_command(
  OUTPUT ${SJ_ONNX_GEN_DIR}/onnx.pb-c.c ${SJ_ONNX_GEN_DIR}/onnx.pb-c.h
  COMMAND ${SJ_PROTOC_C} --c_out=${SJ_ONNX_GEN_DIR} -I${SJ_ONNX_PROTO_DIR} ${SJ_ONNX_PROTO}
  DEPENDS ${SJ_ONNX_PROTO}
  COMMENT "protoc-c: generating ONNX protobuf bindings from ${SJ_ONNX_PROTO}"
  VERBATIM)
list(APPEND SJ_GENERATED_SOURCES ${SJ_ONNX_GEN_DIR}/onnx.pb-c.c ${SJ_ONNX_GEN_DIR}/onnx.pb-c.h)
list(APPEND SJ_EXTRA_INCLUDES ${SJ_ONNX_GEN_DIR})

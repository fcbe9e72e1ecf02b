# The HTTP endpoint (server/): above the library, beside the CLI, which
# links it for `shapejit serve --listen`. libmicrohttpd and jansson are
# found in the top-level CMakeLists.txt with the other dependencies.
file(GLOB SJ_SERVER_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/server/*.c)
add_library(shapejit_server STATIC ${SJ_SERVER_SOURCES})
target_compile_options(shapejit_server PRIVATE ${SJ_WARNINGS})
target_compile_definitions(shapejit_server PRIVATE _GNU_SOURCE)
target_include_directories(shapejit_server PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(shapejit_server PUBLIC shapejit_serve shapejit_client_util shapejit_static PkgConfig::MHD PkgConfig::JANSSON)
if(SJ_SANITIZE)
  target_compile_options(shapejit_server PRIVATE ${SJ_SANITIZE_FLAGS})
endif()

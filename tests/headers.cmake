# Public headers: each compiles on its own (C11 and, where a C++ compiler is
# installed, C++17) under the project's warnings; the umbrella header
# shapejit.h includes every header of the stable tier (include/shapejit/*.h)
# and none of the extension tier (include/shapejit/ext/*.h).
if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode (cmake -DINCLUDE_DIR=... -P headers.cmake): the umbrella check.
  file(READ "${INCLUDE_DIR}/shapejit.h" umbrella)
  file(GLOB headers RELATIVE "${INCLUDE_DIR}" "${INCLUDE_DIR}/shapejit/*.h")
  foreach(h ${headers})
    string(FIND "${umbrella}" "#include \"${h}\"" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "include/shapejit.h does not include ${h}")
    endif()
  endforeach()
  if(umbrella MATCHES "#include \"shapejit/ext/")
    message(FATAL_ERROR "include/shapejit.h includes an extension-tier header")
  endif()
  # The stable tier stands on its own: none of its headers includes ext/.
  foreach(h ${headers})
    file(READ "${INCLUDE_DIR}/${h}" text)
    if(text MATCHES "#include \"shapejit/ext/")
      message(FATAL_ERROR "${h} is in the stable tier but includes an extension-tier header")
    endif()
  endforeach()
  return()
endif()

set(SJ_HEADER_DIR ${PROJECT_BINARY_DIR}/header_tests)
file(MAKE_DIRECTORY ${SJ_HEADER_DIR})
find_program(SJ_CXX_FOR_HEADERS NAMES c++ g++ clang++)
file(GLOB sj_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/include/shapejit/*.h ${PROJECT_SOURCE_DIR}/include/shapejit/ext/*.h)
foreach(h shapejit.h ${sj_public_headers})
  string(REGEX REPLACE "[/.]" "_" name "${h}")
  # Included twice: the include guard is part of what is checked.
  file(CONFIGURE OUTPUT ${SJ_HEADER_DIR}/${name}.c
    CONTENT "#include \"${h}\"\n#include \"${h}\"\nint sj_header_test_${name};\n")
  add_test(NAME header_c_${name} COMMAND ${CMAKE_C_COMPILER} -std=c11 -pedantic ${SJ_WARNINGS}
    -fsyntax-only -I${PROJECT_SOURCE_DIR}/include ${SJ_HEADER_DIR}/${name}.c)
  set_tests_properties(header_c_${name} PROPERTIES LABELS headers)
  if(SJ_CXX_FOR_HEADERS)
    add_test(NAME header_cxx_${name} COMMAND ${SJ_CXX_FOR_HEADERS} -std=c++17 -pedantic ${SJ_WARNINGS}
      -fsyntax-only -x c++ -I${PROJECT_SOURCE_DIR}/include ${SJ_HEADER_DIR}/${name}.c)
    set_tests_properties(header_cxx_${name} PROPERTIES LABELS headers)
  endif()
endforeach()
add_test(NAME header_umbrella_complete COMMAND ${CMAKE_COMMAND}
  -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(header_umbrella_complete PROPERTIES LABELS headers)

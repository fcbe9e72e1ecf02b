# Export control: libshapejit.so exports exactly the functions the public
# headers declare with SJ_API (both tiers), and every function a header
# declares carries SJ_API. Internals and the protobuf-c ONNX code (onnx__*)
# stay hidden (-fvisibility=hidden), so they cannot clash with another copy
# in the same process.
if(CMAKE_SCRIPT_MODE_FILE)
  # Script mode (cmake -DLIB=... -DNM=... -DINCLUDE_DIR=... -P exports.cmake).
  file(GLOB_RECURSE headers "${INCLUDE_DIR}/*.h")
  set(declared "")
  set(unmarked "")
  foreach(h ${headers})
    file(READ "${h}" text)
    # A declaration starts a line: return type, then sj_NAME(.
    string(REGEX MATCHALL "\n[A-Za-z_][^\n(;=]*[ *]sj_[A-Za-z0-9_]+\\(" decls "\n${text}")
    foreach(d ${decls})
      string(REGEX MATCH "sj_[A-Za-z0-9_]+\\($" call "${d}")
      string(REGEX REPLACE "\\($" "" name "${call}")
      if(d MATCHES "^\n(typedef|#)")
        continue()
      elseif(d MATCHES "^\nSJ_API ")
        list(APPEND declared ${name})
      else()
        list(APPEND unmarked "${name} (${h})")
      endif()
    endforeach()
  endforeach()
  if(unmarked)
    list(JOIN unmarked "\n  " text)
    message(FATAL_ERROR "public functions declared without SJ_API:\n  ${text}")
  endif()
  execute_process(COMMAND "${NM}" -D --defined-only "${LIB}" RESULT_VARIABLE rc
    OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed: ${err}")
  endif()
  string(REGEX MATCHALL "[^\n]+" lines "${out}")
  set(exported "")
  foreach(l ${lines})
    # "ADDRESS TYPE NAME". The linker's own markers of the data segment's
    # end are in every shared object; nothing else is let through.
    if(l MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ ]+)$")
      set(sym "${CMAKE_MATCH_1}")
      if(NOT sym MATCHES "^(__bss_start|_edata|_end)$")
        list(APPEND exported ${sym})
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES declared)
  list(REMOVE_DUPLICATES exported)
  set(extra ${exported})
  list(REMOVE_ITEM extra ${declared})
  set(missing ${declared})
  list(REMOVE_ITEM missing ${exported})
  list(LENGTH declared n_declared)
  list(LENGTH exported n_exported)
  if(extra OR missing)
    list(JOIN extra " " extra_text)
    list(JOIN missing " " missing_text)
    message(FATAL_ERROR "libshapejit.so exports ${n_exported} symbols, the headers declare "
      "${n_declared} functions.\nExported but in no header: ${extra_text}\n"
      "Declared but not exported: ${missing_text}")
  endif()
  message(STATUS "libshapejit.so exports the ${n_exported} functions the headers declare")
  return()
endif()

add_test(NAME exported_symbols COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:shapejit>
  -DNM=${CMAKE_NM} -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(exported_symbols PROPERTIES LABELS headers)

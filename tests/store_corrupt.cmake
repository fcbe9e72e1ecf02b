# A store file whose SQLite pages are damaged (header intact): `shapejit run`
# exits 1 saying once that the store is not valid, naming the store once and
# how to go on, and `shapejit store ls` says the same.
#
# In script mode (cmake -P) this file runs the case: make a store, damage
# it, check both commands' messages.

if(CMAKE_SCRIPT_MODE_FILE)
  file(REMOVE_RECURSE "${DIR}")
  file(MAKE_DIRECTORY "${DIR}")
  set(db "${DIR}/s.db")
  execute_process(COMMAND "${SJ_CLI}" run "${MODEL}" --rows 3 --store "${db}" --out "${DIR}/out"
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "making the store failed: ${err}")
  endif()
  file(SIZE "${db}" size)
  if(size LESS 8192)
    message(FATAL_ERROR "the store is only ${size} bytes; nothing to damage past page 1")
  endif()
  # every byte after the first page and a bit becomes 'Z'
  file(REMOVE "${db}-wal" "${db}-shm")
  execute_process(COMMAND sh -c "head -c $(($2 - 4196)) /dev/zero | tr '\\0' Z | dd of=\"$1\" bs=4196 seek=1 conv=notrunc 2>/dev/null"
    sh "${db}" ${size} RESULT_VARIABLE drc)
  file(SIZE "${db}" size2)
  if(NOT drc EQUAL 0 OR NOT size2 EQUAL size)
    message(FATAL_ERROR "damaging the store failed (${drc}; ${size} -> ${size2} bytes)")
  endif()
  foreach(cmd "run;${MODEL};--rows;3;--store;${db};--out;${DIR}/out2" "store;ls;--store;${db}")
    execute_process(COMMAND "${SJ_CLI}" ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    set(report "shapejit ${cmd}\n--- exit: ${rc}\n--- stderr:\n${err}")
    if(NOT rc EQUAL 1)
      message(FATAL_ERROR "expected exit status 1\n${report}")
    endif()
    if(NOT err MATCHES "s.db is not a valid shapejit store \\(database disk image is malformed.*remove it or use another store")
      message(FATAL_ERROR "stderr does not say the store is damaged\n${report}")
    endif()
    string(REGEX MATCHALL "s\\.db" named "${err}")
    list(LENGTH named times)
    if(cmd MATCHES "^run" AND NOT err MATCHES "--store none runs without one")
      message(FATAL_ERROR "run does not say how to go on without a store\n${report}")
    endif()
    if(NOT times EQUAL 1 OR err MATCHES "rebuilding")
      message(FATAL_ERROR "the store is named ${times} times, or called an old schema\n${report}")
    endif()
  endforeach()
  return()
endif()

add_test(NAME store_corrupt_file_message
  COMMAND ${CMAKE_COMMAND} -DSJ_CLI=$<TARGET_FILE:shapejit_cli>
    -DMODEL=${PROJECT_SOURCE_DIR}/tests/data/models/mlp_matmul.onnx
    -DDIR=${PROJECT_BINARY_DIR}/cli_tests/store_corrupt -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(store_corrupt_file_message PROPERTIES TIMEOUT 60)

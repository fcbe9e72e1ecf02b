# The fake CUDA driver (tests/fake_cuda/): a shared library standing in for
# libcuda.so.1, so the device-loss path runs on machines without a GPU.
# It needs only the toolkit's cuda.h; test_cuda_fault and test_cuda_share open
# the device on it.
if(SJ_HAVE_CUDA)
  add_library(sj_fake_cuda SHARED ${PROJECT_SOURCE_DIR}/tests/fake_cuda/fake_cuda.c)
  target_include_directories(sj_fake_cuda PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_options(sj_fake_cuda PRIVATE ${SJ_WARNINGS})
  target_link_libraries(sj_fake_cuda PRIVATE Threads::Threads)
  if(SJ_SANITIZE)
    target_compile_options(sj_fake_cuda PRIVATE ${SJ_SANITIZE_FLAGS})
    target_link_options(sj_fake_cuda PRIVATE ${SJ_SANITIZE_FLAGS})
  endif()
  target_compile_definitions(test_cuda_fault PRIVATE SJ_FAKE_CUDA="$<TARGET_FILE:sj_fake_cuda>")
  target_include_directories(test_cuda_fault PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  add_dependencies(test_cuda_fault sj_fake_cuda)
  # test_cuda_share: kernel modules loaded once per device (issue #33)
  target_compile_definitions(test_cuda_share PRIVATE SJ_FAKE_CUDA="$<TARGET_FILE:sj_fake_cuda>")
  target_include_directories(test_cuda_share PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
  add_dependencies(test_cuda_share sj_fake_cuda)
endif()
find_program(SJ_CURL curl)
if(SJ_HAVE_CUDA AND SJ_CURL)
  add_test(NAME cuda_fault_cli COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cuda_fault_cli.sh
    $<TARGET_FILE:shapejit_cli> $<TARGET_FILE:sj_fake_cuda> ${PROJECT_SOURCE_DIR}/examples/models
    ${PROJECT_BINARY_DIR}/cuda_fault_cli)
  set_tests_properties(cuda_fault_cli PROPERTIES TIMEOUT 300)
endif()

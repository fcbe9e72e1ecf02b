# CI machines differ in CPU: one has AVX-512, the next may not. The host
# compiler's tests run once more under qemu's user-mode emulation of a CPU
# without AVX-512 (an AMD EPYC Rome: AVX2 and FMA, no AVX-512), whose
# CPUID is what LLVM's host detection then reads. That keeps "holds on any
# x86-64 CPU" checked on every run, whatever CPU the run happens to get.
# Not in sanitizer builds: ASan's shadow memory does not map under qemu-user.
find_program(SJ_QEMU_X86_64 qemu-x86_64)
if(SJ_SANITIZE)
elseif(SJ_QEMU_X86_64)
  add_test(NAME cpu_without_avx512_host_compiler
    COMMAND ${SJ_QEMU_X86_64} -cpu EPYC-Rome-v1 $<TARGET_FILE:test_host_compiler>)
  set_tests_properties(cpu_without_avx512_host_compiler PROPERTIES
    LABELS cpu TIMEOUT 900 ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
  # The fused attention kernel is C built in clones for AVX-512, AVX2+FMA
  # and baseline x86-64, the one this CPU runs picked at load: the other two
  # run here, against test_attention_fuse's double-precision reference.
  foreach(cpu EPYC-Rome-v1 qemu64)
    add_test(NAME cpu_${cpu}_attention_kernel
      COMMAND ${SJ_QEMU_X86_64} -cpu ${cpu} $<TARGET_FILE:test_attention_fuse> test_kernel_reference)
    set_tests_properties(cpu_${cpu}_attention_kernel PROPERTIES
      LABELS cpu TIMEOUT 300 ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
    # The packed GEMM picks its level from the artifact, lowered to what the
    # CPU has: every level asked for on CPUs without AVX-512 (and without
    # AVX2 on qemu64) runs, correctly.
    add_test(NAME cpu_${cpu}_gemm_kernel
      COMMAND ${SJ_QEMU_X86_64} -cpu ${cpu} $<TARGET_FILE:test_host_gemm> test_kernel_any_cpu)
    set_tests_properties(cpu_${cpu}_gemm_kernel PROPERTIES
      LABELS cpu TIMEOUT 300 ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
  endforeach()
else()
  message(FATAL_ERROR "shapejit: missing test dependency qemu-x86_64 (Debian: qemu-user); "
                      "run scripts/install-deps.sh")
endif()

/* What a runtime-only build (cmake -DSJ_COMPILERS=OFF, the deploy artifact
 * for GPU nodes) says where host code would be compiled or loaded: it links
 * no LLVM, so it has neither the host's code generator nor ORC, the linker
 * host object code is loaded with. Not installed. */
#ifndef SJ_RUNTIME_RUNTIME_ONLY_H
#define SJ_RUNTIME_RUNTIME_ONLY_H

#define SJ_RUNTIME_ONLY_NO_HOST_CODE                                                               \
    "this runtime-only build (SJ_COMPILERS=OFF) has no LLVM, so it neither compiles nor loads "    \
    "host code; host artifacts run on a full build. Use --backend cuda (GPU artifacts "            \
    "precompiled into the store) or --backend interp"

#endif

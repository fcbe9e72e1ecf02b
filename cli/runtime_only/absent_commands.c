/* The commands a runtime-only build (SJ_COMPILERS=OFF) leaves out, each
 * saying so and what to do instead. That build is one binary that needs
 * only glibc and the NVIDIA driver: the HTTP endpoint's libraries
 * (libmicrohttpd with GnuTLS, jansson) would make it need more, and the
 * benchmark suite times the host backend, which needs LLVM. */
#include "cli/cli.h"

int cli_cmd_serve_listen(int argc, char **argv);

int cli_cmd_serve_listen(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("serve", "--listen: this runtime-only build (SJ_COMPILERS=OFF) has no HTTP "
                             "endpoint; serve over HTTP from a full build, or replay a stream here "
                             "(--trace, --synthetic)");
}

int cli_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("bench", "this runtime-only build (SJ_COMPILERS=OFF) has no host backend to "
                             "time (it needs LLVM); run the benchmark suite from a full build");
}

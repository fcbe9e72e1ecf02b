/* `serve --listen` in a runtime-only build (SJ_COMPILERS=OFF): that build is
 * one binary that needs only glibc and the NVIDIA driver, and the HTTP
 * endpoint's libraries (libmicrohttpd with GnuTLS, jansson) would make it
 * need more, so the endpoint is left out and says so. */
#include "cli/cli.h"

int cli_cmd_serve_listen(int argc, char **argv);

int cli_cmd_serve_listen(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return cli_fail("serve", "--listen: this runtime-only build (SJ_COMPILERS=OFF) has no HTTP "
                             "endpoint; serve over HTTP from a full build, or replay a stream here "
                             "(--trace, --synthetic)");
}

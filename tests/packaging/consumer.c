/* Links against the installed library through find_package and checks the
 * headers and the library agree on the version. */
#include <shapejit.h>
#include <stdio.h>

int main(void) {
    sj_ctx *ctx;
    if (sj_ctx_create(NULL, &ctx) != SJ_OK) return 1;
    sj_ctx_destroy(ctx);
    if (sj_version_number() != SJ_VERSION_NUMBER) {
        fprintf(stderr, "header %d vs library %u\n", SJ_VERSION_NUMBER, sj_version_number());
        return 1;
    }
    printf("shapejit %s\n", sj_version_string());
    return 0;
}

/* shapejit command-line entry point (skeleton; commands land per issue). */
#include <stdio.h>
#include <string.h>

#include "shapejit/common.h"

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--version"))) {
        printf("shapejit %s\n", sj_version_string());
        return 0;
    }
    fprintf(stderr, "usage: shapejit COMMAND [...]\n");
    return 2;
}

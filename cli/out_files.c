/* All-or-nothing output files for commands that write tensors. */
#include "cli/cli.h"
#include "client_util/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool cli_output_path(const char *dir, const char *name, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s/", dir);
    if (n < 0 || (size_t)n >= cap) return false;
    size_t o = (size_t)n;
    for (size_t i = 0; name[i]; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || (c == '.' && i > 0);
        if (o + 1 >= cap) return false;
        buf[o++] = ok ? c : '_';
    }
    return snprintf(buf + o, cap - o, ".npy") < (int)(cap - o);
}

/* mkdir -p */
static bool make_dirs(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) return false;
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST) return false;
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int cli_write_outputs(const char *cmd, sj_ctx *ctx, const char *dir, int n,
                      const char *const *names, const sj_tensor *tensors) {
    if (!make_dirs(dir)) return cli_fail(cmd, "cannot create output directory %s: %s", dir, strerror(errno));
    char(*final)[4096] = calloc((size_t)n + 1, sizeof *final);
    char(*tmp)[4096 + 32] = calloc((size_t)n + 1, sizeof *tmp);
    int rc = CLI_EXIT_OK, written = 0;
    if (!final || !tmp) rc = cli_fail(cmd, "out of memory");
    for (int i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        if (!cli_output_path(dir, names[i], final[i], sizeof final[i]))
            rc = cli_fail(cmd, "output path for '%s' in %s is too long", names[i], dir);
        /* each is put in place by rename, which would replace a FIFO, a
         * device node or a symlink there rather than write to it */
        sj_status st = rc == CLI_EXIT_OK ? cu_check_replaceable(ctx, "--out", final[i]) : SJ_OK;
        if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
        for (int k = 0; rc == CLI_EXIT_OK && k < i; k++)
            if (!strcmp(final[k], final[i]))
                rc = cli_fail(cmd, "outputs '%s' and '%s' would both be written to %s", names[k],
                              names[i], final[i]);
    }
    /* Every file under a temporary name first, so a failure leaves none. */
    for (int i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        snprintf(tmp[i], sizeof tmp[i], "%s.pending.%ld", final[i], (long)getpid());
        sj_status st = sj_npy_write(ctx, tmp[i], &tensors[i]);
        if (st != SJ_OK) rc = cli_fail_status(cmd, ctx, st);
        else written++;
    }
    int renamed = 0;
    for (int i = 0; rc == CLI_EXIT_OK && i < n; i++) {
        if (rename(tmp[i], final[i]) != 0)
            rc = cli_fail(cmd, "cannot move %s into place: %s", final[i], strerror(errno));
        else
            renamed++;
    }
    if (rc != CLI_EXIT_OK) {
        for (int i = 0; i < renamed; i++) unlink(final[i]);
        for (int i = renamed; i < written; i++) unlink(tmp[i]);
    }
    free(final);
    free(tmp);
    return rc;
}

/* Test helper for the GPU code tests: assembles PTX with the toolkit's ptxas
 * (found at build time as SJ_PTXAS) on temporary files. Header-only, static. */
#ifndef SJ_TESTS_PTXAS_CHECK_H
#define SJ_TESTS_PTXAS_CHECK_H

#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* 1 when ptxas is available to the tests. */
static inline int sj_test_have_ptxas(void) {
#ifdef SJ_PTXAS
    return access(SJ_PTXAS, X_OK) == 0;
#else
    return 0;
#endif
}

/* Assembles `ptx` for sm_<sm>. Returns 0 when ptxas accepts it, 1 when it
 * rejects it (its output in `log`), -1 when it could not be run. */
static inline int sj_test_ptxas(const char *ptx, int sm, char *log, size_t log_len) {
    log[0] = '\0';
#ifdef SJ_PTXAS
    char src[] = "/tmp/sj_ptxas_XXXXXX", out[64], errf[64];
    int fd = mkstemp(src);
    if (fd < 0) return -1;
    size_t n = strlen(ptx);
    int ok = write(fd, ptx, n) == (ssize_t)n;
    close(fd);
    snprintf(out, sizeof out, "%s.cubin", src);
    snprintf(errf, sizeof errf, "%s.log", src);
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d", sm);
    char *argv[] = {(char *)SJ_PTXAS, arch, "-o", out, src, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = -1;
    if (ok && posix_spawn(&pid, SJ_PTXAS, &fa, NULL, argv, environ) == 0) {
        int status;
        if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
            rc = WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    posix_spawn_file_actions_destroy(&fa);
    FILE *f = fopen(errf, "r");
    if (f) {
        size_t got = fread(log, 1, log_len - 1, f);
        log[got] = '\0';
        fclose(f);
    }
    unlink(src);
    unlink(out);
    unlink(errf);
    return rc;
#else
    (void)ptx;
    (void)sm;
    (void)log_len;
    return -1;
#endif
}

#endif

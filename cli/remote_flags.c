/* The fleet tier from the command line: --remote, --remote-secret-file and
 * --remote-read-only, with the environment as the default (the library
 * reads none, so this is where $SHAPEJIT_REMOTE and $SHAPEJIT_REMOTE_SECRET
 * become configuration). */
#include "cli/serving.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


/* The secret in FILE, trailing newlines dropped: what `echo s3cret > FILE`
 * and `openssl rand -hex 32 > FILE` write. */
static int read_secret(const char *cmd, const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return cli_fail(cmd, "--remote-secret-file %s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && (sb.st_mode & (S_IRWXG | S_IRWXO)))
        fprintf(stderr,
                "shapejit %s: warning: --remote-secret-file %s is readable by others (mode %03o)\n",
                cmd, path, (unsigned)(sb.st_mode & 0777));
    size_t n = fread(buf, 1, cap, f);
    bool failed = ferror(f) != 0;
    fclose(f);
    if (failed) return cli_fail(cmd, "--remote-secret-file %s: read error", path);
    if (n == cap)
        return cli_fail(cmd, "--remote-secret-file %s: longer than %d bytes: not a secret", path,
                        CLI_SECRET_MAX);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) n--;
    buf[n] = '\0';
    if (n == 0) return cli_fail(cmd, "--remote-secret-file %s: empty", path);
    if (strlen(buf) != n) return cli_fail(cmd, "--remote-secret-file %s: holds a NUL byte", path);
    return CLI_EXIT_OK;
}

/* The tier's one warning (a likely fleet secret mismatch), on stderr;
 * user is the command's name. */
void cli_remote_print_warning(void *user, const char *message) {
    fprintf(stderr, "shapejit %s: warning: %s\n", (const char *)user, message);
}

int cli_remote_resolve(const char *cmd, const cli_remote_flags *f, const char **url_out, char *secret) {
    *url_out = NULL;
    secret[0] = '\0';
    const char *url = f->url;
    if (!url) url = getenv("SHAPEJIT_REMOTE");
    if (url && f->url && !url[0]) return cli_usage_error(cmd, "--remote needs a URL (or 'none')");
    if (!url || !url[0] || !strcmp(url, "none")) {
        if (f->secret_file || f->read_only || f->lease_ms)
            return cli_usage_error(cmd, "%s without a remote tier (--remote URL or $SHAPEJIT_REMOTE)",
                                   f->secret_file ? "--remote-secret-file"
                                   : f->read_only ? "--remote-read-only"
                                                  : "--remote-lease-ms");
        return CLI_EXIT_OK;
    }
    int rc = CLI_EXIT_OK;
    if (f->secret_file) {
        rc = read_secret(cmd, f->secret_file, secret, CLI_SECRET_MAX);
    } else {
        const char *env = getenv("SHAPEJIT_REMOTE_SECRET");
        if (env && strlen(env) > CLI_SECRET_MAX)
            rc = cli_fail(cmd, "$SHAPEJIT_REMOTE_SECRET is longer than %d bytes", CLI_SECRET_MAX);
        else if (env)
            snprintf(secret, CLI_SECRET_MAX + 1, "%s", env);
    }
    if (rc != CLI_EXIT_OK) return rc;
    *url_out = url;
    /* Said at every start: without a secret, whoever can write to the server
     * can make every node load native code of their choosing. */
    if (!secret[0])
        fprintf(stderr,
                "shapejit %s: warning: --remote without a secret: values carry a checksum, not a "
                "MAC, so anyone who can write to the server can inject code into every node; set "
                "--remote-secret-file (or $SHAPEJIT_REMOTE_SECRET) on every node\n",
                cmd);
    return rc;
}

int cli_remote_lease_ms(const char *cmd, const cli_remote_flags *f, int *out) {
    *out = SJ_REMOTE_DEFAULT_LEASE_MS;
    if (!f->lease_ms) return CLI_EXIT_OK;
    char *end;
    errno = 0;
    long long v = strtoll(f->lease_ms, &end, 10);
    if (!f->lease_ms[0] || *end || errno || v < 0 || v > SJ_REMOTE_MAX_LEASE_MS)
        return cli_usage_error(cmd, "--remote-lease-ms must be milliseconds in 0..%d (0: no leases), got '%s'",
                               SJ_REMOTE_MAX_LEASE_MS, f->lease_ms);
    *out = (int)v;
    return CLI_EXIT_OK;
}

int cli_remote_open(const char *cmd, sj_ctx *ctx, const cli_remote_flags *f, sj_remote **out) {
    *out = NULL;
    const char *url;
    char secret[CLI_SECRET_MAX + 1];
    int lease_ms;
    int rc = cli_remote_lease_ms(cmd, f, &lease_ms);
    if (rc != CLI_EXIT_OK) return rc;
    rc = cli_remote_resolve(cmd, f, &url, secret);
    if (rc == CLI_EXIT_OK && url) {
        sj_remote_config rc_cfg;
        sj_remote_config_init(&rc_cfg);
        rc_cfg.url = url;
        rc_cfg.secret = secret;
        rc_cfg.read_only = f->read_only;
        rc_cfg.lease_ms = lease_ms;
        rc_cfg.on_warning = cli_remote_print_warning;
        rc_cfg.warning_user = (void *)cmd;
        sj_status st = sj_remote_create(ctx, &rc_cfg, out); /* copies the secret */
        if (st != SJ_OK)
            rc = cli_fail(cmd, "--remote: %s", sj_ctx_last_error(ctx)[0] ? sj_ctx_last_error(ctx)
                                                                         : sj_status_str(st));
    }
    /* Not left on the stack for a core dump to carry. */
    memset(secret, 0, sizeof secret);
    __asm__ __volatile__("" : : "r"(secret) : "memory");
    return rc;
}

void cli_remote_stats_members(FILE *f, const sj_remote *r) {
    sj_remote_stats s;
    sj_remote_stats_get(r, &s);
    fprintf(f,
            "\"remote_misses\": %llu, \"remote_errors\": %llu, \"remote_timeouts\": %llu, "
            "\"remote_rejected\": %llu, \"remote_backoff_skips\": %llu, \"remote_puts\": %llu, "
            "\"remote_dropped_puts\": %llu, \"remote_foreign\": %llu, \"remote_kept_foreign\": %llu, "
            "\"remote_leases_won\": %llu, \"remote_lease_waits\": %llu, "
            "\"remote_lease_waited_hits\": %llu, \"remote_lease_waited_compiles\": %llu, "
            "\"remote_lease_errors\": %llu",
            (unsigned long long)s.misses, (unsigned long long)s.errors,
            (unsigned long long)s.timeouts, (unsigned long long)s.rejected,
            (unsigned long long)s.backoff_skips, (unsigned long long)s.puts,
            (unsigned long long)s.dropped_puts, (unsigned long long)s.foreign,
            (unsigned long long)s.kept_foreign, (unsigned long long)s.leases_won,
            (unsigned long long)s.lease_waits, (unsigned long long)s.lease_waited_hits,
            (unsigned long long)s.lease_waited_compiles, (unsigned long long)s.lease_errors);
}

void cli_remote_lease_summary(FILE *f, const sj_remote_stats *s) {
    fprintf(f,
            "leases: %llu won, %llu waited for another node (%llu got its value, %llu compiled "
            "after all), %llu errors",
            (unsigned long long)s->leases_won, (unsigned long long)s->lease_waits,
            (unsigned long long)s->lease_waited_hits, (unsigned long long)s->lease_waited_compiles,
            (unsigned long long)s->lease_errors);
}

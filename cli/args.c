/* Option parsing and the helpers every command shares. */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void vmessage(const char *cmd, const char *fmt, va_list ap) {
    fprintf(stderr, "shapejit %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_fail(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAIL;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage(cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try 'shapejit %s --help'.\n", cmd);
    return CLI_EXIT_USAGE;
}

const char *cli_printable(const char *s, char *buf, size_t cap) {
    size_t o = 0;
    for (; *s && o + 5 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

const char *cli_bytes(uint64_t bytes, char *buf, size_t cap) {
    static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%llu bytes", (unsigned long long)bytes);
    else snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

int cli_fail_status(const char *cmd, sj_ctx *ctx, sj_status st) {
    const char *msg = sj_ctx_last_error(ctx);
    return cli_fail(cmd, "%s", msg && msg[0] ? msg : sj_status_str(st));
}

int cli_stdout_done(const char *cmd, int rc) {
    /* fflush reports a write that fails now; ferror one that failed earlier
     * in a buffer already flushed (stdio keeps the flag). */
    errno = 0;
    bool lost = fflush(stdout) != 0 || ferror(stdout);
    if (!lost) return rc;
    int e = errno;
    cli_fail(cmd, "writing to stdout failed%s%s", e ? ": " : "", e ? strerror(e) : "");
    return rc == CLI_EXIT_OK ? CLI_EXIT_FAIL : rc;
}

int cli_parse_exit(cli_parse_result r) {
    return r == CLI_HELP_SHOWN ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static bool parse_int(const char *s, int64_t *out) {
    if (!s[0]) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static cli_parse_result take_value(const char *cmd, const cli_opt *o, const char *value) {
    switch (o->kind) {
    case CLI_OPT_STRING: *(const char **)o->dest = value; break;
    case CLI_OPT_INT:
        if (!parse_int(value, (int64_t *)o->dest)) {
            cli_usage_error(cmd, "%s expects an integer, got '%s'", o->name, value);
            return CLI_BAD_USAGE;
        }
        break;
    case CLI_OPT_LIST: {
        cli_list *l = o->dest;
        if (l->n == CLI_LIST_MAX) {
            cli_usage_error(cmd, "%s given more than %d times", o->name, CLI_LIST_MAX);
            return CLI_BAD_USAGE;
        }
        l->items[l->n++] = value;
        break;
    }
    case CLI_OPT_FLAG: break;
    }
    return CLI_PARSED;
}

cli_parse_result cli_parse(const char *cmd, const char *usage, int argc, char **argv,
                           const cli_opt *opts, int n_opts, const char **pos, int min_pos,
                           int max_pos, int *n_pos) {
    *n_pos = 0;
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_positional || a[0] != '-' || !a[1]) {
            if (*n_pos == max_pos) {
                cli_usage_error(cmd, "unexpected argument '%s'", a);
                return CLI_BAD_USAGE;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_positional = true;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return CLI_HELP_SHOWN;
        }
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = NULL;
        for (int k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == name_len && !strncmp(opts[k].name, a, name_len)) o = &opts[k];
        if (!o) {
            cli_usage_error(cmd, "unknown option '%.*s'", (int)name_len, a);
            return CLI_BAD_USAGE;
        }
        if (o->kind == CLI_OPT_FLAG) {
            if (eq) {
                cli_usage_error(cmd, "%s takes no value", o->name);
                return CLI_BAD_USAGE;
            }
            *(bool *)o->dest = true;
            continue;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value) {
            if (i + 1 >= argc) {
                cli_usage_error(cmd, "%s needs a value", o->name);
                return CLI_BAD_USAGE;
            }
            value = argv[++i];
        }
        cli_parse_result r = take_value(cmd, o, value);
        if (r != CLI_PARSED) return r;
    }
    if (*n_pos < min_pos) {
        const char *eol = strchr(usage, '\n');
        cli_usage_error(cmd, "missing argument%s; %.*s", min_pos - *n_pos > 1 ? "s" : "",
                        (int)(eol ? eol - usage : (ptrdiff_t)strlen(usage)), usage);
        return CLI_BAD_USAGE;
    }
    return CLI_PARSED;
}

sj_ctx *cli_ctx_create(const char *cmd) {
    sj_ctx *ctx;
    sj_status st = sj_ctx_create(NULL, &ctx);
    if (st != SJ_OK) {
        cli_fail(cmd, "cannot create a context: %s", sj_status_str(st));
        return NULL;
    }
    return ctx;
}

/* --dim NAME=VALUE into *fixed, VALUE a size or a tie to the dynamic dim
 * (`total=past+1`); the name is copied (malloc), the caller frees it. */
static int parse_dim(const char *cmd, const char *arg, const char *dyn, sj_dim_value *fixed) {
    const char *eq = strrchr(arg, '=');
    int64_t v;
    if (!eq || eq == arg || sj_dim_parse(eq + 1, dyn, &v) != SJ_OK)
        return cli_usage_error(cmd,
                               "--dim expects NAME=VALUE with VALUE >= 1, or NAME=[K*]%s[+C] tying "
                               "it to the dynamic dim, got '%s'",
                               dyn ? dyn : "DYNAMIC", arg);
    size_t n = (size_t)(eq - arg);
    char *name = malloc(n + 1);
    if (!name) return cli_fail(cmd, "out of memory");
    memcpy(name, arg, n);
    name[n] = '\0';
    fixed->name = name;
    fixed->value = v;
    return CLI_EXIT_OK;
}

/* Fills in the --dynamic-axis part of o and loads. */
static int load_with(const char *cmd, sj_ctx *ctx, const char *path, const cli_model_flags *f,
                     sj_model_options *o, sj_graph **out) {
    if (f->dynamic_axis) {
        const char *colon = strrchr(f->dynamic_axis, ':');
        int64_t axis;
        if (!colon || colon == f->dynamic_axis || !parse_int(colon + 1, &axis) || axis < 0 ||
            axis >= SJ_MAX_RANK)
            return cli_usage_error(cmd, "--dynamic-axis expects INPUT:AXIS (AXIS 0..%d), got '%s'",
                                   SJ_MAX_RANK - 1, f->dynamic_axis);
        size_t n = (size_t)(colon - f->dynamic_axis);
        char *name = malloc(n + 1);
        if (!name) return cli_fail(cmd, "out of memory");
        memcpy(name, f->dynamic_axis, n);
        name[n] = '\0';
        o->dynamic_input = name;
        o->dynamic_axis = (int)axis;
    }
    sj_status st = sj_model_load(ctx, path, o, out);
    free((char *)o->dynamic_input);
    return st == SJ_OK ? CLI_EXIT_OK : cli_fail_status(cmd, ctx, st);
}

int cli_load_model(const char *cmd, sj_ctx *ctx, const char *path, const cli_model_flags *f,
                   sj_graph **out) {
    sj_model_options o;
    sj_model_options_init(&o);
    o.dynamic_name = f->dynamic;
    sj_dim_value fixed[CLI_LIST_MAX];
    o.fixed_dims = fixed;
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < f->dims.n && rc == CLI_EXIT_OK; i++) {
        rc = parse_dim(cmd, f->dims.items[i], f->dynamic, &fixed[i]);
        if (rc == CLI_EXIT_OK) o.n_fixed_dims++;
    }
    if (rc == CLI_EXIT_OK) rc = load_with(cmd, ctx, path, f, &o, out);
    for (int i = 0; i < o.n_fixed_dims; i++) free((char *)fixed[i].name);
    return rc;
}

double cli_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

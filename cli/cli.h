/* Shared pieces of the shapejit command-line tool: the command table entry,
 * option parsing, messages with the CLI's exit codes, model loading.
 * Exit status (docs/cli.md): 0 success, 1 failure (message on stderr naming what
 * failed), 2 usage error. */
#ifndef SJ_CLI_H
#define SJ_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "shapejit/common.h"
#include "shapejit/graph.h"
#include "shapejit/model.h"
#include "shapejit/tensor.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* One row of the command table in main.c. fn gets argv[0] = the command's
 * name and handles its own --help. */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
} cli_command;

typedef enum cli_opt_kind {
    CLI_OPT_FLAG,   /* bool *dest, set to true */
    CLI_OPT_STRING, /* const char **dest, last one wins */
    CLI_OPT_INT,    /* int64_t *dest, decimal, must fit */
    CLI_OPT_LIST    /* cli_list *dest, repeatable */
} cli_opt_kind;

#define CLI_LIST_MAX 64
typedef struct cli_list {
    const char *items[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_opt {
    const char *name; /* "--rows"; takes "--rows 5" and "--rows=5" */
    cli_opt_kind kind;
    void *dest;
} cli_opt;

typedef enum cli_parse_result { CLI_PARSED, CLI_HELP_SHOWN, CLI_BAD_USAGE } cli_parse_result;

/* Parses argv[1..argc): the options in opts (and --help, which prints
 * `usage` to stdout) and between min_pos and max_pos positional arguments
 * into pos. On a usage error prints the reason and a hint to stderr. */
cli_parse_result cli_parse(const char *cmd, const char *usage, int argc, char **argv,
                           const cli_opt *opts, int n_opts, const char **pos, int min_pos,
                           int max_pos, int *n_pos);
/* Exit status for a result other than CLI_PARSED. */
int cli_parse_exit(cli_parse_result r);

/* s with control bytes (and DEL) written as \xHH, so a name or a line from
 * a file cannot drive the terminal; cut to fit buf. Returns buf. */
const char *cli_printable(const char *s, char *buf, size_t cap);
/* "512 bytes", "12.3 MiB", "1.5 GiB" (binary units). Returns buf. */
const char *cli_bytes(uint64_t bytes, char *buf, size_t cap);

/* "shapejit CMD: message" on stderr; return CLI_EXIT_FAIL / CLI_EXIT_USAGE. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cli_fail with the context's last error (or the status string when empty). */
int cli_fail_status(const char *cmd, sj_ctx *ctx, sj_status st);
/* rc, or CLI_EXIT_FAIL with a message when what was printed to stdout did
 * not all reach it (a full disk, /dev/full, a closed pipe): a command's
 * answer that was lost must not exit 0. main calls it after every command;
 * one that prints and then does more calls it where the output ends. */
int cli_stdout_done(const char *cmd, int rc);

/* The options every command that reads a MODEL accepts. */
typedef struct cli_model_flags {
    const char *dynamic;      /* --dynamic NAME */
    const char *dynamic_axis; /* --dynamic-axis INPUT:AXIS */
    cli_list dims;            /* --dim NAME=VALUE, repeatable */
} cli_model_flags;
#define CLI_MODEL_OPTS(f)                                                                          \
    {"--dynamic", CLI_OPT_STRING, &(f).dynamic},                                                   \
        {"--dynamic-axis", CLI_OPT_STRING, &(f).dynamic_axis}, {"--dim", CLI_OPT_LIST, &(f).dims}
#define CLI_MODEL_USAGE "[--dynamic NAME] [--dynamic-axis INPUT:AXIS] [--dim NAME=VALUE]..."

/* Loads MODEL; returns a CLI exit status (message printed on failure). */
int cli_load_model(const char *cmd, sj_ctx *ctx, const char *path, const cli_model_flags *f,
                   sj_graph **out);

/* What a command does with the loaded model; returns a CLI exit status. */
typedef int (*cli_model_action)(const char *cmd, sj_ctx *ctx, const sj_graph *g);
/* The whole of a command whose only argument is MODEL (plus the model
 * options): parses argv, loads the model, runs act on it, cleans up. */
int cli_run_on_model(const char *cmd, const char *usage, int argc, char **argv,
                     cli_model_action act);

#define CLI_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Output files: DIR/<name>.npy with the name made safe for a file name
 * (anything but [A-Za-z0-9._-] becomes '_', a leading '.' too). Fails when
 * the path does not fit. */
bool cli_output_path(const char *dir, const char *name, char *buf, size_t cap);
/* Writes tensors[i] to cli_output_path(dir, names[i]) for every i, all or
 * nothing: each goes to a temporary name first and only when every one is
 * written are they renamed into place. Creates dir (and its parents).
 * Returns a CLI exit status, the message printed. */
int cli_write_outputs(const char *cmd, sj_ctx *ctx, const char *dir, int n,
                      const char *const *names, const sj_tensor *tensors);

/* Creates a context with default settings; NULL after printing why. */
sj_ctx *cli_ctx_create(const char *cmd);

/* Monotonic clock in milliseconds, for --stats. */
double cli_now_ms(void);

#endif

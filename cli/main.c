/* shapejit command-line entry point: finds the command in the table and
 * hands it the rest of argv. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* The command table. A new command is a cli/cmd_*.c file defining
 * `int FN(int argc, char **argv)` plus one row here: X(FN, "name", "summary"). */
#define CLI_COMMANDS(X)                                                                            \
    X(cli_cmd_run, "run", "run a model once and write every output as .npy")                      \
    X(cli_cmd_emit, "emit", "write the code of one bucket (LLVM IR, asm, PTX, CUDA C, cubin)")     \
    X(cli_cmd_precompile, "precompile", "compile every bucket of a ladder into the store")          \
    X(cli_cmd_serve, "serve", "serve a stream of requests of varying size; latency, stalls, padding") \
    X(cli_cmd_bench, "bench", "run the benchmark suite; a table, JSON and charts")                \
    X(cli_cmd_print, "print", "print a model as canonical .sjg text")                             \
    X(cli_cmd_hash, "hash", "print a model's 256-bit content hash")                               \
    X(cli_cmd_onnx_conformance, "onnx-conformance", "run the ONNX backend node tests under a folder") \
    X(cli_cmd_ladder, "ladder", "fit a bucket ladder to a trace of request sizes")                   \
    X(cli_cmd_store, "store", "look after the artifact store: ls, stats, verify, gc, rm, export, import, explain")

#define CLI_DECLARE(fn, name, summary) int fn(int argc, char **argv);
CLI_COMMANDS(CLI_DECLARE)

#define CLI_ROW(fn, name, summary) {name, summary, fn},
static const cli_command commands[] = {CLI_COMMANDS(CLI_ROW)};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_help(FILE *f) {
    fprintf(f,
            "usage: shapejit COMMAND [ARGS...]\n"
            "       shapejit --help | --version\n\n"
            "A JIT compile-and-cache service for shape-bucketed compute graphs.\n"
            "MODEL is a .sjg text graph (docs/sjg.md) or an .onnx file.\n\n"
            "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-18s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'shapejit COMMAND --help' shows a command's options.\n"
               "Exit status: 0 success, 1 failure, 2 usage error.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        if (argc >= 3 && !strcmp(cmd, "help")) {
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *sub[] = {argv[2], "--help", NULL};
                    return cli_stdout_done(commands[i].name, commands[i].fn(2, sub));
                }
            fprintf(stderr, "shapejit: unknown command '%s'\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        print_help(stdout);
        return cli_stdout_done("--help", CLI_EXIT_OK);
    }
    if (!strcmp(cmd, "--version")) {
        printf("shapejit %s\n", sj_version_string());
        return cli_stdout_done("--version", CLI_EXIT_OK);
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name))
            return cli_stdout_done(cmd, commands[i].fn(argc - 1, argv + 1));
    fprintf(stderr, "shapejit: unknown %s '%s'\nTry 'shapejit --help'.\n",
            cmd[0] == '-' ? "option" : "command", cmd);
    return CLI_EXIT_USAGE;
}

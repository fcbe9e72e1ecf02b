/* Request streams for serve and bench: sizes (values of the symbolic dim)
 * from a trace file or a seeded synthetic distribution. */
#ifndef SJ_CLI_REQUEST_STREAM_H
#define SJ_CLI_REQUEST_STREAM_H

#include <stddef.h>
#include <stdint.h>

#define CLI_SYNTHETIC_USAGE                                                                        \
    "  --synthetic SPEC   a seeded random stream of request sizes:\n"                              \
    "                       lognormal:MEDIAN:SIGMA:MAX[:COUNT[:SEED]]  sizes\n"                    \
    "                         round(MEDIAN * exp(SIGMA * z)), z standard normal,\n"                \
    "                         clamped to 1..MAX\n"                                                 \
    "                       uniform:MIN:MAX[:COUNT[:SEED]]  sizes uniform in MIN..MAX\n"           \
    "                     COUNT defaults to 1000 requests, SEED to 1\n"

typedef struct cli_stream {
    int64_t *sizes;
    size_t n;
    int64_t max; /* the largest size */
} cli_stream;

/* Each returns a CLI exit status with the message printed (a bad line of a
 * trace names FILE:LINE). A trace has one size per line; blank lines and
 * lines starting with '#' are skipped. */
int cli_stream_synthetic(const char *cmd, const char *spec, cli_stream *out);
int cli_stream_trace(const char *cmd, const char *path, cli_stream *out);
/* Repeats (or cuts) the stream to n requests. */
int cli_stream_resize(const char *cmd, cli_stream *s, size_t n);
void cli_stream_free(cli_stream *s);


#endif

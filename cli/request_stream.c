/* Trace files and synthetic request-size distributions. */
#include "cli/request_stream.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define DEFAULT_COUNT 1000
#define MAX_COUNT 10000000

/* splitmix64 (Steele, Lea, Flood): the stream generator; advances *state.
 * A seed's stream must stay the same from release to release, so that
 * --synthetic SPEC names one stream. */
static uint64_t next_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): never 0, so log() is finite. */
static double unit(uint64_t *state) {
    return ((double)(next_u64(state) >> 11) + 0.5) / 9007199254740992.0;
}

void cli_stream_free(cli_stream *s) {
    free(s->sizes);
    memset(s, 0, sizeof *s);
}

static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

static int alloc_stream(const char *cmd, cli_stream *out, size_t n) {
    memset(out, 0, sizeof *out);
    out->sizes = malloc((n ? n : 1) * sizeof *out->sizes);
    if (!out->sizes) return cli_fail(cmd, "out of memory for %zu requests", n);
    out->n = n;
    return CLI_EXIT_OK;
}

int cli_stream_synthetic(const char *cmd, const char *spec, cli_stream *out) {
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf)
        return cli_usage_error(cmd, "--synthetic: spec too long");
    char *field[7];
    int n = 0;
    for (char *p = buf, *tok; n < 7 && (tok = strsep(&p, ":"));) field[n++] = tok;
    bool logn = !strcmp(field[0], "lognormal"), unif = !strcmp(field[0], "uniform");
    int fixed = logn ? 4 : 3;
    if (!logn && !unif)
        return cli_usage_error(cmd,
                               "--synthetic '%s': unknown distribution '%s' (lognormal or uniform)",
                               spec, field[0]);
    if (n < fixed || n > fixed + 2)
        return cli_usage_error(cmd, "--synthetic '%s': expected %s", spec,
                               logn ? "lognormal:MEDIAN:SIGMA:MAX[:COUNT[:SEED]]"
                                    : "uniform:MIN:MAX[:COUNT[:SEED]]");
    int64_t count = DEFAULT_COUNT, seed = 1;
    if (n > fixed && (!parse_i64(field[fixed], &count) || count < 1 || count > MAX_COUNT))
        return cli_usage_error(cmd, "--synthetic '%s': COUNT '%s' is not in 1..%d", spec,
                               field[fixed], MAX_COUNT);
    if (n > fixed + 1 && (!parse_i64(field[fixed + 1], &seed) || seed < 0))
        return cli_usage_error(cmd, "--synthetic '%s': SEED '%s' is not a non-negative integer",
                               spec, field[fixed + 1]);
    double median = 0, sigma = 0;
    int64_t lo = 1, hi = 0;
    if (logn) {
        if (!parse_f64(field[1], &median) || median < 1)
            return cli_usage_error(cmd, "--synthetic '%s': MEDIAN '%s' is not a number >= 1", spec,
                                   field[1]);
        if (!parse_f64(field[2], &sigma) || sigma < 0 || sigma > 10)
            return cli_usage_error(cmd, "--synthetic '%s': SIGMA '%s' is not in 0..10", spec,
                                   field[2]);
        if (!parse_i64(field[3], &hi))
            return cli_usage_error(cmd, "--synthetic '%s': MAX '%s' is not an integer", spec,
                                   field[3]);
    } else if (!parse_i64(field[1], &lo) || !parse_i64(field[2], &hi) || lo < 1 || hi < lo) {
        return cli_usage_error(
            cmd, "--synthetic '%s': MIN and MAX must be integers with 1 <= MIN <= MAX", spec);
    }
    if (hi < 1 || hi > SJ_MAX_EXTENT)
        return cli_usage_error(cmd, "--synthetic '%s': MAX must be in 1..%lld", spec,
                               (long long)SJ_MAX_EXTENT);
    int rc = alloc_stream(cmd, out, (size_t)count);
    if (rc != CLI_EXIT_OK) return rc;
    uint64_t state = (uint64_t)seed;
    for (size_t i = 0; i < out->n; i++) {
        int64_t v;
        if (logn) {
            /* Box-Muller: one standard normal from two uniforms. */
            double z = sqrt(-2.0 * log(unit(&state))) * cos(6.283185307179586 * unit(&state));
            double x = round(median * exp(sigma * z));
            v = x < 1 ? 1 : x > (double)hi ? hi : (int64_t)x;
        } else {
            v = lo + (int64_t)(next_u64(&state) % (uint64_t)(hi - lo + 1));
        }
        out->sizes[i] = v;
        if (v > out->max) out->max = v;
    }
    return CLI_EXIT_OK;
}

int cli_stream_trace(const char *cmd, const char *path, cli_stream *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return cli_fail(cmd, "trace %s: cannot open: %s", path, strerror(errno));
    size_t cap = 0;
    char line[256];
    int rc = CLI_EXIT_OK;
    for (long lineno = 1; rc == CLI_EXIT_OK && fgets(line, sizeof line, f); lineno++) {
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = cli_fail(cmd, "trace %s:%ld: line longer than %zu characters", path, lineno,
                          sizeof line - 2);
            break;
        }
        while (len &&
               (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' ||
                line[len - 1] == '\t'))
            line[--len] = '\0';
        char *hash = strchr(line, '#'); /* a comment runs to the end of the line */
        if (hash) {
            *hash = '\0';
            len = (size_t)(hash - line);
            while (len && (line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = '\0';
        }
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) continue;
        int64_t v;
        if (!parse_i64(s, &v) || v < 1 || v > SJ_MAX_EXTENT) {
            char shown[1100];
            rc = cli_fail(cmd, "trace %s:%ld: '%s' is not a request size (an integer in 1..%lld)",
                          path, lineno, cli_printable(s, shown, sizeof shown), (long long)SJ_MAX_EXTENT);
            break;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 256;
            int64_t *p = realloc(out->sizes, cap * sizeof *p);
            if (!p) {
                rc = cli_fail(cmd, "trace %s: out of memory", path);
                break;
            }
            out->sizes = p;
        }
        out->sizes[out->n++] = v;
        if (v > out->max) out->max = v;
    }
    if (rc == CLI_EXIT_OK && ferror(f)) rc = cli_fail(cmd, "trace %s: read error", path);
    fclose(f);
    if (rc == CLI_EXIT_OK && out->n == 0)
        rc = cli_fail(cmd, "trace %s: no request sizes in it", path);
    if (rc != CLI_EXIT_OK) cli_stream_free(out);
    return rc;
}

int cli_stream_resize(const char *cmd, cli_stream *s, size_t n) {
    if (n == s->n) return CLI_EXIT_OK;
    int64_t *p = realloc(s->sizes, (n ? n : 1) * sizeof *p);
    if (!p) return cli_fail(cmd, "out of memory for %zu requests", n);
    for (size_t i = s->n; i < n; i++) p[i] = p[i % s->n];
    s->sizes = p;
    s->n = n;
    s->max = 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] > s->max) s->max = p[i];
    return CLI_EXIT_OK;
}

/* serve --ladder fit:K: serve on a provisional engine, record the sizes of
 * the first `window` requests, fit a K-bucket ladder to them
 * (sj_ladder_fit), open and precompile an engine on it in a background
 * thread, and only then route requests to it. No request waits on that
 * work: until the fitted engine is ready every request runs on the
 * provisional one, and afterwards a request above the fitted ladder's top
 * (the window's largest size) still does.
 *
 *   cli_ladder_switch_config c = {.ctx = ctx, .provisional = e, .k = 4, .window = 1000,
 *                                 .open = open_engine, .open_user = &args};
 *   cli_ladder_switch *ls;
 *   cli_ladder_switch_create(&c, &ls);
 *   ...                                  // per request, any thread:
 *   sj_engine *run_on = cli_ladder_switch_engine(ls, rows);
 *   sj_engine_run(run_on, ...);
 *   ...
 *   cli_ladder_switch_wait(ls);          // a fit in progress finishes
 *   cli_ladder_switch_destroy(ls);       // closes the fitted engine, not the provisional
 *
 * The provisional engine stays open (the caller's) for sizes above the
 * fitted top; its buckets keep their code, so nothing recompiles. Depends
 * on the library only, so the tests drive it without the CLI. */
#ifndef SJ_CLI_LADDER_SWITCH_H
#define SJ_CLI_LADDER_SWITCH_H

#include <stddef.h>
#include <stdint.h>

#include "shapejit/engine.h"
#include "shapejit/ladder.h"

/* Opens the engine for the fitted ladder spec; on failure writes why. */
typedef sj_status (*cli_fit_open_fn)(void *user, const char *spec, sj_engine **out, char *why, size_t cap);
/* The cost model for window sizes in [lo, hi]; on failure writes why. */
typedef sj_status (*cli_fit_cost_fn)(void *user, int64_t lo, int64_t hi, sj_ladder_cost *out, char *why,
                                     size_t cap);

typedef struct cli_ladder_switch_config {
    sj_ctx *ctx;
    sj_engine *provisional; /* borrowed, open for the switch's lifetime */
    int k;                  /* buckets, 1..SJ_LADDER_MAX_BUCKETS */
    size_t window;          /* requests recorded before the fit, >= 1 */
    cli_fit_cost_fn cost;   /* NULL: rows computed, cost(n, E) = E */
    void *cost_user;
    cli_fit_open_fn open;
    void *open_user;
    int jobs; /* precompile threads; 0 = 1 */
    /* Told (from the background thread) once: the switch, or why none. */
    void (*on_event)(void *user, const char *line);
    void *event_user;
} cli_ladder_switch_config;

typedef struct cli_ladder_switch cli_ladder_switch;

/* SJ_E_INVALID_ARG (message on ctx) for k or window out of range. */
sj_status cli_ladder_switch_create(const cli_ladder_switch_config *cfg, cli_ladder_switch **out);
/* The engine to run a request of `rows` on; records rows while the window
 * fills, and starts the fit on the thread that fills it. Any thread. */
sj_engine *cli_ladder_switch_engine(cli_ladder_switch *ls, int64_t rows);
/* Waits for a fit that has started (nothing when the window has not filled). */
void cli_ladder_switch_wait(cli_ladder_switch *ls);
/* Waits, closes the fitted engine; NULL is a no-op. */
void cli_ladder_switch_destroy(cli_ladder_switch *ls);

typedef struct cli_ladder_switch_report {
    int k;
    size_t window, seen;     /* seen: requests recorded (at most window) */
    bool fitted, switched;   /* a ladder was fitted; requests were routed to it */
    const char *fitted_spec; /* borrowed; NULL when none was fitted */
    sj_ladder_fit_result fit; /* the fitted ladder's expected cost over the window */
    int distinct;             /* distinct sizes in the window */
    int64_t lo, hi;           /* the window's sizes */
    size_t switched_after;    /* requests routed before the fitted engine was live */
    uint64_t on_fitted, above_fitted; /* after it: run on the fitted engine, and above its top */
    double fit_ms, ready_ms; /* fitting (cost model included), opening + precompiling */
    const char *error;       /* why there is no switch after a full window; "" otherwise */
} cli_ladder_switch_report;
/* Call after cli_ladder_switch_wait for final figures. */
void cli_ladder_switch_get(cli_ladder_switch *ls, cli_ladder_switch_report *out);
/* The fitted engine once switched (borrowed), else NULL. */
sj_engine *cli_ladder_switch_fitted(cli_ladder_switch *ls);

#endif

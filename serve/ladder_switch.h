/* Ladders fitted to traffic (--ladder fit:K), for `shapejit serve` and the
 * HTTP server alike: serve on a provisional engine, record the sizes of the
 * first `window` requests, fit a K-bucket ladder to them (sj_ladder_fit),
 * open and precompile an engine on it in a background thread, and only then
 * route runs to it. No request waits on that work: until the fitted engine
 * is ready every run goes to the provisional one, and afterwards a run above
 * the fitted ladder's top (the window's largest size) still does. Not
 * installed.
 *
 *   sj_ladder_switch_config c = {.ctx = ctx, .provisional = e, .k = 4, .window = 1000,
 *                                .open = open_engine, .open_user = &args};
 *   sj_ladder_switch *ls;
 *   sj_ladder_switch_create(&c, &ls);
 *   ...                                   // per request, any thread:
 *   sj_ladder_switch_record(ls, rows);    // the request's size, for the window
 *   sj_engine *run_on = sj_ladder_switch_route(ls, rows);   // per run
 *   sj_engine_run(run_on, ...);
 *   ...
 *   sj_ladder_switch_wait(ls);            // a fit in progress finishes
 *   sj_ladder_switch_destroy(ls);         // closes the fitted engine, not the provisional
 *
 * Recording and routing are apart because a server may run several
 * requests as one batch: the window holds what clients asked for, the route
 * follows what runs. The provisional engine stays open (the caller's) for
 * runs above the fitted top; its buckets keep their code, so nothing
 * recompiles. Uses the public API only. */
#ifndef SJ_CACHE_LADDER_SWITCH_H
#define SJ_CACHE_LADDER_SWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shapejit/engine.h"
#include "shapejit/ladder.h"

/* Requests recorded before the fit when the caller does not say. */
#define SJ_LADDER_SWITCH_DEFAULT_WINDOW 1000
#define SJ_LADDER_SWITCH_MAX_WINDOW 10000000

/* "fit:K": 1 with *k set; 0 when spec is no fit spec (another ladder, or
 * NULL); -1 when it is one with a K outside 1..SJ_LADDER_MAX_BUCKETS or no
 * number (the caller names where it came from). */
int sj_ladder_switch_parse(const char *spec, int *k);

/* Opens the engine for a ladder spec; on failure writes why. */
typedef sj_status (*sj_ladder_open_fn)(void *user, const char *spec, sj_engine **out, char *why, size_t cap);
/* The cost model for window sizes in [lo, hi]; on failure writes why. */
typedef sj_status (*sj_ladder_cost_fn)(void *user, int64_t lo, int64_t hi, sj_ladder_cost *out, char *why,
                                       size_t cap);

typedef struct sj_ladder_switch_config {
    sj_ctx *ctx;
    sj_engine *provisional; /* borrowed, open for the switch's lifetime */
    int k;                  /* buckets, 1..SJ_LADDER_MAX_BUCKETS */
    size_t window;          /* requests recorded before the fit, >= 1 */
    sj_ladder_cost_fn cost; /* NULL: rows computed, cost(n, E) = E */
    void *cost_user;
    sj_ladder_open_fn open;
    void *open_user;
    int jobs; /* precompile threads; 0 = 1 */
    /* Told (from the background thread) once: the switch, or why none. */
    void (*on_event)(void *user, const char *line);
    void *event_user;
} sj_ladder_switch_config;

typedef struct sj_ladder_switch sj_ladder_switch;

/* SJ_E_INVALID_ARG for k or window out of range or a missing field. */
sj_status sj_ladder_switch_create(const sj_ladder_switch_config *cfg, sj_ladder_switch **out);
/* A request of `rows`: recorded while the window fills; the call that fills
 * it starts the fit. Any thread. */
void sj_ladder_switch_record(sj_ladder_switch *ls, int64_t rows);
/* The engine to run `rows` on. Any thread. */
sj_engine *sj_ladder_switch_route(sj_ladder_switch *ls, int64_t rows);
/* Waits for a fit that has started (nothing when the window has not filled). */
void sj_ladder_switch_wait(sj_ladder_switch *ls);
/* Waits, closes the fitted engine; NULL is a no-op. */
void sj_ladder_switch_destroy(sj_ladder_switch *ls);

typedef enum sj_ladder_switch_state {
    SJ_LADDER_SWITCH_RECORDING, /* the window is filling */
    SJ_LADDER_SWITCH_FITTING,   /* fitting, opening or precompiling in the background */
    SJ_LADDER_SWITCH_SWITCHED,  /* runs go to the fitted engine */
    SJ_LADDER_SWITCH_FAILED,    /* no switch (error says why); the provisional serves */
} sj_ladder_switch_state;
const char *sj_ladder_switch_state_name(sj_ladder_switch_state s); /* "recording", ... */

typedef struct sj_ladder_switch_report {
    int k;
    sj_ladder_switch_state state;
    size_t window, seen;     /* seen: requests recorded (at most window) */
    bool fitted, switched;   /* a ladder was fitted; runs are routed to it */
    const char *fitted_spec; /* borrowed; NULL when none was fitted */
    sj_ladder_fit_result fit; /* the fitted ladder's expected cost over the window */
    int distinct;             /* distinct sizes in the window */
    int64_t lo, hi;           /* the window's sizes */
    size_t switched_after;    /* requests recorded before the fitted engine was live */
    uint64_t on_fitted, above_fitted; /* runs after it: on the fitted engine, and above its top */
    double fit_ms, ready_ms; /* fitting (cost model included), opening + precompiling */
    const char *error;       /* why there is no switch after a full window; "" otherwise */
} sj_ladder_switch_report;
/* Any time, any thread: figures of a fit still running read as not yet
 * fitted (state FITTING); after sj_ladder_switch_wait they are final. */
void sj_ladder_switch_get(sj_ladder_switch *ls, sj_ladder_switch_report *out);
/* The fitted engine once switched (borrowed), else NULL. */
sj_engine *sj_ladder_switch_fitted(sj_ladder_switch *ls);

#endif

/* The KServe v2 inference protocol's bodies: model metadata, and an infer
 * request (JSON tensors, or the binary tensor data extension) decoded and
 * checked against the model before anything is run, then the outputs
 * encoded the way the request asked. Every check names the input and what
 * differs, and answers 400; nothing the client sends is trusted for a size
 * before it has been compared with the model. */
#include "server/server_impl.h"

#include "serve/ladder_switch.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *v2_dtype(sj_dtype t) {
    switch (t) {
    case SJ_F32: return "FP32";
    case SJ_I64: return "INT64";
    case SJ_I32: return "INT32";
    case SJ_BOOL: return "BOOL";
    default: return "?";
    }
}

/* The protocol's datatypes: a known one the model does not take is a
 * different message from a name that is no datatype at all. */
static const char *const v2_known[] = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8",
                                       "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
                                       "BF16", "BYTES"};

static json_t *shape_json(const sj_value_desc *d) {
    json_t *a = json_array();
    for (int k = 0; a && k < d->shape.rank; k++)
        json_array_append_new(a, json_integer(sj_dim_is_sym(d->shape.dims[k]) ? -1 : d->shape.dims[k]));
    return a;
}

static json_t *io_json(const sj_value_desc *d, int n) {
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{s:s,s:s,s:o}", "name", d[i].name ? d[i].name : "",
                                           "datatype", v2_dtype(d[i].dtype), "shape",
                                           shape_json(&d[i])));
    return a;
}

/* The protocol's fields, then shapejit's own: the ladder served (the
 * fitted one once switched to; runs above its top still take the
 * provisional) and, with --ladder fit:K, how far
 * the fit got ("ladder_fit"). */
void srv_model_metadata(srv_model *m, srv_response *r) {
    sj_engine *now = m->fit && m->fit->ls ? sj_ladder_switch_fitted(m->fit->ls) : NULL;
    char ladder[512];
    sj_ladder_format(sj_engine_ladder(now ? now : m->e), ladder, sizeof ladder);
    json_t *j = json_pack("{s:s,s:[s],s:s,s:o,s:o,s:s}", "name", m->name, "versions", "1", "platform",
                          "shapejit", "inputs", io_json(m->in, m->n_in), "outputs", io_json(m->out, m->n_out),
                          "ladder", ladder);
    json_t *fit = srv_fit_json(m);
    if (j && fit)
        json_object_set_new(j, "ladder_fit", fit);
    else
        json_decref(fit);
    srv_json(r, 200, j);
}

/* max_batch_size 0: no implicit batch dim (requests carry the dynamic dim
 * themselves). dynamic_batching where concurrent requests are stacked;
 * otherwise shapejit's reason, the op that keeps rows apart unproved. */
void srv_model_config(srv_model *m, srv_response *r) {
    const srv_server *s = m->srv;
    json_t *j = json_pack("{s:s,s:s,s:i,s:o,s:o}", "name", m->name, "platform", "shapejit",
                          "max_batch_size", 0, "input", io_json(m->in, m->n_in), "output",
                          io_json(m->out, m->n_out));
    if (j && m->batcher)
        json_object_set_new(j, "dynamic_batching",
                            json_pack("{s:I,s:I}", "max_queue_delay_microseconds",
                                      (json_int_t)s->cfg.max_batch_delay_us, "max_rows",
                                      (json_int_t)m->batch_rows));
    else if (j)
        json_object_set_new(j, "batching_off",
                            json_string(m->batch_why[0] ? m->batch_why
                                                         : "--max-batch-delay-us is 0"));
    srv_json(r, 200, j);
}

/* ---- decoding */

typedef struct decoded {
    sj_tensor t[SRV_MAX_IO]; /* model input order; data malloc'd here */
    bool given[SRV_MAX_IO];
    int64_t rows; /* -1 until an input with the dynamic dim is seen */
    int64_t binary_size[SRV_MAX_IO]; /* -1: JSON data */
    int order[SRV_MAX_IO];           /* request order -> model index, for the binary region */
    int n_order;
} decoded;

static void decoded_free(decoded *d) {
    for (int i = 0; i < SRV_MAX_IO; i++) free(d->t[i].bytes);
}

/* Flattens nested JSON arrays into t's elements; *at counts them. */
static bool put_elements(srv_model *m, const char *name, json_t *v, sj_tensor *t, int64_t numel,
                         int64_t *at, int depth, srv_response *r) {
    if (depth > SJ_MAX_RANK + 1) {
        srv_error(r, 400, "input '%s': data nested deeper than its shape", name);
        return false;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (!put_elements(m, name, e, t, numel, at, depth + 1, r)) return false;
        return true;
    }
    if (*at >= numel) {
        srv_error(r, 400, "input '%s': data holds more than the %lld elements its shape says", name,
                  (long long)numel);
        return false;
    }
    int64_t k = (*at)++;
    switch (t->dtype) {
    case SJ_F32: {
        if (!json_is_number(v)) goto not_number;
        /* A finite JSON number past float32's range would run as inf: the
         * client's value is wrong, not the model's answer (400, not the 500
         * that encoding the inf output would give). */
        double x = json_number_value(v);
        float f = (float)x;
        if (!isfinite(f)) {
            srv_error(r, 400, "input '%s': element %lld (%g) is outside FP32's range (at most "
                      "%g in magnitude)", name, (long long)k, x, (double)FLT_MAX);
            return false;
        }
        t->data[k] = f;
        return true;
    }
    case SJ_I64:
    case SJ_I32:
        if (!json_is_integer(v)) goto not_integer;
        if (t->dtype == SJ_I64) {
            t->i64[k] = json_integer_value(v);
        } else {
            json_int_t x = json_integer_value(v);
            if (x < INT32_MIN || x > INT32_MAX) {
                srv_error(r, 400, "input '%s': element %lld (%lld) does not fit INT32", name,
                          (long long)k, (long long)x);
                return false;
            }
            t->i32[k] = (int32_t)x;
        }
        return true;
    case SJ_BOOL:
        if (!json_is_boolean(v)) {
            srv_error(r, 400, "input '%s': element %lld is not true or false (BOOL)", name, (long long)k);
            return false;
        }
        t->b8[k] = json_is_true(v) ? 1 : 0;
        return true;
    default:
        srv_error(r, 500, "input '%s': unhandled dtype", name);
        return false;
    }
not_number:
    srv_error(r, 400, "input '%s': element %lld is not a number", name, (long long)k);
    return false;
not_integer:
    srv_error(r, 400, "input '%s': element %lld is not an integer (%s)", name, (long long)k,
              v2_dtype(t->dtype));
    return false;
}

static int find_input(const srv_model *m, const char *name) {
    for (int i = 0; i < m->n_in; i++)
        if (m->in[i].name && !strcmp(m->in[i].name, name)) return i;
    return -1;
}
static int find_output(const srv_model *m, const char *name) {
    for (int i = 0; i < m->n_out; i++)
        if (m->out[i].name && !strcmp(m->out[i].name, name)) return i;
    return -1;
}

/* shape + datatype of one request input against the model's; sets t's
 * shape and dtype and d->rows. */
static bool check_shape(srv_model *m, int i, json_t *shape, const char *dt, decoded *d,
                        srv_response *r) {
    const sj_value_desc *want = &m->in[i];
    const char *name = want->name;
    if (strcmp(dt, v2_dtype(want->dtype)) != 0) {
        bool known = false;
        for (size_t k = 0; k < sizeof v2_known / sizeof *v2_known; k++) known |= !strcmp(dt, v2_known[k]);
        if (known)
            srv_error(r, 400, "input '%s': datatype %s, but the model takes %s", name, dt,
                      v2_dtype(want->dtype));
        else
            srv_error(r, 400, "input '%s': unknown datatype '%.64s' (the model takes %s)", name, dt,
                      v2_dtype(want->dtype));
        return false;
    }
    if (!json_is_array(shape)) {
        srv_error(r, 400, "input '%s': 'shape' must be an array of integers", name);
        return false;
    }
    size_t rank = json_array_size(shape);
    if ((int)rank != want->shape.rank) {
        srv_error(r, 400, "input '%s': shape has %zu dims, the model's has %d", name, rank,
                  want->shape.rank);
        return false;
    }
    sj_tensor *t = &d->t[i];
    t->rank = (int)rank;
    t->dtype = want->dtype;
    for (size_t k = 0; k < rank; k++) {
        json_t *e = json_array_get(shape, k);
        if (!json_is_integer(e)) {
            srv_error(r, 400, "input '%s': shape[%zu] is not an integer", name, k);
            return false;
        }
        json_int_t v = json_integer_value(e);
        int64_t w = want->shape.dims[k];
        if (v < 0) {
            srv_error(r, 400, "input '%s': shape[%zu] is negative (%lld)", name, k, (long long)v);
            return false;
        }
        if (sj_dim_is_sym(w) && w != SJ_DIM_SYM) {
            /* tied to the dynamic dim (a decode step's mask, past + 1): the
             * engine checks it against N once every input is in */
            if (v == 0) {
                srv_error(r, 400, "input '%s': shape[%zu] is 0", name, k);
                return false;
            }
        } else if (w == SJ_DIM_SYM) {
            if (v == 0) {
                srv_error(r, 400, "input '%s': shape[%zu] is 0: a request needs at least one row", name, k);
                return false;
            }
            if (v > m->top) {
                srv_error(r, 400, "input '%s': %lld rows along the dynamic dim is outside every bucket "
                          "(at most %lld)", name, (long long)v, (long long)m->top);
                return false;
            }
            if (v > m->max_rows) {
                srv_error(r, 400, "input '%s': %lld rows along the dynamic dim is above the server's "
                          "limit of %lld rows per request", name, (long long)v, (long long)m->max_rows);
                return false;
            }
            if (d->rows >= 0 && d->rows != v) {
                srv_error(r, 400, "input '%s': %lld rows along the dynamic dim, another input has %lld",
                          name, (long long)v, (long long)d->rows);
                return false;
            }
            d->rows = v;
        } else if (v != w) {
            srv_error(r, 400, "input '%s': shape[%zu] is %lld, the model's is %lld", name, k,
                      (long long)v, (long long)w);
            return false;
        }
        t->dims[k] = v;
    }
    return true;
}

static bool alloc_data(srv_model *m, int i, decoded *d, srv_response *r) {
    sj_tensor *t = &d->t[i];
    int64_t n = sj_tensor_numel(t);
    size_t bytes;
    /* The dims were checked against the model and max_rows: n is bounded. */
    if (n < 0 || __builtin_mul_overflow((size_t)n, sj_dtype_size(t->dtype), &bytes)) {
        srv_error(r, 400, "input '%s': shape too large", m->in[i].name);
        return false;
    }
    t->bytes = malloc(bytes ? bytes : 1);
    if (!t->bytes) {
        srv_error(r, 503, "input '%s': out of memory for %zu bytes", m->in[i].name, bytes);
        return false;
    }
    return true;
}

static bool decode_inputs(srv_model *m, json_t *inputs, decoded *d, srv_response *r) {
    if (!json_is_array(inputs)) {
        srv_error(r, 400, "'inputs' must be an array of tensors");
        return false;
    }
    size_t k;
    json_t *in;
    json_array_foreach(inputs, k, in) {
        if (!json_is_object(in)) {
            srv_error(r, 400, "inputs[%zu] is not an object", k);
            return false;
        }
        const char *name = json_string_value(json_object_get(in, "name"));
        const char *dt = json_string_value(json_object_get(in, "datatype"));
        json_t *shape = json_object_get(in, "shape");
        if (!name || !dt || !shape) {
            srv_error(r, 400, "inputs[%zu]: needs 'name', 'shape' and 'datatype'", k);
            return false;
        }
        int i = find_input(m, name);
        if (i < 0) {
            char list[512] = "";
            for (int j = 0; j < m->n_in; j++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "",
                         m->in[j].name);
            srv_error(r, 400, "inputs[%zu]: model '%s' has no input '%.128s' (its inputs: %s)", k,
                      m->name, name, list);
            return false;
        }
        if (d->given[i]) {
            srv_error(r, 400, "input '%s' given twice", name);
            return false;
        }
        d->given[i] = true;
        if (!check_shape(m, i, shape, dt, d, r) || !alloc_data(m, i, d, r)) return false;
        json_t *bsz = json_object_get(json_object_get(in, "parameters"), "binary_data_size");
        json_t *data = json_object_get(in, "data");
        int64_t numel = sj_tensor_numel(&d->t[i]);
        d->order[d->n_order++] = i;
        d->binary_size[i] = -1;
        if (bsz) {
            if (data) {
                srv_error(r, 400, "input '%s': both 'data' and binary_data_size", name);
                return false;
            }
            if (!json_is_integer(bsz) || json_integer_value(bsz) < 0) {
                srv_error(r, 400, "input '%s': binary_data_size must be a non-negative integer", name);
                return false;
            }
            int64_t want = numel * (int64_t)sj_dtype_size(d->t[i].dtype);
            if (json_integer_value(bsz) != want) {
                srv_error(r, 400, "input '%s': binary_data_size is %lld bytes, its shape and %s "
                          "need %lld", name, (long long)json_integer_value(bsz), dt, (long long)want);
                return false;
            }
            d->binary_size[i] = want;
            continue;
        }
        if (!data) {
            srv_error(r, 400, "input '%s': no 'data' and no binary_data_size", name);
            return false;
        }
        int64_t at = 0;
        if (!put_elements(m, name, data, &d->t[i], numel, &at, 0, r)) return false;
        if (at != numel) {
            srv_error(r, 400, "input '%s': data holds %lld elements, its shape says %lld", name,
                      (long long)at, (long long)numel);
            return false;
        }
    }
    for (int i = 0; i < m->n_in; i++)
        if (!d->given[i]) {
            srv_error(r, 400, "input '%s' is missing", m->in[i].name);
            return false;
        }
    return true;
}

/* The binary region after the JSON header: each binary input's bytes in
 * the order the inputs were listed, and nothing else. */
static bool take_binary(srv_model *m, const char *bin, size_t len, decoded *d, srv_response *r) {
    size_t at = 0;
    for (int k = 0; k < d->n_order; k++) {
        int i = d->order[k];
        if (d->binary_size[i] < 0) continue;
        size_t n = (size_t)d->binary_size[i];
        if (n > len - at) {
            srv_error(r, 400, "input '%s': binary data ends after %zu of its %zu bytes",
                      m->in[i].name, len - at, n);
            return false;
        }
        memcpy(d->t[i].bytes, bin + at, n);
        at += n;
    }
    if (at != len) {
        srv_error(r, 400, "the body holds %zu bytes of binary data after the JSON header, the "
                  "inputs' binary_data_size add up to %zu", len, at);
        return false;
    }
    return true;
}

/* ---- encoding
 *
 * The response is written as text straight into its body, not built as a
 * json_t tree first: a tree costs ~70 bytes per element where the text
 * costs ~12, and the body grows only as far as the JSON memory budget lets
 * it (every response being built or sent counts, srv_json_reserve), so a
 * request for a wide output cannot make the server allocate without bound. */

typedef struct out_buf {
    char *p;
    size_t len, cap;
    srv_json_account *a;
    bool failed; /* over the budget (a->over_*) or out of memory (oom) */
    bool oom;
} out_buf;

/* Room for n more bytes: doubling for the JSON text (written a little at
 * a time), exact for a block of known size (the binary outputs), so a body
 * is not refused for the slack of its last doubling. */
static bool ob_grow(out_buf *b, size_t n, bool exact) {
    if (b->failed) return false;
    if (n <= b->cap - b->len) return true;
    if (exact && n > SIZE_MAX - b->len) {
        b->failed = b->oom = true;
        return false;
    }
    size_t cap = exact ? b->len + n : b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->failed = b->oom = true;
            return false;
        }
        cap *= 2;
    }
    if (!srv_json_reserve(b->a, cap - b->cap)) {
        b->failed = true;
        return false;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        srv_json_unreserve(b->a->pool, cap - b->cap);
        b->a->used -= cap - b->cap;
        b->failed = b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static bool ob_room(out_buf *b, size_t n) { return ob_grow(b, n, false); }

static void ob_put(out_buf *b, const char *s, size_t n) {
    if (!ob_room(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void ob_str(out_buf *b, const char *s) { ob_put(b, s, strlen(s)); }

static int ob_dump(const char *chunk, size_t n, void *user) {
    out_buf *b = user;
    ob_put(b, chunk, n);
    return b->failed ? -1 : 0;
}

/* A JSON value (a string escaped by jansson: names and the request's id). */
static void ob_json(out_buf *b, json_t *v) {
    if (!v || json_dump_callback(v, ob_dump, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        b->failed = b->failed || (b->oom = true);
}

static void ob_name(out_buf *b, const char *s) {
    json_t *v = json_string(s ? s : "");
    ob_json(b, v);
    json_decref(v);
}

/* A float32 as jansson writes a real at JSON_REAL_PRECISION(9) (which
 * round-trips every float32): "%.9g", a ".0" when it reads as an integer,
 * no '+' or leading zeros in the exponent. */
static size_t fmt_f32(char *o, size_t cap, float f) {
    int n = snprintf(o, cap, "%.9g", (double)f);
    if (n < 0 || (size_t)n >= cap) return 0;
    if (!strchr(o, '.') && !strchr(o, 'e') && (size_t)n + 2 < cap) {
        o[n++] = '.';
        o[n++] = '0';
        o[n] = '\0';
    }
    char *e = strchr(o, 'e');
    if (e) {
        char *start = e + 1, *end = start + 1;
        if (*start == '-') start++;
        if (*start == '+') end = start + 1;
        while (*end == '0' && end[1]) end++;
        if (end != start) {
            memmove(start, end, (size_t)(o + n - end) + 1);
            n -= (int)(end - start);
        }
    }
    return (size_t)n;
}

/* The first element of a FP32 input that is not finite, to name in an
 * error about an output that is not: -1 if none. */
static int64_t first_non_finite(const sj_tensor *t) {
    if (t->dtype != SJ_F32) return -1;
    int64_t n = sj_tensor_numel(t);
    for (int64_t k = 0; k < n; k++)
        if (!isfinite(t->data[k])) return k;
    return -1;
}

/* out's data as a JSON array. A non-finite FP32 element has no JSON form:
 * that is a 400 naming the output (and the input whose nan or inf it came
 * from, when one holds one), never a 500 — the values are what the model
 * computes for what the client sent, and binary data carries them. */
static bool put_data(out_buf *b, srv_model *m, const decoded *d, const sj_tensor *t,
                     const char *name, srv_response *r) {
    int64_t n = sj_tensor_numel(t);
    ob_put(b, "[", 1);
    for (int64_t k = 0; k < n && !b->failed; k++) {
        char tmp[48];
        size_t len = 0;
        if (k) tmp[len++] = ',';
        switch (t->dtype) {
        case SJ_F32:
            if (!isfinite(t->data[k])) {
                char from[256] = "";
                for (int i = 0; i < m->n_in && !from[0]; i++) {
                    int64_t j = first_non_finite(&d->t[i]);
                    if (j >= 0)
                        snprintf(from, sizeof from, " (input '%s' holds %g at element %lld)",
                                 m->in[i].name, (double)d->t[i].data[j], (long long)j);
                }
                srv_error(r, 400, "output '%s': element %lld is %g, which JSON cannot carry%s; ask "
                          "for the output as binary data (binary_data)", name, (long long)k,
                          (double)t->data[k], from);
                return false;
            }
            len += fmt_f32(tmp + len, sizeof tmp - len, t->data[k]);
            break;
        case SJ_I64: len += (size_t)snprintf(tmp + len, sizeof tmp - len, "%lld", (long long)t->i64[k]); break;
        case SJ_I32: len += (size_t)snprintf(tmp + len, sizeof tmp - len, "%d", (int)t->i32[k]); break;
        case SJ_BOOL: len += (size_t)snprintf(tmp + len, sizeof tmp - len, "%s", t->b8[k] ? "true" : "false"); break;
        default:
            srv_error(r, 500, "output '%s': unhandled dtype", name);
            return false;
        }
        ob_put(b, tmp, len);
    }
    ob_put(b, "]", 1);
    return true;
}

static void put_shape(out_buf *b, const sj_tensor *t) {
    ob_put(b, "[", 1);
    for (int k = 0; k < t->rank; k++) {
        char tmp[32];
        int n = snprintf(tmp, sizeof tmp, "%s%lld", k ? "," : "", (long long)t->dims[k]);
        ob_put(b, tmp, (size_t)n);
    }
    ob_put(b, "]", 1);
}

/* Which outputs, each JSON or binary, from 'outputs' and the request-level
 * binary_data_output. */
static bool pick_outputs(srv_model *m, json_t *req, bool want[], bool binary[], srv_response *r) {
    json_t *p = json_object_get(req, "parameters");
    bool all_binary = json_is_true(json_object_get(p, "binary_data_output"));
    json_t *outs = json_object_get(req, "outputs");
    for (int i = 0; i < m->n_out; i++) {
        want[i] = !outs;
        binary[i] = all_binary;
    }
    if (!outs) return true;
    if (!json_is_array(outs)) {
        srv_error(r, 400, "'outputs' must be an array");
        return false;
    }
    size_t k;
    json_t *o;
    json_array_foreach(outs, k, o) {
        const char *name = json_string_value(json_object_get(o, "name"));
        if (!name) {
            srv_error(r, 400, "outputs[%zu]: needs a 'name'", k);
            return false;
        }
        int i = find_output(m, name);
        if (i < 0) {
            srv_error(r, 400, "outputs[%zu]: model '%s' has no output '%.128s'", k, m->name, name);
            return false;
        }
        want[i] = true;
        json_t *b = json_object_get(json_object_get(o, "parameters"), "binary_data");
        if (b) binary[i] = json_is_true(b);
    }
    return true;
}

/* A budget refused: 503 while others hold the memory (a retry may fit),
 * else this request alone needs more than the server allows (self_status,
 * self_msg: what to do instead). */
static void over_budget(srv_model *m, const srv_json_account *a, unsigned self_status,
                        const char *self_msg, srv_response *r) {
    srv_server *s = m->srv;
    if (a->over_self) {
        atomic_fetch_add(&s->json_over_limit, 1);
        srv_error(r, self_status, "%s %zu bytes of memory %s; %s (the limit is "
                  "--max-json-memory-bytes)", self_msg, s->json.limit,
                  self_status == 413 ? "to parse" : "to write",
                  self_status == 413 ? "send large tensors as binary data (binary_data_size)"
                                     : "ask for large outputs as binary data (binary_data) or "
                                       "send fewer rows");
    } else {
        atomic_fetch_add(&s->json_busy, 1);
        srv_error(r, 503, "the server's JSON memory (%zu bytes, --max-json-memory-bytes) is held "
                  "by other requests now; retry", s->json.limit);
    }
}

static void respond(srv_model *m, json_t *id, const decoded *d, const sj_tensor *out,
                    const bool want[], const bool binary[], srv_json_account *a, srv_response *r) {
    out_buf b = {.a = a};
    size_t bin_len = 0;
    ob_str(&b, "{\"model_name\":");
    ob_name(&b, m->name);
    ob_str(&b, ",\"model_version\":\"1\",\"outputs\":[");
    bool first = true;
    for (int i = 0; i < m->n_out && !b.failed; i++) {
        if (!want[i]) continue;
        ob_str(&b, first ? "{\"name\":" : ",{\"name\":");
        first = false;
        ob_name(&b, m->out[i].name);
        ob_str(&b, ",\"datatype\":\"");
        ob_str(&b, v2_dtype(out[i].dtype));
        ob_str(&b, "\",\"shape\":");
        put_shape(&b, &out[i]);
        if (binary[i]) {
            size_t n = (size_t)sj_tensor_numel(&out[i]) * sj_dtype_size(out[i].dtype);
            char tmp[80];
            int k = snprintf(tmp, sizeof tmp, ",\"parameters\":{\"binary_data_size\":%zu}}", n);
            ob_put(&b, tmp, (size_t)k);
            bin_len += n;
        } else {
            ob_str(&b, ",\"data\":");
            if (!put_data(&b, m, d, &out[i], m->out[i].name, r)) {
                free(b.p);
                srv_json_unreserve(a->pool, b.cap);
                return;
            }
            ob_str(&b, "}");
        }
    }
    ob_str(&b, "]");
    if (json_is_string(id)) {
        ob_str(&b, ",\"id\":");
        ob_json(&b, id);
    }
    ob_str(&b, "}");
    size_t json_len = b.len;
    /* The binary outputs after the JSON, in the order listed. */
    if (bin_len && ob_grow(&b, bin_len, true))
        for (int i = 0; i < m->n_out; i++) {
            if (!want[i] || !binary[i]) continue;
            size_t n = (size_t)sj_tensor_numel(&out[i]) * sj_dtype_size(out[i].dtype);
            memcpy(b.p + b.len, out[i].bytes, n);
            b.len += n;
        }
    if (b.failed) {
        free(b.p);
        srv_json_unreserve(a->pool, b.cap);
        if (b.oom)
            srv_error(r, 503, "out of memory writing the response");
        else
            over_budget(m, a, 400, "the response needs more than the server's", r);
        return;
    }
    /* Doubling left up to half the buffer unused: given back. Only then is
     * it reallocated (a realloc to the same size may move the buffer too),
     * and a failed shrink keeps the buffer as it was. */
    if (b.len && b.len < b.cap) {
        char *p = realloc(b.p, b.len);
        if (p) {
            srv_json_unreserve(a->pool, b.cap - b.len);
            b.p = p;
            b.cap = b.len;
        }
    }
    free(r->body);
    r->status = 200;
    r->body = b.p;
    r->len = b.len;
    r->json_len = bin_len ? (long)json_len : -1;
    r->pool = a->pool;
    r->held = b.cap;
}

void srv_infer(srv_model *m, const char *body, size_t len, const char *header_len, srv_response *r) {
    size_t json_len = len;
    if (header_len) {
        char *end;
        errno = 0;
        unsigned long long h = strtoull(header_len, &end, 10);
        if (errno || end == header_len || *end || header_len[0] == '-' || h > len) {
            srv_error(r, 400, "Inference-Header-Content-Length '%.32s' is not a length within the "
                      "%zu-byte body", header_len, len);
            return;
        }
        json_len = (size_t)h;
    }
    json_error_t err;
    /* Every jansson allocation from here to the end counts against the
     * server's JSON pool: the parsed request (freed before the model runs)
     * and the id echoed. */
    srv_json_account acct;
    srv_json_account_begin(&acct, &m->srv->json);
    json_t *req = json_loadb(body, json_len, JSON_REJECT_DUPLICATES, &err);
    if (!req && (acct.over_self || acct.over_pool)) {
        over_budget(m, &acct, 413, "the request's JSON needs more than the server's", r);
        srv_json_account_end(&acct);
        return;
    }
    if (!req) {
        srv_error(r, 400, "malformed JSON at line %d, column %d: %s", err.line, err.column, err.text);
        srv_json_account_end(&acct);
        return;
    }
    decoded *d = calloc(1, sizeof *d);
    sj_tensor out[SRV_MAX_IO];
    memset(out, 0, sizeof out);
    bool want[SRV_MAX_IO], binary[SRV_MAX_IO];
    if (!d) {
        srv_error(r, 503, "out of memory");
    } else if (!json_is_object(req)) {
        srv_error(r, 400, "the request must be a JSON object");
    } else {
        d->rows = m->has_dyn ? -1 : 1;
        bool ok = decode_inputs(m, json_object_get(req, "inputs"), d, r) &&
                  take_binary(m, body + json_len, len - json_len, d, r) &&
                  pick_outputs(m, req, want, binary, r);
        if (ok && d->rows < 0) d->rows = 1;
        if (ok) {
            /* The tree is done with: its memory goes back before the run,
             * so the response can have it. */
            json_t *id = json_incref(json_object_get(req, "id"));
            json_decref(req);
            req = NULL;
            sj_status st = srv_model_run(m, d->rows, d->t, out);
            if (st == SJ_OK)
                respond(m, id, d, out, want, binary, &acct, r);
            else if (st == SJ_E_SHAPE || st == SJ_E_INVALID_ARG || st == SJ_E_OUT_OF_RANGE)
                srv_error(r, 400, "%s", sj_ctx_last_error(m->srv->ctx));
            else if (st == SJ_E_STATE)
                srv_error(r, 503, "%s", sj_ctx_last_error(m->srv->ctx));
            else
                srv_error(r, 500, "model '%s': %s: %s", m->name, sj_status_str(st),
                          sj_ctx_last_error(m->srv->ctx));
            json_decref(id);
            for (int i = 0; i < m->n_out; i++) sj_tensor_free(m->srv->ctx, &out[i]);
        }
        decoded_free(d);
    }
    free(d);
    json_decref(req);
    srv_json_account_end(&acct);
}

/* Artifact bytes: writer and a reader that checks every count, offset and
 * size against what remains before it allocates or copies anything. */
#include <string.h>

#include <llvm-c/blake3.h>

#include "core/hash.h"
#include "plan/code_bundle.h"
#include "plan/artifact_impl.h"
#include "plan/plan.h"

static const char magic[8] = {'S', 'J', 'A', 'R', 'T', 'I', 'F', 'C'};
enum { HEADER_BYTES = 24, TRAILER_BYTES = 8 };

/* ---- writer: a sizing pass (buf NULL) then a writing pass ---- */

typedef struct writer {
    uint8_t *buf;
    size_t pos;
} writer;

static void put(writer *w, const void *p, size_t n) {
    if (w->buf) memcpy(w->buf + w->pos, p, n);
    w->pos += n;
}
static void put_u32(writer *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}
static void put_u64(writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}
static void put_i32(writer *w, int32_t v) { put_u32(w, (uint32_t)v); }
static void put_i64(writer *w, int64_t v) { put_u64(w, (uint64_t)v); }
static void put_str(writer *w, const char *s) {
    size_t n = strlen(s);
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

/* code_at (NULL: not wanted) gets where each code blob's bytes start. */
static void put_body(writer *w, const sj_artifact *a, size_t *code_at) {
    const char *strs[] = {a->target, a->triple, a->cpu, a->features,
                          a->shapejit_version, a->llvm_version, a->externs, a->tuning};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) put_str(w, strs[i]);
    put(w, a->graph_hash, 32);
    put_u64(w, a->options_hash);
    const sj_launch_plan *p = &a->plan;
    put_i64(w, p->extent);
    put_i64(w, p->arena_bytes);
    put_i64(w, p->sub_rows);
    put_u32(w, (uint32_t)p->n_kernels);
    for (int i = 0; i < p->n_kernels; i++) {
        put_str(w, p->kernels[i].name);
        put(w, p->kernels[i].code, sizeof p->kernels[i].code);
    }
    put_u32(w, (uint32_t)p->n_slots);
    for (int i = 0; i < p->n_slots; i++) {
        put_u32(w, (uint32_t)p->slots[i].kind);
        put_i32(w, p->slots[i].index);
        put_i64(w, p->slots[i].offset);
        put_i64(w, p->slots[i].bytes);
    }
    put_u32(w, (uint32_t)p->n_launches);
    for (int i = 0; i < p->n_launches; i++) {
        const sj_launch *l = &p->launches[i];
        put_i32(w, l->kernel);
        put_i32(w, l->first_slot);
        put_i32(w, l->n_slots);
        put_i32(w, l->first_word);
        put_i32(w, l->n_words);
        for (int d = 0; d < 3; d++) put_u32(w, l->grid[d]);
        for (int d = 0; d < 3; d++) put_u32(w, l->block[d]);
        put_u32(w, l->shared_bytes);
    }
    put_u32(w, (uint32_t)p->n_launch_slots);
    for (int i = 0; i < p->n_launch_slots; i++) put_i32(w, p->launch_slots[i]);
    put_u32(w, (uint32_t)p->n_words);
    for (int i = 0; i < p->n_words; i++) put_i64(w, p->words[i]);
    put_u32(w, (uint32_t)a->n_code);
    for (int i = 0; i < a->n_code; i++) {
        put_u32(w, (uint32_t)a->code[i].format);
        put_u64(w, a->code[i].len);
        if (code_at) code_at[i] = w->pos;
        put(w, a->code[i].bytes, a->code[i].len);
    }
}

static sj_status serialize(const sj_artifact *a, uint8_t **out, size_t *len, size_t *code_at) {
    writer sizing = {0};
    put_body(&sizing, a, NULL);
    size_t total = HEADER_BYTES + sizing.pos + TRAILER_BYTES;
    writer w = {sj_alloc(a->ctx, total), 0};
    if (!w.buf) return sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory for %zu bytes", total);
    put(&w, magic, sizeof magic);
    put_u32(&w, a->format_version);
    put_u32(&w, 0);
    put_u64(&w, sizing.pos);
    put_body(&w, a, code_at);
    put_u64(&w, sj__fnv1a(SJ_FNV_OFFSET, w.buf, w.pos));
    *out = w.buf;
    *len = w.pos;
    return SJ_OK;
}

sj_status sj_artifact_serialize(const sj_artifact *a, uint8_t **out, size_t *len) {
    return serialize(a, out, len, NULL);
}

static void add_part(sj_artifact_part *p, const uint8_t *bytes, size_t at, size_t len) {
    p->offset = at;
    p->len = len;
    llvm_blake3_hasher h;
    llvm_blake3_hasher_init(&h);
    llvm_blake3_hasher_update(&h, bytes + at, len);
    llvm_blake3_hasher_finalize(&h, p->key, sizeof p->key);
}

static sj_status serialize_parts(const sj_artifact *a, uint8_t **out, size_t *len,
                                 sj_artifact_part **parts, int *n_parts) {
    *out = NULL;
    *len = 0;
    *parts = NULL;
    *n_parts = 0;
    size_t *code_at = sj_calloc(a->ctx, (size_t)a->n_code + 1, sizeof *code_at);
    if (!code_at) return sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory");
    sj_status st = serialize(a, out, len, code_at);
    /* a bundle's pieces (host objects, PTX or cubins, one per kernel) one
     * part each, any other blob whole */
    int n = 0;
    sj_code_piece **pieces = st == SJ_OK ? sj_calloc(a->ctx, (size_t)a->n_code + 1, sizeof *pieces) : NULL;
    int *n_pieces = st == SJ_OK ? sj_calloc(a->ctx, (size_t)a->n_code + 1, sizeof *n_pieces) : NULL;
    if (st == SJ_OK && (!pieces || !n_pieces)) st = sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory");
    for (int i = 0; i < a->n_code && st == SJ_OK; i++) {
        const sj_code_blob *c = &a->code[i];
        if (c->format != SJ_CODE_HOST_NATIVE && sj__code_bundle_is(c->bytes, c->len))
            st = sj__code_bundle_parse(a->ctx, c->bytes, c->len, &pieces[i], &n_pieces[i]);
        else
            n_pieces[i] = c->len > 0;
        n += n_pieces[i];
    }
    sj_artifact_part *p = st == SJ_OK && n ? sj_alloc(a->ctx, (size_t)n * sizeof *p) : NULL;
    if (st == SJ_OK && n && !p) st = sj_fail(a->ctx, SJ_E_NOMEM, "artifact: out of memory");
    int k = 0;
    for (int i = 0; i < a->n_code && st == SJ_OK; i++) {
        if (!pieces[i] && n_pieces[i]) add_part(&p[k++], *out, code_at[i], a->code[i].len);
        for (int j = 0; pieces[i] && j < n_pieces[i]; j++)
            add_part(&p[k++], *out, code_at[i] + pieces[i][j].offset, pieces[i][j].len);
    }
    for (int i = 0; pieces && i < a->n_code; i++) sj_free(a->ctx, pieces[i]);
    sj_free(a->ctx, pieces);
    sj_free(a->ctx, n_pieces);
    sj_free(a->ctx, code_at);
    if (st != SJ_OK) {
        sj_free(a->ctx, p);
        sj_free(a->ctx, *out);
        *out = NULL;
        *len = 0;
        return st;
    }
    *parts = p;
    *n_parts = n;
    return SJ_OK;
}

/* ---- reader ---- */

typedef struct reader {
    sj_ctx *ctx;
    const uint8_t *p;
    size_t pos, len;
    sj_status st;
} reader;

static bool need(reader *r, size_t n, const char *what) {
    if (r->st != SJ_OK) return false;
    if (n > r->len - r->pos) {
        r->st = sj_fail(r->ctx, SJ_E_CORRUPT, "artifact: truncated in %s at byte %zu (%zu needed, %zu left)",
                        what, r->pos, n, r->len - r->pos);
        return false;
    }
    return true;
}
static uint64_t get_le(reader *r, int bytes, const char *what) {
    if (!need(r, (size_t)bytes, what)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += (size_t)bytes;
    return v;
}
static uint32_t get_u32(reader *r, const char *what) { return (uint32_t)get_le(r, 4, what); }
static int32_t get_i32(reader *r, const char *what) { return (int32_t)get_u32(r, what); }
static int64_t get_i64(reader *r, const char *what) { return (int64_t)get_le(r, 8, what); }

static void bad(reader *r, const char *fmt, const char *what, uint64_t v) {
    if (r->st == SJ_OK) r->st = sj_fail(r->ctx, SJ_E_CORRUPT, fmt, what, (unsigned long long)v);
}

/* A count of elements of at least `min_bytes` each: it must fit in what remains. */
static int get_count(reader *r, size_t min_bytes, const char *what) {
    uint32_t n = get_u32(r, what);
    if (r->st != SJ_OK) return 0;
    if (n > INT32_MAX || (uint64_t)n * min_bytes > r->len - r->pos) {
        bad(r, "artifact: %s count %llu exceeds the bytes that remain", what, n);
        return 0;
    }
    return (int)n;
}

static void *get_array(reader *r, int n, size_t elem) {
    if (r->st != SJ_OK) return NULL;
    void *p = sj_calloc(r->ctx, (size_t)(n ? n : 1), elem);
    if (!p) r->st = sj_fail(r->ctx, SJ_E_NOMEM, "artifact: out of memory");
    return p;
}

static void get_str(reader *r, sj_artifact *a, char **field, size_t max, const char *what) {
    uint32_t n = get_u32(r, what);
    if (r->st != SJ_OK) return;
    if (n > max) {
        bad(r, "artifact: %s is %llu bytes long, too long", what, n);
        return;
    }
    if (!need(r, n, what)) return;
    if (memchr(r->p + r->pos, 0, n)) {
        bad(r, "artifact: %s holds a NUL byte at offset %llu", what, r->pos);
        return;
    }
    char *s = sj_alloc(r->ctx, (size_t)n + 1);
    if (!s) {
        r->st = sj_fail(r->ctx, SJ_E_NOMEM, "artifact: out of memory");
        return;
    }
    memcpy(s, r->p + r->pos, n);
    s[n] = 0;
    r->pos += n;
    sj_free(a->ctx, *field);
    *field = s;
}

static void get_plan(reader *r, sj_launch_plan *p) {
    p->extent = get_i64(r, "extent");
    p->arena_bytes = get_i64(r, "arena bytes");
    p->sub_rows = get_i64(r, "sub-batch rows");
    p->n_kernels = get_count(r, 4 + 32, "kernel");
    p->kernels = get_array(r, p->n_kernels, sizeof *p->kernels);
    for (int i = 0; i < p->n_kernels && r->st == SJ_OK; i++) {
        uint32_t n = get_u32(r, "kernel name");
        if (n == 0 || n >= SJ_KERNEL_NAME_MAX) bad(r, "artifact: %s length %llu", "kernel name", n);
        else if (need(r, n, "kernel name")) {
            memcpy(p->kernels[i].name, r->p + r->pos, n);
            r->pos += n;
        }
        if (r->st == SJ_OK && need(r, sizeof p->kernels[i].code, "kernel code key")) {
            memcpy(p->kernels[i].code, r->p + r->pos, sizeof p->kernels[i].code);
            r->pos += sizeof p->kernels[i].code;
        }
    }
    p->n_slots = get_count(r, 24, "slot");
    p->slots = get_array(r, p->n_slots, sizeof *p->slots);
    for (int i = 0; i < p->n_slots && r->st == SJ_OK; i++) {
        uint32_t kind = get_u32(r, "slot kind");
        if (kind > SJ_SLOT_PACKED) bad(r, "artifact: %s %llu unknown", "slot kind", kind);
        p->slots[i].kind = (sj_slot_kind)kind;
        p->slots[i].index = get_i32(r, "slot index");
        p->slots[i].offset = get_i64(r, "slot offset");
        p->slots[i].bytes = get_i64(r, "slot bytes");
    }
    p->n_launches = get_count(r, 48, "launch");
    p->launches = get_array(r, p->n_launches, sizeof *p->launches);
    for (int i = 0; i < p->n_launches && r->st == SJ_OK; i++) {
        sj_launch *l = &p->launches[i];
        l->kernel = get_i32(r, "launch");
        l->first_slot = get_i32(r, "launch");
        l->n_slots = get_i32(r, "launch");
        l->first_word = get_i32(r, "launch");
        l->n_words = get_i32(r, "launch");
        for (int d = 0; d < 3; d++) l->grid[d] = get_u32(r, "launch");
        for (int d = 0; d < 3; d++) l->block[d] = get_u32(r, "launch");
        l->shared_bytes = get_u32(r, "launch");
    }
    p->n_launch_slots = get_count(r, 4, "launch slot");
    p->launch_slots = get_array(r, p->n_launch_slots, sizeof *p->launch_slots);
    for (int i = 0; i < p->n_launch_slots && r->st == SJ_OK; i++)
        p->launch_slots[i] = get_i32(r, "launch slot");
    p->n_words = get_count(r, 8, "word");
    p->words = get_array(r, p->n_words, sizeof *p->words);
    for (int i = 0; i < p->n_words && r->st == SJ_OK; i++) p->words[i] = get_i64(r, "word");
    if (r->st == SJ_OK) r->st = sj__plan_validate(r->ctx, p);
}

static void get_body(reader *r, sj_artifact *a) {
    char **strs[] = {&a->target, &a->triple, &a->cpu, &a->features,
                     &a->shapejit_version, &a->llvm_version, &a->externs, &a->tuning};
    static const char *names[] = {"target", "triple", "cpu", "features",
                                  "shapejit version", "llvm version", "externs", "tuning"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) get_str(r, a, strs[i], 1u << 16, names[i]);
    if (need(r, 32, "graph hash")) {
        memcpy(a->graph_hash, r->p + r->pos, 32);
        r->pos += 32;
    }
    a->options_hash = (uint64_t)get_i64(r, "options hash");
    get_plan(r, &a->plan);
    int n = get_count(r, 12, "code blob");
    for (int i = 0; i < n && r->st == SJ_OK; i++) {
        uint32_t fmt = get_u32(r, "code format");
        uint64_t len = (uint64_t)get_i64(r, "code length");
        if (fmt > SJ_CODE_CUBIN) bad(r, "artifact: %s %llu unknown", "code format", fmt);
        else if (r->st == SJ_OK && len > r->len - r->pos)
            bad(r, "artifact: %s %llu exceeds the bytes that remain", "code length", len);
        else if (r->st == SJ_OK) {
            r->st = sj__artifact_add_code(a, (sj_code_format)fmt, r->p + r->pos, (size_t)len);
            r->pos += (size_t)len;
        }
    }
    if (r->st == SJ_OK && r->pos != r->len)
        bad(r, "artifact: %s: %llu bytes follow the last code blob", "body", r->len - r->pos);
}

sj_status sj_artifact_deserialize(sj_ctx *ctx, const void *bytes, size_t len, sj_artifact **out) {
    *out = NULL;
    const uint8_t *p = bytes;
    if (len < HEADER_BYTES + TRAILER_BYTES || memcmp(p, magic, sizeof magic))
        return sj_fail(ctx, SJ_E_CORRUPT, "artifact: %zu bytes without the artifact header", len);
    reader h = {ctx, p, sizeof magic, len, SJ_OK};
    uint32_t version = get_u32(&h, "version");
    get_u32(&h, "header");
    uint64_t body = (uint64_t)get_i64(&h, "body length");
    if (body != len - HEADER_BYTES - TRAILER_BYTES)
        return sj_fail(ctx, SJ_E_CORRUPT, "artifact: body of %llu bytes in %zu bytes (truncated?)",
                       (unsigned long long)body, len);
    reader t = {ctx, p, len - TRAILER_BYTES, len, SJ_OK};
    if ((uint64_t)get_i64(&t, "checksum") != sj__fnv1a(SJ_FNV_OFFSET, p, len - TRAILER_BYTES))
        return sj_fail(ctx, SJ_E_CORRUPT, "artifact: checksum mismatch (altered bytes)");
    if (version != SJ_ARTIFACT_FORMAT_VERSION)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "artifact: format version %u, this build reads %u",
                       version, SJ_ARTIFACT_FORMAT_VERSION);
    sj_artifact *a;
    SJ_TRY(sj__artifact_new(ctx, &a));
    a->format_version = version;
    reader r = {ctx, p, HEADER_BYTES, len - TRAILER_BYTES, SJ_OK};
    get_body(&r, a);
    if (r.st != SJ_OK) {
        sj_artifact_destroy(a);
        return r.st;
    }
    *out = a;
    return SJ_OK;
}

sj_status sj_artifact_code_parts(sj_ctx *ctx, const void *bytes, size_t len, sj_artifact_part **parts,
                                 int *n_parts) {
    if (!parts || !n_parts) return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *parts = NULL;
    *n_parts = 0;
    sj_artifact *a;
    SJ_TRY(sj_artifact_deserialize(ctx, bytes, len, &a));
    /* Writing is deterministic, so the offsets of the bytes written again
     * are those of the bytes given; a difference is refused, not guessed. */
    uint8_t *again;
    size_t again_len;
    sj_status st = serialize_parts(a, &again, &again_len, parts, n_parts);
    sj_artifact_destroy(a);
    if (st != SJ_OK) return st;
    if (again_len != len || memcmp(again, bytes, len) != 0) {
        sj_free(ctx, *parts);
        *parts = NULL;
        *n_parts = 0;
        st = sj_fail(ctx, SJ_E_CORRUPT,
                     "artifact: %zu bytes that this library writes differently (%zu bytes): not its format",
                     len, again_len);
    }
    sj_free(ctx, again);
    return st;
}

/* Parts compressed against parts (issue #33). Most of the distinct kernel
 * objects of a ladder are one kernel compiled at another bucket extent
 * (attention kernels bake the extent into immediates: strides, loop
 * bounds), so two of them are nearly the same bytes; compressed alone each
 * pays for all of them (BERT-base, pow2:1:512: 56 distinct objects, 91 KB
 * of the store's 113 KB).
 *
 * Layout (schema version 4, created in store_open.c): parts.dict_key,
 * indexed, is the part whose raw bytes a part's blob was compressed
 * against (a raw-content zstd dictionary, as a row's base is), NULL for a
 * plain frame. A reference is always plain: a put writes a part against
 * one only when no part is compressed against it, and writes the
 * reference plain first when what is stored is not (no chains: a get
 * decompresses at most one reference per part, and a reference that is
 * itself compressed against another part reads as damage). Triggers keep
 * a reference as long as a part compressed against it: a part no row
 * places stays while one is, and goes with the last of them (rm, gc,
 * eviction, a put's replaced part list or rewritten part). It is a part
 * like any other, counted once in the stored bytes, found by its key and
 * its names, and a row that places it again uses it as it is.
 *
 * A put lists the plain parts the graph's stored rows place (every key
 * component but the extent; those of the rows nearest its extent first),
 * loads and checks the SJ_STORE_PART_REF_TRIES nearest each of its parts
 * by size (the same kernel at another extent is about as long), adds its
 * own earlier parts that are new to the store, compresses the part against
 * each of the nearest of all those and keeps the smallest frame when it is
 * at most half the plain one (else the part stays plain and may serve as
 * a reference itself). On that ladder the parts take 52 KB instead of
 * 91 KB, one bucket's 15 KB instead of 16 KB (three of its own parts
 * against a fourth). Letting a part compressed against another be a reference too
 * (chains) would save some 4 KB more there, at more decompressions per
 * get and triggers that recurse.
 *
 * A get reads each part with its reference (one statement, in the row's
 * snapshot), decompresses the plain parts first, then each other part
 * against its reference: a part of the row itself when it places it,
 * else the reference checked against its own digest first, once per get
 * (a BERT bucket's get reads up to five references besides its eleven
 * parts; it took 0.20-0.29 ms before and after, within the noise).
 * A damaged or missing reference is SJ_E_CORRUPT for every part and row
 * compressed against it, naming it; a put of a row placing it rewrites it
 * plain (as any damaged part), which repairs them all, and a put of one
 * of those parts writes it against another reference or plain. */
#include "store/store_impl.h"
#include "core/hash.h"

#include <stdio.h>
#include <string.h>

/* The stored parts nearest in size a put tries for each of its parts. */
#define SJ_STORE_PART_REF_TRIES 4
/* At most this many of the graph's stored parts are listed per put. */
#define SJ_STORE_PART_REF_LIST 4096

/* --- a get: the reference --- */

sj_status sj__store_part_ref_load(sj_ctx *ctx, ZSTD_DCtx *dctx, int64_t cap, const sj_store_part_row *r,
                                 void **dict, char *why, size_t why_len) {
    *dict = NULL;
    if (!r->has_ref) return SJ_OK;
    char detail[SJ_STORE_WHY_MAX], hex[65];
    sj_status st = SJ_E_CORRUPT;
    if (!r->ref) snprintf(detail, sizeof detail, "missing from the parts table");
    else if (r->ref->has_ref) snprintf(detail, sizeof detail, "itself compressed against another part");
    else st = sj__store_stored_unpack(ctx, dctx, cap, r->ref_key, r->ref, dict, detail, sizeof detail);
    if (st == SJ_E_CORRUPT) {
        sj__hex_encode(r->ref_key, 32, hex);
        snprintf(why, why_len, "its reference part %s: %s", hex, detail);
    }
    return st;
}

/* --- a put: the candidates --- */

/* A stored part the put may compress against, as listed: loaded is its
 * index in pk->refs once read and checked, -1 before, -2 when it was not
 * wanted, damaged or gone. */
typedef struct candidate {
    uint8_t key[32];
    int64_t len;
    int loaded;
    bool wanted;
} candidate;

/* The larger of two sizes over the smaller: 1 for equal sizes. */
static double size_ratio(int64_t a, int64_t b) {
    if (a < 1) a = 1;
    if (b < 1) b = 1;
    return a > b ? (double)a / (double)b : (double)b / (double)a;
}

/* The plain parts the stored rows of key's graph place, those of the rows
 * nearest its extent first (by ratio, as bases are chosen); *c sj_alloc'ed.
 * Caller holds s->mu. */
static sj_status graph_parts(sj_store *s, const sj_store_key *key, candidate **c, int *n) {
    static const char sql[] =
        "SELECT p.key, p.raw_size FROM artifacts a JOIN artifact_parts r ON r.artifact_id = a.id "
        "JOIN parts p ON p.key = r.part_key WHERE a.graph_hash = ?1 AND a.options_hash = ?3 AND "
        "a.target_triple = ?4 AND a.target_cpu = ?5 AND a.target_features = ?6 AND a.artifact_version = ?7 AND "
        "a.shapejit_version = ?8 AND a.compiler_version = ?9 AND p.dict_key IS NULL GROUP BY p.key "
        "ORDER BY min(max(a.extent, ?2) * 1.0 / max(1, min(a.extent, ?2))), p.rowid DESC LIMIT ?10";
    *c = NULL;
    *n = 0;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return sj__store_sql_fail(s, "put: listing parts");
    char gh[65], oh[65];
    sj__store_bind_key(q, 1, key, gh, oh);
    sqlite3_bind_int(q, 10, SJ_STORE_PART_REF_LIST);
    sj_status st = SJ_OK;
    int rc, cap = 0;
    while (st == SJ_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (sqlite3_column_bytes(q, 0) != 32) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            candidate *grown = sj_realloc(s->ctx, *c, (size_t)cap * sizeof **c);
            if (!grown) {
                st = sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory listing parts");
                break;
            }
            *c = grown;
        }
        candidate *k = &(*c)[(*n)++];
        memcpy(k->key, sqlite3_column_blob(q, 0), 32);
        k->len = sqlite3_column_int64(q, 1);
        k->loaded = -1;
        k->wanted = false;
    }
    if (st == SJ_OK && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "put: listing parts");
    sqlite3_finalize(q);
    return st;
}

/* Inserts candidate index `idx` at distance d into the sorted top list
 * (best[], dist[], *n of at most SJ_STORE_PART_REF_TRIES). */
static void top_insert(int *best, double *dist, int *n, int idx, double d) {
    int pos = *n;
    while (pos > 0 && dist[pos - 1] > d) pos--;
    if (pos >= SJ_STORE_PART_REF_TRIES) return;
    int last = *n < SJ_STORE_PART_REF_TRIES ? *n : SJ_STORE_PART_REF_TRIES - 1;
    memmove(&best[pos + 1], &best[pos], (size_t)(last - pos) * sizeof *best);
    memmove(&dist[pos + 1], &dist[pos], (size_t)(last - pos) * sizeof *dist);
    best[pos] = idx;
    dist[pos] = d;
    if (*n < SJ_STORE_PART_REF_TRIES) (*n)++;
}

/* The listed parts nearest part p by size, other than p itself. */
static int nearest(const candidate *c, int n, const sj_store_part *p, int *best) {
    double dist[SJ_STORE_PART_REF_TRIES];
    int n_best = 0;
    for (int i = 0; i < n; i++)
        if (memcmp(c[i].key, p->key, 32) != 0) top_insert(best, dist, &n_best, i, size_ratio(c[i].len, (int64_t)p->len));
    return n_best;
}

static sj_status refs_grow(sj_ctx *ctx, sj_store_packed *pk, int *cap) {
    if (pk->n_refs < *cap) return SJ_OK;
    int n = *cap ? 2 * *cap : 8;
    sj_store_part_ref *grown = sj_realloc(ctx, pk->refs, (size_t)n * sizeof *grown);
    if (!grown) return sj_fail(ctx, SJ_E_NOMEM, "store put: out of memory for %d references", n);
    pk->refs = grown;
    *cap = n;
    return SJ_OK;
}

/* Reads the wanted listed parts (plain ones only: one may have changed
 * since it was listed), copies out. Caller holds s->mu. */
static sj_status wanted_read(sj_store *s, const candidate *c, int n, sj_store_part_row *rows) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT raw_size, digest, blob FROM parts WHERE key = ?1 AND dict_key IS NULL", -1,
                           &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "put: reading parts");
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < n; i++) {
        if (!c[i].wanted) continue;
        sqlite3_reset(q);
        sqlite3_bind_blob(q, 1, c[i].key, 32, SQLITE_STATIC);
        int rc = sqlite3_step(q);
        if (rc == SQLITE_ROW) st = sj__store_stored_copy(s->ctx, q, 0, &rows[i]);
        else if (rc != SQLITE_DONE) st = sj__store_sql_fail(s, "put: reading parts");
    }
    sqlite3_finalize(q);
    return st;
}

/* Whether each of the put's parts is stored (*stored[i]); caller holds
 * s->mu. */
static sj_status own_stored(sj_store *s, const sj_store_part *parts, int n_parts, bool *stored) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM parts WHERE key = ?1", -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "put: reading parts");
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < n_parts; i++) {
        sqlite3_reset(q);
        sqlite3_bind_blob(q, 1, parts[i].key, 32, SQLITE_STATIC);
        int rc = sqlite3_step(q);
        stored[i] = rc == SQLITE_ROW;
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "put: reading parts");
    }
    sqlite3_finalize(q);
    return st;
}

/* Checks the wanted parts read (outside the lock) and makes each sound
 * one a reference (c[i].loaded: its index in pk->refs, or -2). */
static sj_status wanted_check(sj_store *s, candidate *c, int n, sj_store_part_row *rows, sj_store_packed *pk,
                              int *cap) {
    ZSTD_DCtx *d = sj__store_dctx_take(s);
    if (!d) return sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory checking parts");
    sj_status st = SJ_OK;
    for (int i = 0; st == SJ_OK && i < n; i++) {
        c[i].loaded = -2;
        if (!rows[i].found) continue;
        void *raw = NULL;
        char why[SJ_STORE_WHY_MAX]; /* a damaged part is no error here: it is just not used */
        st = sj__store_stored_unpack(s->ctx, d, s->cfg.max_artifact_bytes, c[i].key, &rows[i], &raw, why, sizeof why);
        if (st == SJ_E_CORRUPT) {
            st = SJ_OK;
            continue;
        }
        if (st == SJ_OK) st = refs_grow(s->ctx, pk, cap);
        if (st != SJ_OK) {
            sj_free(s->ctx, raw);
            break;
        }
        sj_store_part_ref *r = &pk->refs[pk->n_refs];
        memcpy(r->key, c[i].key, 32);
        memcpy(r->digest, rows[i].digest, 32);
        r->raw = raw;
        r->len = (size_t)rows[i].raw_size;
        r->frame = rows[i].frame; /* moved */
        r->frame_len = rows[i].frame_len;
        rows[i].frame = NULL;
        r->owned = true;
        r->part = -1;
        c[i].loaded = pk->n_refs++;
    }
    sj__store_dctx_give(s, d);
    return st;
}

/* Lists the graph's parts, reads those nearest each of the put's parts
 * by size (nearest_of[i], n_nearest[i]) in one lock hold, and checks them
 * outside it: nearest_of then names references. stored[i]: whether the
 * put's part i is stored already. */
static sj_status stored_refs(sj_store *s, const sj_store_key *key, const sj_store_part *parts, int n_parts,
                             sj_store_packed *pk, int *cap, int (*nearest_of)[SJ_STORE_PART_REF_TRIES],
                             int *n_nearest, bool *stored) {
    candidate *c = NULL;
    int n = 0;
    pthread_mutex_lock(&s->mu);
    sj_status st = own_stored(s, parts, n_parts, stored);
    if (st == SJ_OK) st = graph_parts(s, key, &c, &n);
    for (int i = 0; st == SJ_OK && i < n_parts; i++) {
        n_nearest[i] = nearest(c, n, &parts[i], nearest_of[i]);
        for (int j = 0; j < n_nearest[i]; j++) c[nearest_of[i][j]].wanted = true;
    }
    sj_store_part_row *rows = st == SJ_OK && n ? sj_calloc(s->ctx, (size_t)n, sizeof *rows) : NULL;
    if (st == SJ_OK && n && !rows) st = sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory reading parts");
    if (st == SJ_OK && n) st = wanted_read(s, c, n, rows);
    pthread_mutex_unlock(&s->mu);
    if (st == SJ_OK && n) st = wanted_check(s, c, n, rows, pk, cap);
    /* nearest_of now names references (pk->refs), -2 for a damaged part */
    for (int i = 0; st == SJ_OK && i < n_parts; i++)
        for (int j = 0; j < n_nearest[i]; j++) nearest_of[i][j] = c[nearest_of[i][j]].loaded;
    for (int i = 0; rows && i < n; i++) sj__store_part_row_free(s->ctx, &rows[i]);
    sj_free(s->ctx, rows);
    sj_free(s->ctx, c);
    return st;
}

/* --- a put: packing each part --- */

/* Part j of the put as a reference (its bytes copied: zstd ignores a
 * dictionary that overlaps what it compresses); *idx its index. */
static sj_status own_ref(sj_store *s, const uint8_t *bytes, const sj_store_part *parts, int j, sj_store_packed *pk,
                         int *cap, int *idx) {
    for (int r = 0; r < pk->n_refs; r++)
        if (pk->refs[r].part == j) {
            *idx = r;
            return SJ_OK;
        }
    SJ_TRY(refs_grow(s->ctx, pk, cap));
    sj_store_part_ref *r = &pk->refs[pk->n_refs];
    r->raw = sj_alloc(s->ctx, (size_t)parts[j].len);
    if (!r->raw) return sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory for a reference");
    memcpy(r->raw, bytes + parts[j].offset, (size_t)parts[j].len);
    memcpy(r->key, parts[j].key, 32);
    memcpy(r->digest, pk->parts[j].digest, 32);
    r->len = (size_t)parts[j].len;
    r->frame = pk->parts[j].frame; /* borrowed */
    r->frame_len = pk->parts[j].frame_len;
    r->owned = false;
    r->part = j;
    *idx = pk->n_refs++;
    return SJ_OK;
}

/* Part i against each of its candidates (the references nearest it in
 * size: the stored ones, stored_near[], and its own earlier plain parts
 * new to the store), keeping the smallest frame when it halves the plain
 * one. */
static sj_status part_delta(sj_store *s, const uint8_t *bytes, const sj_store_part *parts, int i,
                            const int *stored_near, int n_stored_near, const bool *stored, sj_store_packed *pk,
                            int *cap) {
    sj_store_packed_part *pp = &pk->parts[i];
    int64_t len = (int64_t)parts[i].len;
    /* best[k] >= 0: a reference (pk->refs); <= -2: the put's part -best[k] - 2 */
    int best[SJ_STORE_PART_REF_TRIES], n_best = 0;
    double dist[SJ_STORE_PART_REF_TRIES];
    for (int k = 0; k < n_stored_near; k++)
        if (stored_near[k] >= 0)
            top_insert(best, dist, &n_best, stored_near[k], size_ratio((int64_t)pk->refs[stored_near[k]].len, len));
    for (int j = 0; j < i; j++)
        if (!stored[j] && pk->parts[j].ref < 0 && memcmp(parts[j].key, parts[i].key, 32) != 0)
            top_insert(best, dist, &n_best, -j - 2, size_ratio((int64_t)parts[j].len, len));
    for (int k = 0; k < n_best; k++) {
        int r = best[k];
        if (r <= -2) SJ_TRY(own_ref(s, bytes, parts, -r - 2, pk, cap, &r));
        const sj_store_part_ref *ref = &pk->refs[r];
        void *frame;
        size_t frame_len;
        SJ_TRY(sj__store_compress(s->ctx, s->cfg.compression_level, ref->raw, ref->len, bytes + parts[i].offset,
                                  (size_t)len, &frame, &frame_len));
        if (frame_len * 2 > pp->frame_len || (pp->ref >= 0 && frame_len >= pp->delta_len)) {
            sj_free(s->ctx, frame);
            continue;
        }
        sj_free(s->ctx, pp->delta);
        pp->delta = frame;
        pp->delta_len = frame_len;
        pp->ref = r;
    }
    return SJ_OK;
}

sj_status sj__store_parts_pack(sj_store *s, const sj_store_key *key, const uint8_t *bytes, const sj_store_part *parts,
                              int n_parts, sj_store_packed *pk) {
    pk->parts = sj_calloc(s->ctx, (size_t)n_parts, sizeof *pk->parts);
    int (*near)[SJ_STORE_PART_REF_TRIES] = sj_calloc(s->ctx, (size_t)n_parts, sizeof *near);
    int *n_near = sj_calloc(s->ctx, (size_t)n_parts, sizeof *n_near);
    bool *stored = sj_calloc(s->ctx, (size_t)n_parts, sizeof *stored);
    sj_status st = SJ_OK;
    if (!pk->parts || !near || !n_near || !stored)
        st = sj_fail(s->ctx, SJ_E_NOMEM, "store put: out of memory for %d parts", n_parts);
    else pk->n_parts = n_parts;
    for (int i = 0; st == SJ_OK && i < n_parts; i++) {
        const uint8_t *at = bytes + parts[i].offset;
        sj_store_packed_part *pp = &pk->parts[i];
        pp->ref = -1;
        sj__store_content_digest(parts[i].key, at, (size_t)parts[i].len, pp->digest);
        st = sj__store_compress(s->ctx, s->cfg.compression_level, NULL, 0, at, (size_t)parts[i].len, &pp->frame,
                                &pp->frame_len);
    }
    int cap = 0;
    if (st == SJ_OK) st = stored_refs(s, key, parts, n_parts, pk, &cap, near, n_near, stored);
    for (int i = 0; st == SJ_OK && i < n_parts; i++)
        st = part_delta(s, bytes, parts, i, near[i], n_near[i], stored, pk, &cap);
    sj_free(s->ctx, near);
    sj_free(s->ctx, n_near);
    sj_free(s->ctx, stored);
    return st;
}

void sj__store_part_refs_free(sj_ctx *ctx, sj_store_packed *pk) {
    for (int r = 0; r < pk->n_refs; r++) {
        sj_free(ctx, pk->refs[r].raw);
        if (pk->refs[r].owned) sj_free(ctx, pk->refs[r].frame);
    }
    sj_free(ctx, pk->refs);
    pk->refs = NULL;
    pk->n_refs = 0;
}

/* --- a put: writing --- */

/* Inserts or rewrites part `key` (upsert: the triggers on dict_key see a
 * rewritten part's old reference go). dict_key NULL: a plain frame. */
static sj_status part_upsert(sj_store *s, const uint8_t key[32], size_t len, const uint8_t digest[32],
                             const void *frame, size_t frame_len, const uint8_t *dict_key) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db,
                           "INSERT INTO parts(key, raw_size, stored_size, digest, blob, dict_key) "
                           "VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(key) DO UPDATE SET raw_size = "
                           "excluded.raw_size, stored_size = excluded.stored_size, digest = excluded.digest, "
                           "blob = excluded.blob, dict_key = excluded.dict_key",
                           -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "put: writing a part");
    sqlite3_bind_blob(q, 1, key, 32, SQLITE_STATIC);
    sqlite3_bind_int64(q, 2, (int64_t)len);
    sqlite3_bind_int64(q, 3, (int64_t)frame_len);
    sqlite3_bind_blob(q, 4, digest, 32, SQLITE_STATIC);
    sqlite3_bind_blob64(q, 5, frame, (sqlite3_uint64)frame_len, SQLITE_STATIC);
    if (dict_key) sqlite3_bind_blob(q, 6, dict_key, 32, SQLITE_STATIC);
    sj_status st = sqlite3_step(q) == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, "put: writing a part");
    sqlite3_finalize(q);
    return st;
}

/* The reference stored plain with its bytes: kept when what is stored is
 * that, else (gone since the put checked it, damaged, or rewritten against
 * another part) the put's checked copy written. */
static sj_status ref_ensure(sj_store *s, const sj_store_part_ref *r) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT raw_size, digest, blob FROM parts WHERE key = ?1 AND dict_key IS NULL", -1,
                           &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "put: reading a reference");
    bool found, keep;
    sj_status st = sj__store_stored_keep(s, q, r->key, r->raw, r->len, r->digest, &found, &keep);
    sqlite3_finalize(q);
    if (st != SJ_OK || keep) return st;
    return part_upsert(s, r->key, r->len, r->digest, r->frame, r->frame_len, NULL);
}

sj_status sj__store_part_is_reference(sj_store *s, const uint8_t key[32], bool *yes) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM parts WHERE dict_key = ?1 LIMIT 1", -1, &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "put: reading the references");
    sqlite3_bind_blob(q, 1, key, 32, SQLITE_STATIC);
    int rc = sqlite3_step(q);
    *yes = rc == SQLITE_ROW;
    sj_status st = rc == SQLITE_ROW || rc == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, "put: reading the references");
    sqlite3_finalize(q);
    return st;
}

sj_status sj__store_part_put(sj_store *s, const sj_store_part *p, const sj_store_packed *pk, int i) {
    const sj_store_packed_part *pp = &pk->parts[i];
    const sj_store_part_ref *ref = pp->ref >= 0 ? &pk->refs[pp->ref] : NULL;
    bool is_ref = false;
    if (ref) SJ_TRY(sj__store_part_is_reference(s, p->key, &is_ref));
    if (is_ref) ref = NULL; /* a reference stays plain: no chains */
    if (ref) SJ_TRY(ref_ensure(s, ref));
    return part_upsert(s, p->key, (size_t)p->len, pp->digest, ref ? pp->delta : pp->frame,
                       ref ? pp->delta_len : pp->frame_len, ref ? ref->key : NULL);
}

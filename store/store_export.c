/* export / import: rows moved between stores as a file of records.
 *
 * File: "SJSTORE1" then per row: "SJR2", graph hash (32), extent (i64),
 * options hash (32), artifact version (u32), then target triple, cpu,
 * features, shapejit version, compiler version (u32 length + bytes each),
 * raw size (i64), digest (32), the part count (u32) and per part its
 * offset (u64), len (u64) and key (32), frame length (u64), the zstd frame
 * of the whole artifact bytes. Integers little-endian. The digest is the
 * row's own, so an import checks what a get would; the part list makes
 * the import keep the parts shared (a put with those parts). A row with
 * no parts and no base is written with its own frame as it is stored; a
 * row with parts or a base (store_base.c: its frame means nothing without
 * it) is reassembled and checked as a get does and its bytes compressed
 * anew, and one that fails its check is left out (verify names it). The
 * importing put finds or makes its own bases.
 *
 * "SJR1" records (exports of shapejit before shared parts: the same but
 * with no part count or list) are still read, as rows without parts. */
#include "store/store_impl.h"
#include "core/hash.h"

#include "core/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char file_magic[8] = {'S', 'J', 'S', 'T', 'O', 'R', 'E', '1'};
static const char rec_magic[4] = {'S', 'J', 'R', '2'};
static const char rec_magic_v1[4] = {'S', 'J', 'R', '1'};


static bool put_int(FILE *f, uint64_t v, int n) {
    uint8_t b[8];
    sj__put_le(b, v, n);
    return fwrite(b, 1, (size_t)n, f) == (size_t)n;
}
static bool put_str(FILE *f, const char *s) {
    size_t n = strlen(sj__store_str(s));
    return put_int(f, n, 4) && fwrite(sj__store_str(s), 1, n, f) == n;
}

/* One record (see the top comment); false when a write failed. */
static bool write_record(FILE *f, const sj_store_entry *e, const sj_store_row *row, const void *frame,
                         size_t flen) {
    uint8_t zero[32] = {0};
    bool ok = fwrite(rec_magic, 1, 4, f) == 4 && fwrite(e->key.graph_hash, 1, 32, f) == 32 &&
              put_int(f, (uint64_t)e->key.extent, 8) && fwrite(e->key.options_hash, 1, 32, f) == 32 &&
              put_int(f, e->key.artifact_version, 4) && put_str(f, e->key.target_triple) &&
              put_str(f, e->key.target_cpu) && put_str(f, e->key.target_features) &&
              put_str(f, e->key.shapejit_version) && put_str(f, e->key.compiler_version) &&
              put_int(f, (uint64_t)e->raw_bytes, 8) &&
              fwrite(row->digest_len == 32 ? row->digest : zero, 1, 32, f) == 32 &&
              put_int(f, (uint64_t)row->n_parts, 4);
    for (int i = 0; ok && i < row->n_parts; i++)
        ok = put_int(f, row->parts[i].offset, 8) && put_int(f, row->parts[i].len, 8) &&
             fwrite(row->parts[i].key, 1, 32, f) == 32;
    return ok && put_int(f, flen, 8) && (flen == 0 || fwrite(frame, 1, flen, f) == flen);
}

/* A row with parts or a base as one record of its reassembled bytes; one
 * that fails its check is left out (*written false). Caller holds s->mu. */
static sj_status export_assembled(sj_store *s, FILE *f, const sj_store_entry *e, const sj_store_row *row,
                                  bool *ok, bool *written) {
    void *raw, *frame;
    size_t flen;
    char why[SJ_STORE_WHY_MAX];
    sj_status u = sj__store_row_assemble(s->ctx, s->dctx, s->cfg.max_artifact_bytes, &e->key, row, &raw, why,
                                        sizeof why);
    if (u != SJ_OK) return u == SJ_E_CORRUPT ? SJ_OK : u;
    sj_status st =
        sj__store_compress(s->ctx, s->cfg.compression_level, NULL, 0, raw, (size_t)row->raw_size, &frame, &flen);
    sj_free(s->ctx, raw);
    if (st != SJ_OK) return st;
    *ok = write_record(f, e, row, frame, flen);
    *written = true;
    sj_free(s->ctx, frame);
    return SJ_OK;
}

/* q's row (entry columns, digest, blob, id) as a record. Caller holds s->mu. */
static sj_status export_row(sj_store *s, FILE *f, sqlite3_stmt *q, bool *ok, bool *written) {
    sj_store_entry e;
    sj__store_read_entry(q, 0, &e);
    sj_store_row row;
    memset(&row, 0, sizeof row);
    row.id = sqlite3_column_int64(q, 15);
    row.raw_size = e.raw_bytes;
    *written = false;
    sj_status st = sj__store_row_read(s, &row, sqlite3_column_blob(q, 13), (size_t)sqlite3_column_bytes(q, 13),
                                     sqlite3_column_blob(q, 14), (size_t)sqlite3_column_bytes(q, 14));
    if (st == SJ_OK && (row.n_parts > 0 || row.has_base)) {
        st = export_assembled(s, f, &e, &row, ok, written);
    } else if (st == SJ_OK) {
        /* the row's own frame, as stored: the import checks it */
        *ok = write_record(f, &e, &row, row.frame, row.frame_len);
        *written = true;
    }
    sj__store_row_free(s->ctx, &row);
    return st;
}

sj_status sj_store_export(sj_store *s, const char *path, const char *hex_prefix, int64_t *n_written) {
    if (n_written) *n_written = 0;
    if (!s || !path)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    /* The file is replaced by rename: only a regular file or nothing may be there. */
    SJ_TRY(sj__check_replaceable(s->ctx, "store export", path));
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return sj_fail(s->ctx, SJ_E_INVALID_ARG, "store export: path too long");
    /* O_EXCL | O_NOFOLLOW: never write through something planted at tmp */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return sj_fail(s->ctx, SJ_E_IO, "store export: cannot create %s: %s", tmp, strerror(e));
    }
    int64_t n = 0;
    sj_status st = SJ_OK;
    bool ok = fwrite(file_magic, 1, 8, f) == 8;
    pthread_mutex_lock(&s->mu);
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT " SJ_STORE_ENTRY_COLS ", digest, blob, id FROM artifacts "
                           "WHERE ?1 IS NULL OR substr(graph_hash, 1, length(?1)) = lower(?1) "
                           "ORDER BY graph_hash, extent, id",
                           -1, &q, NULL) != SQLITE_OK) {
        st = sj__store_sql_fail(s, "export");
    } else {
        if (hex_prefix) sqlite3_bind_text(q, 1, hex_prefix, -1, SQLITE_STATIC);
        int rc = SQLITE_DONE;
        while (ok && st == SJ_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            bool written;
            st = export_row(s, f, q, &ok, &written);
            n += written;
        }
        if (ok && st == SJ_OK && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "export");
        sqlite3_finalize(q);
    }
    pthread_mutex_unlock(&s->mu);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) ok = false;
    if (fclose(f) != 0) ok = false;
    if (st == SJ_OK && !ok) st = sj_fail(s->ctx, SJ_E_IO, "store export: writing %s failed: %s", tmp, strerror(errno));
    if (st == SJ_OK && rename(tmp, path) != 0)
        st = sj_fail(s->ctx, SJ_E_IO, "store export: cannot rename %s to %s: %s", tmp, path, strerror(errno));
    if (st != SJ_OK) unlink(tmp);
    if (n_written) *n_written = st == SJ_OK ? n : 0;
    return st;
}

typedef struct reader {
    FILE *f;
    const char *path;
    int64_t record;
} reader;

static bool get_bytes(reader *r, void *dst, size_t n) { return fread(dst, 1, n, r->f) == n; }
static bool get_int(reader *r, int n, uint64_t *v) {
    uint8_t b[8];
    if (!get_bytes(r, b, (size_t)n)) return false;
    *v = sj__get_le(b, n);
    return true;
}
static bool get_str(reader *r, char out[SJ_STORE_FIELD_MAX]) {
    uint64_t n;
    if (!get_int(r, 4, &n) || n >= SJ_STORE_FIELD_MAX || !get_bytes(r, out, (size_t)n)) return false;
    out[n] = '\0';
    return memchr(out, '\0', (size_t)n) == NULL;
}

/* One record as read: the key (its strings in strs), the part list and
 * the frame; parts grow across records. */
typedef struct record {
    sj_store_key key;
    char strs[5][SJ_STORE_FIELD_MAX];
    uint64_t raw_size;
    uint8_t digest[32];
    sj_store_part *parts;
    int n_parts, parts_cap;
    void *frame;
    size_t frame_len;
} record;

static sj_status malformed(sj_store *s, const reader *r) {
    return sj_fail(s->ctx, SJ_E_PARSE, "store import: %s: record #%lld is malformed or truncated", r->path,
                   (long long)r->record);
}

/* An SJR2 record's part count and list. Each part is at least a byte, so
 * a count above the raw size is no export's. */
static sj_status read_parts(sj_store *s, reader *r, record *rec) {
    uint64_t n;
    if (!get_int(r, 4, &n) || n > rec->raw_size) return malformed(s, r);
    for (uint64_t i = 0; i < n; i++) {
        if (rec->n_parts == rec->parts_cap) {
            int cap = rec->parts_cap ? 2 * rec->parts_cap : 16;
            sj_store_part *grown = sj_realloc(s->ctx, rec->parts, (size_t)cap * sizeof *grown);
            if (!grown) return sj_fail(s->ctx, SJ_E_NOMEM, "store import: out of memory");
            rec->parts = grown;
            rec->parts_cap = cap;
        }
        sj_store_part *p = &rec->parts[rec->n_parts];
        if (!get_int(r, 8, &p->offset) || !get_int(r, 8, &p->len) || !get_bytes(r, p->key, 32))
            return malformed(s, r);
        rec->n_parts++;
    }
    return SJ_OK;
}

/* The next record into rec (its frame sj_alloc'ed); *end at the end of the
 * file. */
static sj_status read_record(sj_store *s, reader *r, record *rec, bool *end) {
    char rm[4];
    size_t got = fread(rm, 1, 4, r->f);
    *end = got == 0 && feof(r->f);
    if (*end) return SJ_OK;
    r->record++;
    bool v2 = got == 4 && memcmp(rm, rec_magic, 4) == 0, v1 = got == 4 && memcmp(rm, rec_magic_v1, 4) == 0;
    sj_store_key *k = &rec->key;
    memset(k, 0, sizeof *k);
    rec->n_parts = 0;
    uint64_t extent, av, flen;
    if (!(v1 || v2) || !get_bytes(r, k->graph_hash, 32) || !get_int(r, 8, &extent) ||
        !get_bytes(r, k->options_hash, 32) || !get_int(r, 4, &av) || !get_str(r, rec->strs[0]) ||
        !get_str(r, rec->strs[1]) || !get_str(r, rec->strs[2]) || !get_str(r, rec->strs[3]) ||
        !get_str(r, rec->strs[4]) || !get_int(r, 8, &rec->raw_size) || !get_bytes(r, rec->digest, 32))
        return malformed(s, r);
    if (v2) SJ_TRY(read_parts(s, r, rec));
    if (!get_int(r, 8, &flen) || flen > ZSTD_compressBound((size_t)s->cfg.max_artifact_bytes))
        return malformed(s, r);
    k->extent = (int64_t)extent;
    k->artifact_version = (uint32_t)av;
    k->target_triple = rec->strs[0];
    k->target_cpu = rec->strs[1];
    k->target_features = rec->strs[2];
    k->shapejit_version = rec->strs[3];
    k->compiler_version = rec->strs[4];
    if (!(rec->frame = sj_alloc(s->ctx, (size_t)flen)))
        return sj_fail(s->ctx, SJ_E_NOMEM, "store import: out of memory");
    rec->frame_len = (size_t)flen;
    if (get_bytes(r, rec->frame, (size_t)flen)) return SJ_OK;
    sj_free(s->ctx, rec->frame);
    rec->frame = NULL;
    return sj_fail(s->ctx, SJ_E_PARSE, "store import: %s: record #%lld is truncated", r->path, (long long)r->record);
}

/* The record's bytes, checked as a get checks a row (*raw on SJ_OK). */
static sj_status record_unpack(sj_store *s, const record *rec, void **raw, char *why, size_t why_len) {
    *raw = NULL;
    if (rec->key.extent < 1) {
        snprintf(why, why_len, "extent is not positive");
        return SJ_E_CORRUPT;
    }
    sj_store_row whole;
    memset(&whole, 0, sizeof whole);
    whole.raw_size = (int64_t)rec->raw_size;
    memcpy(whole.digest, rec->digest, 32);
    whole.digest_len = 32;
    whole.frame = rec->frame;
    whole.frame_len = rec->frame_len;
    pthread_mutex_lock(&s->mu); /* the shared decompression context */
    sj_status st = sj__store_row_assemble(s->ctx, s->dctx, s->cfg.max_artifact_bytes, &rec->key, &whole, raw, why,
                                         why_len);
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* Puts a record with its parts. One whose bytes fail their check, or
 * whose part list a put refuses (ranges, one key with two contents), is
 * rejected and told to bad; the others' failures are the import's. */
static sj_status import_record(sj_store *s, const reader *r, const record *rec, sj_store_problem_fn bad,
                               void *user, int64_t *imported, int64_t *rejected) {
    void *raw;
    char why[SJ_STORE_WHY_MAX];
    sj_status st = record_unpack(s, rec, &raw, why, sizeof why);
    if (st == SJ_OK) {
        st = sj_store_put_parts(s, &rec->key, raw, (size_t)rec->raw_size, rec->parts, rec->n_parts);
        sj_free(s->ctx, raw);
        if (st == SJ_E_INVALID_ARG) {
            snprintf(why, sizeof why, "%s", sj_ctx_last_error(s->ctx));
            sj_ctx_clear_error(s->ctx);
            st = SJ_E_CORRUPT;
        }
    }
    if (st == SJ_OK) (*imported)++;
    if (st != SJ_E_CORRUPT) return st;
    (*rejected)++;
    if (bad) {
        char what[SJ_STORE_WHY_MAX + 32];
        snprintf(what, sizeof what, "record #%lld: %s", (long long)r->record, why);
        sj_store_entry e = {
            .key = rec->key, .raw_bytes = (int64_t)rec->raw_size, .stored_bytes = (int64_t)rec->frame_len};
        bad(user, &e, what);
    }
    return SJ_OK;
}

sj_status sj_store_import(sj_store *s, const char *path, int64_t *n_imported, int64_t *n_rejected) {
    return sj_store_import_report(s, path, NULL, NULL, n_imported, n_rejected);
}

sj_status sj_store_import_report(sj_store *s, const char *path, sj_store_problem_fn bad, void *user,
                                 int64_t *n_imported, int64_t *n_rejected) {
    if (n_imported) *n_imported = 0;
    if (n_rejected) *n_rejected = 0;
    if (!s || !path)
        return sj_fail(s ? s->ctx : NULL, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    int64_t imported = 0, rejected = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sj_fail(s->ctx, SJ_E_IO, "store import: cannot open %s: %s", path, strerror(errno));
    reader r = {f, path, 0};
    char magic[8];
    sj_status st = SJ_OK;
    if (!get_bytes(&r, magic, 8) || memcmp(magic, file_magic, 8) != 0)
        st = sj_fail(s->ctx, SJ_E_PARSE, "store import: %s is not a shapejit store export", path);
    record rec;
    memset(&rec, 0, sizeof rec);
    bool end = false;
    while (st == SJ_OK && (st = read_record(s, &r, &rec, &end)) == SJ_OK && !end) {
        st = import_record(s, &r, &rec, bad, user, &imported, &rejected);
        sj_free(s->ctx, rec.frame);
        rec.frame = NULL;
    }
    sj_free(s->ctx, rec.parts);
    fclose(f);
    if (n_imported) *n_imported = imported;
    if (n_rejected) *n_rejected = rejected;
    return st;
}

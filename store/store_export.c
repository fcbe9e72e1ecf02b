/* export / import: rows moved between stores as a file of records.
 *
 * File: "SJSTORE1" then per row: "SJR1", graph hash (32), extent (i64),
 * options hash (32), artifact version (u32), then target triple, cpu,
 * features, shapejit version, compiler version (u32 length + bytes each),
 * raw size (i64), digest (32), frame length (u64), the zstd frame. Integers
 * little-endian. The frame and digest are the row's own, so an import
 * checks exactly what a get would. */
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
static const char rec_magic[4] = {'S', 'J', 'R', '1'};


static bool put_int(FILE *f, uint64_t v, int n) {
    uint8_t b[8];
    sj__put_le(b, v, n);
    return fwrite(b, 1, (size_t)n, f) == (size_t)n;
}
static bool put_str(FILE *f, const char *s) {
    size_t n = strlen(sj__store_str(s));
    return put_int(f, n, 4) && fwrite(sj__store_str(s), 1, n, f) == n;
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
                           "SELECT " SJ_STORE_ENTRY_COLS ", digest, blob FROM artifacts "
                           "WHERE ?1 IS NULL OR substr(graph_hash, 1, length(?1)) = lower(?1) "
                           "ORDER BY graph_hash, extent, id",
                           -1, &q, NULL) != SQLITE_OK) {
        st = sj__store_sql_fail(s, "export");
    } else {
        if (hex_prefix) sqlite3_bind_text(q, 1, hex_prefix, -1, SQLITE_STATIC);
        int rc;
        while (ok && (rc = sqlite3_step(q)) == SQLITE_ROW) {
            sj_store_entry e;
            sj__store_read_entry(q, 0, &e);
            size_t dlen = (size_t)sqlite3_column_bytes(q, 13), flen = (size_t)sqlite3_column_bytes(q, 14);
            const void *digest = sqlite3_column_blob(q, 13), *frame = sqlite3_column_blob(q, 14);
            uint8_t zero[32] = {0};
            ok = fwrite(rec_magic, 1, 4, f) == 4 && fwrite(e.key.graph_hash, 1, 32, f) == 32 &&
                 put_int(f, (uint64_t)e.key.extent, 8) && fwrite(e.key.options_hash, 1, 32, f) == 32 &&
                 put_int(f, e.key.artifact_version, 4) && put_str(f, e.key.target_triple) &&
                 put_str(f, e.key.target_cpu) && put_str(f, e.key.target_features) &&
                 put_str(f, e.key.shapejit_version) && put_str(f, e.key.compiler_version) &&
                 put_int(f, (uint64_t)e.raw_bytes, 8) &&
                 fwrite(dlen == 32 ? digest : zero, 1, 32, f) == 32 && put_int(f, flen, 8) &&
                 (flen == 0 || fwrite(frame, 1, flen, f) == flen);
            n++;
        }
        if (ok && rc != SQLITE_DONE) st = sj__store_sql_fail(s, "export");
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
    char triple[SJ_STORE_FIELD_MAX], cpu[SJ_STORE_FIELD_MAX], feat[SJ_STORE_FIELD_MAX],
        sjv[SJ_STORE_FIELD_MAX], ccv[SJ_STORE_FIELD_MAX];
    size_t max_frame = ZSTD_compressBound((size_t)s->cfg.max_artifact_bytes);
    while (st == SJ_OK) {
        char rm[4];
        size_t got = fread(rm, 1, 4, f);
        if (got == 0 && feof(f)) break;
        r.record++;
        sj_store_key k;
        memset(&k, 0, sizeof k);
        uint64_t extent, av, raw_size, flen;
        uint8_t digest[32];
        if (got != 4 || memcmp(rm, rec_magic, 4) != 0 || !get_bytes(&r, k.graph_hash, 32) ||
            !get_int(&r, 8, &extent) || !get_bytes(&r, k.options_hash, 32) || !get_int(&r, 4, &av) ||
            !get_str(&r, triple) || !get_str(&r, cpu) || !get_str(&r, feat) || !get_str(&r, sjv) ||
            !get_str(&r, ccv) || !get_int(&r, 8, &raw_size) || !get_bytes(&r, digest, 32) ||
            !get_int(&r, 8, &flen) || flen > max_frame) {
            st = sj_fail(s->ctx, SJ_E_PARSE, "store import: %s: record #%lld is malformed or truncated", path,
                         (long long)r.record);
            break;
        }
        k.extent = (int64_t)extent;
        k.artifact_version = (uint32_t)av;
        k.target_triple = triple;
        k.target_cpu = cpu;
        k.target_features = feat;
        k.shapejit_version = sjv;
        k.compiler_version = ccv;
        void *frame = sj_alloc(s->ctx, (size_t)flen);
        if (!frame) {
            st = sj_fail(s->ctx, SJ_E_NOMEM, "store import: out of memory");
            break;
        }
        if (!get_bytes(&r, frame, (size_t)flen)) {
            sj_free(s->ctx, frame);
            st = sj_fail(s->ctx, SJ_E_PARSE, "store import: %s: record #%lld is truncated", path,
                         (long long)r.record);
            break;
        }
        void *raw = NULL;
        char why[160] = "extent is not positive";
        sj_status u = SJ_E_CORRUPT;
        if (k.extent >= 1) {
            pthread_mutex_lock(&s->mu); /* the shared decompression context */
            u = sj__store_unpack(s->ctx, s->dctx, s->cfg.max_artifact_bytes, &k, frame, (size_t)flen,
                                (int64_t)raw_size, digest, 32, &raw, why, sizeof why);
            pthread_mutex_unlock(&s->mu);
        }
        sj_free(s->ctx, frame);
        if (u == SJ_E_CORRUPT) {
            rejected++;
            if (bad) {
                char what[200];
                snprintf(what, sizeof what, "record #%lld: %s", (long long)r.record, why);
                sj_store_entry e = {.key = k, .raw_bytes = (int64_t)raw_size, .stored_bytes = (int64_t)flen};
                bad(user, &e, what);
            }
            continue;
        }
        if (u != SJ_OK) {
            st = u;
            break;
        }
        st = sj_store_put(s, &k, raw, (size_t)raw_size);
        sj_free(s->ctx, raw);
        if (st == SJ_OK) imported++;
    }
    fclose(f);
    if (n_imported) *n_imported = imported;
    if (n_rejected) *n_rejected = rejected;
    return st;
}

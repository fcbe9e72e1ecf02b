/* Opening and closing a store: files and permissions, the schema, and the
 * locking policy for multi-process WAL use.
 *
 * Multi-process WAL and SQLite 3.40.1. SQLite's WAL documentation
 * (wal.html, "the WAL-reset bug") describes a data race present from 3.7.0
 * through 3.51.2, fixed in 3.51.3 (backported to 3.44.6 and 3.50.7), so the
 * 3.40.1 this machine has is affected. It needs WAL mode, two or more
 * connections, and a checkpoint that starts just after another one finished
 * while a third connection commits a transaction that resets (restarts) the
 * WAL; the second checkpoint misses the reset, and a later one skips frames:
 * committed pages never reach the database file, which ends up corrupt.
 * Every ingredient is a writer or a checkpointer racing another; readers
 * never reset the WAL. So every connection this library opens serialises
 * all of those under one exclusive flock() on a side file (PATH-sjlock):
 *   - writes: the lock is taken before BEGIN IMMEDIATE, released after
 *     COMMIT (so a WAL restart at the start of a write is under it);
 *   - checkpoints: automatic checkpoints are off (wal_autocheckpoint=0);
 *     we checkpoint (PASSIVE) ourselves after a commit, still holding the
 *     lock, once the WAL passes SJ_STORE_CHECKPOINT_FRAMES frames;
 *   - close: the last connection to close checkpoints and deletes the WAL,
 *     so close runs under the lock too; so does switching to WAL mode.
 * flock() locks belong to the open file description, so two handles in one
 * process exclude each other as two processes do, and the kernel drops the
 * lock of a process killed mid-write (SQLite's own recovery then rolls the
 * half-written transaction back). Other programs writing the file with
 * their own SQLite are outside this protocol.
 * Also from that page: WAL needs shared memory, so the store must be on a
 * local file system (not NFS). synchronous=NORMAL: in WAL mode a power loss
 * can lose the last commits but never corrupt the file; for a cache that
 * recompiles on a miss that is the right trade. */
#include "store/store_impl.h"
#include "core/path_writable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void sj_store_config_init(sj_store_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    cfg->max_artifact_bytes = (int64_t)1 << 30;
    cfg->busy_timeout_ms = 5000;
    cfg->compression_level = -1;
    cfg->touch_interval_ms = 60000;
}

int64_t sj__store_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sj_status sj__store_sql_fail(sj_store *s, const char *what) {
    int code = sqlite3_errcode(s->db);
    sj_status st = SJ_E_IO;
    if (code == SQLITE_BUSY || code == SQLITE_LOCKED) st = SJ_E_BUSY;
    else if (code == SQLITE_NOMEM) st = SJ_E_NOMEM;
    else if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT) st = SJ_E_CORRUPT;
    const char *where = s->path ? s->path : ":memory:";
    /* the step that met the damage says little; the damage is the news */
    if (st == SJ_E_CORRUPT)
        return sj_fail(s->ctx, st,
                       "store %s is not a valid shapejit store (%s, found while %s); remove it or "
                       "use another store",
                       where, sqlite3_errmsg(s->db), what);
    return sj_fail(s->ctx, st, "store %s: %s: %s", where, what, sqlite3_errmsg(s->db));
}

/* Runs one SQL statement with no result rows; the message names `what`. */
static sj_status exec_sql(sj_store *s, const char *sql, const char *what) {
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) return sj__store_sql_fail(s, what);
    return SJ_OK;
}

/* --- the cross-process write lock --- */

static sj_status lock_take(sj_store *s, bool try_only) {
    if (s->lock_fd < 0) return SJ_OK;
    int waited = 0;
    for (;;) {
        if (flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0) return SJ_OK;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return sj_fail(s->ctx, SJ_E_IO, "store %s: locking %s: %s", s->path, s->lock_path,
                           strerror(errno));
        if (try_only || waited >= s->cfg.busy_timeout_ms)
            return sj_fail(s->ctx, SJ_E_BUSY, "store %s: another process held the write lock for %d ms",
                           s->path, waited);
        struct timespec ts = {0, 1000000}; /* 1 ms */
        nanosleep(&ts, NULL);
        waited++;
    }
}

static void lock_release(sj_store *s) {
    if (s->lock_fd >= 0) flock(s->lock_fd, LOCK_UN);
}

sj_status sj__store_write_begin(sj_store *s, bool try_only) {
    if (s->read_only)
        return sj_fail(s->ctx, SJ_E_IO, "store %s is read-only (%s): nothing is written to it", s->path,
                       s->ro_why);
    SJ_TRY(lock_take(s, try_only));
    sj_status st = exec_sql(s, "BEGIN IMMEDIATE", "begin write");
    if (st != SJ_OK) lock_release(s);
    return st;
}

sj_status sj__store_write_end(sj_store *s, bool ok) {
    sj_status st = SJ_OK;
    if (ok) {
        st = exec_sql(s, "COMMIT", "commit");
        if (st != SJ_OK) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    } else {
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
    if (s->path && s->wal_frames >= SJ_STORE_CHECKPOINT_FRAMES) {
        /* A PASSIVE checkpoint never waits on readers; what it cannot copy
         * now the next one will. */
        sqlite3_wal_checkpoint_v2(s->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        s->wal_frames = 0;
    }
    lock_release(s);
    return st;
}

static int wal_hook(void *user, sqlite3 *db, const char *name, int frames) {
    (void)db;
    (void)name;
    ((sj_store *)user)->wal_frames = frames;
    return SQLITE_OK;
}

/* --- files --- */

/* mkdir -p for the parent directories of path; the ones made here are 0700. */
static sj_status make_parents(sj_ctx *ctx, const char *path) {
    char *dir = sj_strdup(ctx, path);
    if (!dir) return sj_fail(ctx, SJ_E_NOMEM, "store %s: out of memory", path);
    sj_status st = SJ_OK;
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
            st = sj_fail(ctx, SJ_E_IO, "store %s: cannot create directory %s: %s", path, dir,
                         strerror(errno));
            break;
        }
        *p = '/';
    }
    sj_free(ctx, dir);
    return st;
}

/* Creates the file 0600 when absent; refuses one that is not an SQLite
 * database before SQLite gets to touch it. An existing file that cannot
 * be written, or whose folder cannot (SQLite's WAL needs its -wal and -shm
 * files beside it), is opened read-only: *ro says so, ro_why why, and
 * *ro_folder whether the folder is the reason. */
static sj_status prepare_file(sj_ctx *ctx, const char *path, bool *ro, bool *ro_folder, char *ro_why,
                              size_t cap) {
    *ro = *ro_folder = false;
    ro_why[0] = '\0';
    SJ_TRY(make_parents(ctx, path));
    struct stat lsb;
    if (lstat(path, &lsb) == 0 && S_ISREG(lsb.st_mode)) {
        char *dir = sj_strdup(ctx, path);
        if (!dir) return sj_fail(ctx, SJ_E_NOMEM, "store %s: out of memory", path);
        char *slash = strrchr(dir, '/');
        const char *folder = !slash ? "." : slash == dir ? "/" : (*slash = '\0', dir);
        struct stat dsb;
        char folder_why[256];
        /* both asked: the folder decides whether SQLite may make its -shm
         * and -wal files (else immutable), whatever the file says */
        *ro_folder = stat(folder, &dsb) == 0 &&
                     !sj__path_writable("its folder", folder, &dsb, folder_why, sizeof folder_why);
        *ro = !sj__path_writable("the store file", path, &lsb, ro_why, cap) || *ro_folder;
        if (*ro_folder && !ro_why[0]) snprintf(ro_why, cap, "%s", folder_why);
        sj_free(ctx, dir);
    }
    int fd = *ro ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                 : open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        if (errno == ELOOP)
            return sj_fail(ctx, SJ_E_IO,
                           "store %s is a symlink (refused: name the store file itself; symlinked "
                           "folders above it are fine)",
                           path);
        if (errno == EACCES || errno == EROFS || errno == EPERM)
            return sj_fail(ctx, SJ_E_IO, "store %s cannot be %s (%s)", path,
                           *ro ? "read" : "created", strerror(errno));
        return sj_fail(ctx, SJ_E_IO, "store %s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    sj_status st = SJ_OK;
    char head[16];
    if (fstat(fd, &sb) != 0) {
        st = sj_fail(ctx, SJ_E_IO, "store %s: stat: %s", path, strerror(errno));
    } else if (!S_ISREG(sb.st_mode)) {
        st = sj_fail(ctx, SJ_E_IO, "store %s is not a regular file", path);
    } else if (*ro && sb.st_size == 0) {
        st = sj_fail(ctx, SJ_E_IO, "store %s is read-only (%s) and empty: there is no store to read", path,
                     ro_why);
    } else if (sb.st_size > 0 &&
               (pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head ||
                memcmp(head, "SQLite format 3", 16) != 0)) {
        st = sj_fail(ctx, SJ_E_CORRUPT, "store %s is not a shapejit store (not an SQLite database)", path);
    }
    close(fd);
    return st;
}

/* --- schema --- */

static const char *const schema_sql =
    "CREATE TABLE artifacts ("
    " id INTEGER PRIMARY KEY,"
    " graph_hash TEXT NOT NULL, extent INTEGER NOT NULL, options_hash TEXT NOT NULL,"
    " target_triple TEXT NOT NULL, target_cpu TEXT NOT NULL, target_features TEXT NOT NULL,"
    " artifact_version INTEGER NOT NULL, shapejit_version TEXT NOT NULL,"
    " compiler_version TEXT NOT NULL,"
    " raw_size INTEGER NOT NULL, stored_size INTEGER NOT NULL, digest BLOB NOT NULL,"
    " created_ms INTEGER NOT NULL, last_used_ms INTEGER NOT NULL, blob BLOB NOT NULL, base_key BLOB,"
    " UNIQUE (graph_hash, extent, options_hash, target_triple, target_cpu, target_features,"
    "   artifact_version, shapejit_version, compiler_version));"
    "CREATE INDEX artifacts_last_used ON artifacts(last_used_ms, id);"
    "CREATE INDEX artifacts_base ON artifacts(base_key);"
    /* shared parts, and the triggers that keep them referenced: see
     * store_parts.c */
    "CREATE TABLE parts ("
    " key BLOB PRIMARY KEY, raw_size INTEGER NOT NULL, stored_size INTEGER NOT NULL,"
    " digest BLOB NOT NULL, blob BLOB NOT NULL, dict_key BLOB);"
    "CREATE INDEX parts_dict ON parts(dict_key);"
    "CREATE TABLE artifact_parts ("
    " artifact_id INTEGER NOT NULL, seq INTEGER NOT NULL, offset INTEGER NOT NULL, len INTEGER NOT NULL,"
    " part_key BLOB NOT NULL, PRIMARY KEY (artifact_id, seq)) WITHOUT ROWID;"
    "CREATE INDEX artifact_parts_key ON artifact_parts(part_key);"
    "CREATE TRIGGER artifacts_drop_refs AFTER DELETE ON artifacts BEGIN"
    " DELETE FROM artifact_parts WHERE artifact_id = old.id; END;"
    "CREATE TRIGGER artifact_parts_drop_unplaced AFTER DELETE ON artifact_parts"
    " WHEN NOT EXISTS (SELECT 1 FROM artifact_parts WHERE part_key = old.part_key)"
    " AND NOT EXISTS (SELECT 1 FROM parts WHERE dict_key = old.part_key) BEGIN"
    " DELETE FROM parts WHERE key = old.part_key; END;"
    /* a part's reference, kept while a part is compressed against it: see
     * store_part_delta.c */
    "CREATE TRIGGER parts_drop_reference AFTER DELETE ON parts"
    " WHEN old.dict_key IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM artifact_parts WHERE part_key = old.dict_key)"
    " AND NOT EXISTS (SELECT 1 FROM parts WHERE dict_key = old.dict_key) BEGIN"
    " DELETE FROM parts WHERE key = old.dict_key; END;"
    "CREATE TRIGGER parts_rereference AFTER UPDATE OF dict_key ON parts"
    " WHEN old.dict_key IS NOT NULL AND old.dict_key IS NOT new.dict_key"
    " AND NOT EXISTS (SELECT 1 FROM artifact_parts WHERE part_key = old.dict_key)"
    " AND NOT EXISTS (SELECT 1 FROM parts WHERE dict_key = old.dict_key) BEGIN"
    " DELETE FROM parts WHERE key = old.dict_key; END;"
    /* bases, and the triggers that drop one with the last row using it:
     * see store_base.c */
    "CREATE TABLE bases ("
    " key BLOB PRIMARY KEY, family BLOB NOT NULL, extent INTEGER NOT NULL, raw_size INTEGER NOT NULL,"
    " stored_size INTEGER NOT NULL, digest BLOB NOT NULL, blob BLOB NOT NULL);"
    "CREATE INDEX bases_family ON bases(family);"
    "CREATE TRIGGER artifacts_drop_base AFTER DELETE ON artifacts"
    " WHEN NOT EXISTS (SELECT 1 FROM artifacts WHERE base_key = old.base_key) BEGIN"
    " DELETE FROM bases WHERE key = old.base_key; END;"
    "CREATE TRIGGER artifacts_rebase AFTER UPDATE OF base_key ON artifacts"
    " WHEN old.base_key IS NOT new.base_key"
    " AND NOT EXISTS (SELECT 1 FROM artifacts WHERE base_key = old.base_key) BEGIN"
    " DELETE FROM bases WHERE key = old.base_key; END;";

/* The first column of the first row, dflt when NULL; a failed query (a
 * damaged file) is an error naming `what`, never a default that would
 * pass for an answer. */
static sj_status query_int(sj_store *s, const char *sql, const char *what, int64_t dflt,
                           int64_t *out) {
    sqlite3_stmt *q;
    *out = dflt;
    if (sqlite3_prepare_v2(s->db, sql, -1, &q, NULL) != SQLITE_OK) return sj__store_sql_fail(s, what);
    int rc = sqlite3_step(q);
    if (rc == SQLITE_ROW && sqlite3_column_type(q, 0) != SQLITE_NULL) *out = sqlite3_column_int64(q, 0);
    sj_status st = rc == SQLITE_ROW || rc == SQLITE_DONE ? SJ_OK : sj__store_sql_fail(s, what);
    sqlite3_finalize(q);
    return st;
}

/* The version in sj_schema's one row, refused (SJ_E_CORRUPT, naming the
 * row) unless it is one positive integer: a damaged row ('abc', 0, -5, no
 * row, two rows) read as "an older layout" once, and the rebuild that an
 * older layout gets wiped the store under a read command (store ls). Only
 * a shapejit that wrote version v wrote the row, so anything else is
 * damage, and damage is reported, never repaired by dropping the rows. */
static sj_status schema_version(sj_store *s, const char *where, int64_t *v) {
    *v = 0;
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(s->db, "SELECT version, typeof(version), quote(version) FROM sj_schema", -1,
                           &q, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "reading the schema version");
    int rows = 0, rc;
    char type[16] = "", shown[64] = "";
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (rows++ > 0) continue;
        *v = sqlite3_column_int64(q, 0);
        snprintf(type, sizeof type, "%s", (const char *)sqlite3_column_text(q, 1));
        snprintf(shown, sizeof shown, "%s", (const char *)sqlite3_column_text(q, 2));
    }
    sqlite3_finalize(q);
    if (rc != SQLITE_DONE) return sj__store_sql_fail(s, "reading the schema version");
    const char *fix = "refusing to touch it (shapejit rebuilds no store on its own: move the file "
                      "aside to start a new one)";
    if (rows == 0)
        return sj_fail(s->ctx, SJ_E_CORRUPT, "store %s is damaged: its sj_schema table has no version row; %s",
                       where, fix);
    if (rows > 1)
        return sj_fail(s->ctx, SJ_E_CORRUPT, "store %s is damaged: its sj_schema table has %d version rows, not "
                       "one; %s", where, rows, fix);
    if (strcmp(type, "integer") != 0 || *v < 1)
        return sj_fail(s->ctx, SJ_E_CORRUPT, "store %s is damaged: its sj_schema version row holds %s (%s), not "
                       "a version; %s", where, shown, type, fix);
    return SJ_OK;
}

/* Inside a write transaction: create, accept, rebuild (older) or refuse
 * (newer, or not ours). */
static sj_status ensure_schema(sj_store *s) {
    const char *where = s->path ? s->path : ":memory:";
    int64_t has_schema, tables, v;
    SJ_TRY(query_int(s, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='sj_schema'",
                     "reading the schema", 0, &has_schema));
    if (has_schema == 0) {
        SJ_TRY(query_int(s, "SELECT count(*) FROM sqlite_master", "reading the schema", 0, &tables));
        if (tables > 0)
            return sj_fail(s->ctx, SJ_E_UNSUPPORTED,
                           "store %s is an SQLite database but not a shapejit store (no sj_schema table); "
                           "refusing to modify it",
                           where);
        SJ_TRY(exec_sql(s, "CREATE TABLE sj_schema(version INTEGER NOT NULL)", "creating the schema"));
        SJ_TRY(exec_sql(s, schema_sql, "creating the schema"));
        char sql[64];
        snprintf(sql, sizeof sql, "INSERT INTO sj_schema VALUES(%d)", SJ_STORE_SCHEMA_VERSION);
        return exec_sql(s, sql, "creating the schema");
    }
    SJ_TRY(schema_version(s, where, &v));
    if (v == SJ_STORE_SCHEMA_VERSION) return SJ_OK;
    if (v > SJ_STORE_SCHEMA_VERSION)
        return sj_fail(s->ctx, SJ_E_UNSUPPORTED,
                       "store %s has schema version %lld, written by a newer shapejit; this one reads "
                       "version %d (use another store or a newer shapejit)",
                       where, (long long)v, SJ_STORE_SCHEMA_VERSION);
    /* An older layout holds only compiled artifacts, which a recompile
     * rebuilds, so it is rebuilt rather than migrated column by column. */
    SJ_TRY(exec_sql(s, "DROP TABLE IF EXISTS bases; DROP TABLE IF EXISTS artifact_parts; DROP TABLE IF EXISTS parts; "
                       "DROP INDEX IF EXISTS artifacts_last_used; DROP TABLE IF EXISTS artifacts; "
                       "DELETE FROM sj_schema",
                    "rebuilding an old schema"));
    SJ_TRY(exec_sql(s, schema_sql, "rebuilding an old schema"));
    char sql[64];
    snprintf(sql, sizeof sql, "INSERT INTO sj_schema VALUES(%d)", SJ_STORE_SCHEMA_VERSION);
    return exec_sql(s, sql, "rebuilding an old schema");
}

static sj_status prepare_statements(sj_store *s);

/* A read-only store's schema: it must be this version, as nothing can be
 * created or rebuilt in it. */
static sj_status check_schema_read_only(sj_store *s) {
    int64_t has_schema, v;
    SJ_TRY(query_int(s, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='sj_schema'",
                     "reading the schema", 0, &has_schema));
    if (has_schema == 0)
        return sj_fail(s->ctx, SJ_E_UNSUPPORTED,
                       "store %s is read-only (%s) and not a shapejit store (no sj_schema table)", s->path,
                       s->ro_why);
    SJ_TRY(schema_version(s, s->path, &v));
    if (v == SJ_STORE_SCHEMA_VERSION) return SJ_OK;
    return sj_fail(s->ctx, SJ_E_UNSUPPORTED,
                   "store %s has schema version %lld; this shapejit reads version %d%s", s->path,
                   (long long)v, SJ_STORE_SCHEMA_VERSION,
                   v > SJ_STORE_SCHEMA_VERSION ? " (use a newer shapejit)"
                                               : ", and the store is read-only, so it cannot be rebuilt");
}

/* "file:PATH?mode=ro[&immutable=1]" with the characters a URI path gives
 * meaning to escaped. *out is sj_alloc'ed. */
static sj_status read_only_uri(sj_store *s, const char *path, bool immutable, char **out) {
    size_t n = strlen(path);
    char *u = sj_alloc(s->ctx, 3 * n + 40);
    if (!u) return sj_fail(s->ctx, SJ_E_NOMEM, "store %s: out of memory", s->path);
    size_t o = (size_t)sprintf(u, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f)
            o += (size_t)sprintf(u + o, "%%%02X", c);
        else
            u[o++] = (char)c;
    }
    sprintf(u + o, "?mode=ro%s", immutable ? "&immutable=1" : "");
    *out = u;
    return SJ_OK;
}

/* open_resolved for a read-only store: SQLite's mode=ro, and immutable=1
 * when the folder is not writable either (then SQLite could not make the
 * -shm file a WAL reader needs; immutable reads the file as it is, with no
 * locks, so rows still in a -wal that a killed writer left are not seen:
 * they read as misses, never as damage). No lock file, no WAL switch, no
 * schema change. */
static sj_status open_read_only(sj_store *s, const char *sqlite_path, bool immutable) {
    char *uri;
    SJ_TRY(read_only_uri(s, sqlite_path, immutable, &uri));
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
    int rc = sqlite3_open_v2(uri, &s->db, flags, NULL);
    sj_free(s->ctx, uri);
    if (rc != SQLITE_OK)
        return s->db ? sj__store_sql_fail(s, "opening read-only")
                     : sj_fail(s->ctx, SJ_E_NOMEM, "store %s: out of memory", s->path);
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, s->cfg.busy_timeout_ms);
    SJ_TRY(check_schema_read_only(s));
    snprintf(s->warning, sizeof s->warning,
             "store %s is read-only (%s): artifacts are read from it, new ones are not saved", s->path,
             s->ro_why);
    return prepare_statements(s);
}

static sj_status prepare_statements(sj_store *s) {
    static const char *const get_sql =
        "SELECT id, raw_size, digest, blob, last_used_ms FROM artifacts WHERE graph_hash=?1 AND extent=?2 "
        "AND options_hash=?3 AND target_triple=?4 AND target_cpu=?5 AND target_features=?6 AND "
        "artifact_version=?7 AND shapejit_version=?8 AND compiler_version=?9";
    static const char *const put_sql =
        "INSERT INTO artifacts(" SJ_STORE_KEY_COLS
        ", raw_size, stored_size, digest, created_ms, last_used_ms, blob, base_key) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?13,?14,?15) "
        "ON CONFLICT DO UPDATE SET raw_size=excluded.raw_size, stored_size=excluded.stored_size, "
        "digest=excluded.digest, created_ms=excluded.created_ms, last_used_ms=excluded.last_used_ms, "
        "blob=excluded.blob, base_key=excluded.base_key RETURNING id";
    /* the parts a row places, with their parts rows and their references'
     * (NULLs when missing) */
    static const char *const refs_sql =
        "SELECT r.offset, r.len, r.part_key, p.key IS NOT NULL, " SJ_STORE_PART_COLS " FROM artifact_parts r "
        "LEFT JOIN parts p ON p.key = r.part_key" SJ_STORE_PART_REF_JOIN " WHERE r.artifact_id = ?1 ORDER BY r.seq";
    /* the base a row's blob was compressed against (no row when none) */
    static const char *const base_sql =
        "SELECT a.base_key, b.key IS NOT NULL, b.raw_size, b.digest, b.blob "
        "FROM artifacts a LEFT JOIN bases b ON b.key = a.base_key WHERE a.id = ?1 AND a.base_key IS NOT NULL";
    static const char *const touch_sql = "UPDATE artifacts SET last_used_ms=?1 WHERE id=?2";
    if (sqlite3_prepare_v3(s->db, get_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st_get, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(s->db, put_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st_put, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(s->db, touch_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st_touch, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(s->db, refs_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st_refs, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(s->db, base_sql, -1, SQLITE_PREPARE_PERSISTENT, &s->st_base, NULL) != SQLITE_OK)
        return sj__store_sql_fail(s, "preparing statements");
    return SJ_OK;
}

/* path with its folder resolved (symlinks in the folders above the file
 * followed; the file itself is not: prepare_file refused a symlink there).
 * SQLite opens with SQLITE_OPEN_NOFOLLOW, which refuses a symlink anywhere
 * in the name: with $XDG_CACHE_HOME a symlink, the default store failed to
 * open. *out is sj_alloc'ed. */
static sj_status resolve_folder(sj_ctx *ctx, const char *path, char **out) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? sj_alloc(ctx, (size_t)(slash - path) + 2) : sj_strdup(ctx, ".");
    if (!dir) return sj_fail(ctx, SJ_E_NOMEM, "store %s: out of memory", path);
    if (slash) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    char *real = realpath(dir, NULL);
    int e = errno;
    sj_free(ctx, dir);
    if (!real) return sj_fail(ctx, SJ_E_IO, "store %s: resolving its folder: %s", path, strerror(e));
    const char *base = slash ? slash + 1 : path;
    size_t len = strlen(real) + strlen(base) + 2;
    *out = sj_alloc(ctx, len);
    if (*out) snprintf(*out, len, "%s/%s", strcmp(real, "/") ? real : "", base);
    free(real);
    return *out ? SJ_OK : sj_fail(ctx, SJ_E_NOMEM, "store %s: out of memory", path);
}

/* open_db's second half: sqlite_path is the store file with its folder
 * resolved (or ":memory:"). */
static sj_status open_resolved(sj_store *s, const char *sqlite_path) {
    const char *path = s->path ? s->path : ":memory:"; /* as the user named it, for messages */
    if (s->path) {
        s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s->lock_fd < 0)
            return sj_fail(s->ctx, SJ_E_IO, "store %s: cannot open lock file %s: %s", s->path, s->lock_path,
                           strerror(errno));
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW;
    if (sqlite3_open_v2(sqlite_path, &s->db, flags, NULL) != SQLITE_OK) {
        sj_status st = s->db ? sj__store_sql_fail(s, "open")
                             : sj_fail(s->ctx, SJ_E_NOMEM, "store %s: out of memory", path);
        return st;
    }
    if (sqlite3_db_readonly(s->db, "main") == 1)
        return sj_fail(s->ctx, SJ_E_IO, "store %s is read-only; shapejit needs to write its store", path);
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, s->cfg.busy_timeout_ms);
    SJ_TRY(lock_take(s, false));
    sj_status st = SJ_OK;
    if (s->path) {
        sqlite3_stmt *q;
        if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &q, NULL) != SQLITE_OK) {
            st = sj__store_sql_fail(s, "setting WAL mode");
        } else {
            int rc = sqlite3_step(q);
            const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 0) : NULL;
            if (!mode || strcmp(mode, "wal") != 0)
                st = rc == SQLITE_ROW ? sj_fail(s->ctx, SJ_E_IO, "store %s: cannot use WAL mode (got %s)", path,
                                                mode ? mode : "?")
                                      : sj__store_sql_fail(s, "setting WAL mode");
            sqlite3_finalize(q);
        }
    }
    if (st == SJ_OK)
        st = exec_sql(s, "PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=0", "configuring");
    if (st == SJ_OK) st = exec_sql(s, "BEGIN IMMEDIATE", "begin write");
    if (st == SJ_OK) {
        st = ensure_schema(s);
        if (st == SJ_OK) st = exec_sql(s, "COMMIT", "commit");
        if (st != SJ_OK) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    }
    lock_release(s);
    SJ_TRY(st);
    sqlite3_wal_hook(s->db, wal_hook, s);
    return prepare_statements(s);
}

/* Opens the database (path or memory) into s, configured and with the
 * schema checked. Leaves s->db NULL on failure. */
static sj_status open_db(sj_store *s) {
    bool ro_folder = false;
    s->read_only = false;
    if (s->path)
        SJ_TRY(prepare_file(s->ctx, s->path, &s->read_only, &ro_folder, s->ro_why, sizeof s->ro_why));
    char *resolved = NULL;
    if (s->path) SJ_TRY(resolve_folder(s->ctx, s->path, &resolved));
    sj_status st = s->read_only ? open_read_only(s, resolved, ro_folder)
                                : open_resolved(s, resolved ? resolved : ":memory:");
    sj_free(s->ctx, resolved);
    return st;
}


static void close_db(sj_store *s) {
    sqlite3_finalize(s->st_get);
    sqlite3_finalize(s->st_put);
    sqlite3_finalize(s->st_touch);
    sqlite3_finalize(s->st_refs);
    sqlite3_finalize(s->st_base);
    s->st_get = s->st_put = s->st_touch = s->st_refs = s->st_base = NULL;
    if (s->db) {
        /* Closing may checkpoint and delete the WAL (see the top comment). */
        bool locked = s->path && lock_take(s, false) == SJ_OK;
        sqlite3_close_v2(s->db);
        if (locked) lock_release(s);
        s->db = NULL;
    }
    if (s->lock_fd >= 0) close(s->lock_fd);
    s->lock_fd = -1;
}

sj_status sj_store_open(sj_ctx *ctx, const sj_store_config *cfg_in, sj_store **out) {
    if (!ctx || !cfg_in || !out)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "%s: NULL argument", __func__);
    *out = NULL;
    sj_store_config c; /* the caller's config as this library reads it */
    sj_store_config_init(&c);
    SJ_TRY(sj__config_read(ctx, "sj_store_config", cfg_in, SJ_CONFIG_SIZE(sj_store_config, fallback_to_memory),
                           sizeof c, &c));
    const sj_store_config *cfg = &c;
    if (cfg->max_artifact_bytes < 1 || cfg->busy_timeout_ms < 0 || cfg->max_bytes < 0 ||
        cfg->touch_interval_ms < 0)
        return sj_fail(ctx, SJ_E_INVALID_ARG, "store config: negative or zero limit");
    if (cfg->path && !cfg->path[0]) return sj_fail(ctx, SJ_E_INVALID_ARG, "store config: empty path");
    sj_store *s = sj_calloc(ctx, 1, sizeof *s);
    if (!s) return sj_fail(ctx, SJ_E_NOMEM, "store: out of memory");
    s->ctx = ctx;
    s->cfg = *cfg;
    s->cfg.path = NULL;
    s->lock_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->pool_mu, NULL);
    sj_status st = SJ_OK;
    if (cfg->path) {
        size_t n = strlen(cfg->path);
        s->path = sj_strdup(ctx, cfg->path);
        s->lock_path = sj_alloc(ctx, n + 8);
        if (!s->path || !s->lock_path) st = sj_fail(ctx, SJ_E_NOMEM, "store: out of memory");
        else snprintf(s->lock_path, n + 8, "%s-sjlock", cfg->path);
    }
    if (st == SJ_OK) st = open_db(s);
    if (st != SJ_OK && cfg->path && cfg->fallback_to_memory &&
        (st == SJ_E_IO || st == SJ_E_CORRUPT || st == SJ_E_UNSUPPORTED)) {
        snprintf(s->warning, sizeof s->warning, "%s; running without persistence", sj_ctx_last_error(ctx));
        close_db(s);
        sj_free(ctx, s->path);
        sj_free(ctx, s->lock_path);
        s->path = s->lock_path = NULL;
        s->read_only = false;
        sj_ctx_clear_error(ctx);
        st = open_db(s);
    }
    if (st == SJ_OK) {
        s->dctx = ZSTD_createDCtx();
        if (!s->dctx) st = sj_fail(ctx, SJ_E_NOMEM, "store: out of memory (zstd context)");
    }
    if (st != SJ_OK) {
        sj_store_close(s);
        return st;
    }
    *out = s;
    return SJ_OK;
}

ZSTD_DCtx *sj__store_dctx_take(sj_store *s) {
    pthread_mutex_lock(&s->pool_mu);
    ZSTD_DCtx *d = s->n_pool ? s->pool[--s->n_pool] : NULL;
    pthread_mutex_unlock(&s->pool_mu);
    return d ? d : ZSTD_createDCtx();
}

void sj__store_dctx_give(sj_store *s, ZSTD_DCtx *d) {
    pthread_mutex_lock(&s->pool_mu);
    if (s->n_pool < (int)(sizeof s->pool / sizeof s->pool[0])) {
        s->pool[s->n_pool++] = d;
        d = NULL;
    }
    pthread_mutex_unlock(&s->pool_mu);
    ZSTD_freeDCtx(d);
}

void sj_store_close(sj_store *s) {
    if (!s) return;
    close_db(s);
    ZSTD_freeDCtx(s->dctx);
    for (int i = 0; i < s->n_pool; i++) ZSTD_freeDCtx(s->pool[i]);
    pthread_mutex_destroy(&s->pool_mu);
    pthread_mutex_destroy(&s->mu);
    sj_free(s->ctx, s->path);
    sj_free(s->ctx, s->lock_path);
    sj_free(s->ctx, s);
}

bool sj_store_persistent(const sj_store *s) { return s->path != NULL; }
bool sj_store_read_only(const sj_store *s) { return s->read_only; }
const char *sj_store_warning(const sj_store *s) { return s->warning; }

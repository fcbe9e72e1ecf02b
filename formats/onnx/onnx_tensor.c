/* ONNX TensorProto decoding: initialisers, Constant values and the .pb files
 * of the node tests. */
#include "formats/onnx/onnx_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file_read.h"

const char *sj__onnx_dtype_name(int32_t dtype) {
    static const char *const names[] = {
        "UNDEFINED", "FLOAT",  "UINT8",  "INT8",      "UINT16",     "INT16",
        "INT32",     "INT64",  "STRING", "BOOL",      "FLOAT16",    "DOUBLE",
        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4",
    };
    if (dtype < 0 || (size_t)dtype >= sizeof names / sizeof names[0]) return "unknown dtype";
    return names[dtype];
}

static void *pb_alloc(void *user, size_t size) {
    sj_onnx_pb_alloc *a = user;
    void *p = sj_alloc(a->ctx, size);
    if (!p) a->failed = true;
    return p;
}

static void pb_free(void *user, void *ptr) {
    sj_onnx_pb_alloc *a = user;
    sj_free(a->ctx, ptr);
}

void sj__onnx_pb_alloc_init(sj_onnx_pb_alloc *a, sj_ctx *ctx) {
    a->base = (ProtobufCAllocator){pb_alloc, pb_free, a};
    a->ctx = ctx;
    a->failed = false;
}

sj_status sj__onnx_unpack_failed(const sj_onnx_pb_alloc *a, const char *what, const char *kind) {
    if (a->failed) return sj_fail(a->ctx, SJ_E_NOMEM, "%s: out of memory reading the protobuf", what);
    return sj_fail(a->ctx, SJ_E_PARSE, "%s: not a valid %s (truncated or corrupt protobuf)", what,
                   kind);
}

void sj__onnx_tensor_release(sj_ctx *ctx, sj_onnx_tensor *t) {
    if (!t) return;
    if (t->map)
        sj__weight_map_release(t->map);
    else
        sj_free(ctx, t->f);
    sj_free(ctx, t->i);
    t->f = NULL;
    t->i = NULL;
    t->map = NULL;
}

static bool is_external(const Onnx__TensorProto *t) {
    return t->n_external_data > 0 ||
           (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
}

/* Bytes per element in raw_data and which typed field holds the values
 * otherwise; 0 for a dtype shapejit does not decode. */
typedef enum { F_FLOAT, F_DOUBLE, F_INT64, F_INT32, F_UINT64 } typed_field;

static size_t elem_bytes(int32_t dtype, typed_field *field) {
    switch (dtype) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *field = F_FLOAT; return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *field = F_DOUBLE; return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *field = F_INT64; return 8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *field = F_INT32; return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *field = F_INT32; return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *field = F_INT32; return 1;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: *field = F_UINT64; return 4;
    default: return 0;
    }
}

bool sj__onnx_dtype_is_float(int32_t dtype) {
    return dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dtype == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
}

/* Element i of little-endian raw bytes as int64 (integer dtypes). */
static int64_t raw_int(int32_t dtype, const uint8_t *p) {
    switch (dtype) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: { int64_t v; memcpy(&v, p, 8); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: { int16_t v; memcpy(&v, p, 2); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return (int8_t)p[0];
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return p[0] != 0;
    default: return p[0]; /* UINT8 */
    }
}

static sj_status fill_from_raw(sj_ctx *ctx, sj_onnx_tensor *out, const uint8_t *src) {
    int64_t n = out->numel;
    if (sj__onnx_dtype_is_float(out->dtype)) {
        for (int64_t k = 0; k < n; k++) {
            if (out->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
                memcpy(&out->f[k], src + 4 * k, 4);
            } else {
                double d;
                memcpy(&d, src + 8 * k, 8);
                out->f[k] = (float)d;
            }
        }
    } else {
        typed_field fld;
        size_t es = elem_bytes(out->dtype, &fld);
        for (int64_t k = 0; k < n; k++) out->i[k] = raw_int(out->dtype, src + es * (size_t)k);
    }
    (void)ctx;
    return SJ_OK;
}

/* "location" made safe: relative, no "..", resolved inside base_dir (also
 * through symlinks). Returns the sj_alloc'ed full path. */
static sj_status external_path(sj_ctx *ctx, const char *what, const char *base_dir,
                               const char *location, char **out) {
    *out = NULL;
    if (!location || !location[0])
        return sj_fail(ctx, SJ_E_PARSE, "%s: external data has no 'location'", what);
    if (location[0] == '/')
        return sj_fail(ctx, SJ_E_UNSUPPORTED,
                       "%s: external data location '%s' is an absolute path; only paths inside "
                       "the model's folder are read",
                       what, location);
    for (const char *p = location; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return sj_fail(ctx, SJ_E_UNSUPPORTED,
                           "%s: external data location '%s' leaves the model's folder ('..')",
                           what, location);
        p += n + (e ? 1 : 0);
    }
    const char *dir = base_dir && base_dir[0] ? base_dir : ".";
    size_t len = strlen(dir) + strlen(location) + 2;
    char *path = sj_alloc(ctx, len);
    if (!path) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", what);
    snprintf(path, len, "%s/%s", dir, location);
    char *real_dir = realpath(dir, NULL), *real_file = realpath(path, NULL);
    sj_status st = SJ_OK;
    if (!real_file) {
        st = sj_fail(ctx, SJ_E_IO, "%s: external data file %s: %s", what, path, strerror(errno));
    } else if (!real_dir || strncmp(real_file, real_dir, strlen(real_dir)) != 0 ||
               real_file[strlen(real_dir)] != '/') {
        st = sj_fail(ctx, SJ_E_UNSUPPORTED,
                     "%s: external data file %s resolves outside the model's folder", what, path);
    }
    free(real_dir);
    free(real_file);
    if (st != SJ_OK) {
        sj_free(ctx, path);
        return st;
    }
    *out = path;
    return SJ_OK;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10) return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* Where t's external data lies: its location and offset, checked against
 * the `need` bytes its dims take. */
static sj_status external_info(sj_ctx *ctx, const Onnx__TensorProto *t, const char *what,
                               size_t need, const char **location, uint64_t *offset) {
    *location = NULL;
    *offset = 0;
    uint64_t length = need;
    bool has_length = false;
    for (size_t k = 0; k < t->n_external_data; k++) {
        const Onnx__StringStringEntryProto *e = t->external_data[k];
        const char *key = e->key ? e->key : "";
        if (!strcmp(key, "location")) {
            *location = e->value;
        } else if (!strcmp(key, "offset")) {
            if (!parse_u64(e->value, offset))
                return sj_fail(ctx, SJ_E_PARSE, "%s: external data offset '%s' is not a number",
                               what, e->value ? e->value : "");
        } else if (!strcmp(key, "length")) {
            if (!parse_u64(e->value, &length))
                return sj_fail(ctx, SJ_E_PARSE, "%s: external data length '%s' is not a number",
                               what, e->value ? e->value : "");
            has_length = true;
        }
    }
    if (has_length && length != need)
        return sj_fail(ctx, SJ_E_PARSE,
                       "%s: external data length %llu but the dims need %zu bytes", what,
                       (unsigned long long)length, need);
    return SJ_OK;
}

static sj_status truncated(sj_ctx *ctx, const char *what, const char *path, size_t need,
                           uint64_t offset, uint64_t size) {
    return sj_fail(ctx, SJ_E_PARSE,
                   "%s: external data file %s is truncated: %zu bytes at offset %llu, the file "
                   "has %llu",
                   what, path, need, (unsigned long long)offset, (unsigned long long)size);
}

/* out's value array (f or i), allocated for out->numel elements. */
static sj_status alloc_values(sj_ctx *ctx, const char *what, sj_onnx_tensor *out) {
    bool is_f = sj__onnx_dtype_is_float(out->dtype);
    void *dst = sj_alloc(ctx, (size_t)(out->numel ? out->numel : 1) *
                                  (is_f ? sizeof(float) : sizeof(int64_t)));
    if (!dst) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", what);
    if (is_f) out->f = dst;
    else out->i = dst;
    return SJ_OK;
}

/* Reads `need` bytes at offset of path into out's fresh value array. */
static sj_status read_copy(sj_ctx *ctx, const char *what, const char *path, uint64_t offset,
                           size_t need, sj_onnx_tensor *out) {
    uint8_t *buf = NULL;
    struct stat sb;
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s: external data file ", what);
    int fd;
    /* never a plain fopen: on a FIFO it would wait for a writer forever */
    SJ_TRY(sj__open_regular(ctx, prefix, path, &fd, &sb));
    sj_status st = SJ_OK;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        st = sj_fail(ctx, SJ_E_IO, "%s: external data file %s: %s", what, path, strerror(errno));
        close(fd);
    } else if (offset > (uint64_t)sb.st_size || need > (uint64_t)sb.st_size - offset) {
        st = truncated(ctx, what, path, need, offset, (uint64_t)sb.st_size);
    } else if (!(buf = sj_alloc(ctx, need ? need : 1))) {
        st = sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory for external data", what);
    } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(buf, 1, need, f) != need) {
        st = sj_fail(ctx, SJ_E_IO, "%s: external data file %s: read failed", what, path);
    }
    if (f) fclose(f);
    if (st == SJ_OK) st = alloc_values(ctx, what, out);
    if (st == SJ_OK) fill_from_raw(ctx, out, buf);
    sj_free(ctx, buf);
    return st;
}

struct sj_onnx_mapped_file {
    char *path;
    sj_weight_map *map; /* NULL: it could not be mapped, so its tensors are read */
};

void sj__onnx_external_free(sj_ctx *ctx, sj_onnx_external *x) {
    for (int i = 0; i < x->n_files; i++) {
        sj__weight_map_release(x->files[i].map);
        sj_free(ctx, x->files[i].path);
    }
    sj_free(ctx, x->files);
    x->files = NULL;
    x->n_files = x->cap_files = 0;
}

/* The load's mapping of path, made on first use; NULL when the file cannot
 * be mapped (a filesystem without mmap, no memory): read instead. */
static sj_weight_map *file_map(sj_ctx *ctx, sj_onnx_external *x, const char *path) {
    for (int i = 0; i < x->n_files; i++)
        if (!strcmp(x->files[i].path, path)) return x->files[i].map;
    if (x->n_files == x->cap_files) {
        int cap = x->cap_files ? x->cap_files * 2 : 4;
        struct sj_onnx_mapped_file *grown = sj_realloc(ctx, x->files, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        x->files = grown;
        x->cap_files = cap;
    }
    char *copy = sj_strdup(ctx, path);
    if (!copy) return NULL;
    sj_weight_map *m = NULL;
    if (sj__weight_map_open(ctx, path, &m) != SJ_OK) m = NULL; /* read instead: its errors are the ones to report */
    x->files[x->n_files++] = (struct sj_onnx_mapped_file){copy, m};
    return m;
}

/* t's `need` bytes of external data as out's values: in place in the
 * file's mapping when they are FLOAT at a 4-byte aligned offset (the
 * runtime's own layout), else read and converted. */
static sj_status decode_external(sj_ctx *ctx, const Onnx__TensorProto *t, const char *what,
                                 sj_onnx_external *x, size_t need, sj_onnx_tensor *out) {
    const char *location;
    uint64_t offset;
    SJ_TRY(external_info(ctx, t, what, need, &location, &offset));
    char *path;
    SJ_TRY(external_path(ctx, what, x->base_dir, location, &path));
    sj_weight_map *m = NULL;
    bool little_endian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if (!x->copy && little_endian && need > 0 && out->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
        offset % sizeof(float) == 0)
        m = file_map(ctx, x, path);
    sj_status st = SJ_OK;
    if (m) {
        size_t size = sj__weight_map_size(m);
        if (offset > size || need > size - offset) {
            st = truncated(ctx, what, path, need, offset, size);
        } else {
            out->f = (float *)(uintptr_t)(sj__weight_map_data(m) + offset);
            out->map = m;
            sj__weight_map_retain(m);
        }
    } else {
        st = read_copy(ctx, what, path, offset, need, out);
        if (st == SJ_OK) {
            x->copied++;
            x->copied_bytes += need;
        }
    }
    sj_free(ctx, path);
    return st;
}

/* owned: t itself, when its FLOAT raw_data may move into out (see take). */
static sj_status decode(sj_ctx *ctx, const Onnx__TensorProto *t, Onnx__TensorProto *owned,
                        const char *what, sj_onnx_external *ext, sj_onnx_tensor *out) {
    memset(out, 0, sizeof *out);
    if (is_external(t) && (!ext || !ext->base_dir))
        return sj_fail(ctx, SJ_E_UNSUPPORTED,
                       "%s: tensor data stored in an external file cannot be read here (no model "
                       "folder)",
                       what);
    if (t->segment)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: segmented tensors are not supported", what);
    int32_t dtype = t->has_data_type ? t->data_type : ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    typed_field field;
    size_t esize = elem_bytes(dtype, &field);
    if (!esize)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: dtype %s is not supported", what,
                       sj__onnx_dtype_name(dtype));
    if (t->n_dims > SJ_ONNX_MAX_RANK)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: rank %zu is too large (at most %d)", what,
                       t->n_dims, SJ_ONNX_MAX_RANK);
    int64_t numel = 1;
    for (size_t d = 0; d < t->n_dims; d++) {
        if (t->dims[d] < 0)
            return sj_fail(ctx, SJ_E_PARSE, "%s: dim %zu is negative (%lld)", what, d,
                           (long long)t->dims[d]);
        if (sj_mul_overflow_i64(numel, t->dims[d], &numel) || numel > SJ_MAX_ELEMENTS)
            return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: too many elements", what);
        out->dims[d] = t->dims[d];
    }
    out->rank = (int)t->n_dims;
    out->numel = numel;
    out->dtype = dtype;
    size_t need = (size_t)numel * esize;
    if (is_external(t)) {
        sj_status st = decode_external(ctx, t, what, ext, need, out);
        if (st != SJ_OK) sj__onnx_tensor_release(ctx, out);
        return st;
    }
    size_t typed_n = field == F_FLOAT    ? t->n_float_data
                     : field == F_DOUBLE ? t->n_double_data
                     : field == F_INT64  ? t->n_int64_data
                     : field == F_INT32  ? t->n_int32_data
                                         : t->n_uint64_data;
    if (t->has_raw_data && (t->raw_data.len > 0 || typed_n == 0)) {
        if (t->raw_data.len != need) {
            sj__onnx_tensor_release(ctx, out);
            return sj_fail(ctx, SJ_E_PARSE,
                           "%s: raw_data holds %zu bytes but the dims need %lld %s values", what,
                           t->raw_data.len, (long long)numel, sj__onnx_dtype_name(dtype));
        }
        /* little-endian hosts only, here and in fill_from_raw */
        if (owned && dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && need > 0 &&
            (uintptr_t)t->raw_data.data % sizeof(float) == 0) {
            /* sj_alloc'ed by sj__onnx_pb_alloc: held as a weights block, the
             * graph and the host's weight pool read it in place */
            SJ_TRY(sj__weight_map_adopt(ctx, owned->raw_data.data, need, &out->map));
            out->f = (float *)owned->raw_data.data;
            owned->raw_data = (ProtobufCBinaryData){0, NULL};
            owned->has_raw_data = 0;
            return SJ_OK;
        }
        SJ_TRY(alloc_values(ctx, what, out));
        return fill_from_raw(ctx, out, t->raw_data.data);
    }
    if (typed_n != (size_t)numel)
        return sj_fail(ctx, SJ_E_PARSE, "%s: %zu values stored but the dims need %lld", what,
                       typed_n, (long long)numel);
    SJ_TRY(alloc_values(ctx, what, out));
    for (int64_t k = 0; k < numel; k++) {
        switch (field) {
        case F_FLOAT: out->f[k] = t->float_data[k]; break;
        case F_DOUBLE: out->f[k] = (float)t->double_data[k]; break;
        case F_INT64: out->i[k] = t->int64_data[k]; break;
        case F_INT32:
            out->i[k] = dtype == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ? t->int32_data[k] != 0
                                                                     : t->int32_data[k];
            break;
        case F_UINT64: out->i[k] = (int64_t)t->uint64_data[k]; break;
        }
    }
    return SJ_OK;
}

sj_status sj__onnx_tensor_clone(sj_ctx *ctx, const sj_onnx_tensor *src, sj_onnx_tensor *out) {
    bool is_f = sj__onnx_dtype_is_float(src->dtype);
    size_t esize = is_f ? sizeof(float) : sizeof(int64_t);
    void *data = sj_alloc(ctx, (size_t)(src->numel ? src->numel : 1) * esize);
    if (!data) return sj_fail(ctx, SJ_E_NOMEM, "out of memory");
    if (src->numel) memcpy(data, is_f ? (const void *)src->f : (const void *)src->i, (size_t)src->numel * esize);
    *out = *src;
    out->map = NULL;
    out->f = is_f ? data : NULL;
    out->i = is_f ? NULL : data;
    return SJ_OK;
}

sj_status sj__onnx_tensor_decode(sj_ctx *ctx, const Onnx__TensorProto *t, const char *what,
                                sj_onnx_external *ext, sj_onnx_tensor *out) {
    return decode(ctx, t, NULL, what, ext, out);
}

sj_status sj__onnx_tensor_take(sj_ctx *ctx, Onnx__TensorProto *t, const char *what,
                              sj_onnx_external *ext, sj_onnx_tensor *out) {
    return decode(ctx, t, t, what, ext, out);
}

sj_status sj__onnx_tensor_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                                const char *what, Onnx__TensorProto **out) {
    *out = NULL;
    SJ_TRY(sj__onnx_check_nesting(a->ctx, &onnx__tensor_proto__descriptor, bytes, len, what));
    *out = onnx__tensor_proto__unpack(&a->base, len, bytes);
    return *out ? SJ_OK : sj__onnx_unpack_failed(a, what, "onnx.TensorProto");
}

bool sj__onnx_dtype_to_sj(int32_t onnx_dtype, sj_dtype *out) {
    switch (onnx_dtype) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = SJ_F32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = SJ_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = SJ_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = SJ_BOOL; return true;
    default: return false;
    }
}

sj_status sj__onnx_tensor_to_host(sj_ctx *ctx, const sj_onnx_tensor *t, const char *what,
                                 sj_tensor *out) {
    memset(out, 0, sizeof *out);
    sj_dtype dt;
    if (!sj__onnx_dtype_to_sj(t->dtype, &dt))
        return sj_fail(ctx, SJ_E_UNSUPPORTED,
                       "%s: dtype %s is not supported (float32, int64, int32 and bool are)", what,
                       sj__onnx_dtype_name(t->dtype));
    if (t->rank > SJ_MAX_RANK)
        return sj_fail(ctx, SJ_E_UNSUPPORTED, "%s: rank %d is too large (at most %d)", what,
                       t->rank, SJ_MAX_RANK);
    SJ_TRY(sj_tensor_alloc_typed(ctx, dt, t->rank, t->dims, out));
    for (int64_t k = 0; k < t->numel; k++) {
        switch (dt) {
        case SJ_F32: out->data[k] = t->f[k]; break;
        case SJ_I64: out->i64[k] = t->i[k]; break;
        case SJ_I32: out->i32[k] = (int32_t)t->i[k]; break;
        default: out->b8[k] = t->i[k] != 0; break;
        }
    }
    return SJ_OK;
}

sj_status sj__onnx_model_unpack(sj_onnx_pb_alloc *a, const void *bytes, size_t len,
                               const char *what, Onnx__ModelProto **out) {
    *out = NULL;
    SJ_TRY(sj__onnx_check_nesting(a->ctx, &onnx__model_proto__descriptor, bytes, len, what));
    *out = onnx__model_proto__unpack(&a->base, len, bytes);
    return *out ? SJ_OK : sj__onnx_unpack_failed(a, what, "ONNX model");
}

sj_status sj_onnx_tensor_read_mem(sj_ctx *ctx, const void *bytes, size_t len, const char *what,
                                  sj_tensor *out) {
    memset(out, 0, sizeof *out);
    Onnx__TensorProto *tp;
    sj_onnx_pb_alloc pa;
    sj__onnx_pb_alloc_init(&pa, ctx);
    SJ_TRY(sj__onnx_tensor_unpack(&pa, bytes, len, what, &tp));
    sj_onnx_tensor t;
    sj_status st = sj__onnx_tensor_decode(ctx, tp, what, NULL, &t);
    onnx__tensor_proto__free_unpacked(tp, &pa.base);
    if (st != SJ_OK) return st;
    st = sj__onnx_tensor_to_host(ctx, &t, what, out);
    sj__onnx_tensor_release(ctx, &t);
    return st;
}

sj_status sj_onnx_tensor_read(sj_ctx *ctx, const char *path, sj_tensor *out) {
    memset(out, 0, sizeof *out);
    char *bytes;
    size_t len;
    SJ_TRY(sj__read_file(ctx, path, &bytes, &len));
    sj_status st = sj_onnx_tensor_read_mem(ctx, bytes, len, path, out);
    sj_free(ctx, bytes);
    return st;
}

/* Loading an .onnx file without holding its weights twice.
 *
 * Read whole, a model sits in memory twice while it loads: the file's
 * buffer, and protobuf-c's copy of every raw_data block. For BERT-base
 * (340 MB) a warm process zeroed and filled 680 MB of fresh pages before
 * its first request, most of its time to ready. Here one pass over the
 * wire bytes, reading field headers and skipping payloads by offset,
 * writes a skeleton of the model: the same messages without the large
 * raw_data blocks of the top graph's initialisers, each noted with where
 * it lies in the file. protobuf-c unpacks the skeleton (kilobytes), then
 * each block is read from the file straight into an allocation of its
 * own, which the loader adopts as that tensor's weights block
 * (sj__onnx_tensor_take). Every byte is read once, into the memory that
 * keeps it.
 *
 * A file with no block to strip is loaded from the bytes the pass read.
 * The pass follows only what it must (model > graph > initialiser >
 * raw_data); anything it does not expect (a malformed header, a group, a
 * graph field given twice, which protobuf merges) sends the file down the
 * whole-file path, so protobuf-c judges it and every message stays what it
 * was. A file that changes while it is read gives a short read, an error
 * naming the file; the model's source key (model_load.c) is only kept when
 * its identity did not change across the load. */
#include "formats/onnx/onnx_file.h"

#include "formats/onnx/onnx_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/array.h"
#include "core/file_read.h"

/* raw_data blocks smaller than this stay in the skeleton: their own read
 * would cost more than the copy. */
#define MIN_BLOCK_BYTES 4096
#define WINDOW_BYTES 65536
/* sj_model_options.load_threads' ceiling: past a few readers the page
 * zeroing they share is bound by memory, not by CPUs. */
#define MAX_READ_THREADS 8

/* A raw_data block of initialiser `index` of the top graph, at `offset`. */
typedef struct block {
    size_t index;
    uint64_t offset, len;
} block;

typedef struct skeleton {
    sj_ctx *ctx;
    int fd;
    uint64_t size; /* the file's, at open */
    uint64_t pos;  /* next byte of the file to read */
    uint8_t window[WINDOW_BYTES];
    uint64_t window_at;
    size_t window_len;
    bool nomem;
    /* field numbers, from the generated descriptors */
    uint32_t model_graph, graph_initializer, tensor_raw_data;
    block *blocks;
    size_t n_blocks, cap_blocks;
} skeleton;

/* Growing bytes of one message's skeleton. */
typedef struct out_bytes {
    uint8_t *p;
    size_t n, cap;
} out_bytes;

/* Makes the window hold s->pos; false at the end of the file or on a read error. */
static bool fill(skeleton *s) {
    if (s->pos >= s->window_at && s->pos < s->window_at + s->window_len) return true;
    if (s->pos >= s->size) return false;
    uint64_t left = s->size - s->pos;
    size_t want = left < WINDOW_BYTES ? (size_t)left : WINDOW_BYTES;
    if (sj__pread_all(s->fd, s->window, want, s->pos) != 1) return false;
    s->window_at = s->pos;
    s->window_len = want;
    return true;
}

static bool put(skeleton *s, out_bytes *o, const void *src, size_t n) {
    if (!sj__array_reserve(s->ctx, (void **)&o->p, &o->cap, o->n + n, 1)) {
        s->nomem = true;
        return false;
    }
    memcpy(o->p + o->n, src, n);
    o->n += n;
    return true;
}

static bool put_varint(skeleton *s, out_bytes *o, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return put(s, o, b, n);
}

/* Reads a varint before `end`, copying its bytes to o when o is not NULL. */
static bool varint(skeleton *s, uint64_t end, out_bytes *o, uint64_t *out) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (s->pos >= end || !fill(s)) return false;
        uint8_t b = s->window[s->pos++ - s->window_at];
        if (o && !put(s, o, &b, 1)) return false;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Copies the next n bytes of the file to o. */
static bool copy(skeleton *s, out_bytes *o, uint64_t n) {
    while (n > 0) {
        if (!fill(s)) return false;
        size_t at = (size_t)(s->pos - s->window_at);
        size_t k = s->window_len - at;
        if (k > n) k = (size_t)n;
        if (!put(s, o, s->window + at, k)) return false;
        s->pos += k;
        n -= k;
    }
    return true;
}

/* Copies one field's payload (its header already read and copied). */
static bool copy_payload(skeleton *s, uint64_t end, out_bytes *o, uint64_t tag) {
    uint64_t n;
    switch (tag & 7) {
    case 0: return varint(s, end, o, &n);
    case 1: return end - s->pos >= 8 && copy(s, o, 8);
    case 5: return end - s->pos >= 4 && copy(s, o, 4);
    case 2: return varint(s, end, o, &n) && n <= end - s->pos && copy(s, o, n);
    default: return false; /* groups, or no wire type at all: the whole-file path */
    }
}

/* One TensorProto ending at `end`, initialiser `index` of the top graph. */
static bool tensor(skeleton *s, uint64_t end, size_t index, out_bytes *o) {
    bool noted = false; /* whether s->blocks ends with this tensor's block */
    while (s->pos < end) {
        uint64_t tag, at = o->n, n;
        if (!varint(s, end, o, &tag)) return false;
        if (tag >> 3 != s->tensor_raw_data || (tag & 7) != 2) {
            if (!copy_payload(s, end, o, tag)) return false;
            continue;
        }
        /* raw_data: the last one given wins, as in protobuf */
        if (noted) s->n_blocks--;
        noted = false;
        if (!varint(s, end, NULL, &n) || n > end - s->pos) return false;
        if (n < MIN_BLOCK_BYTES) {
            if (!put_varint(s, o, n) || !copy(s, o, n)) return false;
            continue;
        }
        o->n = at; /* drop the tag: the block is read into place after unpack */
        if (!sj__array_reserve(s->ctx, (void **)&s->blocks, &s->cap_blocks, s->n_blocks + 1,
                               sizeof *s->blocks)) {
            s->nomem = true;
            return false;
        }
        s->blocks[s->n_blocks++] = (block){index, s->pos, n};
        noted = true;
        s->pos += n;
    }
    return s->pos == end;
}

/* A message ending at `end` whose field `sub` (length-delimited) is parsed
 * by `inner` (NULL: copied); each such field is counted in *count. */
typedef bool (*inner_fn)(skeleton *s, uint64_t end, size_t index, out_bytes *o);

static bool message(skeleton *s, uint64_t end, uint32_t sub, inner_fn inner, size_t *count,
                    out_bytes *o) {
    while (s->pos < end) {
        uint64_t tag, n;
        if (!varint(s, end, o, &tag)) return false;
        if (tag >> 3 != sub || (tag & 7) != 2) {
            if (!copy_payload(s, end, o, tag)) return false;
            continue;
        }
        if (!varint(s, end, NULL, &n) || n > end - s->pos) return false;
        out_bytes part = {0};
        bool ok = inner(s, s->pos + n, (*count)++, &part) && put_varint(s, o, part.n) &&
                  put(s, o, part.p, part.n);
        sj_free(s->ctx, part.p);
        if (!ok) return false;
    }
    return s->pos == end;
}

static bool graph(skeleton *s, uint64_t end, size_t index, out_bytes *o) {
    size_t initialisers = 0;
    /* a second graph field would merge into the first: not followed here */
    return index == 0 && message(s, end, s->graph_initializer, tensor, &initialisers, o);
}

static uint32_t field_id(const ProtobufCMessageDescriptor *d, const char *name) {
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    return f ? f->id : 0;
}

/* Threads reading blocks: each takes the next unread one. The pages a
 * read fills are fresh, so the kernel zeroes each before copying into it:
 * that, not the copy, is most of the time, and it runs on the reading
 * thread's CPU, so reads on several CPUs load a large model that much
 * sooner. */
typedef struct readers {
    const skeleton *s;
    Onnx__TensorProto *const *tensors; /* the tensor of each block */
    atomic_size_t next;
    atomic_size_t failed; /* the first block whose read failed + 1; 0 = none */
    atomic_int error;     /* its errno (0: the file ended first) */
} readers;

static void *read_some(void *arg) {
    readers *r = arg;
    for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < r->s->n_blocks;) {
        const block *b = &r->s->blocks[i];
        errno = 0;
        if (sj__pread_all(r->s->fd, r->tensors[i]->raw_data.data, (size_t)b->len, b->offset) == 1)
            continue;
        size_t none = 0;
        if (atomic_compare_exchange_strong(&r->failed, &none, i + 1)) atomic_store(&r->error, errno);
        atomic_store(&r->next, r->s->n_blocks); /* the others stop too */
    }
    return NULL;
}

/* Gives each noted block's tensor of m an allocation of its size, then
 * reads the blocks into them on `threads` threads (the caller one). */
static sj_status read_blocks(skeleton *s, sj_onnx_pb_alloc *pa, Onnx__ModelProto *m,
                             const char *path, int threads) {
    Onnx__TensorProto **tensors = sj_alloc(s->ctx, s->n_blocks * sizeof *tensors);
    if (!tensors) return sj_fail(s->ctx, SJ_E_NOMEM, "%s: out of memory", path);
    sj_status st = SJ_OK;
    for (size_t i = 0; i < s->n_blocks && st == SJ_OK; i++) {
        const block *b = &s->blocks[i];
        if (!m->graph || b->index >= m->graph->n_initializer) {
            st = sj_fail(s->ctx, SJ_E_PARSE, "%s: initializer %zu's raw_data lies outside its graph",
                         path, b->index);
            break;
        }
        Onnx__TensorProto *t = tensors[i] = m->graph->initializer[b->index];
        void *p = pa->base.alloc(pa->base.allocator_data, (size_t)b->len);
        if (!p) {
            st = sj_fail(s->ctx, SJ_E_NOMEM, "%s: out of memory reading initializer '%s' (%llu bytes)",
                         path, t->name ? t->name : "", (unsigned long long)b->len);
            break;
        }
        /* an earlier, small raw_data of the same tensor lost to this one */
        if (t->raw_data.data) pa->base.free(pa->base.allocator_data, t->raw_data.data);
        t->raw_data = (ProtobufCBinaryData){(size_t)b->len, p};
        t->has_raw_data = 1;
    }
    if (st == SJ_OK) {
        readers r = {.s = s, .tensors = tensors};
        pthread_t helpers[MAX_READ_THREADS - 1];
        int started = 0;
        size_t more = s->n_blocks - 1; /* helpers worth starting */
        for (; started < threads - 1 && (size_t)started < more; started++)
            if (pthread_create(&helpers[started], NULL, read_some, &r) != 0) break;
        read_some(&r);
        for (int i = 0; i < started; i++) pthread_join(helpers[i], NULL);
        size_t bad = atomic_load(&r.failed);
        if (bad) {
            const block *b = &s->blocks[bad - 1];
            int e = atomic_load(&r.error);
            st = sj_fail(s->ctx, SJ_E_IO,
                         "%s: reading initializer '%s' (%llu bytes at byte %llu) failed: %s", path,
                         tensors[bad - 1]->name ? tensors[bad - 1]->name : "",
                         (unsigned long long)b->len, (unsigned long long)b->offset,
                         e ? strerror(e) : "the file shrank while it was read");
        }
    }
    sj_free(s->ctx, tensors);
    return st;
}

static int read_threads(const sj_model_options *o) {
    int n = o ? o->load_threads : 0;
    if (n == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 0 ? (int)(cpus < MAX_READ_THREADS ? cpus : MAX_READ_THREADS) : 1;
    }
    return n < MAX_READ_THREADS ? n : MAX_READ_THREADS;
}

sj_status sj__onnx_load_file(sj_ctx *ctx, const char *path, const sj_model_options *o, sj_graph **out) {
    *out = NULL;
    skeleton *s = sj_alloc(ctx, sizeof *s);
    if (!s) return sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory", path);
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->model_graph = field_id(&onnx__model_proto__descriptor, "graph");
    s->graph_initializer = field_id(&onnx__graph_proto__descriptor, "initializer");
    s->tensor_raw_data = field_id(&onnx__tensor_proto__descriptor, "raw_data");
    struct stat sb;
    sj_status st = sj__open_regular(ctx, "", path, &s->fd, &sb);
    if (st != SJ_OK) {
        sj_free(ctx, s);
        return st;
    }
    s->size = (uint64_t)sb.st_size;
    out_bytes skel = {0};
    size_t graphs = 0;
    bool followed = sb.st_size <= SJ_READ_FILE_MAX_BYTES &&
                    message(s, s->size, s->model_graph, graph, &graphs, &skel);
    if (s->nomem) {
        st = sj_fail(ctx, SJ_E_NOMEM, "%s: out of memory reading the model", path);
    } else {
        Onnx__ModelProto *m = NULL;
        sj_onnx_pb_alloc pa;
        sj__onnx_pb_alloc_init(&pa, ctx);
        /* A skeleton protobuf-c refuses goes down the whole-file path too,
         * so the message (a byte offset in it) is about the file itself. */
        if (followed && s->n_blocks > 0 &&
            sj__onnx_model_unpack(&pa, skel.p, skel.n, path, &m) == SJ_OK) {
            st = read_blocks(s, &pa, m, path, read_threads(o));
            if (st == SJ_OK)
                st = sj__onnx_load_unpacked(ctx, &pa, m, path, o, 0, NULL, out);
            else
                onnx__model_proto__free_unpacked(m, &pa.base);
        } else if (followed && s->n_blocks == 0 && skel.n == s->size) {
            /* Nothing was stripped: the pass copied every byte, and a
             * re-encoded length is never longer, so equal sizes mean the
             * skeleton is the file itself, already in memory. */
            st = sj__onnx_load_bound(ctx, skel.p, skel.n, path, o, 0, NULL, out);
        } else {
            /* bytes for protobuf-c to judge: read whole */
            char *bytes;
            size_t len;
            st = sj__read_file(ctx, path, &bytes, &len);
            if (st == SJ_OK) {
                st = sj__onnx_load_bound(ctx, bytes, len, path, o, 0, NULL, out);
                sj_free(ctx, bytes);
            }
        }
    }
    sj_free(ctx, skel.p);
    close(s->fd);
    sj_free(ctx, s->blocks);
    sj_free(ctx, s);
    return st;
}

/* The launch plan: what lowering produces and the runtime executes. Shared
 * contract between compile/lower (producer), plan (serialisation) and
 * runtime/ (executor). Not installed.
 *
 * A plan is specialised at one bucket extent E: every buffer is laid out for
 * E. At run time the executor passes the active extent n (1 <= n <= E) to
 * every kernel; kernels iterate, reduce and contract over the first n
 * entries of every symbolic dim and never read padding.
 *
 * Kernel ABI, every backend:
 *   kernel(void *const *buffers, const int64_t *info, int64_t active_extent)
 * `buffers[i]` is the base pointer of the launch's i-th buffer slot; `info`
 * points at the launch's metadata words (shapes, strides, scalars as the
 * kernel's emitter chose to encode them; a float scalar is stored as its bit
 * pattern in the low 32 bits). On the host `buffers`/`info` are host memory,
 * and a host kernel takes one more argument, the calling thread's scratch
 * (shapejit/ext/device.h, SJ_HOST_SCRATCH_BYTES); on a GPU they are device
 * memory and grid/block come from the launch. */
#ifndef SJ_LOWER_PLAN_H
#define SJ_LOWER_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "shapejit/graph.h"
#include "shapejit/precision.h"

#define SJ_KERNEL_NAME_MAX 64

typedef void (*sj_host_kernel_fn)(void *const *buffers, const int64_t *info,
                                  int64_t active_extent, void *scratch);

typedef enum sj_slot_kind {
    SJ_SLOT_INPUT,  /* graph input `index`, padded to E by the executor */
    SJ_SLOT_OUTPUT, /* graph output `index`, laid out at E, sliced by the executor */
    SJ_SLOT_PARAM,  /* graph param: `index` is the param's value id in the graph */
    SJ_SLOT_ARENA,  /* intermediate: `offset` bytes into the shared arena */
    /* A float32 weight (graph param `index`) in a GEMM's packed panel layout
     * (its elements float32 or rounded to 16 bits),
     * made once per weight and layout when a bucket loads and shared by every
     * bucket that packs it alike (runtime/host_code/host_gemm.c): `offset`
     * is the first of SJ_PACK_WORDS words of the plan describing the packed
     * [k, n] view (sj_pack_word), `bytes` the packed copy's size. */
    SJ_SLOT_PACKED
} sj_slot_kind;

/* The words of a packed slot, in order: the view of the param that is
 * packed (element offset, rows k, columns n, row and column strides in
 * elements), the GEMM level whose panel width it is packed for, how
 * many such matrices lie batch-stride elements apart (a batched matmul's
 * weight, one matrix per batch index: 1 and 0 for one), packed one after
 * another, and the precision the panels hold (an sj_precision: float32, or
 * the weight rounded to 16 bits as the precision policy stores it). */
enum sj_pack_word {
    SJ_PACK_OFFSET,
    SJ_PACK_K,
    SJ_PACK_N,
    SJ_PACK_ROW_STRIDE,
    SJ_PACK_COL_STRIDE,
    SJ_PACK_LEVEL,
    SJ_PACK_BATCH,
    SJ_PACK_BATCH_STRIDE,
    SJ_PACK_STORAGE,
    SJ_PACK_WORDS
};

typedef struct sj_buffer_slot {
    sj_slot_kind kind;
    int32_t index;
    /* SJ_SLOT_ARENA: bytes into the arena. SJ_SLOT_PARAM: the param's
     * storage, an sj_precision (sj_slot_storage): 0 = as the graph holds
     * it, bf16 / fp16 = a float32 param the precision policy narrowed, 2
     * bytes an element. One word either way, so artifacts carry it as they
     * always carried this field. 0 for the other kinds. */
    int64_t offset;
    int64_t bytes; /* size at the bucket extent, as stored */
} sj_buffer_slot;

static inline int64_t sj_slot_storage(const sj_buffer_slot *s) {
    return s->kind == SJ_SLOT_PARAM ? s->offset : 0;
}
/* A storage word an artifact may hold (read from bytes, so checked whole
 * before it is ever narrowed to the enum). */
static inline bool sj_slot_storage_valid(int64_t storage) {
    return storage >= SJ_PRECISION_FP32 && storage < SJ_PRECISION_COUNT_;
}

typedef struct sj_kernel_desc {
    char name[SJ_KERNEL_NAME_MAX]; /* symbol in the code blob */
    /* Host objects: BLAKE3 of the kernel's module as emitted, before
     * optimisation (what its object is compiled from, so the key a later
     * compile finds the object by: sj_kernel_objects); all zero where the
     * code is not one object per kernel. */
    uint8_t code[32];
} sj_kernel_desc;

typedef struct sj_launch {
    int32_t kernel;     /* index into kernels */
    int32_t first_slot; /* into launch_slots: this launch's buffers, in order */
    int32_t n_slots;
    int32_t first_word; /* into words: this launch's metadata words */
    int32_t n_words;
    uint32_t grid[3];  /* GPU launch geometry at the bucket extent; host: unused */
    uint32_t block[3];
    uint32_t shared_bytes;
} sj_launch;

typedef struct sj_launch_plan {
    int64_t extent; /* the bucket extent E the plan is specialised at */
    int32_t n_kernels;
    sj_kernel_desc *kernels;
    int32_t n_slots;
    sj_buffer_slot *slots;
    int32_t n_launches;
    sj_launch *launches;
    int32_t n_launch_slots;
    int32_t *launch_slots; /* slot ids */
    int32_t n_words;
    int64_t *words;
    int64_t arena_bytes; /* size of the intermediate arena at E */
    /* > 0: a replay may run each run of launches that compute whole slices
     * of the active rows (host row entries split at any row) this many rows
     * at a time, so a sub-batch's activations stay in cache from one
     * launch to the next (lowering sets it where the graph's rows are
     * independent and a row's largest buffer is large); 0 = whole. */
    int64_t sub_rows;
} sj_launch_plan;

/* Launch plan helpers shared by lowering, artifacts, the runtime and tests. */
void sj__plan_free(sj_ctx *ctx, sj_launch_plan *p);
/* Every index and size in range: launches name kernels and slots that exist,
 * word ranges lie inside words, arena slots inside the arena. */
sj_status sj__plan_validate(sj_ctx *ctx, const sj_launch_plan *p);
/* What an executable of p holds, read from the plan alone (a store lists it
 * without the graph): weights, the arena, the padded inputs and outputs its
 * kernels address, and the slot-pointer table; sums held at INT64_MAX. An
 * executable also pads an input no kernel reads, so for such a graph its
 * figure is that input's size above this one. */
typedef struct sj_plan_memory {
    int64_t weight_bytes, arena_bytes, io_bytes, table_bytes;
} sj_plan_memory;
void sj__plan_memory_get(const sj_launch_plan *p, sj_plan_memory *out);

#endif

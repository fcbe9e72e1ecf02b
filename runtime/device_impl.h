/* What the runtime's modules share about a device and its modules. Not
 * installed.
 *
 * The lock is a plain mutex: code that holds it (the launch path, capture)
 * calls the backend's table and the *_locked helpers below, never the public
 * (locking) device functions. */
#ifndef SJ_RUNTIME_DEVICE_IMPL_H
#define SJ_RUNTIME_DEVICE_IMPL_H

#include "shapejit/ext/device.h"
#include "shapejit/ext/metadata_cache.h"
#include "core/core_impl.h"
#include "runtime/weight_pool.h"

#include <pthread.h>
#include <stdatomic.h>

struct sj_device {
    sj_ctx *ctx;
    const sj_device_ops *ops;
    void *impl;
    pthread_mutex_t lock;
    atomic_int refs;     /* the owner's, plus one per module, executable, op cache */
    atomic_bool alive;   /* false from sj_device_destroy on */
    bool capturing;
    sj_mdcache *mdcache;
    sj_mdcache_policy mdcache_policy; /* to make it again after a reset */
    uint64_t next_graph_id;
    /* Weights in memory the host cannot address (a host-visible device
     * uses the context's pool instead): one pool per generation (below),
     * made by the first executable of the generation that needs it (under
     * the lock); `weights` is the current generation's. Retired ones stay
     * until the struct goes, for the executables still releasing into them. */
    sj_weight_pool *weights;
    struct sj_weight_gen *weight_gens; /* newest first */
    bool timing;             /* sj_device_set_timing */
    sj_device_timing timed;  /* its counters */
    /* Resets (sj__device_recover_locked): a backend call failed with
     * SJ_E_DEVICE_LOST, so every handle made on the device so far (memory,
     * modules, graphs, info buffers, weights) went with its context. The
     * generation counts those losses: a holder compares the generation its
     * handles were made in and drops them unused when it differs, never
     * handing them to the backend (a fresh allocation may get an old
     * address). lost: the backend's reset is still to succeed (or the
     * metadata cache to be remade); every call tries it first. */
    _Atomic uint64_t generation;
    bool lost;
    bool reset_backend; /* lost, and the backend's context not yet reset */
    bool forgetting;    /* the metadata cache is dropping buffers the reset freed */
    _Atomic uint64_t resets; /* backend resets that worked */
    /* Where the weights an executable derives at load (a GEMM's packed
     * panels) are kept as files for the next process (weight_files.h);
     * NULL = made in memory each time. Host devices only. */
    char *weight_dir;
    /* Loaded code by content (code_registry.h): every module's pieces, of
     * this generation and of older ones still held; the counts of
     * sj_device_code_stats. */
    struct sj_code_piece_ref *code;
    uint64_t code_loaded, code_shared;
};

/* The weight pool of one generation; its backing's user. */
typedef struct sj_weight_gen {
    sj_device *dev;
    uint64_t gen;
    sj_weight_pool *pool;
    sj_weight_backing backing;
    struct sj_weight_gen *older;
} sj_weight_gen;

/* A loaded code blob: its pieces (one per kernel for a bundle,
 * plan/code_bundle.h; else the whole blob), each held in the device's
 * registry, so a piece several modules carry is loaded once. */
struct sj_module {
    sj_device *dev; /* holds a reference */
    uint64_t gen;   /* the device generation it was loaded in */
    int n;
    int next; /* the piece the next kernel is looked for first (kernels come in piece order) */
    struct sj_code_piece_ref **pieces;
};

void sj__device_lock(sj_device *dev);
void sj__device_unlock(sj_device *dev);
void sj__device_retain(sj_device *dev);
/* Drops a reference; the last one frees the struct. */
void sj__device_unref(sj_device *dev);
/* SJ_E_STATE with a message when the device was released. */
sj_status sj__device_check_alive(sj_device *dev, const char *what);
/* With the lock held: check_alive, and for a lost device one more try at
 * its reset (SJ_E_DEVICE_LOST naming why it still fails). */
sj_status sj__device_check_usable_locked(sj_device *dev, const char *what);
/* With the lock held, after a backend call returned `st`: SJ_E_DEVICE_LOST
 * starts a new generation and resets the backend (keeping the call's
 * message, with the reset's failure appended). Returns st. */
sj_status sj__device_recover_locked(sj_device *dev, sj_status st);
/* Frees ptr when it was allocated in generation `gen` and the device is
 * alive; a pointer of an older generation went with its context. */
void sj__device_free_gen(sj_device *dev, void *ptr, uint64_t gen);
/* The current generation's weight pool and its backing (made at the first
 * call of a generation), or NULL for lack of memory. */
sj_weight_pool *sj__device_weight_pool(sj_device *dev, const sj_weight_backing **backing);

/* Capture with the lock already held (the executor's capture). */
sj_status sj__device_begin_capture_locked(sj_device *dev);
sj_status sj__device_end_capture_locked(sj_device *dev, sj_graph_handle *out);

#endif

/* What the runtime's modules share about a device and its modules. Not
 * installed.
 *
 * The lock is recursive because the launch path holds it across a whole run
 * and, inside it, the op cache resolves a kernel through the public (also
 * locking) device functions. */
#ifndef SJ_RUNTIME_DEVICE_IMPL_H
#define SJ_RUNTIME_DEVICE_IMPL_H

#include "shapejit/ext/device.h"
#include "shapejit/ext/op_cache.h"
#include "jit/core/core_impl.h"
#include "jit/core/weight_pool.h"

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
    sj_op_cache *op_cache;
    sj_mdcache *mdcache;
    uint64_t next_graph_id;
    /* Weights in memory the host cannot address (a host-visible device
     * uses the context's pool instead): made by the first executable that
     * needs it (under the lock), freed with the struct, after every
     * executable holding one let go. */
    sj_weight_pool *weights;
    sj_weight_backing weight_backing;
    bool timing;             /* sj_device_set_timing */
    sj_device_timing timed;  /* its counters */
};

struct sj_module {
    sj_device *dev; /* holds a reference */
    void *impl;
};

void sj_device_lock(sj_device *dev);
void sj_device_unlock(sj_device *dev);
void sj_device_retain(sj_device *dev);
/* Drops a reference; the last one frees the struct. */
void sj_device_unref(sj_device *dev);
/* SJ_E_STATE with a message when the device was released. */
sj_status sj_device_check_alive(sj_device *dev, const char *what);

/* The op cache a device makes for itself holds no reference on it (the device
 * owns it), so it does not keep its owner alive. */
sj_status sj_op_cache_create_owned(sj_device *dev, sj_op_cache **out);

#endif

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
    uint64_t next_graph_id;
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

/* Capture with the lock already held (the executor's capture). */
sj_status sj_device_begin_capture_locked(sj_device *dev);
sj_status sj_device_end_capture_locked(sj_device *dev, sj_graph_handle *out);

#endif

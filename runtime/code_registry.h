/* The device's registry of loaded code, keyed by content (issue #33): a
 * piece of code (one kernel's object file, PTX or cubin, or any module's
 * whole bytes) whose format and bytes this device already holds in its
 * current generation is not loaded again; each holder counts, and the
 * backend unloads the piece with its last holder. A device reset starts a
 * new generation: entries of the old one no longer match and are dropped
 * without a backend call when their holders let go (the context that held
 * them is gone), so the next load after a reset loads afresh. A piece
 * also keeps the kernels resolved from it, so a kernel several executables
 * (buckets, models) hold is resolved once per device. Every call is made
 * with the device's lock held. Not installed.
 *
 *   sj_code_piece_ref *p;
 *   sj__code_hold_locked(dev, SJ_CODE_PTX, bytes, len, &p);  // loads, or counts a holder
 *   sj__code_resolve_locked(dev, p, "sjk_...", &k, &attrs);   // the backend once per name
 *   sj__code_release_locked(dev, p);                         // unloads with the last holder */
#ifndef SJ_RUNTIME_CODE_REGISTRY_H
#define SJ_RUNTIME_CODE_REGISTRY_H

#include "shapejit/ext/device.h"

typedef struct sj_code_piece_ref sj_code_piece_ref;
struct sj_device;

/* Loads the piece through the backend unless this generation holds the
 * same format and bytes already (then one more holder). The backend's
 * failure is passed through sj__device_recover_locked. */
sj_status sj__code_hold_locked(struct sj_device *dev, sj_code_format fmt, const void *bytes,
                               size_t len, sj_code_piece_ref **out);
/* One holder fewer; the last unloads it when its generation is the
 * device's and the device is alive and not lost, and frees the entry. */
void sj__code_release_locked(struct sj_device *dev, sj_code_piece_ref *p);
/* Kernel `name` of the piece: the handle and attributes resolved before,
 * else the backend's answer (kept when found; SJ_E_NOT_FOUND is not). */
sj_status sj__code_resolve_locked(struct sj_device *dev, sj_code_piece_ref *p, const char *name,
                                  sj_kernel_handle *out, sj_kernel_attrs *attrs);
/* Counts so far; resident: this generation's pieces some module holds. */
void sj__code_stats_locked(const struct sj_device *dev, sj_device_code_stats *out);

#endif

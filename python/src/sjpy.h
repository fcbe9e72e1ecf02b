/* sjpy.h — shared declarations of the _shapejit extension module.
 *
 * The module is split by job: errors.c (the exception classes and the
 * sj_status -> class mapping), convert.c (Python buffers <-> sj_tensor),
 * engine.c (the Engine type), module.c (module init, small functions).
 * numpy is not needed to build: arrays come in through the buffer protocol
 * and go out through numpy.ndarray(..., buffer=owner), looked up at import.
 */
#ifndef SJPY_H
#define SJPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "shapejit/engine.h"

/* ---- errors.c */
/* Which step failed, for calls whose status alone does not say which
 * component was at fault (opening the engine touches model, store, remote). */
typedef enum sjpy_phase { SJPY_PHASE_LOAD, SJPY_PHASE_OPEN, SJPY_PHASE_CALL } sjpy_phase;

int sjpy_errors_init(PyObject *module);
/* Raises the class for st in this phase with msg; returns NULL. */
PyObject *sjpy_raise(sj_status st, sjpy_phase phase, const char *msg);
/* Raises a specific class by its Python name ("DtypeError", "ClosedError"). */
PyObject *sjpy_raise_named(const char *cls, sj_status st, const char *fmt, ...);

/* ---- convert.c */
int sjpy_convert_init(PyObject *module);
/* numpy's names of the element types: "float32", "int64", "int32", "bool". */
const char *sjpy_dtype_name(sj_dtype t);

/* One input while a run is in flight: the buffer (held so the array can be
 * neither freed nor resized) and, for a non-contiguous one, the C-order copy. */
typedef struct sjpy_input {
    PyObject *key; /* the name's str, held: another thread may empty the dict meanwhile */
    Py_buffer view;
    int have_view;
    void *copy; /* PyMem_RawMalloc'ed, or NULL when the buffer is used in place */
} sjpy_input;

/* Fills t (borrowing the memory) from obj for the input called name, whose
 * dtype the model says is want (-1: unknown input, the library reports it).
 * A strided buffer is not copied yet: t->bytes is NULL until
 * sjpy_input_contiguous, so the shapes can be checked first (a broadcast
 * view of a huge shape would otherwise be copied, gigabytes, before its
 * shape was refused). On failure raises and returns -1; in is released by
 * sjpy_input_release either way. */
int sjpy_input_from_object(PyObject *key, PyObject *obj, const char *name, int want,
                           sjpy_input *in, sj_tensor *t);
/* Points t at in's bytes in C order, copying a strided buffer once.
 * On failure raises and returns -1. */
int sjpy_input_contiguous(sjpy_input *in, sj_tensor *t);
void sjpy_input_release(sjpy_input *in);

/* A numpy array that owns t's data (allocated on the engine's context):
 * the array's base is an owner object holding t and a reference to keeper
 * (the engine object, which keeps the context alive). Steals t even on
 * failure (it is freed then). */
PyObject *sjpy_array_from_tensor(PyObject *keeper, sj_ctx *ctx, sj_tensor *t);

/* ---- engine.c */
int sjpy_engine_init(PyObject *module);
sj_ctx *sjpy_engine_ctx(PyObject *engine);

#endif

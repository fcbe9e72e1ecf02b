/* convert.c — Python buffers in, numpy arrays out.
 *
 * Inputs go through the buffer protocol, so any C-contiguous buffer of the
 * model's dtype (numpy array, memoryview, array.array, torch CPU tensor via
 * numpy()) is handed to the library in place: no copy. A strided buffer of
 * the right dtype is copied once into C order (its values are unchanged by
 * that). A buffer of another dtype is refused with DtypeError: casting
 * float64 to float32 or int64 to int32 silently loses values, so the caller
 * decides (arr.astype(...)). Objects without the buffer protocol (lists)
 * are refused the same way.
 *
 * Outputs: the library allocates each output on the engine's context; an
 * owner object holds that allocation and exports it through the buffer
 * protocol, and numpy.ndarray(shape, dtype, owner) wraps it without a copy.
 * The array owns its memory in the sense that matters: nothing else writes
 * to it, and it lives as long as the array does.
 */
#include "sjpy.h"

#include <string.h>

static PyObject *g_ndarray;            /* numpy.ndarray */
static PyObject *g_dtypes[SJ_DTYPE_COUNT_]; /* numpy.dtype for each sj_dtype */

static const char *const k_format[SJ_DTYPE_COUNT_] = {
    [SJ_F32] = "f", [SJ_I64] = "q", [SJ_I32] = "i", [SJ_BOOL] = "?"};
static const char *const k_numpy_name[SJ_DTYPE_COUNT_] = {
    [SJ_F32] = "float32", [SJ_I64] = "int64", [SJ_I32] = "int32", [SJ_BOOL] = "bool"};

const char *sjpy_dtype_name(sj_dtype t) {
    return (unsigned)t < SJ_DTYPE_COUNT_ ? k_numpy_name[t] : "unknown";
}

/* ---- buffer format -> sj_dtype */

/* struct-module format characters and numpy's names for them, for the
 * message that refuses one. */
static const char *format_name(char c, Py_ssize_t itemsize) {
    switch (c) {
    case 'd': return "float64";
    case 'e': return "float16";
    case 'f': return "float32";
    case 'g': return "longdouble";
    case 'b': return "int8";
    case 'B': return "uint8";
    case 'h': return "int16";
    case 'H': return "uint16";
    case 'i': return itemsize == 4 ? "int32" : "int";
    case 'I': return "uint32";
    case 'l':
    case 'q': return itemsize == 8 ? "int64" : "int32";
    case 'L':
    case 'Q': return "uint64";
    case '?': return "bool";
    case 'O': return "object";
    }
    return NULL;
}

/* The sj_dtype of a native-order buffer format, or -1. */
static int dtype_of_format(const char *fmt, Py_ssize_t itemsize, const char **what) {
    *what = fmt;
    if (*fmt == '@' || *fmt == '=' || *fmt == '<')
        fmt++;
    else if (*fmt == '>' || *fmt == '!') {
        *what = "a big-endian type";
        return -1;
    }
    if (fmt[0] == 'Z') {
        *what = fmt[1] == 'f' ? "complex64" : fmt[1] == 'd' ? "complex128" : "complex";
        return -1;
    }
    if (!fmt[0] || fmt[1]) /* one item per element, nothing composite */
        return -1;
    const char *n = format_name(fmt[0], itemsize);
    if (n)
        *what = n;
    switch (fmt[0]) {
    case 'f': return itemsize == 4 ? SJ_F32 : -1;
    case 'q':
    case 'l': return itemsize == 8 ? SJ_I64 : itemsize == 4 ? SJ_I32 : -1;
    case 'i': return itemsize == 4 ? SJ_I32 : -1;
    case '?': return itemsize == 1 ? SJ_BOOL : -1;
    }
    return -1;
}

void sjpy_input_release(sjpy_input *in) {
    Py_CLEAR(in->key);
    if (in->have_view) {
        PyBuffer_Release(&in->view);
        in->have_view = 0;
    }
    PyMem_RawFree(in->copy);
    in->copy = NULL;
}

int sjpy_input_from_object(PyObject *key, PyObject *obj, const char *name, int want,
                           sjpy_input *in, sj_tensor *t) {
    in->key = Py_NewRef(key);
    in->have_view = 0;
    in->copy = NULL;
    if (!PyObject_CheckBuffer(obj)) {
        sjpy_raise_named("DtypeError", SJ_E_INVALID_ARG,
                         "input '%s': expected a numpy array%s%s, got %s", name,
                         want >= 0 ? " of " : "", want >= 0 ? sjpy_dtype_name(want) : "",
                         Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(obj, &in->view, PyBUF_RECORDS_RO) < 0)
        return -1;
    in->have_view = 1;
    Py_buffer *v = &in->view;
    const char *what;
    int dt = dtype_of_format(v->format ? v->format : "B", v->itemsize, &what);
    if (dt < 0 || (want >= 0 && dt != want)) {
        if (want >= 0)
            sjpy_raise_named("DtypeError", SJ_E_INVALID_ARG,
                             "input '%s': dtype %s, the model wants %s (convert with "
                             ".astype(numpy.%s); shapejit never casts)",
                             name, what, sjpy_dtype_name(want), sjpy_dtype_name(want));
        else
            sjpy_raise_named("DtypeError", SJ_E_INVALID_ARG,
                             "input '%s': dtype %s is not supported (float32, int64, "
                             "int32, bool are)", name, what);
        return -1;
    }
    if (v->ndim > SJ_MAX_RANK) {
        sjpy_raise_named("ShapeError", SJ_E_SHAPE,
                         "input '%s': rank %d, shapejit tensors have rank 0..%d", name,
                         v->ndim, SJ_MAX_RANK);
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->rank = v->ndim;
    for (int i = 0; i < v->ndim; i++)
        t->dims[i] = (int64_t)v->shape[i];
    t->dtype = (sj_dtype)dt;
    t->bytes = PyBuffer_IsContiguous(v, 'C') ? v->buf : NULL;
    return 0;
}

int sjpy_input_contiguous(sjpy_input *in, sj_tensor *t) {
    Py_buffer *v = &in->view;
    if (PyBuffer_IsContiguous(v, 'C') || in->copy) {
        t->bytes = in->copy ? in->copy : v->buf;
        return 0;
    }
    in->copy = PyMem_RawMalloc(v->len ? (size_t)v->len : 1);
    if (!in->copy) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyBuffer_ToContiguous(in->copy, v, v->len, 'C') < 0)
        return -1;
    t->bytes = in->copy;
    return 0;
}

/* ---- outputs */

typedef struct {
    PyObject_HEAD
    sj_tensor t;
    sj_ctx *ctx;
    PyObject *keeper;
    Py_ssize_t shape[SJ_MAX_RANK];
    Py_ssize_t strides[SJ_MAX_RANK];
} output_obj;

static void output_dealloc(output_obj *self) {
    sj_tensor_free(self->ctx, &self->t);
    Py_XDECREF(self->keeper);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int output_getbuffer(output_obj *self, Py_buffer *view, int flags) {
    size_t item = sj_dtype_size(self->t.dtype);
    view->obj = Py_NewRef((PyObject *)self);
    view->buf = self->t.bytes;
    view->len = (Py_ssize_t)(sj_tensor_numel(&self->t) * (int64_t)item);
    view->readonly = 0;
    view->itemsize = (Py_ssize_t)item;
    view->format = (flags & PyBUF_FORMAT) ? (char *)k_format[self->t.dtype] : NULL;
    view->ndim = self->t.rank;
    view->shape = (flags & PyBUF_ND) ? self->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? self->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static PyBufferProcs output_as_buffer = {(getbufferproc)output_getbuffer, NULL};

static PyTypeObject output_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shapejit._Output",
    .tp_basicsize = sizeof(output_obj),
    .tp_dealloc = (destructor)output_dealloc,
    .tp_as_buffer = &output_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The memory of one engine output; the base of the numpy array returned.",
};

PyObject *sjpy_array_from_tensor(PyObject *keeper, sj_ctx *ctx, sj_tensor *t) {
    if ((unsigned)t->dtype >= SJ_DTYPE_COUNT_) {
        sj_tensor_free(ctx, t);
        return sjpy_raise_named("InternalError", SJ_E_INTERNAL, "output of unknown dtype %d",
                                (int)t->dtype);
    }
    output_obj *o = PyObject_New(output_obj, &output_type);
    if (!o) {
        sj_tensor_free(ctx, t);
        return NULL;
    }
    o->t = *t;
    o->ctx = ctx;
    o->keeper = Py_NewRef(keeper);
    memset(t, 0, sizeof *t);
    PyObject *shape = PyTuple_New(o->t.rank);
    if (!shape) {
        Py_DECREF(o);
        return NULL;
    }
    Py_ssize_t stride = (Py_ssize_t)sj_dtype_size(o->t.dtype);
    for (int i = o->t.rank - 1; i >= 0; i--) {
        o->shape[i] = (Py_ssize_t)o->t.dims[i];
        o->strides[i] = stride;
        stride *= o->shape[i];
        PyObject *d = PyLong_FromSsize_t(o->shape[i]);
        if (!d) {
            Py_DECREF(shape);
            Py_DECREF(o);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, i, d);
    }
    PyObject *args[3] = {shape, g_dtypes[o->t.dtype], (PyObject *)o};
    PyObject *arr = PyObject_Vectorcall(g_ndarray, args, 3, NULL);
    Py_DECREF(shape);
    Py_DECREF(o);
    return arr;
}

int sjpy_convert_init(PyObject *module) {
    if (PyType_Ready(&output_type) < 0)
        return -1;
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np)
        return -1;
    g_ndarray = PyObject_GetAttrString(np, "ndarray");
    PyObject *dtype = g_ndarray ? PyObject_GetAttrString(np, "dtype") : NULL;
    Py_DECREF(np);
    if (!dtype)
        return -1;
    for (int i = 0; i < SJ_DTYPE_COUNT_; i++) {
        g_dtypes[i] = PyObject_CallFunction(dtype, "s", k_numpy_name[i]);
        if (!g_dtypes[i]) {
            Py_DECREF(dtype);
            return -1;
        }
    }
    Py_DECREF(dtype);
    return 0;
}

/* errors.c — shapejit.Error and its subclasses, and which one a failed
 * library call raises. Every exception carries the library's message as
 * its text and the status as .status (the sj_status value) and
 * .status_name (sj_status_str), so code can match on either the class or
 * the code. Classes also derive from the builtin a Python programmer would
 * catch (ValueError for bad shapes, TypeError for dtypes, MemoryError, ...).
 */
#include "sjpy.h"

#include <stdarg.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *base;     /* a class defined earlier in this table, or NULL = Error */
    PyObject **builtin;   /* a second base, or NULL */
    const char *doc;
} class_spec;

/* Order matters: a base is created before its subclasses. */
static const class_spec k_classes[] = {
    {"InvalidArgumentError", NULL, &PyExc_ValueError,
     "An argument was malformed: a ladder spec, a backend name, an option."},
    {"ShapeError", NULL, &PyExc_ValueError,
     "An input's rank or shape does not match the model, or inputs disagree on N."},
    {"OutOfRangeError", "ShapeError", NULL,
     "The request's size N lies outside every bucket of the ladder."},
    {"DtypeError", "InvalidArgumentError", &PyExc_TypeError,
     "An input is not an array of the dtype the model wants (refused, never cast)."},
    {"ModelError", NULL, NULL, "The model file could not be read, parsed or is not supported."},
    {"StoreError", NULL, NULL, "The artifact store could not be opened, read or written."},
    {"RemoteError", NULL, NULL, "The fleet tier (Redis) could not be reached or used."},
    {"CompileError", NULL, NULL, "A compiler (LLVM, NVRTC, ptxas) rejected generated code."},
    {"DeviceError", NULL, NULL, "The device or its driver is missing or reported an error."},
    {"UnsupportedError", NULL, NULL, "Valid input that shapejit does not handle."},
    {"NotFoundError", NULL, &PyExc_LookupError, "A named thing does not exist."},
    {"StateError", NULL, NULL, "The call is not valid in the engine's current state."},
    {"ClosedError", "StateError", NULL, "The engine has been closed."},
    {"OutOfMemoryError", NULL, &PyExc_MemoryError, "The allocator failed."},
    {"InternalError", NULL, NULL, "A bug in shapejit; please report it with the message."},
};
#define N_CLASSES (sizeof k_classes / sizeof k_classes[0])

static PyObject *g_error;               /* shapejit.Error */
static PyObject *g_classes[N_CLASSES];  /* parallel to k_classes */

static PyObject *class_by_name(const char *name) {
    for (size_t i = 0; i < N_CLASSES; i++)
        if (strcmp(k_classes[i].name, name) == 0)
            return g_classes[i];
    return g_error;
}

int sjpy_errors_init(PyObject *module) {
    g_error = PyErr_NewExceptionWithDoc(
        "shapejit.Error",
        "Base class of every error shapejit raises. str(e) is the library's message; "
        "e.status is the sj_status code and e.status_name its name.",
        PyExc_Exception, NULL);
    if (!g_error || PyModule_AddObjectRef(module, "Error", g_error) < 0)
        return -1;
    /* Errors raised by the Python layer itself have no library status. */
    if (PyObject_SetAttrString(g_error, "status", Py_None) < 0 ||
        PyObject_SetAttrString(g_error, "status_name", Py_None) < 0)
        return -1;
    for (size_t i = 0; i < N_CLASSES; i++) {
        const class_spec *c = &k_classes[i];
        PyObject *base = c->base ? class_by_name(c->base) : g_error;
        PyObject *bases = c->builtin ? PyTuple_Pack(2, base, *c->builtin) : PyTuple_Pack(1, base);
        if (!bases)
            return -1;
        char qual[64];
        snprintf(qual, sizeof qual, "shapejit.%s", c->name);
        g_classes[i] = PyErr_NewExceptionWithDoc(qual, c->doc, bases, NULL);
        Py_DECREF(bases);
        if (!g_classes[i] || PyModule_AddObjectRef(module, c->name, g_classes[i]) < 0)
            return -1;
    }
    return 0;
}

/* The class for a status. Opening an engine touches the ladder, the store
 * and the remote tier, whose failures share codes (a ladder spec and a
 * store file are both "parse errors"); the engine's message starts with
 * the component ("engine: store ..."), which is what picks the class there. */
static PyObject *class_for(sj_status st, sjpy_phase phase, const char *msg) {
    if (phase == SJPY_PHASE_LOAD && st != SJ_E_NOMEM)
        return class_by_name("ModelError");
    if (phase == SJPY_PHASE_OPEN && st != SJ_E_NOMEM) {
        if (strncmp(msg, "engine: store:", 14) == 0)
            return class_by_name("StoreError");
        if (strncmp(msg, "engine: remote:", 15) == 0 || strncmp(msg, "engine: remote tier:", 20) == 0)
            return class_by_name("RemoteError");
        if (strncmp(msg, "engine: ladder", 14) == 0)
            return class_by_name("InvalidArgumentError");
    }
    switch (st) {
    case SJ_E_INVALID_ARG: return class_by_name("InvalidArgumentError");
    case SJ_E_NOMEM: return class_by_name("OutOfMemoryError");
    case SJ_E_SHAPE: return class_by_name("ShapeError");
    case SJ_E_OUT_OF_RANGE: return class_by_name("OutOfRangeError");
    case SJ_E_UNSUPPORTED: return class_by_name("UnsupportedError");
    case SJ_E_NOT_FOUND: return class_by_name("NotFoundError");
    case SJ_E_COMPILE: return class_by_name("CompileError");
    case SJ_E_NO_DEVICE:
    case SJ_E_DEVICE:
    case SJ_E_DEVICE_LOST:
    case SJ_E_MISMATCH: return class_by_name("DeviceError");
    case SJ_E_STATE: return class_by_name("StateError");
    case SJ_E_INTERNAL: return class_by_name("InternalError");
    case SJ_E_IO:
    case SJ_E_PARSE:
    case SJ_E_CORRUPT:
    case SJ_E_BUSY:
        if (msg && (strstr(msg, "remote") || strstr(msg, "redis")))
            return class_by_name("RemoteError");
        return class_by_name("StoreError");
    case SJ_OK: break;
    }
    return g_error;
}

static PyObject *raise_instance(PyObject *cls, sj_status st, const char *msg) {
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong((long)st);
    PyObject *name = PyUnicode_FromString(sj_status_str(st));
    if (code && name && PyObject_SetAttrString(exc, "status", code) == 0 &&
        PyObject_SetAttrString(exc, "status_name", name) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
    return NULL;
}

PyObject *sjpy_raise(sj_status st, sjpy_phase phase, const char *msg) {
    if (!msg || !*msg)
        msg = sj_status_str(st);
    return raise_instance(class_for(st, phase, msg), st, msg);
}

PyObject *sjpy_raise_named(const char *cls, sj_status st, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return raise_instance(class_by_name(cls), st, buf);
}

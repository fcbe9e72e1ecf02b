/* module.c — the _shapejit extension module: exceptions, the Engine type,
 * and the library's default-store-path rule for the Python layer (which,
 * unlike the library, reads the environment). */
#include "sjpy.h"

static PyObject *default_store_path(PyObject *self, PyObject *args) {
    const char *store, *xdg, *home;
    if (!PyArg_ParseTuple(args, "zzz", &store, &xdg, &home))
        return NULL;
    char path[4096];
    sj_status st = sj_engine_default_store_path(store, xdg, home, path, sizeof path);
    if (st == SJ_E_NOT_FOUND)
        Py_RETURN_NONE;
    if (st != SJ_OK)
        return sjpy_raise_named("InvalidArgumentError", st,
                                "default store path: longer than %zu bytes", sizeof path - 1);
    return PyUnicode_DecodeFSDefault(path);
}

static PyObject *library_version(PyObject *self, PyObject *unused) {
    return PyUnicode_FromString(sj_version_string());
}

static PyMethodDef module_methods[] = {
    {"default_store_path", default_store_path, METH_VARARGS,
     "default_store_path(SHAPEJIT_STORE, XDG_CACHE_HOME, HOME) -> str | None\n\n"
     "The documented rule (sj_engine_default_store_path) applied to the values given; "
     "None when none is set."},
    {"library_version", library_version, METH_NOARGS, "The linked library's version string."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_shapejit",
    "C core of the shapejit package: the engine, its errors and buffer conversion.", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__shapejit(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (sjpy_errors_init(m) < 0 || sjpy_convert_init(m) < 0 || sjpy_engine_init(m) < 0 ||
        PyModule_AddIntConstant(m, "MAX_RANK", SJ_MAX_RANK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

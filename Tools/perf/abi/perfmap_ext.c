/* An extension written for the perf map C API of CPython 3.12 and 3.13,
   built out of tree against installed headers (Tools/perf/tests/
   test_capi_ext.py): it compiles against 3.11 with this patch, through
   the PY_HAVE_PERF_TRAMPOLINE check of pyconfig.h, and works. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030C0000 || defined(PY_HAVE_PERF_TRAMPOLINE)
#  define HAVE_PERF_MAP_API 1
#else
#  define HAVE_PERF_MAP_API 0
#endif

static PyObject *
write_entry(PyObject *self, PyObject *args)
{
    unsigned long long addr;
    unsigned int size;
    const char *name;
    if (!PyArg_ParseTuple(args, "KIs", &addr, &size, &name)) {
        return NULL;
    }
#if HAVE_PERF_MAP_API
    int res;
    Py_BEGIN_ALLOW_THREADS
    res = PyUnstable_WritePerfMapEntry((const void *)(uintptr_t)addr, size,
                                       name);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(res);
#else
    PyErr_SetString(PyExc_NotImplementedError, "no perf map API");
    return NULL;
#endif
}

static PyObject *
compile_code(PyObject *self, PyObject *code)
{
#if HAVE_PERF_MAP_API
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "expected a code object");
        return NULL;
    }
    if (PyUnstable_PerfTrampoline_CompileCode((PyCodeObject *)code) < 0) {
        return NULL;
    }
    return PyLong_FromLong(PyUnstable_PerfTrampoline_SetPersistAfterFork(1));
#else
    PyErr_SetString(PyExc_NotImplementedError, "no perf map API");
    return NULL;
#endif
}

static PyObject *
copy_map(PyObject *self, PyObject *args)
{
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path)) {
        return NULL;
    }
#if HAVE_PERF_MAP_API
    int res = PyUnstable_PerfMapState_Init();
    if (res == 0) {
        res = PyUnstable_CopyPerfMapFile(path);
    }
    PyUnstable_PerfMapState_Fini();
    return PyLong_FromLong(res);
#else
    PyErr_SetString(PyExc_NotImplementedError, "no perf map API");
    return NULL;
#endif
}

static PyMethodDef methods[] = {
    {"write_entry", write_entry, METH_VARARGS, NULL},
    {"compile_code", compile_code, METH_O, NULL},
    {"copy_map", copy_map, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "perfmap_ext", NULL, -1, methods
};

PyMODINIT_FUNC
PyInit_perfmap_ext(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL
        && PyModule_AddIntConstant(m, "HAVE_PERF_MAP_API",
                                   HAVE_PERF_MAP_API) < 0)
    {
        Py_CLEAR(m);
    }
    return m;
}

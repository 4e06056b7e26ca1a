/* An extension module built against the headers of PRISTINE CPython 3.11.2
   ("make abi-check"), then imported by the patched interpreter with perf
   trampolines active.  It touches the structures whose layout must not
   change and the co_extra API whose slot 0 the patch reserves. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>

static Py_ssize_t extra_index = -1;
static int extras_freed = 0;

static void
free_extra(void *Py_UNUSED(extra))
{
    extras_freed++;
}

/* call(func, *args): call back into Python from C. */
static PyObject *
call(PyObject *Py_UNUSED(self), PyObject *args)
{
    if (PyTuple_GET_SIZE(args) < 1) {
        PyErr_SetString(PyExc_TypeError, "call() needs a callable");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
    if (rest == NULL) {
        return NULL;
    }
    PyObject *res = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, NULL);
    Py_DECREF(rest);
    return res;
}

/* tag_code(code, value): store value in a co_extra slot of our own. */
static PyObject *
tag_code(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *code;
    Py_ssize_t value;
    if (!PyArg_ParseTuple(args, "O!n", &PyCode_Type, &code, &value)) {
        return NULL;
    }
    if (extra_index < 0) {
        extra_index = _PyEval_RequestCodeExtraIndex(free_extra);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no co_extra index left");
            return NULL;
        }
    }
    if (_PyCode_SetExtra(code, extra_index, (void *)value) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(extra_index);
}

static PyObject *
get_tag(PyObject *Py_UNUSED(self), PyObject *code)
{
    void *value = NULL;
    if (_PyCode_GetExtra(code, extra_index, &value) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t((Py_ssize_t)value);
}

/* caller(): name and line of the calling Python frame, read through the
   pristine layouts of PyThreadState and PyCodeObject. */
static PyObject *
caller(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    PyThreadState *tstate = PyThreadState_Get();
    if (tstate->interp != PyInterpreterState_Get()) {
        PyErr_SetString(PyExc_AssertionError, "PyThreadState.interp");
        return NULL;
    }
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL) {
        Py_RETURN_NONE;
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    PyObject *res = Py_BuildValue("(Oi)", code->co_name,
                                  PyFrame_GetLineNumber(frame));
    Py_DECREF(code);
    return res;
}

static PyObject *
freed(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(args))
{
    return PyLong_FromLong(extras_freed);
}

static PyMethodDef methods[] = {
    {"call", call, METH_VARARGS},
    {"tag_code", tag_code, METH_VARARGS},
    {"get_tag", get_tag, METH_O},
    {"caller", caller, METH_NOARGS},
    {"freed", freed, METH_NOARGS},
    {NULL, NULL}
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "compat_ext", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit_compat_ext(void)
{
    return PyModule_Create(&module);
}

/* Activation: which backend each interpreter uses, and so each thread
   (_PyPerfTrampoline_thread); opening and closing the backends' files as
   interpreters start and stop using them; and the configuration that
   asks for a backend (-X perf, -X perf_jit, PYTHONPERFSUPPORT,
   PYTHON_PERF_JIT_SUPPORT, sys.activate_stack_trampoline()). */

#include "Python.h"
#include "pycore_initconfig.h"    // _Py_GetEnv()
#include "pycore_interp.h"         // PyInterpreterState.co_extra_user_count
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyInterpreterState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE
#  include <pthread.h>            // pthread_atfork()
#endif

/* Backends, in the order of their co_extra slots (PERF_MAP_BACKEND, ...). */
static const char *const backend_names[] = {"perf", "perf_jit"};

/* The index of the backend called name, or -1. */
static int
find_backend(const char *name)
{
    for (size_t i = 0; i < Py_ARRAY_LENGTH(backend_names); i++) {
        if (strcmp(backend_names[i], name) == 0) {
            return (int)i;
        }
    }
    return -1;
}

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* A forked child is noticed at its first new trampoline (see
   _PyPerfCoreState.forked). */
static void
atfork_child(void)
{
    _PyPerfCore.forked = 1;
    _PyPerfFile_DropLocksAtFork();
}

/* Activation ***************************************************************/

/* Interpreters and their backends.  Each interpreter uses one backend at
   a time, or none; a thread follows the interpreter of its current thread
   state (_PyPerfTrampoline_thread).  The list holds only the
   interpreters that use a backend, usually one or two. */

static int
backend_of(PyInterpreterState *interp)
{
    for (size_t i = 0; i < _PyPerfCore.n_interps; i++) {
        if (_PyPerfCore.interps[i].interp == interp) {
            return _PyPerfCore.interps[i].backend;
        }
    }
    return -1;
}

/* Record that interp uses the backend at index (-1: none).  Return -1
   (no memory) if it cannot be recorded. */
static int
set_backend_of(PyInterpreterState *interp, int index)
{
    for (size_t i = 0; i < _PyPerfCore.n_interps; i++) {
        if (_PyPerfCore.interps[i].interp == interp) {
            if (index >= 0) {
                _PyPerfCore.interps[i].backend = index;
                _PyPerfCore.interps[i].by_request = 0;
            }
            else {
                _PyPerfCore.interps[i] =
                    _PyPerfCore.interps[--_PyPerfCore.n_interps];
                _PyPerfTrampoline_active = _PyPerfCore.n_interps > 0;
            }
            return 0;
        }
    }
    if (index < 0) {
        return 0;
    }
    if (_PyPerfCore.n_interps == _PyPerfCore.interps_cap) {
        size_t cap = _PyPerfCore.interps_cap ? 2 * _PyPerfCore.interps_cap : 4;
        _PyPerfInterpBackend *mem = PyMem_RawRealloc(_PyPerfCore.interps,
                                                     cap * sizeof(*mem));
        if (mem == NULL) {
            return -1;
        }
        _PyPerfCore.interps = mem;
        _PyPerfCore.interps_cap = cap;
    }
    _PyPerfCore.interps[_PyPerfCore.n_interps].interp = interp;
    _PyPerfCore.interps[_PyPerfCore.n_interps].backend = index;
    _PyPerfCore.interps[_PyPerfCore.n_interps].by_request = 0;
    _PyPerfCore.n_interps++;
    _PyPerfTrampoline_active = 1;
    return 0;
}

void
_PyPerfTrampoline_AttachThread(PyThreadState *tstate)
{
    _PyPerfTrampoline_ThreadState *t = &_PyPerfTrampoline_thread;
    t->backend = _PyPerfCore.n_interps == 0 ? -1 : backend_of(tstate->interp);
    if (t->backend < 0) {
        t->stack_limit = 0;
        t->stack_span = 0;
        return;
    }
    t->slot = _PyPerfCore.pools[t->backend].slot;
    if (!t->computed) {
        /* Once per thread: finding the stack takes system calls. */
        _PyPerfStack_ComputeLimit(&t->own_limit, &t->own_span);
        t->computed = 1;
    }
    t->stack_limit = t->own_limit;
    t->stack_span = t->own_span;
}

/* The calling thread's interpreter may have changed its backend. */
void
_PyPerfTrampoline_UpdateThread(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    if (tstate != NULL) {
        _PyPerfTrampoline_AttachThread(tstate);
    }
}

/* One more interpreter uses the backend at index: open its file if it is
   the first.  Return 0, or -1 with *reason set if the file cannot be
   opened. */
static int
use_backend(int index, const char **reason)
{
    _PyPerfPool *pool = &_PyPerfCore.pools[index];
    if (pool->users > 0) {
        pool->users++;
        return 0;
    }
    _PyPerfArena_InitTemplate();
    if (_PyPerfSlot_TakeFirst() < 0) {
        *reason = "no co_extra index is left";
        errno = ENOSPC;
        return -1;
    }
    if (!_PyPerfCore.watching_forks) {
        /* Once per process and its children, which inherit it. */
        if (pthread_atfork(NULL, NULL, atfork_child) != 0) {
            *reason = strerror(ENOMEM);
            errno = ENOMEM;
            return -1;
        }
        _PyPerfCore.watching_forks = 1;
    }
    if (_PyPerf_backends[index]->open(reason) < 0) {
        return -1;
    }
    pool->users = 1;
    pool->arena_failed = 0;
    pool->write_failed = 0;
    pool->unreported_errno = 0;
    return 0;
}

/* One interpreter less uses the backend at index: close its file if it
   was the last.  Frames already running keep returning through their
   trampolines; only new frames stop using them. */
static void
release_backend(int index)
{
    _PyPerfPool *pool = &_PyPerfCore.pools[index];
    assert(pool->users > 0);
    if (--pool->users == 0 && _PyPerf_backends[index]->close() < 0) {
        _PyPerfTrampoline_ReportWriteFailure(index, errno);
    }
}

static int
activate(PyInterpreterState *interp, int index, const char **reason)
{
    int current = backend_of(interp);
    if (current == index) {
        return 0;
    }
    /* The new backend opens before the previous one stops: one that
       cannot start leaves the interpreter as it was. */
    if (use_backend(index, reason) < 0) {
        return -1;
    }
    if (set_backend_of(interp, index) < 0) {
        release_backend(index);
        *reason = strerror(ENOMEM);
        errno = ENOMEM;
        return -1;
    }
    _PyPerfTrampoline_UpdateThread();
    if (current >= 0) {
        release_backend(current);
    }
    return 0;
}

static void
deactivate(PyInterpreterState *interp)
{
    int current = backend_of(interp);
    if (current >= 0) {
        (void)set_backend_of(interp, -1);
        _PyPerfTrampoline_UpdateThread();
        release_backend(current);
    }
}

/* The entry of interp in the list, or NULL if it uses no backend. */
static _PyPerfInterpBackend *
entry_of(PyInterpreterState *interp)
{
    for (size_t i = 0; i < _PyPerfCore.n_interps; i++) {
        if (_PyPerfCore.interps[i].interp == interp) {
            return &_PyPerfCore.interps[i];
        }
    }
    return NULL;
}

/* Turn interp on with the backend at index for a request from outside,
   unless the program turned it on itself. */
static int
activate_by_request(PyInterpreterState *interp, int index)
{
    _PyPerfInterpBackend *entry = entry_of(interp);
    if (entry != NULL && !entry->by_request) {
        return 0;
    }
    const char *reason;
    if (activate(interp, index, &reason) < 0) {
        return -1;
    }
    entry_of(interp)->by_request = 1;
    return 0;
}

int
_PyPerfTrampoline_ActivateRemote(int index)
{
    /* dlopen() waits for the loader's locks, which another thread may
       hold while it waits for the GIL (Python/perf_loader.c). */
    Py_BEGIN_ALLOW_THREADS
    _PyPerfArena_Prepare(_PyPerf_backends[index]);
    Py_END_ALLOW_THREADS
    if (_PyPerfCore.remote_backend != index) {
        _PyPerfTrampoline_DeactivateRemote();
    }
    /* The GIL, held from here on, keeps the list of interpreters as it
       is.  One that is ending is left alone. */
    int err = 0;
    for (PyInterpreterState *interp = PyInterpreterState_Head();
         interp != NULL; interp = PyInterpreterState_Next(interp))
    {
        if (!interp->finalizing
            && activate_by_request(interp, index) < 0)
        {
            err = errno ? errno : EIO;
            break;
        }
    }
    for (size_t i = 0; i < _PyPerfCore.n_interps; i++) {
        if (_PyPerfCore.interps[i].by_request) {
            _PyPerfCore.remote_backend = index;
        }
    }
    return err;
}

void
_PyPerfTrampoline_DeactivateRemote(void)
{
    size_t i = 0;
    while (i < _PyPerfCore.n_interps) {
        if (_PyPerfCore.interps[i].by_request) {
            /* Removes entry i (the last one takes its place). */
            deactivate(_PyPerfCore.interps[i].interp);
        }
        else {
            i++;
        }
    }
    _PyPerfCore.remote_backend = -1;
}

void
_PyPerfTrampoline_InitInterpreter(PyInterpreterState *interp)
{
    Py_BUILD_ASSERT(Py_ARRAY_LENGTH(backend_names)
                    == _PyPerfTrampoline_CODE_EXTRA_SLOTS);
    Py_BUILD_ASSERT(PERF_MAP_BACKEND == _PyPerfFile_MAP
                    && PERF_JIT_BACKEND == _PyPerfFile_JITDUMP);
    /* Reserve the co_extra slots taken so far before anything else can
       request one, so they have the same indexes in every interpreter
       (see _PyPerfSlot_Take()). */
    assert(interp->co_extra_user_count == 0);
    for (Py_ssize_t i = 0; i < _PyPerfCore.reserved; i++) {
        interp->co_extra_freefuncs[i] = NULL;
    }
    interp->co_extra_user_count = _PyPerfCore.reserved;
    /* -X perf and the environment variables cover sub-interpreters too
       (the main interpreter starts in _PyPerfTrampoline_InitFromConfig()).
       If the file cannot be opened, the warning was printed when the main
       interpreter could not open it either. */
    if (_PyPerfCore.config_backend >= 0) {
        const char *reason;
        (void)activate(interp, _PyPerfCore.config_backend, &reason);
    }
    else if (_PyPerfCore.remote_backend >= 0) {
        /* A request from outside covers interpreters created while it
           lasts. */
        (void)activate_by_request(interp, _PyPerfCore.remote_backend);
    }
}

void
_PyPerfTrampoline_FiniInterpreter(PyInterpreterState *interp)
{
    deactivate(interp);
}

void
_PyPerfTrampoline_Deactivate(void)
{
    deactivate(_PyInterpreterState_GET());
}

int
_PyPerfTrampoline_IsActiveHere(void)
{
    return backend_of(_PyInterpreterState_GET()) >= 0;
}


void
_PyPerfTrampoline_Fini(void)
{
    /* Sub-interpreters have ended; the main interpreter stops here.  A
       later initialization of the runtime follows its own
       configuration. */
    _PyPerfCore.config_backend = -1;
    _PyPerfCore.remote_backend = -1;
    _PyPerfCore.remote_handling = 0;
    _PyPerfRemote_leased = 0;
    while (_PyPerfCore.n_interps > 0) {
        deactivate(_PyPerfCore.interps[_PyPerfCore.n_interps - 1].interp);
    }
    PyUnstable_PerfMapState_Fini();
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

void
_PyPerfTrampoline_InitInterpreter(PyInterpreterState *Py_UNUSED(interp))
{
}

void
_PyPerfTrampoline_FiniInterpreter(PyInterpreterState *Py_UNUSED(interp))
{
}

void
_PyPerfTrampoline_AttachThread(PyThreadState *Py_UNUSED(tstate))
{
}

int
_PyPerfTrampoline_IsActiveHere(void)
{
    return 0;
}

void
_PyPerfTrampoline_Deactivate(void)
{
}

void
_PyPerfTrampoline_Fini(void)
{
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */


/* Configuration ************************************************************/

int
_PyPerfTrampoline_Activate(const char *name)
{
    int index = find_backend(name);
    if (index < 0) {
        PyErr_Format(PyExc_ValueError,
                     "invalid stack trampoline backend: '%s'", name);
        return -1;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* dlopen() waits for the loader's locks, which another thread may
       hold while it waits for the GIL (Python/perf_loader.c). */
    Py_BEGIN_ALLOW_THREADS
    _PyPerfArena_Prepare(_PyPerf_backends[index]);
    Py_END_ALLOW_THREADS
    const char *reason = NULL;
    PyInterpreterState *interp = _PyInterpreterState_GET();
    if (activate(interp, index, &reason) == 0) {
        /* The program's own from now on: the end of a request from
           outside leaves it on. */
        entry_of(interp)->by_request = 0;
    }
    else {
        int err = errno;
        PyObject *msg = PyUnicode_FromFormat(
            "cannot open the %s file: %s", backend_names[index], reason);
        PyObject *path = PyUnicode_DecodeFSDefault(
            _PyPerfFile_PendingPath(_PyPerf_backends[index]->kind));
        if (msg != NULL && path != NULL) {
            PyObject *exc = PyObject_CallFunction(PyExc_OSError, "iOO",
                                                  err, msg, path);
            if (exc != NULL) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
                Py_DECREF(exc);
            }
        }
        Py_XDECREF(msg);
        Py_XDECREF(path);
        return -1;
    }
    return 0;
#else
    PyErr_Format(PyExc_ValueError,
                 "the '%s' stack trampoline is not supported by this build "
                 "of Python (it needs Linux on x86-64, aarch64 or riscv64)",
                 backend_names[index]);
    return -1;
#endif
}

/* Parse the value of PYTHONPERFSUPPORT or of -X perf=VALUE: a non-zero
   integer enables (1), zero refuses requests from outside (0; see
   Python/perf_remote.c).  Anything else (unset, empty, not an integer,
   out of range) does neither (-1). */
static int
parse_value(const char *value)
{
    int result;
    if (value == NULL || _Py_str_to_int(value, &result) < 0) {
        return -1;
    }
    return result != 0;
}

static int
enable_value(const char *value)
{
    return parse_value(value) == 1;
}

static int
parse_xoption(const wchar_t *xoption)
{
    if (xoption == NULL) {
        return -1;
    }
    const wchar_t *sep = wcschr(xoption, L'=');
    if (sep == NULL) {
        return 1;   /* plain "-X perf" */
    }
    /* Integers are plain ASCII: anything else is not one. */
    char value[32];
    size_t i;
    for (i = 0; sep[1 + i] != L'\0'; i++) {
        wchar_t c = sep[1 + i];
        if (i + 1 >= sizeof(value) || c > 127) {
            return -1;
        }
        value[i] = (char)c;
    }
    value[i] = '\0';
    return parse_value(value);
}

static int
xoption_enable_value(const wchar_t *xoption)
{
    return parse_xoption(xoption) == 1;
}

/* Whether the configuration refuses requests from outside: one of the
   options is zero, or with neither option given, one of the variables
   (the precedence of backend_from_config()). */
static int
refuses_requests(const PyConfig *config)
{
    const wchar_t *x_jit = _Py_get_xoption(&config->xoptions, L"perf_jit");
    const wchar_t *x_perf = _Py_get_xoption(&config->xoptions, L"perf");
    if (x_jit != NULL || x_perf != NULL) {
        return parse_xoption(x_jit) == 0 || parse_xoption(x_perf) == 0;
    }
    return (parse_value(_Py_GetEnv(config->use_environment,
                                   "PYTHONPERFSUPPORT")) == 0
            || parse_value(_Py_GetEnv(config->use_environment,
                                      "PYTHON_PERF_JIT_SUPPORT")) == 0);
}

/* The index of the backend that -X perf, -X perf_jit, PYTHONPERFSUPPORT
   and PYTHON_PERF_JIT_SUPPORT select, or -1.  -X options win over the
   environment; among each, perf_jit wins over perf. */
static int
backend_from_config(const PyConfig *config)
{
    const wchar_t *x_jit = _Py_get_xoption(&config->xoptions, L"perf_jit");
    const wchar_t *x_perf = _Py_get_xoption(&config->xoptions, L"perf");
    if (x_jit != NULL || x_perf != NULL) {
        if (x_jit != NULL && xoption_enable_value(x_jit)) {
            return PERF_JIT_BACKEND;
        }
        if (x_perf != NULL && xoption_enable_value(x_perf)) {
            return PERF_MAP_BACKEND;
        }
        return -1;
    }
    if (enable_value(_Py_GetEnv(config->use_environment,
                                "PYTHON_PERF_JIT_SUPPORT"))) {
        return PERF_JIT_BACKEND;
    }
    if (enable_value(_Py_GetEnv(config->use_environment,
                                "PYTHONPERFSUPPORT"))) {
        return PERF_MAP_BACKEND;
    }
    return -1;
}

void
_PyPerfTrampoline_InitFromConfig(const PyConfig *config)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    _PyPerfLoader_NoteStart();
    _PyPerfStack_NoteStart();
    /* Hold what is described until _PyPerfTrampoline_EndStartup(). */
    _PyPerfFile_Hold();
    _PyPerf_Remote.refused = (uint32_t)refuses_requests(config);
#endif
    int index = backend_from_config(config);
    if (index < 0) {
        return;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* Every interpreter starts with it, this one now.  No other thread
       runs Python code yet, so the loader may be waited for with the
       GIL held. */
    _PyPerfCore.config_backend = index;
    _PyPerfArena_Prepare(_PyPerf_backends[index]);
    const char *reason = NULL;
    if (activate(_PyInterpreterState_GET(), index, &reason) < 0) {
        PySys_FormatStderr(
            "Warning: perf trampolines not activated: cannot open %s: %s\n",
            _PyPerfFile_PendingPath(_PyPerf_backends[index]->kind), reason);
    }
#endif
}

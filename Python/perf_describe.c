/* Describing trampolines: to profilers through their backend's file, to
   debuggers through the images of Python/perf_debugger.c; writing what
   start-up, imports and bursts of new functions held back (see
   Python/perf_description_file.c); and saying, once, when a file cannot
   be written. */

#include "Python.h"
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyInterpreterState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* Report, once, that the file of the backend at index cannot be written:
   no new trampolines of that backend are made until it is opened again.
   Call it only once the state is consistent: writing to sys.stderr can
   run Python code, which can make trampolines or activate and
   deactivate. */
void
_PyPerfTrampoline_ReportWriteFailure(int index, int err)
{
    char path[64];
    _PyPerfCore.pools[index].write_failed = 1;
    Py_ssize_t lost = _PyPerfFile_TakeLost(_PyPerf_backends[index]->kind);
    PyOS_snprintf(path, sizeof(path), "%s",
                  _PyPerfFile_Path(_PyPerf_backends[index]->kind));
    if (lost > 0) {
        PySys_FormatStderr(
            "Warning: cannot write to %s (%s); the names of %zd functions "
            "are not in it, and Python functions started from now on will "
            "not appear in native profiles\n",
            path, strerror(err), lost);
    }
    else {
        PySys_FormatStderr(
            "Warning: cannot write to %s (%s); Python functions started "
            "from now on will not appear in native profiles\n",
            path, strerror(err));
    }
}

/* Set while a failure seen where nothing may be printed is to be
   reported: the eval breaker reports it (see Python/ceval.c). */
int _PyPerfTrampoline_unreported = 0;

void
_PyPerfTrampoline_ReportUnreported(int index)
{
    _PyPerfPool *pool = &_PyPerfCore.pools[index];
    if (pool->unreported_errno != 0) {
        int err = pool->unreported_errno;
        pool->unreported_errno = 0;
        _PyPerfTrampoline_ReportWriteFailure(index, err);
    }
}

void
_PyPerfTrampoline_ReportFailures(void)
{
    _PyPerfTrampoline_unreported = 0;
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        _PyPerfTrampoline_ReportUnreported(i);
    }
}

/* Describe co's trampoline at code, of the backend at index, to
   profilers (through the backend) and, if it is new, to debuggers (an
   inherited one is in the images the process inherited). */
void
_PyPerfTrampoline_Describe(int index, char *code, PyCodeObject *co,
                           int is_new)
{
    const _PyPerfBackend *backend = _PyPerf_backends[index];
    _PyPerfPool *pool = &_PyPerfCore.pools[index];
    char small[512];
    char *name = small;
    size_t qualname_end;
    size_t n = _PyPerfTrampoline_FormatSymbol(co, small, sizeof(small),
                                              &qualname_end);
    if (n > sizeof(small)) {
        name = PyMem_RawMalloc(n);
        if (name == NULL) {
            _PyPerfTrampoline_ReportWriteFailure(index, ENOMEM);
            return;
        }
        (void)_PyPerfTrampoline_FormatSymbol(co, name, n, &qualname_end);
    }
    size_t size = _PyPerfArena_CodeSize(backend);
    int holding = _PyPerfFile_Holding();
    int64_t now = _PyPerfFile_Now();
    if (is_new) {
        _PyPerfDebugger_Describe(&pool->image, code, size,
                                 _PyPerfArena_Stride(backend),
                                 pool->limit, name, n, qualname_end,
                                 holding, now);
    }
    if (backend->write_entry(code, size, name, n, now) < 0) {
        _PyPerfTrampoline_ReportWriteFailure(index, errno);
    }
    else if (_PyPerfFile_held && !holding) {
        /* Written in time by the eval breaker (see
           Python/perf_description_file.c). */
        _Py_atomic_store_relaxed(
            &_PyInterpreterState_GET()->ceval.eval_breaker, 1);
    }
    if (name != small) {
        PyMem_RawFree(name);
    }
}

/* Write what start-up or the imports held, for every open file, and tell
   an attached debugger the names held back with it (see
   Python/perf_debugger.c). */
static void
write_held(void)
{
    if (_PyPerfFile_Holding()) {
        return;
    }
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        /* Nothing held: the files' lock is not taken (this runs at the
           end of every import, whether the feature is used or not). */
        if (_PyPerfFile_held
            && _PyPerfFile_WriteHeld(_PyPerf_backends[i]->kind) < 0
            && _PyPerfCore.pools[i].users > 0)
        {
            _PyPerfTrampoline_ReportWriteFailure(i, errno);
        }
        _PyPerfDebugger_Flush(_PyPerfCore.pools[i].image);
    }
}

/* Called at the eval breaker (all = 0: only what is due) and where the
   thread is about to release the GIL (all = 1), which may be in the
   middle of anything: no Python code may run, so a failure is reported
   at the next check of the eval breaker, by whichever thread runs
   Python code next (or at the next new trampoline). */
void
_PyPerfTrampoline_WriteHeld(int all)
{
    if (!all && _PyPerfFile_Now() < _PyPerfFile_deadline) {
        return;
    }
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        int wrote;
        _PyPerfPool *pool = &_PyPerfCore.pools[i];
        int kind = _PyPerf_backends[i]->kind;
        if (_PyPerfFile_WriteHeldNow(kind, all, &wrote) < 0
            && pool->users > 0 && !pool->write_failed)
        {
            pool->write_failed = 1;
            pool->unreported_errno = errno;
            _PyPerfTrampoline_unreported = 1;
            /* PyEval_ReleaseThread() has no current thread state here. */
            PyThreadState *tstate = _PyThreadState_GET();
            PyInterpreterState *interp = (tstate != NULL ? tstate->interp
                                          : _PyInterpreterState_Main());
            if (interp != NULL) {
                _Py_atomic_store_relaxed(&interp->ceval.eval_breaker, 1);
            }
        }
        if (wrote) {
            _PyPerfDebugger_Flush(_PyPerfCore.pools[i].image);
        }
    }
}

void
_PyPerfTrampoline_EndStartup(void)
{
    _PyPerfFile_EndHold();
    write_held();
}


void
_PyPerfTrampoline_BeginImport(void)
{
    _PyPerfFile_BeginImport();
}

void
_PyPerfTrampoline_EndImport(void)
{
    _PyPerfFile_EndImport();
    write_held();
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

void
_PyPerfTrampoline_EndStartup(void)
{
}

void
_PyPerfTrampoline_BeginImport(void)
{
}

void
_PyPerfTrampoline_EndImport(void)
{
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

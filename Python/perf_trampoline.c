/* Perf trampolines: one native frame per Python frame.

   The evaluation loop runs Python-to-Python calls inside a single C frame
   of _PyEval_EvalFrameDefault(), so a native profiler such as Linux perf
   sees the same C function over and over and never the Python functions.

   While a trampoline backend is active, every Python frame is started from
   a trampoline: a copy of the tiny function in Python/asm_trampoline.S that
   just calls the evaluator.  Each code object gets a copy of its own, at an
   address that never changes and is never reused, so the return address
   that the trampoline leaves on the native stack identifies the Python
   function.  The backend then tells the profiler what lives at that
   address: the "perf" backend (Python/perf_map.c) in /tmp/perf-PID.map,
   the "perf_jit" backend (Python/perf_jit_trampoline.c) in a jitdump with
   unwind information.  pycore_perf_backend.h lists the files.

   This file holds how frames reach their trampolines, how a trampoline
   is made, the C API, and the state that the files of the core share
   (pycore_perf_core.h lists them).

   Frames reach their trampoline from two places: _PyEval_EvalFrame(),
   which is how C code starts a frame (function calls from C, generators,
   coroutines), and the call instructions of the evaluation loop that
   normally push the callee's frame and continue in the same C frame; while
   active, those make a C call through the callee's trampoline instead.
   This is not done with the PEP 523 frame evaluation hook, which makes
   3.11 give up its specialized, inlined Python-to-Python calls: the call
   instructions keep their fast frame push, and only the final "continue
   in this C frame" becomes a C call.  That call is a new activation of the
   evaluator, 60-70 instructions per Python call on recursive fib(), where
   the hook costs several times as much (see "Call instructions, not the
   PEP 523 hook" in Tools/perf/bench/RESULTS.rst). */

#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

const _PyPerfBackend *const _PyPerf_backends[N_BACKENDS] = {
    [PERF_MAP_BACKEND] = &_PyPerfMap_Backend,
    [PERF_JIT_BACKEND] = &_PyPerfJit_Backend,
};

typedef PyObject *(*py_trampoline)(PyThreadState *,
                                   _PyInterpreterFrame *, int,
                                   _PyFrameEvalFunction);

/* Read on every frame entry: kept apart from the state below. */
int _PyPerfTrampoline_active = 0;
__thread _PyPerfTrampoline_ThreadState _PyPerfTrampoline_thread
    _PyPerfTrampoline_TLS_MODEL = {0, 0, 0, 0, 0, -1, 0};

_PyPerfCoreState _PyPerfCore = {
    .config_backend = -1,
    .remote_backend = -1,
    .pools = {{.slot = -1}, {.slot = -1}},
    .arenas = {.shared = 1},
};

/* Give "co" a trampoline of the calling thread's backend and describe
   it.  Return NULL if that is not possible; the frame then runs without
   one.  Never raises, nor changes the exception set: the caller may be
   starting a frame with one (generator.throw()).  (Only a name that is
   not ASCII is made with Python's API, see Python/perf_symbols.c; the
   warnings keep the exception, like PySys_FormatStderr().) */
static py_trampoline
compile_trampoline(PyCodeObject *co)
{
    if (_PyPerfCore.forked) {
        /* No at-fork handlers run in a child forked so. */
        _PyPerfTrampoline_AfterFork_Child();
        _PyPerfTrampoline_AfterForkHandlers();
    }
    if (_PyPerfCore.in_fork_handlers) {
        return NULL;
    }
    if (_PyPerfTrampoline_child_pending) {
        _PyPerfTrampoline_StartChild();
    }
    if (_PyPerfRemote_leased) {
        /* A thread that keeps making new functions may not check the
           eval breaker nor block for long. */
        _PyPerfRemote_CheckLease();
    }
    int index = _PyPerfTrampoline_thread.backend;
    if (index < 0) {
        return NULL;
    }
    const _PyPerfBackend *backend = _PyPerf_backends[index];
    _PyPerfPool *pool = &_PyPerfCore.pools[index];
    size_t step = _PyPerfArena_Stride(backend);
    _PyPerfTrampoline_ReportUnreported(index);
    if (pool->arena_failed || pool->write_failed) {
        return NULL;
    }
    char *code = _PyPerfTrampoline_ClaimInherited(index, co);
    if (code != NULL) {
        return (py_trampoline)code;
    }
    if (pool->next == NULL || (size_t)(pool->limit - pool->next) < step) {
        if (_PyPerfArena_New(backend, pool) < 0) {
            pool->arena_failed = 1;
            PySys_FormatStderr(
                "Warning: cannot allocate memory for perf trampolines "
                "(%s); Python functions started from now on will not "
                "appear in native profiles\n", strerror(errno));
            return NULL;
        }
    }
    code = pool->next;
    int res = _PyPerfSlot_Set(co, pool->slot, code);
    if (res == 0) {
        pool->next += step;
        pool->made = 1;
        _PyPerfCore.trampolines++;
        _PyPerfTrampoline_Describe(index, code, co, 1);
    }
    return res < 0 ? NULL : (py_trampoline)code;
}

PyObject *
_PyPerfTrampoline_EvalFrameWith(PyThreadState *tstate,
                                _PyInterpreterFrame *frame, int throwflag,
                                _PyFrameEvalFunction evaluator)
{
    if (!_PyPerfTrampoline_HaveStack()) {
        return evaluator(tstate, frame, throwflag);
    }
    PyCodeObject *co = frame->f_code;
    py_trampoline f = (py_trampoline)_PyPerfTrampoline_Lookup(co);
    if (f == NULL) {
        f = compile_trampoline(co);
        if (f == NULL) {
            return evaluator(tstate, frame, throwflag);
        }
    }
    return f(tstate, frame, throwflag, evaluator);
}

PyObject *
_PyPerfTrampoline_EvalFrame(PyThreadState *tstate,
                            _PyInterpreterFrame *frame, int throwflag)
{
    return _PyPerfTrampoline_EvalFrameWith(tstate, frame, throwflag,
                                           _PyEval_EvalFrameDefault);
}

PyObject *
_PyPerfTrampoline_GetStats(void)
{
    return Py_BuildValue(
        "{snsnsnsnsnsnsn}",
        "arena_bytes", (Py_ssize_t)_PyPerfCore.arena_bytes,
        "trampolines", (Py_ssize_t)_PyPerfCore.trampolines,
        "trampoline_size", (Py_ssize_t)_PyPerfCore.template_size,
        "written_bytes", (Py_ssize_t)_PyPerfFile_WrittenBytes(),
        "writes", (Py_ssize_t)_PyPerfFile_Writes(),
        "eval_breaker_checks", (Py_ssize_t)_PyPerfFile_breaker_checks,
        "unwindable_bytes", (Py_ssize_t)_PyPerfCore.unwindable_bytes);
}


/* C API (Include/cpython/ceval.h) *******************************************/

int
PyUnstable_PerfTrampoline_CompileCode(PyCodeObject *co)
{
    if (co == NULL || !PyCode_Check(co)) {
        PyErr_SetString(PyExc_TypeError, "expected a code object");
        return -1;
    }
    int index = _PyPerfTrampoline_thread.backend;
    if (index < 0 || _PyPerfTrampoline_Lookup(co) != NULL) {
        return 0;
    }
    if (compile_trampoline(co) == NULL
        && !_PyPerfCore.pools[index].arena_failed
        && !_PyPerfCore.pools[index].write_failed)
    {
        PyErr_NoMemory();
        return -1;
    }
    /* A failure to map or describe was reported already; the code runs
       without a trampoline, as it would without this call. */
    return 0;
}

int
PyUnstable_PerfTrampoline_SetPersistAfterFork(int enable)
{
    /* Children always keep their parent's trampolines, named, and make
       their own (see _PyPerfTrampoline_AfterFork_Child()): the setting
       changes nothing, and is returned as upstream CPython does. */
    return enable;
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

PyObject *
_PyPerfTrampoline_EvalFrame(PyThreadState *tstate,
                            _PyInterpreterFrame *frame, int throwflag)
{
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

PyObject *
_PyPerfTrampoline_EvalFrameWith(PyThreadState *tstate,
                                _PyInterpreterFrame *frame, int throwflag,
                                _PyFrameEvalFunction evaluator)
{
    return evaluator(tstate, frame, throwflag);
}

int
PyUnstable_PerfTrampoline_CompileCode(PyCodeObject *co)
{
    if (co == NULL || !PyCode_Check(co)) {
        PyErr_SetString(PyExc_TypeError, "expected a code object");
        return -1;
    }
    return 0;
}

int
PyUnstable_PerfTrampoline_SetPersistAfterFork(int Py_UNUSED(enable))
{
    return 0;
}

PyObject *
_PyPerfTrampoline_GetStats(void)
{
    return Py_BuildValue("{snsnsnsnsnsnsn}", "arena_bytes", (Py_ssize_t)0,
                         "trampolines", (Py_ssize_t)0,
                         "trampoline_size", (Py_ssize_t)0,
                         "written_bytes", (Py_ssize_t)0,
                         "writes", (Py_ssize_t)0,
                         "eval_breaker_checks", (Py_ssize_t)0,
                         "unwindable_bytes", (Py_ssize_t)0);
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

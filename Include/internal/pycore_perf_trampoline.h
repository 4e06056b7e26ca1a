#ifndef Py_INTERNAL_PERF_TRAMPOLINE_H
#define Py_INTERNAL_PERF_TRAMPOLINE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* Perf trampolines: the interface to the rest of the interpreter (the
   implementation is in Python/perf_trampoline.c and the files that
   pycore_perf_backend.h lists).

   While active, every Python frame is evaluated from a small piece of
   machine code that is unique to its code object, so that native profilers
   (Linux perf and tools reading its map files) see one native frame per
   Python frame and can name it from /tmp/perf-PID.map. */

#include "pycore_code.h"           // _PyCodeObjectExtra
#include "pycore_frame.h"          // _PyInterpreterFrame

struct _PyInterpreterFrame;

/* The co_extra slots holding a code object's trampolines, one per backend
   ("perf", "perf_jit").  They are taken in every interpreter when a
   backend is first used, and reserved in every interpreter created after,
   so the indexes are valid in all of them.  A forked child takes new ones
   (see Python/perf_trampoline.c). */
#define _PyPerfTrampoline_CODE_EXTRA_SLOTS 2

/* A trampoline: calls evaluator(tstate, frame, throwflag). */
typedef PyObject *(*_PyPerfTrampoline_Func)(PyThreadState *,
                                            struct _PyInterpreterFrame *,
                                            int, _PyFrameEvalFunction);

#ifdef PY_HAVE_PERF_TRAMPOLINE
/* Non-zero while some interpreter uses a backend.  Read on every frame
   entry: while no interpreter does, the feature costs one load, test and
   branch per call. */
PyAPI_DATA(int) _PyPerfTrampoline_active;

/* Per thread, what its calls need, read on every call while active (one
   thread-local block, so one address computation for both):

   - The backend that the interpreter of the thread's current thread state
     uses, which is also the co_extra index of its trampolines; -1 if none.
     A thread follows its interpreter when its thread state changes
     (_PyThreadState_Swap() calls _PyPerfTrampoline_AttachThread()), and an
     interpreter can only change backends while the thread that changes
     it holds the GIL.

   - A trampolined Python call costs C stack, which an inlined call does
     not.  Calls are trampolined only while the stack pointer is within
     stack_span bytes above stack_limit: a small share at the start of
     the thread's own stack (see Python/perf_trampoline.c).  Anywhere
     else (deep down the thread's stack, or on a stack the thread switched
     to, such as a makecontext() one, whose bounds are unknown) calls stay
     inline.  stack_span is 0 while the thread's interpreter uses no
     backend, so that one test covers both, and the bounds are computed
     when the thread attaches to an interpreter that uses one, so that the
     test is all a call pays.

   Where the interpreter is linked into the program (Debian's python3.11
   and the default build), the initial-exec model makes each read one
   instruction.  Not in a shared libpython (--enable-shared, as Debian
   ships it for embedding): that model would mark the library as needing
   static TLS, and a program that dlopen()s it could then fail with
   "cannot allocate memory in static TLS block".  There each read calls
   __tls_get_addr(), which cost 16 of the 79 extra instructions per call
   on recursive fib() with -X perf. */
typedef struct {
    uintptr_t stack_limit;
    uintptr_t stack_span;
    /* The thread's own bounds, once computed (own_span 0: unknown). */
    uintptr_t own_limit;
    uintptr_t own_span;
    int computed;
    int backend;
    /* The co_extra index of the backend's trampolines in this process:
       the backend's index in the first process, a new one in each forked
       child (see Python/perf_trampoline.c). */
    Py_ssize_t slot;
} _PyPerfTrampoline_ThreadState;

#ifdef Py_ENABLE_SHARED
#  define _PyPerfTrampoline_TLS_MODEL
#else
#  define _PyPerfTrampoline_TLS_MODEL \
       __attribute__((tls_model("initial-exec")))
#endif
extern __thread _PyPerfTrampoline_ThreadState _PyPerfTrampoline_thread
    _PyPerfTrampoline_TLS_MODEL;

static inline int
_PyPerfTrampoline_IsActive(void)
{
    return _PyPerfTrampoline_active;
}

/* May a call made here be trampolined?  Only if the thread's interpreter
   uses a backend, and within the share of the thread's own stack that
   trampolines may take (one unsigned comparison tests both bounds). */
static inline int
_PyPerfTrampoline_HaveStack(void)
{
    return ((uintptr_t)__builtin_frame_address(0)
            - _PyPerfTrampoline_thread.stack_limit
            < _PyPerfTrampoline_thread.stack_span);
}

/* The trampoline of the thread's backend for co, or NULL if it has none
   yet in this process.  Only valid where _PyPerfTrampoline_HaveStack(). */
static inline _PyPerfTrampoline_Func
_PyPerfTrampoline_Lookup(PyCodeObject *co)
{
    _PyCodeObjectExtra *extra = (_PyCodeObjectExtra *)co->co_extra;
    Py_ssize_t slot = _PyPerfTrampoline_thread.slot;
    if (extra == NULL || extra->ce_size <= slot) {
        return NULL;
    }
    return (_PyPerfTrampoline_Func)extra->ce_extras[slot];
}
#else
static inline int
_PyPerfTrampoline_IsActive(void)
{
    return 0;
}

static inline int
_PyPerfTrampoline_HaveStack(void)
{
    return 0;
}

static inline _PyPerfTrampoline_Func
_PyPerfTrampoline_Lookup(PyCodeObject *Py_UNUSED(co))
{
    return NULL;
}
#endif

/* Evaluate *frame* through its code object's trampoline (creating the
   trampoline on first use).  Same contract as _PyEval_EvalFrameDefault().
   Exported because _PyEval_EvalFrame() is inline. */
PyAPI_FUNC(PyObject *) _PyPerfTrampoline_EvalFrame(
    PyThreadState *tstate,
    struct _PyInterpreterFrame *frame,
    int throwflag);

/* The same with another frame evaluation function (a PEP 523 hook that
   another tool installed): the trampoline calls it instead of
   _PyEval_EvalFrameDefault(), so that the frame still has its native
   frame and name. */
PyAPI_FUNC(PyObject *) _PyPerfTrampoline_EvalFrameWith(
    PyThreadState *tstate,
    struct _PyInterpreterFrame *frame,
    int throwflag,
    _PyFrameEvalFunction evaluator);

/* The same, for _PyEval_EvalFrame(), by which every generator and
   coroutine resumes: a frame whose code has a trampoline already goes
   straight through it, with nothing out of line. */
static inline PyObject *
_PyPerfTrampoline_EnterFrame(PyThreadState *tstate,
                             struct _PyInterpreterFrame *frame,
                             int throwflag)
{
    _PyPerfTrampoline_Func trampoline;
    if (_PyPerfTrampoline_HaveStack()
        && (trampoline = _PyPerfTrampoline_Lookup(frame->f_code)) != NULL)
    {
        return trampoline(tstate, frame, throwflag, _PyEval_EvalFrameDefault);
    }
    return _PyPerfTrampoline_EvalFrame(tstate, frame, throwflag);
}

/* Reserve the co_extra slots taken so far in a new interpreter, which
   starts with the backend that -X perf or the environment asked for
   (Python/pystate.c), and stop its backend when it is cleared. */
extern void _PyPerfTrampoline_InitInterpreter(PyInterpreterState *interp);
extern void _PyPerfTrampoline_FiniInterpreter(PyInterpreterState *interp);
/* The calling thread's current thread state is now tstate (not NULL). */
extern void _PyPerfTrampoline_AttachThread(PyThreadState *tstate);

/* Activate the backend named by -X perf / PYTHONPERFSUPPORT, if any.
   Failures are reported on stderr and never stop the interpreter.  Until
   _PyPerfTrampoline_EndStartup(), descriptions of new trampolines are held
   in memory, to be written all at once. */
extern void _PyPerfTrampoline_InitFromConfig(const PyConfig *config);
extern void _PyPerfTrampoline_EndStartup(void);

/* Called by the import system around each import (Python/import.c):
   what is described during an import is written when the outermost one
   of the thread ends, if not before (see
   Python/perf_description_file.c). */
extern void _PyPerfTrampoline_BeginImport(void);
extern void _PyPerfTrampoline_EndImport(void);

#ifdef PY_HAVE_PERF_TRAMPOLINE
/* Non-zero while descriptions are held (Python/perf_description_file.c);
   set for good once any were. */
extern int _PyPerfFile_held;
extern int _PyPerfFile_ever_held;
extern size_t _PyPerfFile_breaker_checks;
/* Whether the calling thread holds what it describes (start-up, imports). */
extern int _PyPerfFile_Holding(void);
extern void _PyPerfTrampoline_WriteHeld(int all);
/* Non-zero while a failure to write them is to be reported. */
extern int _PyPerfTrampoline_unreported;
extern void _PyPerfTrampoline_ReportFailures(void);
/* Non-zero in a forked child until it runs Python code, which starts it
   (see _PyPerfTrampoline_AfterFork_Child()). */
extern int _PyPerfTrampoline_child_pending;
extern void _PyPerfTrampoline_StartChild(void);
extern void _PyPerfTrampoline_ChildAtEvalBreaker(void);
#endif

/* Requests from outside the process (Python/perf_remote.c).  A tool that
   the kernel lets write this process's memory (ptrace attach rights,
   which /proc/PID/mem and process_vm_writev() check) finds this block by
   its symbol, writes a request into it and sets the main interpreter's
   eval breaker, at the offset below; the next thread that checks an eval
   breaker handles the request.  (Threads of other interpreters notice it
   when they next take the GIL: a pending request keeps every eval breaker
   computed then set.  The main interpreter is the only one that is never
   freed, so a tool never writes into memory the process has freed.)
   Tools read the block by its layout: fields are only ever added at the
   end (with size). */
typedef struct {
    /* Set when the interpreter is built, for tools to check. */
    char magic[16];                 /* "CPython perfctl" */
    uint32_t version;               /* of this layout: 1 */
    uint32_t size;                  /* sizeof(_PyPerfRemoteControl) */
    void *runtime;                  /* &_PyRuntime */
    uint32_t main_eval_breaker;     /* offsetof(_PyRuntimeState,
                                       _main_interpreter.ceval.eval_breaker) */
    /* Set at start-up: non-zero if the process refuses requests. */
    uint32_t refused;
    /* Written by the tool: command and lease_ms, then request (one more
       than the last), then each interpreter's eval breaker. */
    volatile uint32_t command;      /* 0: off; 1 + the backend's index */
    volatile uint32_t lease_ms;     /* on for this long unless renewed */
    volatile uint32_t request;
    /* Written by the interpreter once it has handled a request: the
       result, the interpreters using a backend after it (all of them,
       and those turned on by requests), then handled = request. */
    int32_t result;                 /* 0 or an errno value */
    int32_t interps_on;
    int32_t interps_by_request;
    volatile uint32_t handled;
} _PyPerfRemoteControl;

#ifdef PY_HAVE_PERF_TRAMPOLINE
PyAPI_DATA(_PyPerfRemoteControl) _PyPerf_Remote;
/* Non-zero while interpreters are on by a request, until its lease
   ends. */
extern int _PyPerfRemote_leased;
extern void _PyPerfRemote_AtEvalBreaker(void);
extern void _PyPerfRemote_CheckLease(void);
#endif

/* Whether the eval breaker's handler should look at requests: never in a
   process that was never sent one (one load). */
static inline int
_PyPerfRemote_Asked(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    return _PyPerf_Remote.request != 0 || _PyPerfRemote_leased;
#else
    return 0;
#endif
}

/* Called before a thread releases the GIL to sleep, wait or do I/O
   (PyEval_SaveThread()), or for good (_PyThreadState_DeleteCurrent(),
   os._exit()): what is held is written, since the thread may not run the
   eval breaker for long, or ever again.  One load and branch otherwise. */
static inline void
_PyPerfTrampoline_BeforeBlocking(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    if (_PyPerfFile_held) {
        _PyPerfTrampoline_WriteHeld(1);
    }
    /* A lease that ended turns the support off here too: a thread that
       blocks may not check the eval breaker again for long. */
    if (_PyPerfRemote_leased) {
        _PyPerfRemote_CheckLease();
    }
#endif
}

/* Whether the eval breaker may be wanted (see below): COMPUTE_EVAL_BREAKER()
   sets it then.  Signal handlers call that, so this reads a global
   variable only (thread-local storage is not async-signal-safe in a
   shared library); the eval breaker, where the thread's state is
   known, clears it again if the thread does not want it. */
static inline int
_PyPerfTrampoline_EvalBreakerMayBeWanted(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* A request from outside stays wanted until handled: the GIL's
       holder computes the eval breaker again each time it takes the
       GIL, which would drop the one the tool set. */
    return (_PyPerfFile_held != 0 || _PyPerfTrampoline_unreported
            || _PyPerfTrampoline_child_pending
            || _PyPerf_Remote.request != _PyPerf_Remote.handled);
#else
    return 0;
#endif
}

/* Whether the eval breaker has ever been set for perf trampolines in
   this process: if not, eval_frame_handle_pending() leaves it alone. */
static inline int
_PyPerfTrampoline_EvalBreakerUsed(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    return _PyPerfFile_ever_held || _PyPerfTrampoline_child_pending;
#else
    return 0;
#endif
}

/* Whether the eval breaker must stay set: while descriptions are held,
   each check of it (function entries, backward jumps) calls
   _PyPerfTrampoline_AtEvalBreaker(), which writes them once they are
   due, so that a thread busy in Python code does not keep them back.
   Not in a thread that starts up or imports: what it holds is bounded by
   count instead (see Python/perf_description_file.c).  And until a
   failure to write them, seen where nothing could be printed, has been
   reported, and in a forked child until it has started (its first
   check of the eval breaker is its first Python code). */
static inline int
_PyPerfTrampoline_EvalBreakerWanted(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    return ((_PyPerfFile_held != 0 && !_PyPerfFile_Holding())
            || _PyPerfTrampoline_unreported
            || _PyPerfTrampoline_child_pending);
#else
    return 0;
#endif
}

static inline void
_PyPerfTrampoline_AtEvalBreaker(void)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* The clock is read at one check in 64: the checks come every few
       nanoseconds while anything is held. */
    if (_PyPerfFile_held && (++_PyPerfFile_breaker_checks & 63) == 0) {
        _PyPerfTrampoline_WriteHeld(0);
    }
    if (_PyPerfTrampoline_child_pending) {
        _PyPerfTrampoline_ChildAtEvalBreaker();
    }
    if (_PyPerfTrampoline_unreported) {
        _PyPerfTrampoline_ReportFailures();
    }
#endif
}

/* Runtime control of the calling thread's interpreter, used by the sys
   module.  Activation returns 0 on success and -1 with an exception set
   on failure. */
extern int _PyPerfTrampoline_Activate(const char *backend);
extern void _PyPerfTrampoline_Deactivate(void);
extern int _PyPerfTrampoline_IsActiveHere(void);

/* Called in the child process after fork() (before and after its
   at-fork handlers run, see Modules/posixmodule.c) and at finalization. */
extern void _PyPerfTrampoline_AfterFork_Child(void);
extern void _PyPerfTrampoline_AfterForkHandlers(void);
/* In a child of subprocess (Modules/_posixsubprocess.c) that runs a
   preexec_fn and then execs: it describes nothing and leaves no file. */
PyAPI_FUNC(void) _PyPerfTrampoline_ChildWillExec(void);
extern void _PyPerfTrampoline_Fini(void);

/* For tests (_testinternalcapi) and benchmarks: make arena allocation
   fail, and get counters (arena bytes mapped, trampolines handed out,
   bytes of one trampoline, bytes and writes to description files). */
PyAPI_FUNC(void) _PyPerfTrampoline_SetArenaFailureForTesting(int fail);
PyAPI_FUNC(PyObject *) _PyPerfTrampoline_GetStats(void);
/* For tests: take (lock=1) or release (lock=0) the lock of the description
   files, to fork while it is held. */
PyAPI_FUNC(void) _PyPerfFile_LockForTesting(int lock);

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_PERF_TRAMPOLINE_H */

/* Requests from outside the process: a tool (pyprofile -p PID) turns the
   support on in a process that was started without it, for as long as
   it records, and off again.

   The tool writes a request into _PyPerf_Remote, an exported block whose
   address it finds in the ELF symbol table, and sets the main
   interpreter's eval breaker.  The kernel decides who may: writing another
   process's memory takes ptrace attach rights (root, or the same user
   where kernel.yama.ptrace_scope allows), which already let the caller do
   anything in the process.  Nothing here runs until a request comes: no
   thread, no signal, no file; the eval breaker's handler looks at the
   block only in a process that was sent one.

   A request turns every interpreter on (those created later too) for
   lease_ms; the tool renews it while it records.  When the lease ends
   without a renewal (the tool was killed), the next thread to check the
   eval breaker, block (release the GIL) or make a trampoline turns the
   support off.  Interpreters that the program turned on itself (-X perf,
   sys.activate_stack_trampoline()) are left as they are.

   A process refuses requests if it was started with -X perf=0,
   -X perf_jit=0, PYTHONPERFSUPPORT=0 or PYTHON_PERF_JIT_SUPPORT=0 (an
   embedding application: "perf=0" in PyConfig.xoptions). */

#include "Python.h"
#include "pycore_interp.h"        // PyInterpreterState.ceval
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"
#include "pycore_runtime.h"       // _PyRuntime

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <time.h>                 // clock_gettime()

_PyPerfRemoteControl _PyPerf_Remote = {
    .magic = "CPython perfctl",
    .version = 1,
    .size = sizeof(_PyPerfRemoteControl),
    .runtime = &_PyRuntime,
    .main_eval_breaker = offsetof(_PyRuntimeState,
                                  _main_interpreter.ceval.eval_breaker),
};

int _PyPerfRemote_leased = 0;

/* When the lease ends, in CLOCK_MONOTONIC nanoseconds. */
static int64_t lease_end;

static int64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Tell tools how many interpreters use a backend, and how many of them
   requests turned on. */
static void
publish(void)
{
    int by_request = 0;
    for (size_t i = 0; i < _PyPerfCore.n_interps; i++) {
        by_request += _PyPerfCore.interps[i].by_request;
    }
    _PyPerf_Remote.interps_on = (int32_t)_PyPerfCore.n_interps;
    _PyPerf_Remote.interps_by_request = by_request;
}

static void
handle(uint32_t request)
{
    uint32_t command = _PyPerf_Remote.command;
    uint32_t lease_ms = _PyPerf_Remote.lease_ms;
    int result = 0;
    if (_PyPerf_Remote.refused) {
        result = EPERM;
    }
    else if (_Py_IsFinalizing()) {
        result = ESHUTDOWN;
    }
    else if (command == 0) {
        _PyPerfTrampoline_DeactivateRemote();
        _PyPerfRemote_leased = 0;
    }
    else if (command > N_BACKENDS || lease_ms == 0) {
        result = EINVAL;
    }
    else {
        result = _PyPerfTrampoline_ActivateRemote((int)command - 1);
        if (result == 0 && _PyPerfCore.remote_backend >= 0) {
            lease_end = now_ns() + (int64_t)lease_ms * 1000000;
            _PyPerfRemote_leased = 1;
        }
    }
    _PyPerf_Remote.result = result;
    publish();
    /* The tool reads handled, then the rest. */
    __atomic_store_n(&_PyPerf_Remote.handled, request, __ATOMIC_RELEASE);
}

void
_PyPerfRemote_AtEvalBreaker(void)
{
    /* Tools know the layout (Tools/perf/pyprofile_lib/remote.py). */
    Py_BUILD_ASSERT(offsetof(_PyPerfRemoteControl, main_eval_breaker) == 32);
    Py_BUILD_ASSERT(offsetof(_PyPerfRemoteControl, command) == 40);
    Py_BUILD_ASSERT(offsetof(_PyPerfRemoteControl, handled) == 64);
    /* Set while a request is handled: the GIL is released to open the
       backend (Python/perf_loader.c), and another thread may check the
       eval breaker meanwhile. */
    if (_PyPerfCore.remote_handling) {
        return;
    }
    uint32_t request = __atomic_load_n(&_PyPerf_Remote.request,
                                       __ATOMIC_ACQUIRE);
    if (request != _PyPerf_Remote.handled) {
        _PyPerfCore.remote_handling = 1;
        handle(request);
        _PyPerfCore.remote_handling = 0;
    }
    if (_PyPerfRemote_leased) {
        _PyPerfRemote_CheckLease();
    }
}

void
_PyPerfRemote_CheckLease(void)
{
    if (!_PyPerfCore.remote_handling && now_ns() >= lease_end) {
        _PyPerfRemote_leased = 0;
        _PyPerfTrampoline_DeactivateRemote();
        publish();
    }
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

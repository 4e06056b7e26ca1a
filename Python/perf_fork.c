/* Forked children: a child keeps the trampolines it inherited, at their
   addresses and with their names, describes them in a file of its own as
   it runs them, and makes new ones in arenas of its own, so that a fork
   costs the same however many the parent made. */

#include "Python.h"
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyThreadState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE
#  include <unistd.h>             // getpid()
#endif

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* In a forked child, once its at-fork handlers have run: the number of
   checks of the eval breaker to its start (see
   _PyPerfTrampoline_AfterFork_Child()). */
int _PyPerfTrampoline_child_pending = 0;

/* Give co, in this process's slot of the backend at index, the
   trampoline it had in an ancestor process, and describe it in this
   process's file.  Return it, or NULL if it has none. */
char *
_PyPerfTrampoline_ClaimInherited(int index, PyCodeObject *co)
{
    _PyPerfPool *pool = &_PyPerfCore.pools[index];
    char *code = _PyPerfSlot_Inherited(co, pool->slot);
    if (code == NULL || _PyPerfSlot_Set(co, pool->slot, code) < 0) {
        return NULL;
    }
    _PyPerfTrampoline_Describe(index, code, co, 0);
    return code;
}

/* Describe the trampolines of the frames the calling thread is running:
   they were entered before the fork, so they are not looked up again. */
static void
describe_running_frames(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    int index = _PyPerfTrampoline_thread.backend;
    if (tstate == NULL || index < 0) {
        return;
    }
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    for (_PyInterpreterFrame *frame = tstate->cframe->current_frame;
         frame != NULL && !_PyPerfCore.pools[index].write_failed;
         frame = frame->previous)
    {
        if (_PyPerfTrampoline_Lookup(frame->f_code) == NULL) {
            (void)_PyPerfTrampoline_ClaimInherited(index, frame->f_code);
        }
    }
    PyErr_Restore(exc, val, tb);
}

/* What a forked child does once it runs Python code: open its own files,
   take new slots and describe the frames it is running. */
void
_PyPerfTrampoline_StartChild(void)
{
    _PyPerfTrampoline_child_pending = 0;
    /* A map copied whole names every trampoline the child inherited. */
    int map_copied = _PyPerfMap_AfterFork();
    for (int kind = 0; kind < _PyPerfFile_KINDS; kind++) {
        (void)_PyPerfFile_WriteInherited(kind);
    }
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        _PyPerfPool *pool = &_PyPerfCore.pools[i];
        if (pool->made && !(i == PERF_MAP_BACKEND && map_copied)) {
            /* With no index left (after some 250 generations of forks),
               the child keeps its parent's: it then describes only the
               trampolines it makes. */
            (void)_PyPerfSlot_Take(pool);
        }
        if (pool->users == 0) {
            continue;
        }
        const char *reason = NULL;
        if (_PyPerf_backends[i]->open(&reason) < 0) {
            char path[64];
            PyOS_snprintf(path, sizeof(path), "%s",
                          _PyPerfFile_PendingPath(_PyPerf_backends[i]->kind));
            /* No interpreter of the child uses this backend any more. */
            for (size_t j = _PyPerfCore.n_interps; j-- > 0;) {
                if (_PyPerfCore.interps[j].backend == i) {
                    _PyPerfCore.interps[j] =
                        _PyPerfCore.interps[--_PyPerfCore.n_interps];
                }
            }
            _PyPerfTrampoline_active = _PyPerfCore.n_interps > 0;
            pool->users = 0;
            _PyPerfTrampoline_UpdateThread();
            PySys_FormatStderr(
                "Warning: perf trampolines deactivated in child process "
                "%ld: cannot open %s: %s\n", (long)getpid(), path, reason);
        }
    }
    _PyPerfTrampoline_UpdateThread();
    describe_running_frames();
}

void
_PyPerfTrampoline_ChildAtEvalBreaker(void)
{
    if (--_PyPerfTrampoline_child_pending == 0) {
        _PyPerfTrampoline_StartChild();
    }
}

void
_PyPerfTrampoline_AfterFork_Child(void)
{
    /* perf copies the parent's memory maps into the child at the fork and
       keeps naming what lies in them from the parent's map file.  So the
       trampolines the child makes go into arenas it maps itself; the ones
       it inherited keep their addresses, and their names.  The child's
       files start empty and describe what the child runs, so that a fork
       costs the same however much the parent made: each backend takes a
       new co_extra slot, in which the child's first lookup of each code
       object misses and finds the trampoline it inherited (see
       _PyPerfTrampoline_ClaimInherited()), and the running frames are
       described.  The parent's failures are not the child's.

       All that waits until the child runs Python code: its next new
       function, or the second check of the eval breaker (a function
       entry, a loop iteration, the end of a call to C), which is set for
       it once the at-fork handlers (os.register_at_fork(), which
       threading uses) have run: the first check follows the call that
       forked (os.fork() returning, or a preexec_fn's entry).  What the
       at-fork handlers run meanwhile runs without new trampolines.  So a
       child that execs or exits at once (subprocess's children, os.fork()
       then os.execv()) creates no file and does no work for it. */
    _PyPerfCore.forked = 0;
    /* The rest of the parent's reservation is the parent's to use. */
    _PyPerfCore.arenas.next = _PyPerfCore.arenas.end = NULL;
    _PyPerfDebugger_AfterFork();
    _PyPerfFile_AfterFork();
    int in_use = 0;
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        _PyPerfPool *pool = &_PyPerfCore.pools[i];
        pool->next = pool->limit = NULL;
        pool->image = NULL;
        pool->arena_failed = 0;
        pool->write_failed = 0;
        pool->unreported_errno = 0;
        in_use |= pool->made || pool->users > 0;
    }
    if (in_use || _PyPerfMap_InUse()) {
        _PyPerfCore.in_fork_handlers = 1;
    }
}

void
_PyPerfTrampoline_AfterForkHandlers(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    if (_PyPerfCore.in_fork_handlers && tstate != NULL) {
        _PyPerfCore.in_fork_handlers = 0;
        _PyPerfTrampoline_child_pending = 2;
        _Py_atomic_store_relaxed(&tstate->interp->ceval.eval_breaker, 1);
    }
}

void
_PyPerfTrampoline_ChildWillExec(void)
{
    /* The preexec_fn runs as the at-fork handlers do: through the
       trampolines the child inherited, without new ones, and the child
       never starts (see _PyPerfTrampoline_AfterFork_Child()). */
    if (_PyPerfTrampoline_child_pending) {
        _PyPerfTrampoline_child_pending = 0;
        _PyPerfCore.in_fork_handlers = 1;
    }
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

void
_PyPerfTrampoline_AfterFork_Child(void)
{
}

void
_PyPerfTrampoline_AfterForkHandlers(void)
{
}

void
_PyPerfTrampoline_ChildWillExec(void)
{
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

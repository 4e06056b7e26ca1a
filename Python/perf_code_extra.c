/* The co_extra slots that hold code objects' trampolines.

   A code object's trampoline is kept in co_extra, at an index per backend
   that is taken in every interpreter when a backend is first used: a
   trampoline is always described by the backend it was made for, and
   each backend spaces its trampolines as its consumers need.  A forked
   child takes new indexes, so that its first lookup of each code object
   misses, and finds the trampoline it inherited in the slot of the
   process it was forked from (see Python/perf_fork.c). */

#include "Python.h"
#include "pycore_interp.h"         // PyInterpreterState.co_extra_user_count
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

/* Store a trampoline in co's co_extra at index slot.  Unlike
   _PyCode_SetExtra(), a co_extra is only made as large as our slot needs:
   code_dealloc() calls the free function of every slot it has, with NULL
   for unset ones, and other users' free functions should not start
   running for code objects they never touched. */
int
_PyPerfSlot_Set(PyCodeObject *co, Py_ssize_t slot, void *code)
{
    _PyCodeObjectExtra *extra = (_PyCodeObjectExtra *)co->co_extra;
    Py_ssize_t size = extra == NULL ? 0 : extra->ce_size;
    if (size <= slot) {
        extra = PyMem_Realloc(extra, sizeof(_PyCodeObjectExtra)
                                     + slot * sizeof(void *));
        if (extra == NULL) {
            return -1;
        }
        for (Py_ssize_t i = size; i <= slot; i++) {
            extra->ce_extras[i] = NULL;
        }
        extra->ce_size = slot + 1;
        co->co_extra = extra;
    }
    extra->ce_extras[slot] = code;
    return 0;
}

/* The trampoline that co had in the process this one was forked from
   (or in its ancestors), for the backend whose slot is slot; NULL if
   none. */
char *
_PyPerfSlot_Inherited(PyCodeObject *co, Py_ssize_t slot)
{
    _PyCodeObjectExtra *extra = (_PyCodeObjectExtra *)co->co_extra;
    if (extra == NULL) {
        return NULL;
    }
    for (Py_ssize_t s = _PyPerfCore.forked_from[slot] - 1; s >= 0;
         s = _PyPerfCore.forked_from[s] - 1)
    {
        if (s < extra->ce_size && extra->ce_extras[s] != NULL) {
            return extra->ce_extras[s];
        }
    }
    return NULL;
}

/* Take a new co_extra index for the trampolines of pool in this process,
   the same in every interpreter; the old one stays as the slot this
   process forked from.  Return -1 if no index is left. */
int
_PyPerfSlot_Take(_PyPerfPool *pool)
{
    Py_ssize_t slot = _PyPerfCore.reserved;
    PyInterpreterState *interp;
    for (interp = PyInterpreterState_Head(); interp != NULL;
         interp = PyInterpreterState_Next(interp))
    {
        slot = Py_MAX(slot, interp->co_extra_user_count);
    }
    /* _PyEval_RequestCodeExtraIndex() hands out no more than this. */
    if (slot >= MAX_CO_EXTRA_USERS - 1) {
        return -1;
    }
    for (interp = PyInterpreterState_Head(); interp != NULL;
         interp = PyInterpreterState_Next(interp))
    {
        for (Py_ssize_t i = interp->co_extra_user_count; i <= slot; i++) {
            interp->co_extra_freefuncs[i] = NULL;
        }
        interp->co_extra_user_count = slot + 1;
    }
    _PyPerfCore.reserved = slot + 1;
    _PyPerfCore.forked_from[slot] = pool->slot + 1;   /* 0 for a first slot */
    pool->slot = slot;
    return 0;
}

/* Take the slots of every backend when one is first used in this process
   lineage (a forked child inherits them), so that each backend keeps its
   index.  Return -1 if no index is left. */
int
_PyPerfSlot_TakeFirst(void)
{
    if (_PyPerfCore.pools[0].slot >= 0) {
        return 0;
    }
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        if (_PyPerfSlot_Take(&_PyPerfCore.pools[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

#ifndef Py_INTERNAL_PERF_CORE_H
#define Py_INTERNAL_PERF_CORE_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* What the files of the trampoline core share with each other: the state
   of the backends' trampolines, and what each file offers those that
   come after it in this list (a file calls only files before it):

     Python/perf_symbols.c      the name of a trampoline
     Python/perf_arena.c        memory: regions of address space, and
                                the arenas of trampolines in them
     Python/perf_stack.c        the part of a thread's stack where calls
                                are trampolined
     Python/perf_code_extra.c   the co_extra slots holding trampolines,
                                per process of a fork lineage
     Python/perf_describe.c     describing trampolines to profilers and
                                debuggers, and writing what is held
     Python/perf_activation.c   which interpreters and threads use which
                                backend; the configuration that asks
     Python/perf_fork.c         what a forked child does
     Python/perf_remote.c       requests from outside the process to
                                turn the support on for a while
     Python/perf_trampoline.c   frames through trampolines, making them,
                                the C API; the state below

   The files of the backends, the description files and the debugger
   images (pycore_perf_backend.h) come before all of these but
   perf_symbols.c and perf_arena.c, whose region allocator the debugger
   images use. */

/* Backends, in the order of their co_extra slots (the names are in
   Python/perf_activation.c). */
#define PERF_MAP_BACKEND 0
#define PERF_JIT_BACKEND 1

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include "pycore_perf_backend.h"
#include "pycore_perf_trampoline.h"   // _PyPerfTrampoline_CODE_EXTRA_SLOTS

#define N_BACKENDS _PyPerfTrampoline_CODE_EXTRA_SLOTS

extern const _PyPerfBackend *const _PyPerf_backends[N_BACKENDS];

/* The trampolines of one backend. */
typedef struct {
    /* The co_extra index of the trampolines this process uses (see
       _PyPerfTrampoline_AfterFork_Child()). */
    Py_ssize_t slot;
    /* Set once the backend has made a trampoline in this process or an
       ancestor: a forked child then takes a new slot. */
    int made;
    char *next;             /* next free trampoline of the current arena */
    char *limit;            /* end of the current arena */
    struct _PyPerfDebugImage *image;    /* that debuggers are told of */
    size_t arena_size;      /* of its next arena; 0 for the first */
    /* Interpreters using the backend: its file is open while positive. */
    int users;
    /* Set when an arena could not be mapped, or a description could not
       be written: no new trampolines are made until the backend is
       opened again, so the failure is reported once. */
    int arena_failed;
    int write_failed;
    /* A write failure seen where nothing may be printed (see
       _PyPerfTrampoline_WriteHeld()), to report at the next call. */
    int unreported_errno;
} _PyPerfPool;

/* An interpreter and the backend it uses.  Interpreters without one are
   not listed. */
typedef struct {
    PyInterpreterState *interp;
    int backend;
    /* Set if a request from outside turned it on (Python/perf_remote.c),
       not the program. */
    int by_request;
} _PyPerfInterpBackend;

typedef struct {
    size_t template_size;               /* bytes of the template */
    _PyPerfPool pools[N_BACKENDS];      /* one per backend */
    _PyPerfInterpBackend *interps;
    size_t n_interps;
    size_t interps_cap;
    /* The backend that -X perf and the environment variables ask for,
       which every interpreter starts with; -1 if none. */
    int config_backend;
    /* The backend that requests from outside turned interpreters on with
       (Python/perf_remote.c), which interpreters created since start
       with too; -1 if none. */
    int remote_backend;
    /* Set while a request from outside is handled (the GIL is released
       meanwhile); reset at finalization, should a daemon thread have
       ended there. */
    int remote_handling;
    /* Where arenas come from: memory shared with forked children, as an
       arena never changes once it is filled (see _PyPerfArena_New()). */
    _PyPerfRegion arenas;
    /* Set by tests to make arena allocation fail. */
    int fail_arenas_for_testing;
    /* Statistics, for tests and benchmarks. */
    size_t arena_bytes;
    size_t unwindable_bytes;    /* of them, in objects the loader knows */
    size_t trampolines;
    /* Set once the fork handler is registered (see
       Python/perf_activation.c). */
    int watching_forks;
    /* Set in a child forked by fork() (the C library's), however it was
       called: a child forked without PyOS_AfterFork_Child() (a raw fork()
       through ctypes, say) is caught when it makes its first trampoline.
       (Comparing getpid() with the pid that opened the files, as an
       earlier version did, cost a system call per new trampoline.) */
    volatile int forked;
    /* Set in a forked child from the fork until its at-fork handlers have
       run, then _PyPerfTrampoline_child_pending counts the checks of the
       eval breaker to its start: see _PyPerfTrampoline_AfterFork_Child(). */
    int in_fork_handlers;
    /* co_extra indexes reserved in every interpreter, ours and others'
       before the last slot we took: each interpreter gets at least this
       many, so that a slot is the same index in all of them.  None until
       a backend is first used: a process that never uses one leaves every
       index to other tools, as stock does. */
    Py_ssize_t reserved;
    /* For each slot a process of this lineage used after a fork, 1 + the
       slot of the process it was forked from, whose trampolines it
       inherited (0: none, a slot of the first process). */
    Py_ssize_t forked_from[MAX_CO_EXTRA_USERS];
} _PyPerfCoreState;

extern _PyPerfCoreState _PyPerfCore;


/* Python/perf_arena.c: copies of the template.  InitTemplate: before the
   first arena.  Prepare: at the activation of backend, tell the dynamic
   loader of its arenas if it can be (_PyPerfLoader_Open()).  CodeSize:
   the bytes a backend reports as one trampoline's code; Stride: how far
   apart its trampolines are.  New: a new arena for pool; -1 with errno
   set if it cannot be mapped. */
extern void _PyPerfArena_InitTemplate(void);
extern void _PyPerfArena_Prepare(const _PyPerfBackend *backend);
extern size_t _PyPerfArena_CodeSize(const _PyPerfBackend *backend);
extern size_t _PyPerfArena_Stride(const _PyPerfBackend *backend);
extern int _PyPerfArena_New(const _PyPerfBackend *backend,
                            _PyPerfPool *pool);

/* Python/perf_stack.c: the part of the calling thread's own stack where
   calls may be trampolined, *span bytes from *limit up; *span is 0 if
   the stack cannot be found. */
extern void _PyPerfStack_ComputeLimit(uintptr_t *limit, uintptr_t *span);
/* At start-up: note where the main thread's stack is. */
extern void _PyPerfStack_NoteStart(void);

/* Python/perf_code_extra.c.  Set: store a trampoline in co's co_extra at
   index slot (-1: no memory).  Inherited: co's trampoline in an ancestor
   process, for the backend whose slot is slot, or NULL.  Take: a new slot
   for pool in this process (-1: none left).  TakeFirst: every backend's
   first slots, when one is first used in the process lineage. */
extern int _PyPerfSlot_Set(PyCodeObject *co, Py_ssize_t slot, void *code);
extern char *_PyPerfSlot_Inherited(PyCodeObject *co, Py_ssize_t slot);
extern int _PyPerfSlot_Take(_PyPerfPool *pool);
extern int _PyPerfSlot_TakeFirst(void);

/* Python/perf_describe.c.  Describe: co's trampoline at code, of the
   backend at index, to profilers and, if it is new, to debuggers.
   ReportWriteFailure: say once that the backend's file cannot be written
   (only where Python code may run).  ReportUnreported: say it now for a
   failure seen where nothing could be said. */
extern void _PyPerfTrampoline_Describe(int index, char *code,
                                       PyCodeObject *co, int is_new);
extern void _PyPerfTrampoline_ReportWriteFailure(int index, int err);
extern void _PyPerfTrampoline_ReportUnreported(int index);

/* Python/perf_activation.c.  UpdateThread: the calling thread's
   interpreter may have changed its backend.  ActivateRemote: turn every
   interpreter that the program did not turn on itself on with the
   backend at index, for a request from outside (the GIL is released
   while the backend is prepared); 0 or an errno value.  DeactivateRemote:
   turn off those that requests turned on. */
extern void _PyPerfTrampoline_UpdateThread(void);
extern int _PyPerfTrampoline_ActivateRemote(int index);
extern void _PyPerfTrampoline_DeactivateRemote(void);

/* Python/perf_fork.c: give co, in this process's slot of the backend at
   index, the trampoline it had in an ancestor process, and describe it;
   return it, or NULL if it has none. */
extern char *_PyPerfTrampoline_ClaimInherited(int index, PyCodeObject *co);

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

#ifdef __cplusplus
}
#endif
#endif  /* !Py_INTERNAL_PERF_CORE_H */

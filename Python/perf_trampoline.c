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

   This file holds what does not depend on the backend: the arenas the
   trampolines live in, how frames reach them, activation and the
   configuration that asks for it, fork, and the C stack limit.

   Memory: trampolines are carved out of anonymous mappings ("arenas") that
   are filled with copies of the template while writable and then made
   read-only and executable, never both writable and executable.  Arenas
   are never unmapped: a thread can still be running below any trampoline
   handed out so far (even after deactivation, or while the interpreter
   exits under a daemon thread), and an address must never be reused for
   another name within one process.  As an arena never changes once made,
   it is shared memory (MAP_SHARED) that forked children keep without a
   copy of its page tables, so that a fork costs no more however many
   trampolines the parent made; a child makes its own arenas in a
   reservation of its own.  /proc/PID/maps calls such a mapping
   "/dev/zero (deleted)", which perf, like the tools that follow its
   conventions, treats as anonymous memory named by the perf map.

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
   the hook costs several times as much (see Tools/perf/bench/RESULTS.rst).

   A code object's trampoline is kept in co_extra, at an index per backend
   that is reserved when each interpreter is created: a trampoline is always
   described by the backend it was made for, and each backend spaces its
   trampolines as its consumers need. */

#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_initconfig.h"    // _Py_GetEnv()
#include "pycore_interp.h"        // PyInterpreterState.co_extra_user_count
#include "pycore_perf_backend.h"
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyInterpreterState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE
#  include <pthread.h>            // pthread_getattr_np()
#  include <sys/mman.h>           // mmap()
#  include <sys/resource.h>       // getrlimit()
#  include <unistd.h>             // sysconf()
#endif


/* Backends, in the order of their co_extra slots. */
static const char *const backend_names[] = {"perf", "perf_jit"};
#define PERF_MAP_BACKEND 0
#define PERF_JIT_BACKEND 1

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

static const _PyPerfBackend *const backends[] = {
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

/* Arenas: each backend hands out trampolines from its own arenas, each
   at least TRAMPOLINE_ALIGN-aligned so that no address of one lies within
   the range reported for another. */
#define TRAMPOLINE_ALIGN 16
#define ARENA_SIZE (64 * 1024)

#define N_BACKENDS Py_ARRAY_LENGTH(backend_names)

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
    /* Interpreters using the backend: its file is open while positive. */
    int users;
    /* Set when an arena could not be mapped, or a description could not
       be written: no new trampolines are made until the backend is
       opened again, so the failure is reported once. */
    int arena_failed;
    int write_failed;
    /* A write failure seen where nothing may be printed (see
       _PyPerfTrampoline_WriteOverdue()), to report at the next call. */
    int unreported_errno;
} trampoline_pool;

/* An interpreter and the backend it uses.  Interpreters without one are
   not listed. */
typedef struct {
    PyInterpreterState *interp;
    int backend;
} interp_backend;

static struct {
    size_t template_size;               /* bytes of the template */
    trampoline_pool pools[N_BACKENDS];  /* one per backend */
    interp_backend *interps;
    size_t n_interps;
    size_t interps_cap;
    /* The backend that -X perf and the environment variables ask for,
       which every interpreter starts with; -1 if none. */
    int config_backend;
    /* Where arenas come from: memory shared with forked children, as an
       arena never changes once it is filled (see new_arena()). */
    _PyPerfRegion arenas;
    /* Set by tests to make arena allocation fail. */
    int fail_arenas_for_testing;
    /* Statistics, for tests and benchmarks. */
    size_t arena_bytes;
    size_t trampolines;
    /* Set once atfork_child() is registered. */
    int watching_forks;
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
} state = {
    .config_backend = -1,
    .pools = {{.slot = -1}, {.slot = -1}},
    .arenas = {.shared = 1},
};


/* Names ********************************************************************/

/* The UTF-8 bytes of a str that is not ASCII, encoded into *owned
   (backslashreplace: file names may hold lone surrogates), which the
   caller releases; "?" if that fails.  The exception of the frame being
   started (generator.throw()) is kept aside meanwhile. */
static void
encoded_symbol_part(PyObject *str, const char **src, size_t *n,
                    PyObject **owned)
{
    *src = "?";
    *n = 1;
    if (!PyUnicode_Check(str)) {
        return;
    }
    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    *owned = _PyUnicode_AsUTF8String(str, "backslashreplace");
    if (*owned != NULL) {
        *src = PyBytes_AS_STRING(*owned);
        *n = (size_t)PyBytes_GET_SIZE(*owned);
    }
    else {
        PyErr_Clear();
    }
    PyErr_Restore(exc, val, tb);
}

/* The UTF-8 bytes of one part of a name: an ASCII string as it is, others
   as encoded_symbol_part() makes them. */
static inline void
symbol_part(PyObject *str, const char **src, size_t *n, PyObject **owned)
{
    *owned = NULL;
    if (PyUnicode_Check(str) && PyUnicode_IS_READY(str)
        && PyUnicode_IS_ASCII(str))
    {
        *src = (const char *)PyUnicode_DATA(str);
        *n = (size_t)PyUnicode_GET_LENGTH(str);
        return;
    }
    encoded_symbol_part(str, src, n, owned);
}

/* A control character (below 0x20, or 0x7f) would break a line-based
   format. */
static inline int
is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

/* Whether s[:n] has a control character.  Eight bytes at a time: a byte
   by byte test of every name was about 300 of the 1,000 instructions that
   describing a function took while importing.  Bytes from 0x80 up (UTF-8)
   never count: ~x clears their high bit. */
static int
has_control_chars(const char *s, size_t n)
{
    const uint64_t ones = UINT64_C(0x0101010101010101);
    const uint64_t highs = UINT64_C(0x8080808080808080);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t del = x ^ (0x7f * ones);
        if ((((x - 0x20 * ones) & ~x) | ((del - ones) & ~del)) & highs) {
            return 1;
        }
    }
    for (; i < n; i++) {
        if (is_control((unsigned char)s[i])) {
            return 1;
        }
    }
    return 0;
}

size_t
_PyPerfTrampoline_FormatSymbol(PyCodeObject *co, char *buf, size_t size,
                               size_t *qualname_end)
{
    const char *qualname, *filename;
    size_t qn, fn;
    PyObject *owned_q, *owned_f;
    symbol_part(co->co_qualname, &qualname, &qn, &owned_q);
    symbol_part(co->co_filename, &filename, &fn, &owned_f);
    size_t len = 4 + qn + 1 + fn;
    *qualname_end = 4 + qn;
    if (len <= size) {
        memcpy(buf, "py::", 4);
        memcpy(buf + 4, qualname, qn);
        buf[4 + qn] = ':';
        memcpy(buf + 4 + qn + 1, filename, fn);
        /* Nothing that would break a line-based format (the newline above
           all). */
        if (has_control_chars(buf + 4, len - 4)) {
            for (size_t i = 4; i < len; i++) {
                if (is_control((unsigned char)buf[i])) {
                    buf[i] = '?';
                }
            }
        }
    }
    Py_XDECREF(owned_q);
    Py_XDECREF(owned_f);
    return len;
}


/* Arenas and trampolines ***************************************************/

static void
init_template(void)
{
    if (state.template_size == 0) {
        state.template_size = (size_t)(_Py_trampoline_func_end
                                       - _Py_trampoline_func_start);
    }
}

/* Bytes a backend reports as one trampoline's code. */
static size_t
code_size(const _PyPerfBackend *backend)
{
    if (backend->unique_tag) {
        return _Py_SIZE_ROUND_UP(state.template_size, 8) + 8;
    }
    return state.template_size;
}

static size_t
stride(const _PyPerfBackend *backend)
{
    size_t size = code_size(backend);
    if (backend->span != NULL) {
        size = backend->span(size);
    }
    return _Py_SIZE_ROUND_UP(size, TRAMPOLINE_ALIGN);
}

/* Address space reserved at a time for blocks of a region: 16 MiB, a
   million perf trampolines, 150,000 perf_jit ones (x86-64) or the images
   for debuggers of 25,000, in two mappings (the blocks in use and the
   rest).  Small enough that the unused rest does not weigh on a tight
   RLIMIT_AS. */
#define REGION_RESERVE ((size_t)16 * 1024 * 1024)

void *
_PyPerfRegion_Alloc(_PyPerfRegion *region, size_t size, int prot)
{
    if (region->next == NULL || (size_t)(region->end - region->next) < size) {
        /* Reserved only: no memory is committed until a block is. */
        size_t reserve = Py_MAX(REGION_RESERVE, size);
        int flags = region->shared ? MAP_SHARED : MAP_PRIVATE;
        char *mem = mmap(NULL, reserve, PROT_NONE,
                         flags | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED) {
            return NULL;
        }
        region->next = mem;
        region->end = mem + reserve;
    }
    char *block = region->next;
    if (mprotect(block, size, prot) < 0) {
        return NULL;
    }
    region->next += size;
    return block;
}

static int
new_arena(const _PyPerfBackend *backend, trampoline_pool *pool)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = ARENA_SIZE;
    size_t step = stride(backend);
    if (page > 0) {
        size = _Py_SIZE_ROUND_UP(size, (size_t)page);
    }
    if (state.fail_arenas_for_testing) {
        errno = ENOMEM;
        return -1;
    }
    char *mem = _PyPerfRegion_Alloc(&state.arenas, size,
                                    PROT_READ | PROT_WRITE);
    if (mem == NULL) {
        return -1;
    }
#ifdef MADV_POPULATE_WRITE
    /* Every page is written below: one call maps them all, where a fault
       per page cost perf_jit (a page per 16 trampolines) a tenth of the
       time of making new functions.  Kernels before 5.14 refuse it, and
       the pages then fault in as usual. */
    (void)madvise(mem, size, MADV_POPULATE_WRITE);
#endif
    /* The first slot: the template, then instructions that trap up to
       the next slot.  Copy it over the arena, doubling what is copied
       each time; what is left after the last whole slot traps too. */
#if defined(__x86_64__)
    const int trap = 0xcc;      /* int3 */
#else
    const int trap = 0;         /* udf #0 on aarch64, unimp on riscv64 */
#endif
    size_t slots_end = size - size % step;
    memset(mem, trap, step);
    memcpy(mem, _Py_trampoline_func_start, state.template_size);
    for (size_t done = step; done < slots_end; done *= 2) {
        memcpy(mem + done, mem, Py_MIN(done, slots_end - done));
    }
    memset(mem + slots_end, trap, size - slots_end);
    if (backend->unique_tag) {
        for (size_t off = 0; off + step <= size; off += step) {
            /* Never executed: the trampoline's own address. */
            uint64_t tag = (uint64_t)(uintptr_t)(mem + off);
            memcpy(mem + off + _Py_SIZE_ROUND_UP(state.template_size, 8),
                   &tag, sizeof(tag));
        }
    }
    __builtin___clear_cache(mem, mem + size);
    if (mprotect(mem, size, PROT_READ | PROT_EXEC) < 0) {
        int err = errno;
        (void)mprotect(mem, size, PROT_NONE);   /* never used again */
        errno = err;
        return -1;
    }
    pool->next = mem;
    pool->limit = mem + size;
    pool->image = NULL;
    state.arena_bytes += size;
    return 0;
}

/* A trampolined call costs C stack that an inlined one does not: a C frame
   of the evaluator (about 360 bytes on x86-64).  Calls are trampolined only
   in the first STACK_SHARE-th of a thread's stack, so all the trampolined
   frames of a thread together never take more than that share: a program
   that needs less than the rest of the stack without trampolines (deep
   recursion through C included) runs unchanged with them, and one that
   needs more would crash without them too.  A fixed reserve at the end of
   the stack would not do: the recursion that fills the reserve has less
   stack in all than it would have had without trampolines.  1/32 of the
   8 MiB main thread stack holds several hundred trampolined calls. */
#define STACK_SHARE 32

#ifdef __GLIBC__
/* Where the main thread's stack starts (glibc and its dynamic loader export
   it; no header declares it). */
extern void *__libc_stack_end;
#endif

/* Find the part of the calling thread's own stack where calls may be
   trampolined: *span bytes from *limit up, where the stack starts; *span
   is 0 if the stack cannot be found. */
static void
compute_stack_limit(uintptr_t *limit, uintptr_t *span)
{
    *limit = 0;
    *span = 0;
#ifdef __GLIBC__
    /* For the main thread, pthread_getattr_np() parses /proc/self/maps
       (about 110,000 instructions, a fifth of what -X perf added to
       start-up) to report the stack's start and RLIMIT_STACK, capped by
       the mapping below the stack.  Linux leaves at least 128 MiB free
       below the main thread's stack, so a limit up to that needs no cap;
       beyond it, ask glibc.  The range check leaves out a child forked
       by another thread, which runs on that thread's stack. */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    struct rlimit rl;
    uintptr_t start = (uintptr_t)__libc_stack_end;
    if ((unsigned long)getpid() == PyThread_get_thread_native_id()
        && getrlimit(RLIMIT_STACK, &rl) == 0
        && rl.rlim_cur <= (rlim_t)128 * 1024 * 1024
        && here < start && start - here <= rl.rlim_cur)
    {
        *span = rl.rlim_cur / STACK_SHARE;
        *limit = start - *span;
        return;
    }
#endif
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
            /* The stack grows down from addr + size.  The thread may be
               running on another stack now: these are the bounds of its
               own all the same. */
            *span = size / STACK_SHARE;
            *limit = (uintptr_t)addr + size - *span;
        }
        pthread_attr_destroy(&attr);
    }
    /* Otherwise the stack is unknown: no call is trampolined. */
}

/* Store a trampoline in co's co_extra at index slot.  Unlike
   _PyCode_SetExtra(), a co_extra is only made as large as our slot needs:
   code_dealloc() calls the free function of every slot it has, with NULL
   for unset ones, and other users' free functions should not start
   running for code objects they never touched. */
static int
set_trampoline(PyCodeObject *co, Py_ssize_t slot, void *code)
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
static char *
inherited_trampoline(PyCodeObject *co, Py_ssize_t slot)
{
    _PyCodeObjectExtra *extra = (_PyCodeObjectExtra *)co->co_extra;
    if (extra == NULL) {
        return NULL;
    }
    for (Py_ssize_t s = state.forked_from[slot] - 1; s >= 0;
         s = state.forked_from[s] - 1)
    {
        if (s < extra->ce_size && extra->ce_extras[s] != NULL) {
            return extra->ce_extras[s];
        }
    }
    return NULL;
}

/* Report, once, that the file of the backend at index cannot be written:
   no new trampolines of that backend are made until it is opened again.
   Call it only once the state is consistent: writing to sys.stderr can
   run Python code, which can make trampolines or activate and
   deactivate. */
static void
report_write_failure(int index, int err)
{
    char path[64];
    state.pools[index].write_failed = 1;
    Py_ssize_t lost = _PyPerfFile_TakeLost(backends[index]->kind);
    PyOS_snprintf(path, sizeof(path), "%s",
                  _PyPerfFile_Path(backends[index]->kind));
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

static void
report_unreported(int index)
{
    trampoline_pool *pool = &state.pools[index];
    if (pool->unreported_errno != 0) {
        int err = pool->unreported_errno;
        pool->unreported_errno = 0;
        report_write_failure(index, err);
    }
}

void
_PyPerfTrampoline_ReportFailures(void)
{
    _PyPerfTrampoline_unreported = 0;
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        report_unreported(i);
    }
}

/* Describe co's trampoline at code, of the backend at index, to
   profilers (through the backend) and, if it is new, to debuggers (an
   inherited one is in the images the process inherited). */
static void
describe(int index, char *code, PyCodeObject *co, int is_new)
{
    const _PyPerfBackend *backend = backends[index];
    trampoline_pool *pool = &state.pools[index];
    char small[512];
    char *name = small;
    size_t qualname_end;
    size_t n = _PyPerfTrampoline_FormatSymbol(co, small, sizeof(small),
                                              &qualname_end);
    if (n > sizeof(small)) {
        name = PyMem_RawMalloc(n);
        if (name == NULL) {
            report_write_failure(index, ENOMEM);
            return;
        }
        (void)_PyPerfTrampoline_FormatSymbol(co, name, n, &qualname_end);
    }
    size_t size = code_size(backend);
    int holding = _PyPerfFile_Holding();
    int64_t now = _PyPerfFile_Now();
    if (is_new) {
        _PyPerfDebugger_Describe(&pool->image, code, size, stride(backend),
                                 pool->limit, name, n, qualname_end,
                                 holding, now);
    }
    if (backend->write_entry(code, size, name, n, now) < 0) {
        report_write_failure(index, errno);
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

/* Set in a child forked by fork() (the C library's), however it was
   called: a child forked without PyOS_AfterFork_Child() (a raw fork()
   through ctypes, say) is caught when it makes its first trampoline.
   (Comparing getpid() with the pid that opened the files, as an earlier
   version did, cost a system call per new trampoline.) */
static volatile int forked = 0;

/* Set in a forked child from the fork until its at-fork handlers have
   run (in_fork_handlers), then until it runs Python code (child_pending,
   the number of checks of the eval breaker to its start): see
   _PyPerfTrampoline_AfterFork_Child(). */
static int in_fork_handlers = 0;
int _PyPerfTrampoline_child_pending = 0;

static void
atfork_child(void)
{
    forked = 1;
}

/* Give co, in this process's slot of the backend at index, the
   trampoline it had in an ancestor process, and describe it in this
   process's file.  Return it, or NULL if it has none. */
static char *
claim_inherited(int index, PyCodeObject *co)
{
    trampoline_pool *pool = &state.pools[index];
    char *code = inherited_trampoline(co, pool->slot);
    if (code == NULL || set_trampoline(co, pool->slot, code) < 0) {
        return NULL;
    }
    describe(index, code, co, 0);
    return code;
}

/* Give "co" a trampoline of the calling thread's backend and describe
   it.  Return NULL if that is not possible; the frame then runs without
   one.  Never raises, nor changes the exception set: the caller may be
   starting a frame with one (generator.throw()).  (Only a name that is
   not ASCII is made with Python's API, see encoded_symbol_part(); the
   warnings keep the exception, like PySys_FormatStderr().) */
static py_trampoline
compile_trampoline(PyCodeObject *co)
{
    if (forked) {
        /* No at-fork handlers run in a child forked so. */
        _PyPerfTrampoline_AfterFork_Child();
        _PyPerfTrampoline_AfterForkHandlers();
    }
    if (in_fork_handlers) {
        return NULL;
    }
    if (_PyPerfTrampoline_child_pending) {
        _PyPerfTrampoline_StartChild();
    }
    int index = _PyPerfTrampoline_thread.backend;
    if (index < 0) {
        return NULL;
    }
    const _PyPerfBackend *backend = backends[index];
    trampoline_pool *pool = &state.pools[index];
    size_t step = stride(backend);
    report_unreported(index);
    if (pool->arena_failed || pool->write_failed) {
        return NULL;
    }
    char *code = claim_inherited(index, co);
    if (code != NULL) {
        return (py_trampoline)code;
    }
    if (pool->next == NULL || (size_t)(pool->limit - pool->next) < step) {
        if (new_arena(backend, pool) < 0) {
            pool->arena_failed = 1;
            PySys_FormatStderr(
                "Warning: cannot allocate memory for perf trampolines "
                "(%s); Python functions started from now on will not "
                "appear in native profiles\n", strerror(errno));
            return NULL;
        }
    }
    code = pool->next;
    int res = set_trampoline(co, pool->slot, code);
    if (res == 0) {
        pool->next += step;
        pool->made = 1;
        state.trampolines++;
        describe(index, code, co, 1);
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


/* Activation ***************************************************************/

/* Interpreters and their backends.  Each interpreter uses one backend at
   a time, or none; a thread follows the interpreter of its current thread
   state (_PyPerfTrampoline_thread).  The list holds only the
   interpreters that use a backend, usually one or two. */

static int
backend_of(PyInterpreterState *interp)
{
    for (size_t i = 0; i < state.n_interps; i++) {
        if (state.interps[i].interp == interp) {
            return state.interps[i].backend;
        }
    }
    return -1;
}

/* Record that interp uses the backend at index (-1: none).  Return -1
   (no memory) if it cannot be recorded. */
static int
set_backend_of(PyInterpreterState *interp, int index)
{
    for (size_t i = 0; i < state.n_interps; i++) {
        if (state.interps[i].interp == interp) {
            if (index >= 0) {
                state.interps[i].backend = index;
            }
            else {
                state.interps[i] = state.interps[--state.n_interps];
                _PyPerfTrampoline_active = state.n_interps > 0;
            }
            return 0;
        }
    }
    if (index < 0) {
        return 0;
    }
    if (state.n_interps == state.interps_cap) {
        size_t cap = state.interps_cap ? 2 * state.interps_cap : 4;
        interp_backend *mem = PyMem_RawRealloc(state.interps,
                                               cap * sizeof(*mem));
        if (mem == NULL) {
            return -1;
        }
        state.interps = mem;
        state.interps_cap = cap;
    }
    state.interps[state.n_interps].interp = interp;
    state.interps[state.n_interps].backend = index;
    state.n_interps++;
    _PyPerfTrampoline_active = 1;
    return 0;
}

void
_PyPerfTrampoline_AttachThread(PyThreadState *tstate)
{
    _PyPerfTrampoline_ThreadState *t = &_PyPerfTrampoline_thread;
    t->backend = state.n_interps == 0 ? -1 : backend_of(tstate->interp);
    if (t->backend < 0) {
        t->stack_limit = 0;
        t->stack_span = 0;
        return;
    }
    t->slot = state.pools[t->backend].slot;
    if (!t->computed) {
        /* Once per thread: finding the stack takes system calls. */
        compute_stack_limit(&t->own_limit, &t->own_span);
        t->computed = 1;
    }
    t->stack_limit = t->own_limit;
    t->stack_span = t->own_span;
}

/* The calling thread's interpreter may have changed its backend. */
static void
update_this_thread(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    if (tstate != NULL) {
        _PyPerfTrampoline_AttachThread(tstate);
    }
}

/* Take a new co_extra index for the trampolines of pool in this process,
   the same in every interpreter; the old one stays as the slot this
   process forked from.  Return -1 if no index is left. */
static int
take_slot(trampoline_pool *pool)
{
    Py_ssize_t slot = state.reserved;
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
    state.reserved = slot + 1;
    state.forked_from[slot] = pool->slot + 1;   /* 0 for a first slot */
    pool->slot = slot;
    return 0;
}

/* Take the slots of every backend when one is first used in this process
   lineage (a forked child inherits them), so that each backend keeps its
   index.  Return -1 if no index is left. */
static int
take_first_slots(void)
{
    if (state.pools[0].slot >= 0) {
        return 0;
    }
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        if (take_slot(&state.pools[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* One more interpreter uses the backend at index: open its file if it is
   the first.  Return 0, or -1 with *reason set if the file cannot be
   opened. */
static int
use_backend(int index, const char **reason)
{
    trampoline_pool *pool = &state.pools[index];
    if (pool->users > 0) {
        pool->users++;
        return 0;
    }
    init_template();
    if (take_first_slots() < 0) {
        *reason = "no co_extra index is left";
        errno = ENOSPC;
        return -1;
    }
    if (!state.watching_forks) {
        /* Once per process and its children, which inherit it. */
        if (pthread_atfork(NULL, NULL, atfork_child) != 0) {
            *reason = strerror(ENOMEM);
            errno = ENOMEM;
            return -1;
        }
        state.watching_forks = 1;
    }
    if (backends[index]->open(reason) < 0) {
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
    trampoline_pool *pool = &state.pools[index];
    assert(pool->users > 0);
    if (--pool->users == 0 && backends[index]->close() < 0) {
        report_write_failure(index, errno);
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
    update_this_thread();
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
        update_this_thread();
        release_backend(current);
    }
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
       (see take_slot()). */
    assert(interp->co_extra_user_count == 0);
    for (Py_ssize_t i = 0; i < state.reserved; i++) {
        interp->co_extra_freefuncs[i] = NULL;
    }
    interp->co_extra_user_count = state.reserved;
    /* -X perf and the environment variables cover sub-interpreters too
       (the main interpreter starts in _PyPerfTrampoline_InitFromConfig()).
       If the file cannot be opened, the warning was printed when the main
       interpreter could not open it either. */
    if (state.config_backend >= 0) {
        const char *reason;
        (void)activate(interp, state.config_backend, &reason);
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
            && _PyPerfFile_WriteHeld(backends[i]->kind) < 0
            && state.pools[i].users > 0)
        {
            report_write_failure(i, errno);
        }
        _PyPerfDebugger_Flush(state.pools[i].image);
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
        trampoline_pool *pool = &state.pools[i];
        if (_PyPerfFile_WriteHeldNow(backends[i]->kind, all, &wrote) < 0
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
            _PyPerfDebugger_Flush(state.pools[i].image);
        }
    }
}

void
_PyPerfTrampoline_EndStartup(void)
{
    _PyPerfFile_EndHold();
    write_held();
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
         frame != NULL && !state.pools[index].write_failed;
         frame = frame->previous)
    {
        if (_PyPerfTrampoline_Lookup(frame->f_code) == NULL) {
            (void)claim_inherited(index, frame->f_code);
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
        trampoline_pool *pool = &state.pools[i];
        if (pool->made && !(i == PERF_MAP_BACKEND && map_copied)) {
            /* With no index left (after some 250 generations of forks),
               the child keeps its parent's: it then describes only the
               trampolines it makes. */
            (void)take_slot(pool);
        }
        if (pool->users == 0) {
            continue;
        }
        const char *reason = NULL;
        if (backends[i]->open(&reason) < 0) {
            char path[64];
            PyOS_snprintf(path, sizeof(path), "%s",
                          _PyPerfFile_PendingPath(backends[i]->kind));
            /* No interpreter of the child uses this backend any more. */
            for (size_t j = state.n_interps; j-- > 0;) {
                if (state.interps[j].backend == i) {
                    state.interps[j] = state.interps[--state.n_interps];
                }
            }
            _PyPerfTrampoline_active = state.n_interps > 0;
            pool->users = 0;
            update_this_thread();
            PySys_FormatStderr(
                "Warning: perf trampolines deactivated in child process "
                "%ld: cannot open %s: %s\n", (long)getpid(), path, reason);
        }
    }
    update_this_thread();
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
       claim_inherited()), and the running frames are described.  The
       parent's failures are not the child's.

       All that waits until the child runs Python code: its next new
       function, or the second check of the eval breaker (a function
       entry, a loop iteration, the end of a call to C), which is set for
       it once the at-fork handlers (os.register_at_fork(), which
       threading uses) have run: the first check follows the call that
       forked (os.fork() returning, or a preexec_fn's entry).  What the
       at-fork handlers run meanwhile runs without new trampolines.  So a
       child that execs or exits at once (subprocess's children, os.fork()
       then os.execv()) creates no file and does no work for it. */
    forked = 0;
    /* The rest of the parent's reservation is the parent's to use. */
    state.arenas.next = state.arenas.end = NULL;
    _PyPerfDebugger_AfterFork();
    _PyPerfFile_AfterFork();
    int in_use = 0;
    for (int i = 0; i < (int)N_BACKENDS; i++) {
        trampoline_pool *pool = &state.pools[i];
        pool->next = pool->limit = NULL;
        pool->image = NULL;
        pool->arena_failed = 0;
        pool->write_failed = 0;
        pool->unreported_errno = 0;
        in_use |= pool->made || pool->users > 0;
    }
    if (in_use || _PyPerfMap_InUse()) {
        in_fork_handlers = 1;
    }
}

void
_PyPerfTrampoline_AfterForkHandlers(void)
{
    PyThreadState *tstate = _PyThreadState_GET();
    if (in_fork_handlers && tstate != NULL) {
        in_fork_handlers = 0;
        _PyPerfTrampoline_child_pending = 2;
        _Py_atomic_store_relaxed(&tstate->interp->ceval.eval_breaker, 1);
    }
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

void
_PyPerfTrampoline_Fini(void)
{
    /* Sub-interpreters have ended; the main interpreter stops here.  A
       later initialization of the runtime follows its own
       configuration. */
    state.config_backend = -1;
    while (state.n_interps > 0) {
        deactivate(state.interps[state.n_interps - 1].interp);
    }
    PyUnstable_PerfMapState_Fini();
}

void
_PyPerfTrampoline_SetArenaFailureForTesting(int fail)
{
    state.fail_arenas_for_testing = fail;
}

PyObject *
_PyPerfTrampoline_GetStats(void)
{
    return Py_BuildValue(
        "{snsnsnsnsnsn}",
        "arena_bytes", (Py_ssize_t)state.arena_bytes,
        "trampolines", (Py_ssize_t)state.trampolines,
        "trampoline_size", (Py_ssize_t)state.template_size,
        "written_bytes", (Py_ssize_t)_PyPerfFile_WrittenBytes(),
        "writes", (Py_ssize_t)_PyPerfFile_Writes(),
        "eval_breaker_checks", (Py_ssize_t)_PyPerfFile_breaker_checks);
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
        && !state.pools[index].arena_failed
        && !state.pools[index].write_failed)
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

void
_PyPerfTrampoline_Deactivate(void)
{
}

void
_PyPerfTrampoline_AfterFork_Child(void)
{
}

void
_PyPerfTrampoline_AfterForkHandlers(void)
{
}

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

void
_PyPerfTrampoline_Fini(void)
{
}

void
_PyPerfTrampoline_SetArenaFailureForTesting(int Py_UNUSED(fail))
{
}

PyObject *
_PyPerfTrampoline_GetStats(void)
{
    return Py_BuildValue("{snsnsnsnsnsn}", "arena_bytes", (Py_ssize_t)0,
                         "trampolines", (Py_ssize_t)0,
                         "trampoline_size", (Py_ssize_t)0,
                         "written_bytes", (Py_ssize_t)0,
                         "writes", (Py_ssize_t)0,
                         "eval_breaker_checks", (Py_ssize_t)0);
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
    const char *reason = NULL;
    if (activate(_PyInterpreterState_GET(), index, &reason) < 0) {
        int err = errno;
        PyObject *msg = PyUnicode_FromFormat(
            "cannot open the %s file: %s", backend_names[index], reason);
        PyObject *path = PyUnicode_DecodeFSDefault(
            _PyPerfFile_PendingPath(backends[index]->kind));
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
   integer enables.  Anything else (empty, "0", not an integer, out of
   range) does not. */
static int
enable_value(const char *value)
{
    int result;
    if (value == NULL || _Py_str_to_int(value, &result) < 0) {
        return 0;
    }
    return result != 0;
}

static int
xoption_enable_value(const wchar_t *xoption)
{
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
            return 0;
        }
        value[i] = (char)c;
    }
    value[i] = '\0';
    return enable_value(value);
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
    /* Hold what is described until _PyPerfTrampoline_EndStartup(). */
    _PyPerfFile_Hold();
#endif
    int index = backend_from_config(config);
    if (index < 0) {
        return;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* Every interpreter starts with it, this one now. */
    state.config_backend = index;
    const char *reason = NULL;
    if (activate(_PyInterpreterState_GET(), index, &reason) < 0) {
        PySys_FormatStderr(
            "Warning: perf trampolines not activated: cannot open %s: %s\n",
            _PyPerfFile_PendingPath(backends[index]->kind), reason);
    }
#endif
}

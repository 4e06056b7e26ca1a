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
   address; the "perf" backend appends a line

       ADDR SIZE py::QUALNAME:FILENAME

   to /tmp/perf-PID.map, the format perf reads for code without ELF
   symbols.

   Memory: trampolines are carved out of anonymous mappings ("arenas") that
   are filled with copies of the template while writable and then made
   read-only and executable, never both writable and executable.  Arenas
   are never unmapped: a thread can still be running below any trampoline
   handed out so far (even after deactivation, or while the interpreter
   exits under a daemon thread), and an address must never be reused for
   another name within one process.

   Frames reach their trampoline from two places: _PyEval_EvalFrame(),
   which is how C code starts a frame (function calls from C, generators,
   coroutines), and the call instructions of the evaluation loop that
   normally push the callee's frame and continue in the same C frame; while
   active, those make a C call through the callee's trampoline instead.

   All state here is process-wide and protected by the GIL.  A code
   object's trampoline is kept in co_extra, at an index that is reserved
   when each interpreter is created. */

#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_initconfig.h"    // _Py_GetEnv()
#include "pycore_interp.h"        // PyInterpreterState.co_extra_user_count
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyInterpreterState_GET()

#ifdef PY_HAVE_PERF_TRAMPOLINE
#  include <fcntl.h>              // open()
#  include <pthread.h>            // pthread_getattr_np()
#  include <sys/mman.h>           // mmap()
#  include <sys/stat.h>           // fstat()
#  include <unistd.h>             // sysconf()
#endif


/* Backends ****************************************************************/

typedef struct {
    const char *name;
    /* Start a new description file for this process.  Return 0 on
       success; on failure return -1 with errno set and *reason set to a
       static description. */
    int (*open)(const char **reason);
    /* Describe one trampoline.  Return 0 on success; on failure return -1
       with errno set. */
    int (*write_entry)(const void *code, size_t size, PyCodeObject *co);
    /* In a child process after fork(): the description file still belongs
       to the parent.  Start the child's own one, carrying over what the
       parent had written before the fork. */
    int (*after_fork_child)(const char **reason);
    void (*close)(void);
    /* Path of the current description file, for error messages. */
    const char *(*path)(void);
} trampoline_backend;

static const trampoline_backend perf_map_backend;

static const trampoline_backend *const backends[] = {
    &perf_map_backend,
};

static const trampoline_backend *
find_backend(const char *name)
{
    for (size_t i = 0; i < Py_ARRAY_LENGTH(backends); i++) {
        if (strcmp(backends[i]->name, name) == 0) {
            return backends[i];
        }
    }
    return NULL;
}


#ifdef PY_HAVE_PERF_TRAMPOLINE

/* The trampoline template (Python/asm_trampoline.S). */
extern const char _Py_trampoline_func_start[];
extern const char _Py_trampoline_func_end[];

typedef PyObject *(*py_trampoline)(PyThreadState *,
                                   _PyInterpreterFrame *, int,
                                   _PyFrameEvalFunction);

int _PyPerfTrampoline_active = 0;
__thread uintptr_t _PyPerfTrampoline_stack_limit = 0;

/* The active backend, or NULL. */
static const trampoline_backend *active_backend = NULL;

/* Arenas: trampolines are handed out from next_trampoline up to
   arena_limit, each TRAMPOLINE_ALIGN-aligned so that no address of one
   lies within the range reported for another. */
#define TRAMPOLINE_ALIGN 16
#define ARENA_SIZE (64 * 1024)
static char *next_trampoline = NULL;
static char *arena_limit = NULL;
static size_t trampoline_size = 0;     /* code bytes of one trampoline */
static size_t trampoline_stride = 0;   /* distance between two of them */
/* Set when an arena could not be mapped: no new trampolines are made
   until the next activation, so the failure is reported once. */
static int arena_failed = 0;
/* Set when a description could not be written, for the same reason. */
static int write_failed = 0;
/* Set by tests to make arena allocation fail. */
static int fail_arenas_for_testing = 0;

/* Statistics, for tests and benchmarks. */
static size_t stat_arena_bytes = 0;
static size_t stat_trampolines = 0;
static size_t stat_written_bytes = 0;


/* perf map backend *********************************************************/

static int perf_map_fd = -1;
/* Bytes this process had appended to its map file, so a child can copy
   exactly what was there when it was forked. */
static off_t perf_map_size = 0;
static char perf_map_path[64];

static int
open_description_file(const char *path, int *fd_out, const char **reason)
{
    /* O_NOFOLLOW: never write through a symbolic link an attacker planted
       in /tmp.  O_NONBLOCK: a FIFO at the path must not hang the
       interpreter.  The file is private to the user (0600). */
    int fd = open(path,
                  O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC
                  | O_NONBLOCK,
                  0600);
    if (fd < 0) {
        int err = errno;
        *reason = (err == ELOOP) ? "the path is a symbolic link"
                                 : strerror(err);
        errno = err;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int err = errno;
        *reason = strerror(err);
        close(fd);
        errno = err;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        *reason = "the path is not a regular file";
        errno = EINVAL;
        return -1;
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        *reason = "the file belongs to another user";
        errno = EPERM;
        return -1;
    }
    *fd_out = fd;
    return 0;
}

/* Append buf to fd.  On failure (a full disk, a file size limit), cut off
   what was written of it, so the file never ends with a partial line. */
static int
write_all(int fd, const char *buf, size_t size)
{
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, buf + done, size - done);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            int err = errno;
            if (done > 0) {
                /* With O_APPEND the offset is the end of what we wrote. */
                off_t end = lseek(fd, 0, SEEK_CUR);
                if (end >= (off_t)done) {
                    (void)ftruncate(fd, end - (off_t)done);
                }
            }
            errno = err;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static const char *
perf_map_get_path(void)
{
    return perf_map_path;
}

static int
perf_map_open(const char **reason)
{
    assert(perf_map_fd < 0);
    PyOS_snprintf(perf_map_path, sizeof(perf_map_path),
                  "/tmp/perf-%ld.map", (long)getpid());
    if (open_description_file(perf_map_path, &perf_map_fd, reason) < 0) {
        return -1;
    }
    perf_map_size = lseek(perf_map_fd, 0, SEEK_END);
    if (perf_map_size < 0) {
        perf_map_size = 0;
    }
    return 0;
}

static void
perf_map_close(void)
{
    if (perf_map_fd >= 0) {
        close(perf_map_fd);
        perf_map_fd = -1;
    }
}

/* Encode a code object's name or file name for the map.  Return a new
   bytes object, or NULL (without an exception set) on failure. */
static PyObject *
encode_name(PyObject *str)
{
    if (!PyUnicode_Check(str)) {
        return NULL;
    }
    /* backslashreplace: file names may hold lone surrogates. */
    PyObject *bytes = PyUnicode_AsEncodedString(str, "utf-8",
                                                "backslashreplace");
    if (bytes == NULL) {
        PyErr_Clear();
    }
    return bytes;
}

/* Copy a name into the line, replacing characters that would break the
   line-based format (the newline above all). */
static char *
copy_name(char *dst, PyObject *bytes)
{
    if (bytes == NULL) {
        *dst++ = '?';
        return dst;
    }
    const char *src = PyBytes_AS_STRING(bytes);
    Py_ssize_t n = PyBytes_GET_SIZE(bytes);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        *dst++ = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    return dst;
}

static int
perf_map_write_entry(const void *code, size_t size, PyCodeObject *co)
{
    PyObject *qualname = encode_name(co->co_qualname);
    PyObject *filename = encode_name(co->co_filename);
    size_t names = (qualname ? (size_t)PyBytes_GET_SIZE(qualname) : 1)
                   + (filename ? (size_t)PyBytes_GET_SIZE(filename) : 1);
    /* "ADDR SIZE py::" + names + ':' + '\n' */
    size_t needed = 2 * 3 * sizeof(uintptr_t) + 8 + names;
    char small[512];
    char *line = needed <= sizeof(small) ? small : PyMem_RawMalloc(needed);
    int res = -1;
    if (line == NULL) {
        errno = ENOMEM;
        goto done;
    }
    int len = PyOS_snprintf(line, needed, "%" PRIxPTR " %zx py::",
                            (uintptr_t)code, size);
    assert(len > 0 && (size_t)len < needed);
    char *end = copy_name(line + len, qualname);
    *end++ = ':';
    end = copy_name(end, filename);
    *end++ = '\n';
    assert((size_t)(end - line) <= needed);
    /* One write() per line: with O_APPEND the line reaches the file whole
       and at once, even with other writers, so a profile taken while the
       process still runs can resolve it. */
    if (write_all(perf_map_fd, line, (size_t)(end - line)) == 0) {
        off_t pos = lseek(perf_map_fd, 0, SEEK_CUR);
        perf_map_size = pos >= 0 ? pos : perf_map_size + (end - line);
        stat_written_bytes += (size_t)(end - line);
        res = 0;
    }
    if (line != small) {
        PyMem_RawFree(line);
    }
done:
    Py_XDECREF(qualname);
    Py_XDECREF(filename);
    return res;
}

static int
perf_map_after_fork_child(const char **reason)
{
    int parent_fd = perf_map_fd;
    off_t parent_size = perf_map_size;
    perf_map_fd = -1;
    int res = perf_map_open(reason);
    if (res == 0 && parent_size > 0) {
        /* The child runs the trampolines it inherited: describe them in
           its own map too.  The parent's descriptor is write-only, so read
           the file through a new descriptor. */
        char proc_path[64];
        PyOS_snprintf(proc_path, sizeof(proc_path),
                      "/proc/self/fd/%d", parent_fd);
        int in = open(proc_path, O_RDONLY | O_CLOEXEC);
        if (in < 0) {
            *reason = "cannot read the parent's perf map";
            res = -1;
        }
        else {
            char buf[8192];
            off_t copied = 0;
            while (copied < parent_size) {
                size_t want = sizeof(buf);
                if ((off_t)want > parent_size - copied) {
                    want = (size_t)(parent_size - copied);
                }
                ssize_t n = pread(in, buf, want, copied);
                if (n < 0 && errno == EINTR) {
                    continue;
                }
                if (n <= 0) {
                    break;
                }
                if (write_all(perf_map_fd, buf, (size_t)n) < 0) {
                    *reason = strerror(errno);
                    res = -1;
                    break;
                }
                copied += n;
            }
            perf_map_size += copied;
            close(in);
        }
    }
    if (parent_fd >= 0) {
        close(parent_fd);
    }
    return res;
}

static const trampoline_backend perf_map_backend = {
    .name = "perf",
    .open = perf_map_open,
    .write_entry = perf_map_write_entry,
    .after_fork_child = perf_map_after_fork_child,
    .close = perf_map_close,
    .path = perf_map_get_path,
};


/* Arenas and trampolines ***************************************************/

static void
init_template(void)
{
    if (trampoline_size != 0) {
        return;
    }
    trampoline_size = (size_t)(_Py_trampoline_func_end
                               - _Py_trampoline_func_start);
    trampoline_stride = _Py_SIZE_ROUND_UP(trampoline_size, TRAMPOLINE_ALIGN);
}

static int
new_arena(void)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = ARENA_SIZE;
    if (page > 0) {
        size = _Py_SIZE_ROUND_UP(size, (size_t)page);
    }
    if (fail_arenas_for_testing) {
        errno = ENOMEM;
        return -1;
    }
    char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        return -1;
    }
    /* Fill the gaps between trampolines with instructions that trap. */
#if defined(__x86_64__)
    memset(mem, 0xcc, size);    /* int3 */
#else
    memset(mem, 0, size);       /* udf #0 on aarch64 */
#endif
    for (size_t off = 0; off + trampoline_stride <= size;
         off += trampoline_stride)
    {
        memcpy(mem + off, _Py_trampoline_func_start, trampoline_size);
    }
    __builtin___clear_cache(mem, mem + size);
    if (mprotect(mem, size, PROT_READ | PROT_EXEC) < 0) {
        int err = errno;
        munmap(mem, size);
        errno = err;
        return -1;
    }
    next_trampoline = mem;
    arena_limit = mem + size;
    stat_arena_bytes += size;
    return 0;
}

uintptr_t
_PyPerfTrampoline_ComputeStackLimit(void)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    uintptr_t limit = 0;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr;
        size_t size;
        if (pthread_attr_getstack(&attr, &addr, &size) == 0
            && here > (uintptr_t)addr && here - (uintptr_t)addr <= size)
        {
            /* Keep a quarter of the stack (64 KiB to 2 MiB) for the C
               recursion that happens without trampolines too. */
            size_t reserve = size / 4;
            reserve = Py_MAX(reserve, (size_t)64 * 1024);
            reserve = Py_MIN(reserve, (size_t)2 * 1024 * 1024);
            limit = (uintptr_t)addr + reserve;
        }
        pthread_attr_destroy(&attr);
    }
    if (limit == 0) {
        /* Unknown stack: assume no more than 256 KiB below this point. */
        const uintptr_t assumed = 256 * 1024;
        limit = here > assumed ? here - assumed / 2 : 1;
    }
    _PyPerfTrampoline_stack_limit = limit;
    return limit;
}

/* Give "co" a trampoline and describe it.  Return NULL if that is not
   possible; the frame then runs without one.  Never raises: the caller may
   be starting a frame with an exception set (generator.throw()). */
static py_trampoline
compile_trampoline(PyCodeObject *co)
{
    if (arena_failed || write_failed) {
        return NULL;
    }
    if (next_trampoline == NULL
        || arena_limit - next_trampoline < (ptrdiff_t)trampoline_stride)
    {
        if (new_arena() < 0) {
            arena_failed = 1;
            PySys_FormatStderr(
                "Warning: cannot allocate memory for perf trampolines "
                "(%s); Python functions started from now on will not "
                "appear in native profiles\n", strerror(errno));
            return NULL;
        }
    }
    char *code = next_trampoline;

    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    int res = _PyCode_SetExtra((PyObject *)co,
                               _PyPerfTrampoline_CODE_EXTRA_INDEX, code);
    if (res < 0) {
        PyErr_Clear();
    }
    else {
        next_trampoline += trampoline_stride;
        stat_trampolines++;
        if (active_backend->write_entry(code, trampoline_size, co) < 0) {
            write_failed = 1;
            PySys_FormatStderr(
                "Warning: cannot write to %s (%s); Python functions "
                "started from now on will not appear in native profiles\n",
                active_backend->path(), strerror(errno));
        }
    }
    PyErr_Restore(exc, val, tb);
    return res < 0 ? NULL : (py_trampoline)code;
}

PyObject *
_PyPerfTrampoline_EvalFrame(PyThreadState *tstate,
                            _PyInterpreterFrame *frame, int throwflag)
{
    if (!_PyPerfTrampoline_HaveStack()) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    PyCodeObject *co = frame->f_code;
    void *extra = NULL;
    if (co->co_extra != NULL) {
        (void)_PyCode_GetExtra((PyObject *)co,
                               _PyPerfTrampoline_CODE_EXTRA_INDEX, &extra);
    }
    py_trampoline f = (py_trampoline)extra;
    if (f == NULL) {
        f = compile_trampoline(co);
        if (f == NULL) {
            return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
        }
    }
    return f(tstate, frame, throwflag, _PyEval_EvalFrameDefault);
}

void
_PyPerfTrampoline_InitInterpreter(PyInterpreterState *interp)
{
    /* Reserve co_extra slot 0 before anything else can request one, so the
       slot has the same index in every interpreter. */
    assert(interp->co_extra_user_count == 0);
    interp->co_extra_freefuncs[_PyPerfTrampoline_CODE_EXTRA_INDEX] = NULL;
    interp->co_extra_user_count = _PyPerfTrampoline_CODE_EXTRA_INDEX + 1;
}

static int
activate(const trampoline_backend *backend, const char **reason)
{
    if (active_backend == backend) {
        return 0;
    }
    _PyPerfTrampoline_Deactivate();
    init_template();
    if (backend->open(reason) < 0) {
        return -1;
    }
    arena_failed = 0;
    write_failed = 0;
    active_backend = backend;
    _PyPerfTrampoline_active = 1;
    return 0;
}

void
_PyPerfTrampoline_Deactivate(void)
{
    /* Frames already running keep returning through their trampolines;
       only new frames stop using them. */
    _PyPerfTrampoline_active = 0;
    if (active_backend != NULL) {
        active_backend->close();
        active_backend = NULL;
    }
}

void
_PyPerfTrampoline_AfterFork_Child(void)
{
    if (active_backend == NULL) {
        return;
    }
    const char *reason = NULL;
    if (active_backend->after_fork_child(&reason) < 0) {
        PySys_FormatStderr(
            "Warning: perf trampolines deactivated in child process %ld: "
            "cannot write %s: %s\n",
            (long)getpid(), active_backend->path(), reason);
        _PyPerfTrampoline_Deactivate();
    }
}

void
_PyPerfTrampoline_Fini(void)
{
    _PyPerfTrampoline_Deactivate();
}

void
_PyPerfTrampoline_SetArenaFailureForTesting(int fail)
{
    fail_arenas_for_testing = fail;
}

PyObject *
_PyPerfTrampoline_GetStats(void)
{
    return Py_BuildValue("{snsnsnsn}",
                         "arena_bytes", (Py_ssize_t)stat_arena_bytes,
                         "trampolines", (Py_ssize_t)stat_trampolines,
                         "trampoline_size", (Py_ssize_t)trampoline_size,
                         "written_bytes", (Py_ssize_t)stat_written_bytes);
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

static const trampoline_backend perf_map_backend = {
    .name = "perf",
};

PyObject *
_PyPerfTrampoline_EvalFrame(PyThreadState *tstate,
                            _PyInterpreterFrame *frame, int throwflag)
{
    return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
}

void
_PyPerfTrampoline_InitInterpreter(PyInterpreterState *Py_UNUSED(interp))
{
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
    return Py_BuildValue("{snsnsnsn}", "arena_bytes", (Py_ssize_t)0,
                         "trampolines", (Py_ssize_t)0,
                         "trampoline_size", (Py_ssize_t)0,
                         "written_bytes", (Py_ssize_t)0);
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */


/* Activation **************************************************************/

int
_PyPerfTrampoline_Activate(const char *name)
{
    const trampoline_backend *backend = find_backend(name);
    if (backend == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "invalid stack trampoline backend: '%s'", name);
        return -1;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    const char *reason = NULL;
    if (activate(backend, &reason) < 0) {
        int err = errno;
        PyObject *msg = PyUnicode_FromFormat(
            "cannot open the %s file: %s", backend->name, reason);
        PyObject *path = PyUnicode_DecodeFSDefault(backend->path());
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
                 "of Python (it needs Linux on x86-64 or aarch64)",
                 backend->name);
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

void
_PyPerfTrampoline_InitFromConfig(const PyConfig *config)
{
    /* -X perf[=VALUE] wins over PYTHONPERFSUPPORT. */
    int enable;
    const wchar_t *xoption = _Py_get_xoption(&config->xoptions, L"perf");
    if (xoption != NULL) {
        enable = xoption_enable_value(xoption);
    }
    else {
        enable = enable_value(_Py_GetEnv(config->use_environment,
                                         "PYTHONPERFSUPPORT"));
    }
    if (!enable) {
        return;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    const char *reason = NULL;
    if (activate(&perf_map_backend, &reason) < 0) {
        PySys_FormatStderr(
            "Warning: perf trampolines not activated: cannot open %s: %s\n",
            perf_map_backend.path(), reason);
    }
#endif
}

/* The "perf" backend: the perf map file.

   perf names code that has no ELF symbols from /tmp/perf-PID.map, one
   line per piece of code:

       ADDR SIZE NAME

   with ADDR and SIZE in hexadecimal without "0x" (see
   tools/perf/Documentation/jit-interface.txt in the Linux sources).  For
   each trampoline this backend appends

       ADDR SIZE py::QUALNAME:FILENAME

   The file follows the rules of Python/perf_description_file.c.  The
   same map takes the entries of the C API below, for code that other
   code generators in the process make, whether or not trampolines are
   active. */

#include "Python.h"
#include "pycore_bitutils.h"      // _Py_bit_length()
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <fcntl.h>                // O_RDONLY
#include <pthread.h>              // pthread_mutex_t
#include <string.h>               // memrchr()
#include <sys/stat.h>             // fstat()
#include <unistd.h>               // getpid()

static int
perf_map_open(const char **reason)
{
    char path[64];
    PyOS_snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
    return _PyPerfFile_OpenSimple(_PyPerfFile_MAP, path, reason);
}

static int
perf_map_close(void)
{
    int closed;
    return _PyPerfFile_Close(_PyPerfFile_MAP, &closed);
}

/* Write v in lower-case hexadecimal without leading zeros at p; return
   the end. */
static char *
put_hex(char *p, uintptr_t v)
{
    Py_BUILD_ASSERT(sizeof(uintptr_t) <= sizeof(unsigned long));
    int n = Py_MAX((_Py_bit_length((unsigned long)v) + 3) / 4, 1);
    for (int i = n; i-- > 0; v >>= 4) {
        p[i] = "0123456789abcdef"[v & 0xf];
    }
    return p + n;
}

/* Append the line "ADDR SIZE NAME" to the map, with the control
   characters of name (len bytes) replaced if "sanitize" is set (an entry
   of the C API, written at once), held with other descriptions of
   trampolines otherwise (one made at "now"). */
static int
write_line(const void *code, size_t size, const char *name, size_t len,
           int sanitize, int64_t now)
{
    char small[512];
    char *line = small;
    size_t needed = 2 * (2 * sizeof(uintptr_t) + 1) + len + 1;
    if (needed > sizeof(small)) {
        line = PyMem_RawMalloc(needed);
        if (line == NULL) {
            errno = ENOMEM;
            return -1;
        }
    }
    char *p = put_hex(line, (uintptr_t)code);
    *p++ = ' ';
    p = put_hex(p, (uintptr_t)size);
    *p++ = ' ';
    memcpy(p, name, len);
    if (sanitize) {
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c < 0x20 || c == 0x7f) {
                p[i] = '?';
            }
        }
    }
    p += len;
    *p++ = '\n';
    /* Whole lines only: with O_APPEND each write() reaches the file at
       once and never interleaves with other writers. */
    int res = sanitize
        ? _PyPerfFile_Write(_PyPerfFile_MAP, line, (size_t)(p - line))
        : _PyPerfFile_WriteLater(_PyPerfFile_MAP, line, (size_t)(p - line),
                                 now);
    if (line != small) {
        PyMem_RawFree(line);
    }
    return res;
}

static int
perf_map_write_entry(const void *code, size_t size, const char *name,
                     size_t len, int64_t now)
{
    /* The core has replaced control characters already. */
    return write_line(code, size, name, len, 0, now);
}

const _PyPerfBackend _PyPerfMap_Backend = {
    .kind = _PyPerfFile_MAP,
    .open = perf_map_open,
    .write_entry = perf_map_write_entry,
    .close = perf_map_close,
};


/* The C API (Include/cpython/ceval.h) ***************************************

   Entries go to the same map as the trampolines', through the same rules:
   the map is open while the perf backend is active in any interpreter, or
   from PyUnstable_PerfMapState_Init() to PyUnstable_PerfMapState_Fini().
   Any thread may call these, with or without the GIL: the description
   files have a lock of their own, and this state one too. */

static struct {
    long pid;                   /* the process that opened the map; 0 */
} api;

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

/* Made new in a forked child before anything runs there, as the
   description files' lock is (Python/perf_description_file.c). */
static pthread_once_t watching_forks = PTHREAD_ONCE_INIT;

static void
reinit_api_lock(void)
{
    pthread_mutex_init(&api_lock, NULL);
}

static void
watch_forks(void)
{
    (void)pthread_atfork(NULL, NULL, reinit_api_lock);
}

int
PyUnstable_PerfMapState_Init(void)
{
    pthread_once(&watching_forks, watch_forks);
    pthread_mutex_lock(&api_lock);
    int res = 0;
    if (api.pid != (long)getpid()) {
        /* Not open, or opened by the parent of this forked process. */
        const char *reason;
        if (perf_map_open(&reason) < 0) {
            res = -1;
        }
        else {
            api.pid = (long)getpid();
        }
    }
    pthread_mutex_unlock(&api_lock);
    return res;
}

int
PyUnstable_WritePerfMapEntry(const void *code_addr, unsigned int code_size,
                             const char *entry_name)
{
    if (entry_name == NULL || code_size == 0) {
        errno = EINVAL;
        return -1;
    }
    int res = PyUnstable_PerfMapState_Init();
    if (res < 0) {
        return res;
    }
    return write_line(code_addr, code_size, entry_name, strlen(entry_name),
                      1, 0) < 0 ? -1 : 0;
}

void
PyUnstable_PerfMapState_Fini(void)
{
    pthread_mutex_lock(&api_lock);
    if (api.pid == (long)getpid()) {
        (void)perf_map_close();
    }
    api.pid = 0;
    pthread_mutex_unlock(&api_lock);
}

/* Append to the map what perf would read of the open file fd: every line,
   up to the size the file had when the copy began (a writer appending to
   it meanwhile, this process above all, would make the copy endless) or
   limit bytes if less, with a newline after a last line that has none.
   Each write() ends at a line's end, so that the copy never interleaves
   with entries written meanwhile; a line longer than the buffer makes it
   grow.  The map itself is refused (EINVAL): it would be copied into
   itself; so is anything but a regular file. */
static int
copy_lines(int fd, off_t limit)
{
    struct stat src;
    if (fstat(fd, &src) < 0) {
        return -1;
    }
    /* perf reads regular files only; a FIFO would never end. */
    if (!S_ISREG(src.st_mode) || _PyPerfFile_IsFile(_PyPerfFile_MAP, &src)) {
        errno = EINVAL;
        return -1;
    }
    size_t cap = 64 * 1024;
    char *buf = PyMem_RawMalloc(cap);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    off_t left = Py_MIN(src.st_size, limit);
    size_t len = 0;
    int res = 0;
    while (left > 0) {
        if (len == cap) {
            char *bigger = PyMem_RawRealloc(buf, 2 * cap);
            if (bigger == NULL) {
                errno = ENOMEM;
                res = -1;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t want = cap - len;
        if ((off_t)want > left) {
            want = (size_t)left;
        }
        ssize_t n = read(fd, buf + len, want);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            res = n < 0 ? -1 : 0;   /* 0: the file got shorter */
            break;
        }
        len += (size_t)n;
        left -= n;
        char *end = memrchr(buf, '\n', len);
        if (end != NULL) {
            size_t lines = (size_t)(end - buf) + 1;
            if (_PyPerfFile_Write(_PyPerfFile_MAP, buf, lines) < 0) {
                res = -1;
                break;
            }
            memmove(buf, buf + lines, len - lines);
            len -= lines;
        }
    }
    if (res == 0 && len > 0) {
        /* A last line without its newline: perf reads it all the same. */
        char *bigger = len == cap ? PyMem_RawRealloc(buf, cap + 1) : buf;
        if (bigger == NULL) {
            errno = ENOMEM;
            res = -1;
        }
        else {
            buf = bigger;
            buf[len++] = '\n';
            res = _PyPerfFile_Write(_PyPerfFile_MAP, buf, len);
        }
    }
    int err = errno;
    PyMem_RawFree(buf);
    errno = err;
    return res;
}

int
PyUnstable_CopyPerfMapFile(const char *parent_filename)
{
    if (parent_filename == NULL) {
        errno = EINVAL;
        return -1;
    }
    int res = PyUnstable_PerfMapState_Init();
    if (res < 0) {
        return res;
    }
    int fd = open(parent_filename, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return -1;
    }
    res = copy_lines(fd, PY_SSIZE_T_MAX);
    int err = errno;
    close(fd);
    errno = err;
    return res;
}

int
_PyPerfMap_InUse(void)
{
    return api.pid != 0;
}

int
_PyPerfMap_AfterFork(void)
{
    if (api.pid == 0) {
        return 0;
    }
    /* The parent's map has entries of the C API, for code the child
       inherited that only their writers know: the child's map starts with
       the parent's, as far as the parent had written it. */
    char parent[64];
    PyOS_snprintf(parent, sizeof(parent), "%s",
                  _PyPerfFile_Path(_PyPerfFile_MAP));
    off_t size = _PyPerfFile_Size(_PyPerfFile_MAP);
    int copied = 0;
    if (PyUnstable_PerfMapState_Init() == 0) {
        int fd = open(parent,
                      O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd >= 0) {
            /* The parent's file, then what it held at the fork. */
            copied = (copy_lines(fd, size) == 0
                      && _PyPerfFile_WriteInherited(_PyPerfFile_MAP) == 0);
            close(fd);
        }
    }
    return copied;
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

/* No perf maps on this platform: the functions do nothing. */

int
PyUnstable_PerfMapState_Init(void)
{
    return 0;
}

int
PyUnstable_WritePerfMapEntry(const void *Py_UNUSED(code_addr),
                             unsigned int Py_UNUSED(code_size),
                             const char *Py_UNUSED(entry_name))
{
    return 0;
}

void
PyUnstable_PerfMapState_Fini(void)
{
}

int
PyUnstable_CopyPerfMapFile(const char *Py_UNUSED(parent_filename))
{
    return 0;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

/* The "perf" backend: the perf map file.

   perf names code that has no ELF symbols from /tmp/perf-PID.map, one
   line per piece of code:

       ADDR SIZE NAME

   with ADDR and SIZE in hexadecimal without "0x" (see
   tools/perf/Documentation/jit-interface.txt in the Linux sources).  For
   each trampoline this backend appends

       ADDR SIZE py::QUALNAME:FILENAME

   The file follows the rules of Python/perf_description_file.c. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <fcntl.h>                // O_WRONLY
#include <unistd.h>               // getpid()

static int
perf_map_open(const char **reason)
{
    char path[64];
    int fd;
    PyOS_snprintf(path, sizeof(path), "/tmp/perf-%ld.map", (long)getpid());
    if (_PyPerfFile_Open(path, O_WRONLY, &fd, reason) < 0) {
        return -1;
    }
    close(fd);
    return 0;
}

static void
perf_map_close(void)
{
    /* Nothing is kept open. */
}

/* Write v in lower-case hexadecimal without leading zeros at p; return
   the end. */
static char *
put_hex(char *p, uintptr_t v)
{
    char digits[2 * sizeof(uintptr_t)];
    int n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v & 0xf];
        v >>= 4;
    } while (v != 0);
    while (n > 0) {
        *p++ = digits[--n];
    }
    return p;
}

static int
perf_map_write_entry(const void *code, size_t size, const char *name,
                     size_t len)
{
    /* "ADDR SIZE " + name + '\n' */
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
    p += len;
    *p++ = '\n';
    /* Whole lines only: with O_APPEND each write() reaches the file at
       once and never interleaves with other writers. */
    int res = _PyPerfFile_Write(line, (size_t)(p - line));
    if (line != small) {
        PyMem_RawFree(line);
    }
    return res;
}

const _PyPerfBackend _PyPerfMap_Backend = {
    .open = perf_map_open,
    .write_entry = perf_map_write_entry,
    .close = perf_map_close,
    /* A forked child's map starts with all of the parent's lines as they
       are: they name the trampolines it inherited. */
    .header_size = 0,
    .claim_records = NULL,
};

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

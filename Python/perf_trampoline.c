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
   symbols.  The "perf_jit" backend instead writes a jitdump,
   /tmp/jit-PID.dump: each trampoline with its code and the DWARF unwind
   information (.eh_frame) that describes its prologue and epilogue, so
   that perf can unwind through it with --call-graph dwarf in builds
   without frame pointers (after "perf inject --jit").

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
   object's trampoline is kept in co_extra, at an index per backend that is
   reserved when each interpreter is created: a trampoline is always
   described by the backend it was made for, and each backend spaces its
   trampolines as its consumers need. */

#include "Python.h"
#include "pycore_ceval.h"         // _PyEval_EvalFrameDefault()
#include "pycore_frame.h"         // _PyInterpreterFrame
#include "pycore_initconfig.h"    // _Py_GetEnv()
#include "pycore_interp.h"        // PyInterpreterState.co_extra_user_count
#include "pycore_perf_trampoline.h"
#include "pycore_pystate.h"       // _PyInterpreterState_GET()
#include <time.h>                 // clock_gettime()

#ifdef PY_HAVE_PERF_TRAMPOLINE
#  include <fcntl.h>              // open()
#  include <pthread.h>            // pthread_getattr_np()
#  include <sys/mman.h>           // mmap()
#  include <sys/stat.h>           // fstat()
#  include <unistd.h>             // sysconf()
#endif


/* Backends ****************************************************************/

typedef struct {
    char *next;             /* next free trampoline of the current arena */
    char *limit;            /* end of the current arena */
} trampoline_pool;

typedef struct {
    const char *name;
    /* co_extra index of the code objects' trampolines for this backend */
    Py_ssize_t extra_index;
    /* Distance between two trampolines; 0 means the template size rounded
       up to TRAMPOLINE_ALIGN. */
    size_t stride;
    /* Add a unique 8-byte tag after each copy of the template (reported
       as part of its code), so no two trampolines have the same bytes. */
    int unique_tag;
    trampoline_pool *pool;
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
static const trampoline_backend perf_jit_backend;

static const trampoline_backend *const backends[] = {
    &perf_map_backend,
    &perf_jit_backend,
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
Py_ssize_t _PyPerfTrampoline_extra_index = 0;
__thread uintptr_t _PyPerfTrampoline_stack_limit
    __attribute__((tls_model("initial-exec"))) = 0;

/* The active backend, or NULL. */
static const trampoline_backend *active_backend = NULL;

/* Arenas: each backend hands out trampolines from its own arenas, each
   at least TRAMPOLINE_ALIGN-aligned so that no address of one lies within
   the range reported for another. */
#define TRAMPOLINE_ALIGN 16
#define ARENA_SIZE (64 * 1024)
static size_t template_size = 0;        /* bytes of the template */
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

/* Bytes of the active backend's description file as this process knows
   them (what was there when it was opened, plus what it wrote), so that a
   forked child can copy exactly what was there at the fork. */
static off_t file_size = 0;

static char perf_map_path[64];

static int
open_description_file(const char *path, int access_mode, int *fd_out,
                      struct stat *st_out, const char **reason)
{
    /* O_NOFOLLOW: never write through a symbolic link an attacker planted
       in /tmp.  O_NONBLOCK: a FIFO at the path must not hang the
       interpreter.  The file is private to the user (0600). */
    int fd = open(path,
                  access_mode | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC
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
    if (st_out != NULL) {
        *st_out = st;
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

/* Append buf to the description file at path.  The file is opened for
   each write and closed again: an interpreter with perf support active
   must not keep a descriptor open that the program would see (in
   /proc/self/fd, or inherited by children that list their descriptors).
   The one exception is while the program imports (see below). */
static int
append_to_file(const char *path, const char *buf, size_t size)
{
    int fd;
    const char *reason;
    if (open_description_file(path, O_WRONLY, &fd, NULL, &reason) < 0) {
        return -1;
    }
    int res = write_all(fd, buf, size);
    int err = errno;
    close(fd);
    errno = err;
    return res;
}

/* Descriptions made while the interpreter starts up are held in memory and
   written with a single write() when start-up is done (see
   _PyPerfTrampoline_EndStartup()): a few hundred code objects run before
   the program does, and opening the file for each of them would add about
   a third to the start-up time.  Once start-up is done, each description
   is written as soon as it is made, so that a profiler reading the file
   while the process still runs finds it. */
#define HELD_MAX (256 * 1024)
static int holding = 0;
static char *held = NULL;
static size_t held_len = 0;
static size_t held_cap = 0;

/* While the program imports modules, functions run for the first time one
   after the other (module and class bodies, decorators, what they call),
   and each needs a description.  The description file then stays open
   between writes, and is closed when the last import in progress is done
   (see _PyPerfTrampoline_EndImport()): each description still reaches the
   file at once, without an open() and close() of its own, and outside
   imports no descriptor stays open.  The depth is per thread: a thread
   that forks keeps its own count in the child. */
static __thread int import_depth = 0;
static int kept_fd = -1;
static dev_t kept_dev;
static ino_t kept_ino;

/* Is kept_fd still our description file?  The program may have closed
   it, and opened another file under its number. */
static int
kept_file_is_ours(struct stat *st)
{
    return (fstat(kept_fd, st) == 0 && st->st_dev == kept_dev
            && st->st_ino == kept_ino);
}

static void
close_kept_file(void)
{
    struct stat st;
    if (kept_fd >= 0) {
        if (kept_file_is_ours(&st)) {
            close(kept_fd);
        }
        kept_fd = -1;
    }
}

/* Return a descriptor of the description file at path to write to while
   something imports, opening it if needed; -1 with errno set on failure. */
static int
get_kept_file(const char *path)
{
    struct stat st;
    if (kept_fd >= 0) {
        if (kept_file_is_ours(&st) && st.st_nlink > 0) {
            return kept_fd;
        }
        /* Closed by the program, or removed from the directory (then
           start a new file). */
        close_kept_file();
    }
    const char *reason;
    int fd;
    if (open_description_file(path, O_WRONLY, &fd, &st, &reason) < 0) {
        return -1;
    }
    kept_fd = fd;
    kept_dev = st.st_dev;
    kept_ino = st.st_ino;
    return fd;
}

static int
write_description(const char *buf, size_t size)
{
    const char *path = active_backend->path();
    if (import_depth > 0) {
        int fd = get_kept_file(path);
        if (fd < 0 || write_all(fd, buf, size) < 0) {
            return -1;
        }
    }
    else if (append_to_file(path, buf, size) < 0) {
        return -1;
    }
    file_size += (off_t)size;
    stat_written_bytes += size;
    return 0;
}

/* Write the held descriptions.  On failure, none of them is in the file;
   return -1 with errno set. */
static int
flush_held(void)
{
    int res = 0;
    if (held_len > 0) {
        res = write_description(held, held_len);
        held_len = 0;
    }
    return res;
}

/* Describe one trampoline: buf holds whole records of the active
   backend's description file.  Return 0 on success; -1 with errno set on
   failure. */
static int
emit_description(const char *buf, size_t size)
{
    if (holding) {
        if (held_len + size > held_cap) {
            size_t cap = Py_MAX(held_len + size, (size_t)16 * 1024);
            char *mem = PyMem_RawRealloc(held, cap);
            if (mem != NULL) {
                held = mem;
                held_cap = cap;
            }
        }
        if (held_len + size <= held_cap) {
            memcpy(held + held_len, buf, size);
            held_len += size;
            return held_len < HELD_MAX ? 0 : flush_held();
        }
        /* No memory to hold it: write it now, after what is held. */
        if (flush_held() < 0) {
            return -1;
        }
    }
    return write_description(buf, size);
}

static void
report_write_failure(void)
{
    write_failed = 1;
    PySys_FormatStderr(
        "Warning: cannot write to %s (%s); Python functions started from "
        "now on will not appear in native profiles\n",
        active_backend->path(), strerror(errno));
}

/* Read the first size bytes of our description file at path into a new
   PyMem_RawMalloc() buffer; set *got to the number of bytes read. */
static char *
read_file_prefix(const char *path, off_t size, off_t *got)
{
    *got = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
        && st.st_uid == geteuid() && size > 0)
    {
        buf = PyMem_RawMalloc((size_t)size);
    }
    while (buf != NULL && *got < size) {
        ssize_t n = pread(fd, buf + *got, (size_t)(size - *got), *got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        *got += n;
    }
    close(fd);
    return buf;
}

static const char *
perf_map_get_path(void)
{
    return perf_map_path;
}

static int
perf_map_open(const char **reason)
{
    int fd;
    PyOS_snprintf(perf_map_path, sizeof(perf_map_path),
                  "/tmp/perf-%ld.map", (long)getpid());
    if (open_description_file(perf_map_path, O_WRONLY, &fd, NULL,
                              reason) < 0)
    {
        return -1;
    }
    file_size = lseek(fd, 0, SEEK_END);
    if (file_size < 0) {
        file_size = 0;
    }
    close(fd);
    return 0;
}

static void
perf_map_close(void)
{
    /* Nothing is kept open. */
}

/* Append str, encoded to UTF-8, to the symbol being built, replacing
   characters that would break the line-based map format (the newline
   above all). */
static int
append_symbol_part(_PyBytesWriter *writer, char **p, PyObject *str)
{
    PyObject *bytes = NULL;
    const char *src = "?";
    Py_ssize_t n = 1;
    if (PyUnicode_Check(str) && PyUnicode_IS_READY(str)
        && PyUnicode_IS_ASCII(str))
    {
        src = (const char *)PyUnicode_DATA(str);
        n = PyUnicode_GET_LENGTH(str);
    }
    else if (PyUnicode_Check(str)) {
        /* backslashreplace: file names may hold lone surrogates. */
        bytes = _PyUnicode_AsUTF8String(str, "backslashreplace");
        if (bytes == NULL) {
            PyErr_Clear();
        }
        else {
            src = PyBytes_AS_STRING(bytes);
            n = PyBytes_GET_SIZE(bytes);
        }
    }
    *p = _PyBytesWriter_Prepare(writer, *p, n);
    if (*p != NULL) {
        unsigned char *dst = (unsigned char *)*p;
        memcpy(dst, src, (size_t)n);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (dst[i] < 0x20 || dst[i] == 0x7f) {
                dst[i] = '?';
            }
        }
        *p += n;
    }
    Py_XDECREF(bytes);
    return *p != NULL ? 0 : -1;
}

/* The name both backends give co's trampoline: "py::QUALNAME:FILENAME", as
   a new bytes object.  Return NULL with errno set (not an exception) on
   failure. */
static PyObject *
make_symbol(PyCodeObject *co)
{
    _PyBytesWriter writer;
    _PyBytesWriter_Init(&writer);
    char *p = _PyBytesWriter_Alloc(&writer, 4);
    if (p == NULL) {
        goto error;
    }
    memcpy(p, "py::", 4);
    p += 4;
    if (append_symbol_part(&writer, &p, co->co_qualname) < 0) {
        goto error;
    }
    p = _PyBytesWriter_Prepare(&writer, p, 1);
    if (p == NULL) {
        goto error;
    }
    *p++ = ':';
    if (append_symbol_part(&writer, &p, co->co_filename) < 0) {
        goto error;
    }
    PyObject *symbol = _PyBytesWriter_Finish(&writer, p);
    if (symbol == NULL) {
        PyErr_Clear();
        errno = ENOMEM;
    }
    return symbol;

error:
    _PyBytesWriter_Dealloc(&writer);
    PyErr_Clear();
    errno = ENOMEM;
    return NULL;
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
perf_map_write_entry(const void *code, size_t size, PyCodeObject *co)
{
    PyObject *symbol = make_symbol(co);
    if (symbol == NULL) {
        return -1;
    }
    /* "ADDR SIZE " + symbol + '\n' */
    size_t needed = 2 * 3 * sizeof(uintptr_t) + 4
                    + (size_t)PyBytes_GET_SIZE(symbol);
    char small[512];
    char *line = needed <= sizeof(small) ? small : PyMem_RawMalloc(needed);
    int res = -1;
    if (line == NULL) {
        errno = ENOMEM;
        goto done;
    }
    char *end = put_hex(line, (uintptr_t)code);
    *end++ = ' ';
    end = put_hex(end, (uintptr_t)size);
    *end++ = ' ';
    memcpy(end, PyBytes_AS_STRING(symbol), PyBytes_GET_SIZE(symbol));
    end += PyBytes_GET_SIZE(symbol);
    *end++ = '\n';
    assert((size_t)(end - line) <= needed);
    /* Whole lines only: with O_APPEND each write() reaches the file at
       once and never interleaves with other writers. */
    res = emit_description(line, (size_t)(end - line));
    if (line != small) {
        PyMem_RawFree(line);
    }
done:
    Py_DECREF(symbol);
    return res;
}

static int
perf_map_after_fork_child(const char **reason)
{
    /* The child runs the trampolines it inherited: its map starts with
       what the parent had written before the fork (and the held lines,
       which the child writes itself). */
    char parent_path[sizeof(perf_map_path)];
    memcpy(parent_path, perf_map_path, sizeof(parent_path));
    off_t parent_size = file_size;
    if (perf_map_open(reason) < 0) {
        return -1;
    }
    if (parent_size <= 0) {
        return 0;
    }
    off_t got;
    char *copy = read_file_prefix(parent_path, parent_size, &got);
    if (copy == NULL) {
        *reason = "cannot read the parent's perf map";
        return -1;
    }
    int res = 0;
    if (got > 0) {
        res = append_to_file(perf_map_path, copy, (size_t)got);
        if (res < 0) {
            *reason = strerror(errno);
        }
        else {
            file_size += got;
        }
    }
    PyMem_RawFree(copy);
    return res;
}

static trampoline_pool perf_map_pool;

static const trampoline_backend perf_map_backend = {
    .name = "perf",
    .extra_index = 0,
    .pool = &perf_map_pool,
    .open = perf_map_open,
    .write_entry = perf_map_write_entry,
    .after_fork_child = perf_map_after_fork_child,
    .close = perf_map_close,
    .path = perf_map_get_path,
};


/* perf_jit backend: jitdump ***********************************************/

/* The jitdump format is specified in the Linux sources
   (tools/perf/Documentation/jitdump-specification.txt).  For each
   trampoline we write a JIT_CODE_UNWINDING_INFO record (an .eh_frame with
   one CIE and one FDE, then an .eh_frame_hdr indexing it) followed by the
   JIT_CODE_LOAD record it applies to.  "perf inject --jit" turns each load
   into a small ELF file whose .text starts at file offset
   JITDUMP_TEXT_OFFSET (the size of the ELF header), followed by the
   .eh_frame at the next 8-byte boundary and the .eh_frame_hdr; the
   pc-relative addresses below are computed for that layout. */

#define JITDUMP_MAGIC 0x4A695444
#define JITDUMP_VERSION 1
#define JIT_CODE_LOAD 0
#define JIT_CODE_UNWINDING_INFO 4
#define JITDUMP_TEXT_OFFSET 64          /* sizeof(Elf64_Ehdr) */
/* Distance between two perf_jit trampolines: perf maps each one together
   with its unwind information, and those maps must not overlap. */
#define JIT_TRAMPOLINE_STRIDE 256

#if defined(__x86_64__)
#  define JITDUMP_ELF_MACH 62           /* EM_X86_64 */
#  define DWARF_SP 7
#  define DWARF_FP 6
#  define DWARF_RA 16
#  define DWARF_CODE_ALIGN 1
#else
#  define JITDUMP_ELF_MACH 183          /* EM_AARCH64 */
#  define DWARF_SP 31
#  define DWARF_FP 29
#  define DWARF_RA 30
#  define DWARF_CODE_ALIGN 4
#endif
#define DWARF_DATA_ALIGN (-8)

/* DWARF call frame instructions and pointer encodings. */
#define DW_CFA_advance_loc 0x40
#define DW_CFA_offset 0x80
#define DW_CFA_restore 0xc0
#define DW_CFA_def_cfa 0x0c
#define DW_CFA_def_cfa_register 0x0d
#define DW_CFA_def_cfa_offset 0x0e
#define DW_CFA_AARCH64_negate_ra_state 0x2d
#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30

extern const char _Py_trampoline_func_pushed[];
extern const char _Py_trampoline_func_framed[];
extern const char _Py_trampoline_func_popped[];

static void *jitdump_mapping = NULL;
static size_t jitdump_mapping_size = 0;
static char jitdump_path[64];
static uint64_t jitdump_code_index = 0;

typedef struct {
    unsigned char *buf;
    size_t len;
    size_t cap;
} byte_buffer;

static void
put_bytes(byte_buffer *b, const void *data, size_t size)
{
    assert(b->len + size <= b->cap);
    memcpy(b->buf + b->len, data, size);
    b->len += size;
}

static void
put_u8(byte_buffer *b, uint8_t v)
{
    put_bytes(b, &v, 1);
}

static void
put_u32(byte_buffer *b, uint32_t v)
{
    put_bytes(b, &v, 4);
}

static void
put_u64(byte_buffer *b, uint64_t v)
{
    put_bytes(b, &v, 8);
}

static void
put_uleb128(byte_buffer *b, uint32_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        put_u8(b, byte | (v ? 0x80 : 0));
    } while (v);
}

static void
put_sleb128(byte_buffer *b, int32_t v)
{
    for (;;) {
        uint8_t byte = v & 0x7f;
        v >>= 7;   /* arithmetic shift */
        if ((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40))) {
            put_u8(b, byte);
            return;
        }
        put_u8(b, byte | 0x80);
    }
}

static void
patch_u32(byte_buffer *b, size_t pos, uint32_t v)
{
    memcpy(b->buf + pos, &v, 4);
}

/* Advance the location of a CFA program from *loc to new_loc (bytes). */
static void
advance_to(byte_buffer *b, size_t *loc, size_t new_loc)
{
    size_t delta = (new_loc - *loc) / DWARF_CODE_ALIGN;
    assert(new_loc >= *loc && delta < 0x40);
    if (delta) {
        put_u8(b, DW_CFA_advance_loc | (uint8_t)delta);
    }
    *loc = new_loc;
}

/* Append .eh_frame (CIE, FDE, terminator) and .eh_frame_hdr describing a
   trampoline of code_size bytes; return the size of .eh_frame_hdr. */
static size_t
write_unwind_info(byte_buffer *b, size_t code_size)
{
    size_t start = b->len;
    /* Where perf's ELF file puts the sections (see above). */
    int64_t text_addr = JITDUMP_TEXT_OFFSET;
    int64_t eh_frame_addr = _Py_SIZE_ROUND_UP(JITDUMP_TEXT_OFFSET + code_size,
                                              8);

    /* CIE: the state at the first instruction; the return address is
       just above the stack pointer on x86-64, in x30 on aarch64. */
    size_t cie = b->len;
    put_u32(b, 0);                      /* length, patched below */
    put_u32(b, 0);                      /* CIE id */
    put_u8(b, 1);                       /* version */
    put_bytes(b, "zR", 3);              /* augmentation */
    put_uleb128(b, DWARF_CODE_ALIGN);
    put_sleb128(b, DWARF_DATA_ALIGN);
    put_uleb128(b, DWARF_RA);
    put_uleb128(b, 1);                  /* augmentation data length */
    put_u8(b, DW_EH_PE_pcrel | DW_EH_PE_sdata4);   /* FDE pointers */
#if defined(__x86_64__)
    put_u8(b, DW_CFA_def_cfa);
    put_uleb128(b, DWARF_SP);
    put_uleb128(b, 8);
    put_u8(b, DW_CFA_offset | DWARF_RA);
    put_uleb128(b, 1);                  /* at CFA-8 */
#else
    put_u8(b, DW_CFA_def_cfa);
    put_uleb128(b, DWARF_SP);
    put_uleb128(b, 0);
#endif
    while ((b->len - cie) % 8) {
        put_u8(b, 0);                   /* DW_CFA_nop */
    }
    patch_u32(b, cie, (uint32_t)(b->len - cie - 4));

    /* FDE: how the prologue and epilogue move the CFA. */
    size_t fde = b->len;
    put_u32(b, 0);                      /* length, patched below */
    put_u32(b, (uint32_t)(b->len - cie));          /* CIE pointer */
    int64_t field_addr = eh_frame_addr + (int64_t)(b->len - start);
    put_u32(b, (uint32_t)(int32_t)(text_addr - field_addr));  /* pc begin */
    put_u32(b, (uint32_t)code_size);    /* pc range */
    put_uleb128(b, 0);                  /* augmentation data length */
    size_t pushed = _Py_trampoline_func_pushed - _Py_trampoline_func_start;
    size_t framed = _Py_trampoline_func_framed - _Py_trampoline_func_start;
    size_t popped = _Py_trampoline_func_popped - _Py_trampoline_func_start;
    size_t loc = 0;
#if defined(__x86_64__)
    advance_to(b, &loc, pushed);        /* push %rbp */
    put_u8(b, DW_CFA_def_cfa_offset);
    put_uleb128(b, 16);
    put_u8(b, DW_CFA_offset | DWARF_FP);
    put_uleb128(b, 2);                  /* at CFA-16 */
    advance_to(b, &loc, framed);        /* mov %rsp, %rbp */
    put_u8(b, DW_CFA_def_cfa_register);
    put_uleb128(b, DWARF_FP);
    advance_to(b, &loc, popped);        /* pop %rbp */
    put_u8(b, DW_CFA_def_cfa);
    put_uleb128(b, DWARF_SP);
    put_uleb128(b, 8);
    put_u8(b, DW_CFA_restore | DWARF_FP);
#else
#  if defined(__ARM_FEATURE_PAC_DEFAULT)
    advance_to(b, &loc, pushed - 4);    /* paci[ab]sp signed x30 */
    put_u8(b, DW_CFA_AARCH64_negate_ra_state);
#  endif
    advance_to(b, &loc, pushed);        /* stp x29, x30, [sp, -16]! */
    put_u8(b, DW_CFA_def_cfa_offset);
    put_uleb128(b, 16);
    put_u8(b, DW_CFA_offset | DWARF_FP);
    put_uleb128(b, 2);                  /* at CFA-16 */
    put_u8(b, DW_CFA_offset | DWARF_RA);
    put_uleb128(b, 1);                  /* at CFA-8 */
    advance_to(b, &loc, framed);        /* mov x29, sp */
    put_u8(b, DW_CFA_def_cfa_register);
    put_uleb128(b, DWARF_FP);
    advance_to(b, &loc, popped);        /* ldp x29, x30, [sp], 16 */
    put_u8(b, DW_CFA_def_cfa);
    put_uleb128(b, DWARF_SP);
    put_uleb128(b, 0);
    put_u8(b, DW_CFA_restore | DWARF_FP);
    put_u8(b, DW_CFA_restore | DWARF_RA);
#  if defined(__ARM_FEATURE_PAC_DEFAULT)
    advance_to(b, &loc, popped + 4);    /* auti[ab]sp */
    put_u8(b, DW_CFA_AARCH64_negate_ra_state);
#  endif
#endif
    while ((b->len - fde) % 8) {
        put_u8(b, 0);                   /* DW_CFA_nop */
    }
    patch_u32(b, fde, (uint32_t)(b->len - fde - 4));
    put_u32(b, 0);                      /* end of .eh_frame */

    /* .eh_frame_hdr: a one-entry search table. */
    size_t hdr = b->len;
    int64_t hdr_addr = eh_frame_addr + (int64_t)(hdr - start);
    put_u8(b, 1);                       /* version */
    put_u8(b, DW_EH_PE_pcrel | DW_EH_PE_sdata4);   /* eh_frame_ptr */
    put_u8(b, DW_EH_PE_udata4);                     /* fde_count */
    put_u8(b, DW_EH_PE_datarel | DW_EH_PE_sdata4);  /* table */
    put_u32(b, (uint32_t)(int32_t)(eh_frame_addr - (hdr_addr + 4)));
    put_u32(b, 1);
    put_u32(b, (uint32_t)(int32_t)(text_addr - hdr_addr));
    put_u32(b, (uint32_t)(int32_t)(eh_frame_addr + (int64_t)(fde - start)
                                   - hdr_addr));
    return b->len - hdr;
}

static uint64_t
monotonic_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static const char *
jitdump_get_path(void)
{
    return jitdump_path;
}

static void
jitdump_close(void)
{
    if (jitdump_mapping != NULL) {
        munmap(jitdump_mapping, jitdump_mapping_size);
        jitdump_mapping = NULL;
    }
}

static int
jitdump_open(const char **reason)
{
    int jitdump_fd;
    PyOS_snprintf(jitdump_path, sizeof(jitdump_path),
                  "/tmp/jit-%ld.dump", (long)getpid());
    if (open_description_file(jitdump_path, O_RDWR, &jitdump_fd, NULL,
                              reason) < 0) {
        return -1;
    }
    /* A dump left by an earlier process with the same PID describes code
       that no longer exists: start afresh.  Within one process, a second
       activation appends to the dump of the first. */
    off_t size = lseek(jitdump_fd, 0, SEEK_END);
    static long header_pid = 0;
    if (size <= 0 || header_pid != (long)getpid()) {
        if (ftruncate(jitdump_fd, 0) < 0) {
            goto error;
        }
        unsigned char header_buf[40];
        byte_buffer h = {header_buf, 0, sizeof(header_buf)};
        put_u32(&h, JITDUMP_MAGIC);
        put_u32(&h, JITDUMP_VERSION);
        put_u32(&h, (uint32_t)sizeof(header_buf));
        put_u32(&h, JITDUMP_ELF_MACH);
        put_u32(&h, 0);                 /* padding */
        put_u32(&h, (uint32_t)getpid());
        put_u64(&h, monotonic_ns());
        put_u64(&h, 0);                 /* flags */
        if (write_all(jitdump_fd, (const char *)header_buf, h.len) < 0) {
            goto error;
        }
        header_pid = (long)getpid();
        size = (off_t)h.len;
    }
    file_size = size;
    /* perf record learns about the dump from this executable mapping. */
    long page = sysconf(_SC_PAGESIZE);
    jitdump_mapping_size = page > 0 ? (size_t)page : 4096;
    jitdump_mapping = mmap(NULL, jitdump_mapping_size, PROT_READ | PROT_EXEC,
                           MAP_PRIVATE, jitdump_fd, 0);
    if (jitdump_mapping == MAP_FAILED) {
        jitdump_mapping = NULL;
        int err = errno;
        *reason = (err == EPERM || err == EACCES)
                  ? "cannot map it executable (is /tmp mounted noexec?)"
                  : strerror(err);
        close(jitdump_fd);
        errno = err;
        return -1;
    }
    /* The mapping stays; no descriptor is kept open (see
       append_to_file()). */
    close(jitdump_fd);
    return 0;

error:
    {
        int err = errno;
        *reason = strerror(err);
        close(jitdump_fd);
        errno = err;
        return -1;
    }
}

static int
jitdump_write_entry(const void *code, size_t size, PyCodeObject *co)
{
    PyObject *symbol = make_symbol(co);
    if (symbol == NULL) {
        return -1;
    }
    size_t names = (size_t)PyBytes_GET_SIZE(symbol);
    /* Both records: unwinding info (header, 3 sizes, at most 256 bytes of
       tables, padding) then code load (header, fixed fields, name, code). */
    size_t needed = 16 + 24 + 256 + 8 + 16 + 40 + names + 1 + size;
    unsigned char small[1024];
    unsigned char *mem = needed <= sizeof(small) ? small
                                                 : PyMem_RawMalloc(needed);
    int res = -1;
    if (mem == NULL) {
        errno = ENOMEM;
        goto done;
    }
    byte_buffer b = {mem, 0, needed};
    uint64_t now = monotonic_ns();

    size_t rec = b.len;
    put_u32(&b, JIT_CODE_UNWINDING_INFO);
    put_u32(&b, 0);                     /* total size, patched below */
    put_u64(&b, now);
    size_t sizes = b.len;
    put_u64(&b, 0);                     /* unwinding_size */
    put_u64(&b, 0);                     /* eh_frame_hdr_size */
    put_u64(&b, 0);                     /* mapped_size */
    size_t tables = b.len;
    size_t hdr_size = write_unwind_info(&b, size);
    uint64_t unwind_size = b.len - tables;
    memcpy(b.buf + sizes, &unwind_size, 8);
    uint64_t hdr_size64 = hdr_size;
    memcpy(b.buf + sizes + 8, &hdr_size64, 8);
    uint64_t mapped = _Py_SIZE_ROUND_UP(unwind_size, 8);
    memcpy(b.buf + sizes + 16, &mapped, 8);
    assert(_Py_SIZE_ROUND_UP(size, 8) + mapped <= JIT_TRAMPOLINE_STRIDE);
    while ((b.len - rec) % 8) {
        put_u8(&b, 0);
    }
    patch_u32(&b, rec + 4, (uint32_t)(b.len - rec));

    rec = b.len;
    put_u32(&b, JIT_CODE_LOAD);
    put_u32(&b, 0);                     /* total size, patched below */
    put_u64(&b, now);
    put_u32(&b, (uint32_t)getpid());
    put_u32(&b, (uint32_t)PyThread_get_thread_native_id());
    put_u64(&b, (uint64_t)(uintptr_t)code);    /* vma */
    put_u64(&b, (uint64_t)(uintptr_t)code);    /* code address */
    put_u64(&b, size);
    put_u64(&b, jitdump_code_index++);
    put_bytes(&b, PyBytes_AS_STRING(symbol), names);
    put_u8(&b, 0);
    put_bytes(&b, code, size);
    patch_u32(&b, rec + 4, (uint32_t)(b.len - rec));

    /* Both records in one write(), so they stay together. */
    res = emit_description((const char *)b.buf, b.len);
    if (mem != small) {
        PyMem_RawFree(mem);
    }
done:
    Py_DECREF(symbol);
    return res;
}

/* Give the load records among the records in buf the PID and TID of the
   calling process and thread.  Return the size of the complete records at
   the start of buf. */
static size_t
claim_records(char *buf, size_t size)
{
    uint32_t pid = (uint32_t)getpid();
    uint32_t tid = (uint32_t)PyThread_get_thread_native_id();
    size_t pos = 0;
    while (pos + 16 <= size) {
        uint32_t id, total;
        memcpy(&id, buf + pos, 4);
        memcpy(&total, buf + pos + 4, 4);
        if (total < 16 || total > size - pos) {
            break;
        }
        if (id == JIT_CODE_LOAD && total >= 24) {
            memcpy(buf + pos + 16, &pid, 4);
            memcpy(buf + pos + 20, &tid, 4);
        }
        pos += total;
    }
    return pos;
}

static int
jitdump_after_fork_child(const char **reason)
{
    /* The child's dump starts with the parent's records, rewritten for the
       child's PID, so that the trampolines it inherited resolve.  The
       held records are rewritten too: the child writes them itself. */
    char parent_path[sizeof(jitdump_path)];
    memcpy(parent_path, jitdump_path, sizeof(parent_path));
    off_t parent_size = file_size;
    if (jitdump_mapping != NULL) {
        /* The parent's dump, not the child's. */
        munmap(jitdump_mapping, jitdump_mapping_size);
        jitdump_mapping = NULL;
    }
    off_t got = 0;
    char *old = read_file_prefix(parent_path, parent_size, &got);
    if (old == NULL && parent_size > 0) {
        *reason = "cannot read the parent's dump";
        return -1;
    }
    int res = -1;
    if (jitdump_open(reason) < 0) {
        goto done;
    }
    (void)claim_records(held, held_len);
    /* Skip the parent's header (40 bytes). */
    size_t records = got > 40 ? claim_records(old + 40, (size_t)got - 40) : 0;
    if (records > 0) {
        if (append_to_file(jitdump_path, old + 40, records) < 0) {
            *reason = strerror(errno);
            goto done;
        }
        file_size += (off_t)records;
    }
    res = 0;
done:
    PyMem_RawFree(old);
    return res;
}

static trampoline_pool perf_jit_pool;

static const trampoline_backend perf_jit_backend = {
    .name = "perf_jit",
    .extra_index = 1,
    .stride = JIT_TRAMPOLINE_STRIDE,
    .unique_tag = 1,
    .pool = &perf_jit_pool,
    .open = jitdump_open,
    .write_entry = jitdump_write_entry,
    .after_fork_child = jitdump_after_fork_child,
    .close = jitdump_close,
    .path = jitdump_get_path,
};


/* Arenas and trampolines ***************************************************/

static void
init_template(void)
{
    if (template_size == 0) {
        template_size = (size_t)(_Py_trampoline_func_end
                                 - _Py_trampoline_func_start);
    }
}

/* Bytes a backend reports as one trampoline's code. */
static size_t
code_size(const trampoline_backend *backend)
{
    if (backend->unique_tag) {
        return _Py_SIZE_ROUND_UP(template_size, 8) + 8;
    }
    return template_size;
}

static size_t
stride(const trampoline_backend *backend)
{
    if (backend->stride) {
        return backend->stride;
    }
    return _Py_SIZE_ROUND_UP(template_size, TRAMPOLINE_ALIGN);
}

static int
new_arena(const trampoline_backend *backend)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = ARENA_SIZE;
    size_t step = stride(backend);
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
    /* The first slot: the template, then instructions that trap up to
       the next slot.  Copy it over the arena, doubling what is copied
       each time; what is left after the last whole slot traps too. */
#if defined(__x86_64__)
    const int trap = 0xcc;      /* int3 */
#else
    const int trap = 0;         /* udf #0 on aarch64 */
#endif
    size_t slots_end = size - size % step;
    memset(mem, trap, step);
    memcpy(mem, _Py_trampoline_func_start, template_size);
    for (size_t done = step; done < slots_end; done *= 2) {
        memcpy(mem + done, mem, Py_MIN(done, slots_end - done));
    }
    memset(mem + slots_end, trap, size - slots_end);
    if (backend->unique_tag) {
        for (size_t off = 0; off + step <= size; off += step) {
            /* Never executed: the trampoline's own address. */
            uint64_t tag = (uint64_t)(uintptr_t)(mem + off);
            memcpy(mem + off + _Py_SIZE_ROUND_UP(template_size, 8),
                   &tag, sizeof(tag));
        }
    }
    __builtin___clear_cache(mem, mem + size);
    if (mprotect(mem, size, PROT_READ | PROT_EXEC) < 0) {
        int err = errno;
        munmap(mem, size);
        errno = err;
        return -1;
    }
    backend->pool->next = mem;
    backend->pool->limit = mem + size;
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

/* Store a trampoline in co's co_extra slot for a backend.  Unlike
   _PyCode_SetExtra(), a new co_extra only gets our slots: code_dealloc()
   calls the free function of every slot it has, with NULL for unset ones,
   and other users' free functions must not start running for code objects
   they never touched. */
static int
set_trampoline(PyCodeObject *co, Py_ssize_t index, void *code)
{
    _PyCodeObjectExtra *extra = (_PyCodeObjectExtra *)co->co_extra;
    assert(index < _PyPerfTrampoline_CODE_EXTRA_SLOTS);
    if (extra == NULL) {
        extra = PyMem_Malloc(sizeof(_PyCodeObjectExtra)
                             + (_PyPerfTrampoline_CODE_EXTRA_SLOTS - 1)
                               * sizeof(void *));
        if (extra == NULL) {
            return -1;
        }
        extra->ce_size = _PyPerfTrampoline_CODE_EXTRA_SLOTS;
        for (Py_ssize_t i = 0; i < extra->ce_size; i++) {
            extra->ce_extras[i] = NULL;
        }
        co->co_extra = extra;
    }
    /* Every co_extra has at least our slots: they are reserved first. */
    assert(extra->ce_size > index);
    extra->ce_extras[index] = code;
    return 0;
}

/* Give "co" a trampoline of the active backend and describe it.  Return
   NULL if that is not possible; the frame then runs without one.  Never
   raises: the caller may be starting a frame with an exception set
   (generator.throw()). */
static py_trampoline
compile_trampoline(PyCodeObject *co)
{
    const trampoline_backend *backend = active_backend;
    trampoline_pool *pool = backend->pool;
    size_t step = stride(backend);
    if (arena_failed || write_failed) {
        return NULL;
    }
    if (pool->next == NULL || (size_t)(pool->limit - pool->next) < step) {
        if (new_arena(backend) < 0) {
            arena_failed = 1;
            PySys_FormatStderr(
                "Warning: cannot allocate memory for perf trampolines "
                "(%s); Python functions started from now on will not "
                "appear in native profiles\n", strerror(errno));
            return NULL;
        }
    }
    char *code = pool->next;

    PyObject *exc, *val, *tb;
    PyErr_Fetch(&exc, &val, &tb);
    int res = set_trampoline(co, backend->extra_index, code);
    if (res == 0) {
        pool->next += step;
        stat_trampolines++;
        if (backend->write_entry(code, code_size(backend), co) < 0) {
            report_write_failure();
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
    py_trampoline f = (py_trampoline)_PyPerfTrampoline_Lookup(co);
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
    /* Reserve the co_extra slots before anything else can request one, so
       they have the same indexes in every interpreter. */
    assert(interp->co_extra_user_count == 0);
    for (int i = 0; i < _PyPerfTrampoline_CODE_EXTRA_SLOTS; i++) {
        interp->co_extra_freefuncs[i] = NULL;
    }
    interp->co_extra_user_count = _PyPerfTrampoline_CODE_EXTRA_SLOTS;
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
    _PyPerfTrampoline_extra_index = backend->extra_index;
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
        if (flush_held() < 0) {
            report_write_failure();
        }
        close_kept_file();
        active_backend->close();
        active_backend = NULL;
    }
}

void
_PyPerfTrampoline_EndStartup(void)
{
    holding = 0;
    if (active_backend != NULL && flush_held() < 0) {
        report_write_failure();
    }
    PyMem_RawFree(held);
    held = NULL;
    held_len = held_cap = 0;
}

void
_PyPerfTrampoline_BeginImport(void)
{
    import_depth++;
}

void
_PyPerfTrampoline_EndImport(void)
{
    assert(import_depth > 0);
    if (--import_depth == 0) {
        close_kept_file();
    }
}

void
_PyPerfTrampoline_AfterFork_Child(void)
{
    /* A kept descriptor is the parent's file. */
    close_kept_file();
    if (active_backend == NULL) {
        return;
    }
    const char *reason = NULL;
    if (active_backend->after_fork_child(&reason) < 0) {
        held_len = 0;
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
                         "trampoline_size", (Py_ssize_t)template_size,
                         "written_bytes", (Py_ssize_t)stat_written_bytes);
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

static const trampoline_backend perf_map_backend = {
    .name = "perf",
};

static const trampoline_backend perf_jit_backend = {
    .name = "perf_jit",
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

/* The backend that -X perf, -X perf_jit, PYTHONPERFSUPPORT and
   PYTHON_PERF_JIT_SUPPORT select, or NULL.  -X options win over the
   environment; among each, perf_jit wins over perf. */
static const trampoline_backend *
backend_from_config(const PyConfig *config)
{
    const wchar_t *x_jit = _Py_get_xoption(&config->xoptions, L"perf_jit");
    const wchar_t *x_perf = _Py_get_xoption(&config->xoptions, L"perf");
    if (x_jit != NULL || x_perf != NULL) {
        if (x_jit != NULL && xoption_enable_value(x_jit)) {
            return &perf_jit_backend;
        }
        if (x_perf != NULL && xoption_enable_value(x_perf)) {
            return &perf_map_backend;
        }
        return NULL;
    }
    if (enable_value(_Py_GetEnv(config->use_environment,
                                "PYTHON_PERF_JIT_SUPPORT"))) {
        return &perf_jit_backend;
    }
    if (enable_value(_Py_GetEnv(config->use_environment,
                                "PYTHONPERFSUPPORT"))) {
        return &perf_map_backend;
    }
    return NULL;
}

void
_PyPerfTrampoline_InitFromConfig(const PyConfig *config)
{
#ifdef PY_HAVE_PERF_TRAMPOLINE
    /* Hold what is described until _PyPerfTrampoline_EndStartup(). */
    holding = 1;
#endif
    const trampoline_backend *backend = backend_from_config(config);
    if (backend == NULL) {
        return;
    }
#ifdef PY_HAVE_PERF_TRAMPOLINE
    const char *reason = NULL;
    if (activate(backend, &reason) < 0) {
        PySys_FormatStderr(
            "Warning: perf trampolines not activated: cannot open %s: %s\n",
            backend->path(), reason);
    }
#endif
}

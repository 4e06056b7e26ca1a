/* The "perf_jit" backend: a jitdump.

   The jitdump format is specified in the Linux sources
   (tools/perf/Documentation/jitdump-specification.txt).  The file,
   /tmp/jit-PID.dump, starts with a header; for each trampoline we append a
   JIT_CODE_UNWINDING_INFO record (an .eh_frame and .eh_frame_hdr from
   Python/perf_unwind.c) followed by the JIT_CODE_LOAD record it applies
   to, with the trampoline's code.  "perf inject --jit" turns each load
   into a small ELF file whose .text starts at file offset
   JITDUMP_TEXT_OFFSET (the size of the ELF header), followed by the
   .eh_frame at the next 8-byte boundary: the pc-relative addresses of the
   unwind information are computed for that layout.  With them, perf can
   unwind through trampolines with --call-graph dwarf in interpreters built
   without frame pointers.

   perf record learns about the dump from an executable mapping of it,
   which this backend keeps while it is active.  The file follows the rules
   of Python/perf_description_file.c. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <fcntl.h>                // O_RDWR
#include <sys/mman.h>             // mmap()
#include <unistd.h>               // getpid()

#define JITDUMP_MAGIC 0x4A695444
#define JITDUMP_VERSION 1
#define JITDUMP_HEADER_SIZE 40
#define JIT_CODE_LOAD 0
#define JIT_CODE_UNWINDING_INFO 4
#define JITDUMP_TEXT_OFFSET 64          /* sizeof(Elf64_Ehdr) */
#if defined(__x86_64__)
#  define JITDUMP_ELF_MACH 62           /* EM_X86_64 */
#elif defined(__aarch64__)
#  define JITDUMP_ELF_MACH 183          /* EM_AARCH64 */
#else
#  define JITDUMP_ELF_MACH 243          /* EM_RISCV */
#endif

static struct {
    void *mapping;              /* the executable mapping perf looks for */
    size_t mapping_size;
    uint64_t code_index;        /* of the next load record */
    long header_pid;            /* the process whose dump it is */
    /* The unwind tables are the same for every trampoline (their
       pointers are relative to perf's layout): built once. */
    unsigned char unwind[_PyPerfUnwind_MAX_SIZE];
    size_t unwind_size;
    size_t unwind_hdr_size;
    size_t unwind_code_size;    /* the code size they were built for */
} jitdump;

static void
unmap_dump(void)
{
    if (jitdump.mapping != NULL) {
        munmap(jitdump.mapping, jitdump.mapping_size);
        jitdump.mapping = NULL;
    }
}

static int
jitdump_close(void)
{
    int closed;
    int res = _PyPerfFile_Close(_PyPerfFile_JITDUMP, &closed);
    if (closed) {
        unmap_dump();
    }
    return res;
}

static int
jitdump_open(const char **reason)
{
    if (_PyPerfFile_Use(_PyPerfFile_JITDUMP)) {
        return 0;
    }
    /* A forked child maps a dump of its own instead of its parent's. */
    unmap_dump();
    char path[64];
    int fd;
    PyOS_snprintf(path, sizeof(path), "/tmp/jit-%ld.dump", (long)getpid());
    if (_PyPerfFile_Open(_PyPerfFile_JITDUMP, path, O_RDWR, &fd,
                         reason) < 0) {
        return -1;
    }
    /* A dump that no one in this process image wrote or has open was
       emptied (it describes code that no longer exists): it starts
       afresh.  Otherwise this process appends, as to the map: to the dump
       of its own earlier activation, or one that a JIT compiler of the
       program writes. */
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0) {
        unsigned char header_buf[JITDUMP_HEADER_SIZE];
        _PyPerfBuf h = {header_buf, 0, sizeof(header_buf)};
        _PyPerfBuf_PutU32(&h, JITDUMP_MAGIC);
        _PyPerfBuf_PutU32(&h, JITDUMP_VERSION);
        _PyPerfBuf_PutU32(&h, (uint32_t)sizeof(header_buf));
        _PyPerfBuf_PutU32(&h, JITDUMP_ELF_MACH);
        _PyPerfBuf_PutU32(&h, 0);               /* padding */
        _PyPerfBuf_PutU32(&h, (uint32_t)getpid());
        _PyPerfBuf_PutU64(&h, (uint64_t)_PyPerfFile_Now());
        _PyPerfBuf_PutU64(&h, 0);               /* flags */
        if (_PyPerfFile_Restart(_PyPerfFile_JITDUMP, fd, header_buf,
                                h.len) < 0) {
            int err = errno;
            *reason = strerror(err);
            close(fd);
            _PyPerfFile_Cancel(_PyPerfFile_JITDUMP);
            errno = err;
            return -1;
        }
    }
    jitdump.header_pid = (long)getpid();
    long page = sysconf(_SC_PAGESIZE);
    jitdump.mapping_size = page > 0 ? (size_t)page : 4096;
    jitdump.mapping = mmap(NULL, jitdump.mapping_size, PROT_READ | PROT_EXEC,
                           MAP_PRIVATE, fd, 0);
    if (jitdump.mapping == MAP_FAILED) {
        jitdump.mapping = NULL;
        int err = errno;
        *reason = (err == EPERM || err == EACCES)
                  ? "cannot map it executable (is /tmp mounted noexec?)"
                  : strerror(err);
        close(fd);
        _PyPerfFile_Cancel(_PyPerfFile_JITDUMP);
        errno = err;
        return -1;
    }
    /* The mapping stays; the descriptor of the lock (see
       Python/perf_description_file.c) is the only one kept open. */
    close(fd);
    _PyPerfFile_Switch(_PyPerfFile_JITDUMP);
    return 0;
}

/* The calling thread's id, for load records, asked of the kernel once
   per thread and process (the dump is this process's: its header has
   the process id). */
static uint32_t
this_thread_id(void)
{
    static __thread long pid = 0;
    static __thread uint32_t tid;
    if (pid != jitdump.header_pid) {
        tid = (uint32_t)PyThread_get_thread_native_id();
        pid = jitdump.header_pid;
    }
    return tid;
}

/* perf inject --jit makes a small ELF file of each load record and maps
   it over the code's address range followed by the record's mapped_size
   bytes of unwind tables (at the next 8-byte boundary): that whole range
   is the trampoline's, so the next trampoline may start only after it. */
static size_t
jitdump_span(size_t code_size)
{
    if (jitdump.unwind_code_size != code_size) {
        /* Where perf's ELF file puts the code and the tables (see
           above). */
        _PyPerfBuf u = {jitdump.unwind, 0, sizeof(jitdump.unwind)};
        jitdump.unwind_hdr_size = _PyPerfUnwind_Write(
            &u, code_size, JITDUMP_TEXT_OFFSET,
            _Py_SIZE_ROUND_UP(JITDUMP_TEXT_OFFSET + code_size, 8));
        jitdump.unwind_size = u.len;
        jitdump.unwind_code_size = code_size;
    }
    return _Py_SIZE_ROUND_UP(code_size, 8)
           + _Py_SIZE_ROUND_UP(jitdump.unwind_size, 8);
}

static int
jitdump_write_entry(const void *code, size_t size, const char *name,
                    size_t names, int64_t now)
{
    /* Both records: unwinding info (header, 3 sizes, the tables, padding)
       then code load (header, fixed fields, name, code). */
    size_t needed = 16 + 24 + _PyPerfUnwind_MAX_SIZE + 8 + 16 + 40
                    + names + 1 + size;
    unsigned char small[1024];
    unsigned char *mem = needed <= sizeof(small) ? small
                                                 : PyMem_RawMalloc(needed);
    if (mem == NULL) {
        errno = ENOMEM;
        return -1;
    }
    _PyPerfBuf b = {mem, 0, needed};

    size_t rec = b.len;
    _PyPerfBuf_PutU32(&b, JIT_CODE_UNWINDING_INFO);
    _PyPerfBuf_PutU32(&b, 0);               /* total size, patched below */
    _PyPerfBuf_PutU64(&b, (uint64_t)now);
    /* The trampolines are jitdump_span() apart, which leaves room for
       mapped_size. */
    size_t mapped = jitdump_span(size) - _Py_SIZE_ROUND_UP(size, 8);
    _PyPerfBuf_PutU64(&b, jitdump.unwind_size);         /* unwinding_size */
    _PyPerfBuf_PutU64(&b, jitdump.unwind_hdr_size);     /* eh_frame_hdr_size */
    _PyPerfBuf_PutU64(&b, mapped);                      /* mapped_size */
    _PyPerfBuf_PutBytes(&b, jitdump.unwind, jitdump.unwind_size);
    while ((b.len - rec) % 8) {
        _PyPerfBuf_PutU8(&b, 0);
    }
    _PyPerfBuf_PatchU32(&b, rec + 4, (uint32_t)(b.len - rec));

    rec = b.len;
    _PyPerfBuf_PutU32(&b, JIT_CODE_LOAD);
    _PyPerfBuf_PutU32(&b, 0);               /* total size, patched below */
    _PyPerfBuf_PutU64(&b, (uint64_t)now);
    _PyPerfBuf_PutU32(&b, (uint32_t)jitdump.header_pid);
    _PyPerfBuf_PutU32(&b, this_thread_id());
    _PyPerfBuf_PutU64(&b, (uint64_t)(uintptr_t)code);   /* vma */
    _PyPerfBuf_PutU64(&b, (uint64_t)(uintptr_t)code);   /* code address */
    _PyPerfBuf_PutU64(&b, size);
    _PyPerfBuf_PutU64(&b, jitdump.code_index++);
    _PyPerfBuf_PutBytes(&b, name, names);
    _PyPerfBuf_PutU8(&b, 0);
    _PyPerfBuf_PutBytes(&b, code, size);
    _PyPerfBuf_PatchU32(&b, rec + 4, (uint32_t)(b.len - rec));

    /* Both records in one write(), so they stay together. */
    int res = _PyPerfFile_WriteLater(_PyPerfFile_JITDUMP, b.buf, b.len,
                                     now);
    if (mem != small) {
        PyMem_RawFree(mem);
    }
    return res;
}

const _PyPerfBackend _PyPerfJit_Backend = {
    .kind = _PyPerfFile_JITDUMP,
    .span = jitdump_span,
    .unique_tag = 1,
    .open = jitdump_open,
    .write_entry = jitdump_write_entry,
    .close = jitdump_close,
};

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

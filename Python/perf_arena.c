/* Memory for trampolines and for the images that debuggers read.

   Regions: blocks carved one after the other out of large reservations of
   address space (see _PyPerfRegion in pycore_perf_backend.h), for the
   arenas below and for Python/perf_debugger.c.

   Arenas: each backend hands out its trampolines from arenas of its own,
   filled with copies of the template while writable and then made
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
   conventions, treats as anonymous memory named by the perf map.  Where
   the dynamic loader was told at activation, an arena is instead part of
   the text of an object it knows, so that unwinders in the process walk
   through trampolines (Python/perf_loader.c); its memory is the same
   kind. */

#include "Python.h"
#include "pycore_perf_core.h"
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <sys/mman.h>             // mmap()
#include <unistd.h>               // sysconf()

/* Each arena at least TRAMPOLINE_ALIGN-aligned, so that no address of one
   trampoline lies within the range reported for another. */
#define TRAMPOLINE_ALIGN 16
/* Each arena of a backend twice the size of the one before, up to the
   most: a process that makes few trampolines has little memory for them,
   and one that makes many has few arenas to map. */
#define ARENA_MIN_SIZE (64 * 1024)
#define ARENA_MAX_SIZE (1024 * 1024)

void
_PyPerfArena_InitTemplate(void)
{
    if (_PyPerfCore.template_size == 0) {
        _PyPerfCore.template_size = (size_t)(_Py_trampoline_func_end
                                             - _Py_trampoline_func_start);
    }
}

void
_PyPerfArena_Prepare(const _PyPerfBackend *backend)
{
    _PyPerfArena_InitTemplate();
    _PyPerfLoader_Open(_PyPerfArena_Stride(backend),
                       _PyPerfCore.template_size);
}

/* Bytes a backend reports as one trampoline's code. */
size_t
_PyPerfArena_CodeSize(const _PyPerfBackend *backend)
{
    if (backend->unique_tag) {
        return _Py_SIZE_ROUND_UP(_PyPerfCore.template_size, 8) + 8;
    }
    return _PyPerfCore.template_size;
}

size_t
_PyPerfArena_Stride(const _PyPerfBackend *backend)
{
    size_t size = _PyPerfArena_CodeSize(backend);
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

int
_PyPerfArena_New(const _PyPerfBackend *backend, _PyPerfPool *pool)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t size = pool->arena_size ? pool->arena_size : ARENA_MIN_SIZE;
    size_t step = _PyPerfArena_Stride(backend);
    if (page > 0) {
        /* Whole pages of whole slots (Python/perf_loader.c). */
        size_t unit = (size_t)page;
        while (unit % step != 0) {
            unit += (size_t)page;
        }
        size = (size + unit - 1) / unit * unit;
    }
    if (_PyPerfCore.fail_arenas_for_testing) {
        errno = ENOMEM;
        return -1;
    }
    /* Where in-process unwinders find the slots' unwind data, if the
       dynamic loader was told. */
    char *mem = _PyPerfLoader_NewText(size, step);
    if (mem != NULL) {
        _PyPerfCore.unwindable_bytes += size;
    }
    else {
        mem = _PyPerfRegion_Alloc(&_PyPerfCore.arenas, size,
                                  PROT_READ | PROT_WRITE);
    }
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
    memcpy(mem, _Py_trampoline_func_start, _PyPerfCore.template_size);
    for (size_t done = step; done < slots_end; done *= 2) {
        memcpy(mem + done, mem, Py_MIN(done, slots_end - done));
    }
    memset(mem + slots_end, trap, size - slots_end);
    if (backend->unique_tag) {
        for (size_t off = 0; off + step <= size; off += step) {
            /* Never executed: the trampoline's own address. */
            uint64_t tag = (uint64_t)(uintptr_t)(mem + off);
            memcpy(mem + off + _Py_SIZE_ROUND_UP(_PyPerfCore.template_size, 8),
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
    pool->arena_size = Py_MIN(size * 2, (size_t)ARENA_MAX_SIZE);
    _PyPerfCore.arena_bytes += size;
    return 0;
}


void
_PyPerfTrampoline_SetArenaFailureForTesting(int fail)
{
    _PyPerfCore.fail_arenas_for_testing = fail;
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

void
_PyPerfTrampoline_SetArenaFailureForTesting(int Py_UNUSED(fail))
{
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

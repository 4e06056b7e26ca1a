#ifndef Py_INTERNAL_PERF_BACKEND_H
#define Py_INTERNAL_PERF_BACKEND_H
#ifdef __cplusplus
extern "C" {
#endif

#ifndef Py_BUILD_CORE
#  error "this header requires Py_BUILD_CORE define"
#endif

/* What the files of the perf trampoline feature share with each other.
   The rest of the interpreter uses pycore_perf_trampoline.h.

     Python/perf_trampoline.c         the core: frames through trampolines
                                      (pycore_perf_core.h lists its files)
     Python/perf_map.c                the "perf" backend: /tmp/perf-PID.map
     Python/perf_jit_trampoline.c     the "perf_jit" backend: a jitdump
     Python/perf_description_file.c   the rules both backends' files follow
     Python/perf_file_io.c            the system calls those rules make
     Python/perf_unwind.c             DWARF unwind information (.eh_frame)
                                      for the template
     Python/perf_debugger.c           what debuggers (the GDB JIT
                                      interface) and libgcc's unwinder
                                      are told about trampolines
     Python/asm_trampoline.S          the template itself

   State lives in file-scope storage of each file, grouped in one struct
   per concern, and not in _PyRuntimeState or PyInterpreterState: the
   layout of those structures is read by debuggers and out-of-process
   profilers that were built against stock 3.11, so it must not change.
   It is protected by the GIL, except for the description files, which
   the C API of Python/perf_map.c writes from any thread: those have a
   lock of their own. */

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <sys/types.h>            // off_t

/* The template (Python/asm_trampoline.S) and the points inside it where
   its frame changes, for unwind information. */
extern const char _Py_trampoline_func_start[];
extern const char _Py_trampoline_func_pushed[];
extern const char _Py_trampoline_func_framed[];
extern const char _Py_trampoline_func_popped[];
extern const char _Py_trampoline_func_end[];
#if defined(__riscv)
/* Where the frame is reserved, before the frame record is stored. */
extern const char _Py_trampoline_func_reserved[];
#endif


/* Backends ****************************************************************/

/* How a backend describes trampolines to profilers.  Each backend has a
   co_extra slot of its own (its index in the core's table), so that a
   trampoline is always described by the backend it was made for. */
typedef struct {
    /* The bytes from a trampoline's start that its profiler takes as the
       trampoline's own, given the size of its code: perf_jit's are
       followed by their unwind information.  Trampolines are that far
       apart (rounded up to the arenas' alignment) so that no two ranges
       overlap.  NULL means the code alone. */
    size_t (*span)(size_t code_size);
    /* Add a unique 8-byte tag after each copy of the template (reported
       as part of its code), so that no two trampolines have the same
       bytes. */
    int unique_tag;
    /* The kind of description file it writes (_PyPerfFile_MAP, ...),
       also its index among the backends. */
    int kind;
    /* Open the file of its kind for this process, or use it if it is
       open already (_PyPerfFile_Switch(), _PyPerfFile_Use()).  Return 0
       on success; on failure return -1 with errno set and *reason set to
       a static description. */
    int (*open)(const char **reason);
    /* Describe one trampoline, called name (len bytes, not
       NUL-terminated), made at "now" (_PyPerfFile_Now()), with
       _PyPerfFile_WriteLater().  Return 0 on success; on failure return
       -1 with errno set. */
    int (*write_entry)(const void *code, size_t size, const char *name,
                       size_t len, int64_t now);
    /* Stop using the file (_PyPerfFile_Close()).  Return 0, or -1 with
       errno set if what was held could not be written. */
    int (*close)(void);
} _PyPerfBackend;

extern const _PyPerfBackend _PyPerfMap_Backend;
extern const _PyPerfBackend _PyPerfJit_Backend;

/* The name of co's trampoline (Python/perf_symbols.c),
   "py::QUALNAME:FILENAME" in UTF-8 with control characters replaced,
   written to buf if it has room for it (size bytes), not NUL-terminated;
   *qualname_end is set to the index of the ':' after QUALNAME.  Return
   its length: if that is more than size, call again with a buffer that
   large.  Never raises. */
extern size_t _PyPerfTrampoline_FormatSymbol(PyCodeObject *co, char *buf,
                                             size_t size,
                                             size_t *qualname_end);


/* Memory for trampolines and debugger images (Python/perf_arena.c).
   Blocks are carved one after the other out of large reservations, so
   that the kernel merges the mappings of neighbours with the same
   protection: the number of mappings grows with the megabytes used, not
   with the blocks (a process may have only vm.max_map_count of them). */
typedef struct {
    char *next;                 /* the next block; NULL: none reserved */
    char *end;                  /* the end of the reservation */
    /* Shared with forked children (MAP_SHARED): for blocks that are never
       written once made, so that a fork does not copy their page tables.
       A child must then reserve its own (reset next and end). */
    int shared;
} _PyPerfRegion;

/* size bytes (a multiple of the page size) with protection prot, zeroed,
   after the previous block of region; NULL with errno set if they cannot
   be had.  Blocks are never freed. */
extern void *_PyPerfRegion_Alloc(_PyPerfRegion *region, size_t size,
                                 int prot);


/* In a forked child, before anything else opens a file: if the C API
   wrote to the parent's map, the child's starts with a copy of it
   (Python/perf_map.c); return 1 if it does.  InUse: whether the C API
   opened the map in this process or an ancestor. */
extern int _PyPerfMap_AfterFork(void);
extern int _PyPerfMap_InUse(void);


/* Debuggers (Python/perf_debugger.c) **************************************/

struct _PyPerfDebugImage;

/* Describe the trampoline at code (size bytes of code), called name (len
   bytes, as _PyPerfTrampoline_FormatSymbol() made it, with qualname_end),
   to debuggers.  It is the next slot handed out from an arena whose slots
   are stride bytes apart up to arena_end; *current is the image the
   previous slot of that arena went to, NULL for a new arena, and is
   updated.  An attached debugger learns the name at once within its
   budget, else with a later notification; if batch is set, with
   _PyPerfDebugger_Flush(*current).  "now" is when it is described
   (_PyPerfFile_Now()).  Never fails: without memory for an image,
   debuggers fall back to what they do without one. */
extern void _PyPerfDebugger_Describe(struct _PyPerfDebugImage **current,
                                     const char *code, size_t size,
                                     size_t stride, const char *arena_end,
                                     const char *name, size_t len,
                                     size_t qualname_end, int batch,
                                     int64_t now);
extern void _PyPerfDebugger_Flush(struct _PyPerfDebugImage *image);
/* In a forked child, before anything is described (the images that were
   growing at the fork get no more symbols in this process). */
extern void _PyPerfDebugger_AfterFork(void);


/* Description files (Python/perf_description_file.c) ***********************/

/* The kinds of description file: one per backend. */
#define _PyPerfFile_MAP 0
#define _PyPerfFile_JITDUMP 1
#define _PyPerfFile_KINDS 2

/* Opening a file of a kind takes three steps: open it at path as the
   kind's pending file (for writing with access_mode); if the backend
   starts it afresh, Restart it with its header (written again if the
   file is ever found empty); then Switch to it: it becomes the open file
   of its kind, used once.  Open returns 0 and sets *fd on success; on
   failure -1 with errno set and *reason set to a static description (the
   path is kept for messages: _PyPerfFile_PendingPath()), EBUSY if
   another live process writes the file.  A backend that fails after Open
   calls Cancel. */
extern int _PyPerfFile_Open(int kind, const char *path, int access_mode,
                            int *fd, const char **reason);
extern int _PyPerfFile_Restart(int kind, int fd, const void *header,
                               size_t size);
extern void _PyPerfFile_Switch(int kind);
extern void _PyPerfFile_Cancel(int kind);
/* The three steps at once for a file without a header, or one more use
   of the file if it is open; as a backend's open(). */
extern int _PyPerfFile_OpenSimple(int kind, const char *path,
                                  const char **reason);
/* One more use of the open file of a kind: return 1, or 0 if it is not
   open in this process. */
extern int _PyPerfFile_Use(int kind);
/* One use less; the last writes what is held and sets *closed.  Return
   -1 with errno set if that could not be written. */
extern int _PyPerfFile_Close(int kind, int *closed);
extern const char *_PyPerfFile_Path(int kind);
/* The bytes of it that this process knows of (see _PyPerfMap_AfterFork()). */
extern off_t _PyPerfFile_Size(int kind);
/* Is the file of that kind the file st describes (same device and
   inode)? */
struct stat;
extern int _PyPerfFile_IsFile(int kind, const struct stat *st);
extern const char *_PyPerfFile_PendingPath(int kind);

/* Append whole records to the open file of a kind, or hold them while the
   interpreter starts up or this thread imports.  Return 0 on success; -1
   with errno set (EBADF if the file is not open in this process). */
extern int _PyPerfFile_Write(int kind, const void *buf, size_t size);
/* The same, but held in any case, to be written together with others
   within a bounded time (see Python/perf_description_file.c): for the
   descriptions of trampolines, made at "now" (_PyPerfFile_Now()). */
extern int _PyPerfFile_WriteLater(int kind, const void *buf, size_t size,
                                  int64_t now);
/* Hold what is written during start-up (until EndHold) and while this
   thread imports (until its outermost import ends).  WriteHeld writes
   what is held for a kind unless something still holds it; on failure
   none of it is in the file, and it returns -1 with errno set. */
extern void _PyPerfFile_Hold(void);
extern void _PyPerfFile_EndHold(void);
extern void _PyPerfFile_BeginImport(void);
extern void _PyPerfFile_EndImport(void);
extern int _PyPerfFile_Holding(void);
extern int _PyPerfFile_WriteHeld(int kind);
/* Write what is held for a kind, whatever holds it, if "all" is set or
   the first of it is overdue; set *wrote if it did so.  On failure
   return -1 with errno set. */
extern int _PyPerfFile_WriteHeldNow(int kind, int all, int *wrote);
/* How many records of a kind could not be written (lost) since the last
   call: the count a warning gives. */
extern Py_ssize_t _PyPerfFile_TakeLost(int kind);
/* When the first of what is held is due, and the clock it is on:
   CLOCK_MONOTONIC in nanoseconds, which perf orders jitdump records by
   (perf record -k 1).  A description is timed once, for the file, the
   jitdump record and the debugger's budget. */
extern int64_t _PyPerfFile_deadline;
extern int64_t _PyPerfFile_Now(void);
/* In a forked child: none of the imports in progress is the child's, no
   file is open (each user opens its own) and nothing is held (the parent
   writes what it held; the child describes what it runs itself).  But a
   child whose file starts as a copy of the parent's (see
   Python/perf_map.c) appends what the parent held at the fork with
   WriteInherited, once its own file is open; every other kind's is
   dropped then too. */
extern void _PyPerfFile_AfterFork(void);
/* In a forked child's at-fork handler: only async-signal-safe calls. */
extern void _PyPerfFile_DropLocksAtFork(void);
extern int _PyPerfFile_WriteInherited(int kind);
extern size_t _PyPerfFile_WrittenBytes(void);
extern size_t _PyPerfFile_Writes(void);


/* System calls on description files (Python/perf_file_io.c).
   OpenChecked: open path in /tmp safely (a regular file of our own user,
   never through a symbolic link, created 0600), with its stat in *st_out
   if that is not NULL; -1 with errno and *reason set if that cannot be.
   WriteAll: append buf to fd whole, or cut off what was written of it
   (-1 with errno set).  OpenElsewhere: whether a descriptor of this
   process other than fd refers to the file st describes.  KeepLiveLines:
   empty the stale map at fd but for its lines that name code mapped in
   this process. */
extern int _PyPerfFileIO_OpenChecked(const char *path, int access_mode,
                                     int *fd_out, struct stat *st_out,
                                     const char **reason);
extern int _PyPerfFileIO_WriteAll(int fd, const void *buf, size_t size);
extern int _PyPerfFileIO_OpenElsewhere(int fd, const struct stat *st);
extern void _PyPerfFileIO_KeepLiveLines(int fd, const char *path,
                                        const struct stat *st);
/* The lock a live writer holds on its file: TakeLock takes it through a
   mapping of the file (fd must be open read-write), -1 with errno EBUSY
   if another process holds it; DropLock lets it go; ForgetLock, in a
   forked child, forgets the parent's. */
typedef struct {
    void *addr;                 /* the mapping; NULL: none */
    size_t size;
    long pid;                   /* the process that mapped it */
} _PyPerfFileLock;
extern int _PyPerfFileIO_TakeLock(_PyPerfFileLock *lock, int fd);
extern void _PyPerfFileIO_DropLock(_PyPerfFileLock *lock);
extern void _PyPerfFileIO_ForgetLock(_PyPerfFileLock *lock);


/* Binary records (jitdump, DWARF) ******************************************/

/* A buffer of known capacity that records are built in; the caller sizes
   it for the largest record it builds. */
typedef struct {
    unsigned char *buf;
    size_t len;
    size_t cap;
} _PyPerfBuf;

static inline void
_PyPerfBuf_PutBytes(_PyPerfBuf *b, const void *data, size_t size)
{
    assert(b->len + size <= b->cap);
    memcpy(b->buf + b->len, data, size);
    b->len += size;
}

static inline void
_PyPerfBuf_PutU8(_PyPerfBuf *b, uint8_t v)
{
    _PyPerfBuf_PutBytes(b, &v, 1);
}

static inline void
_PyPerfBuf_PutU32(_PyPerfBuf *b, uint32_t v)
{
    _PyPerfBuf_PutBytes(b, &v, 4);
}

static inline void
_PyPerfBuf_PutU64(_PyPerfBuf *b, uint64_t v)
{
    _PyPerfBuf_PutBytes(b, &v, 8);
}

static inline void
_PyPerfBuf_PutULEB128(_PyPerfBuf *b, uint32_t v)
{
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        _PyPerfBuf_PutU8(b, byte | (v ? 0x80 : 0));
    } while (v);
}

static inline void
_PyPerfBuf_PutSLEB128(_PyPerfBuf *b, int32_t v)
{
    for (;;) {
        uint8_t byte = v & 0x7f;
        v >>= 7;   /* arithmetic shift */
        if ((v == 0 && !(byte & 0x40)) || (v == -1 && (byte & 0x40))) {
            _PyPerfBuf_PutU8(b, byte);
            return;
        }
        _PyPerfBuf_PutU8(b, byte | 0x80);
    }
}

/* Overwrite 4 bytes at pos, for sizes known only at the end. */
static inline void
_PyPerfBuf_PatchU32(_PyPerfBuf *b, size_t pos, uint32_t v)
{
    assert(pos + 4 <= b->len);
    memcpy(b->buf + pos, &v, 4);
}

/* DWARF unwind information for copies of the template of code_size bytes
   (Python/perf_unwind.c).  Pointers are pc-relative (4 bytes) or, if
   "absolute", 8-byte addresses, which reach from anywhere: buf_addr is
   where the consumer will place b->buf[0], for pc-relative ones.

   WriteCIE appends a CIE and returns its offset in b.  WriteFDE appends
   an FDE for the copy at text_addr that refers to the CIE at offset cie
   (written with the same "absolute"), and returns the FDE's offset. */
extern size_t _PyPerfUnwind_WriteCIE(_PyPerfBuf *b, int absolute);
extern size_t _PyPerfUnwind_WriteFDE(_PyPerfBuf *b, size_t cie, int absolute,
                                     size_t code_size, int64_t text_addr,
                                     int64_t buf_addr);
#define _PyPerfUnwind_CIE_MAX_SIZE 32
#define _PyPerfUnwind_FDE_MAX_SIZE 64

/* Text that in-process unwinders know (Python/perf_loader.c).
   NoteStart: at the start of the runtime (a forked child is not one).
   Open: tell the dynamic loader of an object for slots stride bytes
   apart, each starting with code_size bytes of the template, unless that
   was tried already or this is a forked child; never while the GIL is
   held and another thread may run Python code.  NewText: size bytes
   (whole pages of whole slots) of its text, shared anonymous memory,
   readable and writable, or NULL if there is no such object or no room
   in it.  NewText never enters the loader. */
extern void _PyPerfLoader_NoteStart(void);
extern void _PyPerfLoader_Open(size_t stride, size_t code_size);
extern char *_PyPerfLoader_NewText(size_t size, size_t stride);

/* Append .eh_frame (a CIE, one FDE, the terminator) and .eh_frame_hdr
   with pc-relative pointers, for the jitdump.  text_addr and
   eh_frame_addr are where the consumer will place the code and the first
   byte appended.  Return the size of .eh_frame_hdr; the caller provides
   _PyPerfUnwind_MAX_SIZE bytes. */
extern size_t _PyPerfUnwind_Write(_PyPerfBuf *b, size_t code_size,
                                  int64_t text_addr, int64_t eh_frame_addr);
#define _PyPerfUnwind_MAX_SIZE 256

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

#ifdef __cplusplus
}
#endif
#endif /* !Py_INTERNAL_PERF_BACKEND_H */

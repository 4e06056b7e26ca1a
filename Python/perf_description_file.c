/* Description files: the rules that the files of every perf trampoline
   backend follow (/tmp/perf-PID.map, /tmp/jit-PID.dump).

   - A file in /tmp is opened safely: never through a symbolic link, never
     a FIFO or anything but a regular file of our own user, created 0600.
   - Records are appended whole, with O_APPEND and one write() each, and a
     write that fails half-way is cut off again: a profiler reading the
     file, or another writer, never sees a partial record.
   - No descriptor is written through that the program could see (or
     close, and reuse for a file of its own): each write opens the file,
     and none is kept open (the lock of a live writer is held through a
     mapping, see _PyPerfFileIO_TakeLock() in Python/perf_file_io.c).
     Each record is written as soon as it is
     made, so that a profiler reading the file while the process runs finds
     it, except during start-up and imports (below).
   - A forked child gets a file of its own, which starts empty: it
     describes the trampolines it inherited as it runs them (see
     Python/perf_trampoline.c), so a fork costs the same however much
     the parent described.
   - Any thread may write, with or without the GIL (the C API of
     Python/perf_map.c): the state below is guarded by a mutex.
   - A file found with records in it is stale, and emptied, unless this
     process image wrote it or still has it open, or another live process
     writes it (see open_pending()).

   There is a file of each kind (the perf map, the jitdump), open while
   someone uses it: a backend that an interpreter uses, or the C API for
   the map.  Which file that is, and how many bytes of it this process
   knows about, is kept here; the backends only say what goes into it. */

#include "Python.h"
#include "pycore_perf_backend.h"
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <fcntl.h>                // open()
#include <pthread.h>              // pthread_mutex_t
#include <sys/stat.h>             // fstat()
#include <time.h>                 // clock_gettime()
#include <unistd.h>               // write()

/* The descriptions of trampolines made in a burst (from the BURST_MIN-th
   that came within BURST_NS of the one before) are held in memory and
   written together: opening the file, checking it and writing it for
   each one made a program that keeps making new functions 3.4 times as slow as
   without the support, and a forked worker that names 20,000 functions
   it inherited took 300 ms to do so.  (A descriptor kept open between
   writes would be seen by the program, which could also close it and
   open a file of its own under its number.)  The others are written at
   once, with what is held: holding costs the eval breaker below, which a
   program that makes a few new functions now and then should not pay.
   What is held is written:

   - once the first of it is HELD_FOR_NS old: checked at the next
     description, and at the eval breaker, which is set while anything is
     held (see Python/ceval.c), so that a thread that runs Python code
     writes it in time even if it makes no new function;
   - before the thread releases the GIL to sleep, wait or do I/O
     (PyEval_SaveThread()), which the eval breaker would not see;
   - when start-up or the outermost import of the thread is done, when the
     file is closed, and when HELD_MAX bytes are held.

   So a name reaches the file at most about HELD_FOR_NS after its function
   first ran, unless the thread stays that long in C code that keeps the
   GIL.  The entries of the C API (Python/perf_map.c) are written at once,
   except during start-up and imports (see holding()).

   A thread that starts up or imports does not keep the eval breaker set:
   it holds all it describes, and the eval breaker's path at every
   function entry and backward jump made importing much of the standard
   library 0.6% slower (in instructions).  Its descriptions are written
   when HELD_COUNT of them are held instead, besides the times above
   (the next description that finds them overdue, the GIL released, the
   import done).  So a module-level loop that runs for long without any
   of these keeps up to HELD_COUNT - 1 names back until it does: nothing
   else could interrupt it but a thread of ours (which made system calls
   that need a process of one thread fail, such as
   unshare(CLONE_NEWUSER)), a signal (the program's), or the eval breaker
   kept set. */
#define HELD_MAX (256 * 1024)
#define HELD_COUNT 64
#define HELD_FOR_NS (10 * 1000 * 1000)
#define BURST_NS (1000 * 1000)
#define BURST_MIN 8

typedef struct {
    char path[64];
    /* Its bytes as this process knows them (what was there when it was
       opened, plus what it wrote): a forked child copies the map up to
       there if the C API wrote to it (Python/perf_map.c). */
    off_t size;
    /* The header the file starts with, if the backend has one: written
       again if the file is found empty (someone removed it). */
    unsigned char header[64];
    size_t header_size;
    /* The process that opened it; 0 if none. */
    long pid;
    /* The lock a live writer holds on it (see _PyPerfFileIO_TakeLock()). */
    _PyPerfFileLock lock;
    /* Which file it was, to know it again (see open_pending()). */
    dev_t dev;
    ino_t ino;
    int users;                  /* while positive, it is open */
    /* Held records (see HELD_MAX), the first made at held_since (see
       now_ns()). */
    char *held;
    size_t held_len;
    size_t held_cap;
    int held_count;             /* records */
    int64_t held_since;
    /* Records that could not be written since this was last asked (see
       _PyPerfFile_TakeLost()). */
    Py_ssize_t lost;
} description_file;

static struct {
    description_file file[_PyPerfFile_KINDS];
    description_file pending[_PyPerfFile_KINDS];    /* being opened */
    /* When the last description of a trampoline was made, and how many
       came in a burst up to it. */
    int64_t last_description;
    int in_burst;
    /* In a forked child, until _PyPerfFile_WriteInherited(): what the
       parent held at the fork, not yet in its file. */
    char *inherited[_PyPerfFile_KINDS];
    size_t inherited_len[_PyPerfFile_KINDS];
    size_t written_bytes;       /* statistics */
    size_t writes;
    int holding;                /* during start-up */
} files;

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

#define LOCK() pthread_mutex_lock(&files_lock)
#define UNLOCK() pthread_mutex_unlock(&files_lock)

/* A thread of the parent that the child does not have may hold the lock
   at a fork.  The fork itself makes it new in the child, before anything
   runs there: PyOS_AfterFork_Child() runs finalizers (the thread-local
   data of the threads the child does not have) before it gets to
   _PyPerfFile_AfterFork(), and a raw fork() never calls it. */
static pthread_once_t watching_forks = PTHREAD_ONCE_INIT;

/* Whether the lock was free at the fork: if not, what a thread the child
   does not have was changing may be half-changed. */
static int free_at_fork = 1;

static void
reinit_lock(void)
{
    free_at_fork = pthread_mutex_trylock(&files_lock) == 0;
    pthread_mutex_init(&files_lock, NULL);
}

static void
watch_forks(void)
{
    (void)pthread_atfork(NULL, NULL, reinit_lock);
}

/* The number of kinds with records held, and when the first of them is
   HELD_FOR_NS old (see now_ns()): read without the lock, by
   PyEval_SaveThread() and the eval breaker. */
int _PyPerfFile_held = 0;
int _PyPerfFile_ever_held = 0;
int64_t _PyPerfFile_deadline = 0;
/* Checks of the eval breaker made while anything was held: they pace
   its clock readings, and are a statistic. */
size_t _PyPerfFile_breaker_checks = 0;

/* While the program imports modules, functions run for the first time
   one after the other (module and class bodies, decorators, what they
   call), and each needs a description.  Those are held too, and
   written when the outermost import in progress is done: one write()
   for the lot, where open(), fstat(), geteuid(), write() and close()
   for each one made importing much of the standard library 1.15x
   slower.  (Keeping the file open during imports instead, as an
   earlier version did, saved most of that, but another thread could
   close the descriptor and open a file of its own under its number
   between the check and the write.)  A process forked during an
   import writes at once: the imports it inherited end in its parent.
   This is the number of imports in progress in this thread. */
static __thread int import_depth = 0;


/* Write f's header to fd if the file is empty: it was removed since it
   was started, and a new one was just created. */
static int
restore_header(description_file *f, int fd, const struct stat *st)
{
    if (st->st_size != 0 || f->header_size == 0) {
        return 0;
    }
    if (_PyPerfFileIO_WriteAll(fd, f->header, f->header_size) < 0) {
        return -1;
    }
    f->size = (off_t)f->header_size;
    return 0;
}

/* Append buf to f, opened for this write only.  Held records reach
   here without a check of the process: this is where a forked child
   that was not told of the fork is kept out of its parent's file. */
static int
write_now(description_file *f, const void *buf, size_t size)
{
    if (f->pid != (long)getpid()) {
        errno = EBADF;
        return -1;
    }
    int fd;
    struct stat st;
    const char *reason;
    if (_PyPerfFileIO_OpenChecked(f->path, O_RDWR | O_APPEND, &fd, &st,
                                  &reason) < 0)
    {
        return -1;
    }
    if (st.st_dev != f->dev || st.st_ino != f->ino) {
        /* Removed (by a cleanup job, say) and created again by this
           open(): this process's file from now on, what is in it too,
           unless another live process writes it (see
           _PyPerfFileIO_TakeLock()). */
        _PyPerfFileIO_DropLock(&f->lock);
        if (_PyPerfFileIO_TakeLock(&f->lock, fd) < 0) {
            int err = errno;
            close(fd);
            errno = err;
            return -1;
        }
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->size = st.st_size;
    }
    int res = restore_header(f, fd, &st);
    if (res == 0) {
        res = _PyPerfFileIO_WriteAll(fd, buf, size);
    }
    int err = errno;
    close(fd);
    errno = err;
    if (res == 0) {
        f->size += (off_t)size;
        files.written_bytes += size;
        files.writes++;
    }
    return res;
}

static int
holding(void)
{
    return files.holding || import_depth > 0;
}

/* The time in nanoseconds, on CLOCK_MONOTONIC: a description is timed
   once, for the burst it may be part of (which the coarse clock's ticks
   of a few milliseconds could not tell), the age of what is held, and
   what the backends and debuggers need (see _PyPerfFile_Now()). */
static int64_t
now_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0) {
        return 0;
    }
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void
update_deadline(void)
{
    int64_t deadline = INT64_MAX;
    for (int kind = 0; kind < _PyPerfFile_KINDS; kind++) {
        const description_file *f = &files.file[kind];
        if (f->held_len > 0) {
            deadline = Py_MIN(deadline, f->held_since + HELD_FOR_NS);
        }
    }
    _PyPerfFile_deadline = deadline;
}

static void
drop_held(description_file *f)
{
    if (f->held_len > 0) {
        f->held_len = 0;
        f->held_count = 0;
        _PyPerfFile_held--;
        update_deadline();
    }
}

static int
flush(description_file *f)
{
    int res = 0;
    if (f->held_len > 0) {
        res = write_now(f, f->held, f->held_len);
        if (res < 0) {
            f->lost += f->held_count;
        }
        drop_held(f);
    }
    return res;
}

/* Write one record now, after what is held. */
static int
write_one(description_file *f, const void *buf, size_t size)
{
    if (flush(f) < 0 || write_now(f, buf, size) < 0) {
        f->lost++;
        return -1;
    }
    return 0;
}

static int
overdue(const description_file *f, int64_t now)
{
    return f->held_len > 0 && now - f->held_since >= HELD_FOR_NS;
}

static int
is_open(description_file *f)
{
    return f->users > 0 && f->pid == (long)getpid();
}


/* Opening and closing ******************************************************/

static int
open_pending(int kind, const char *path, int access_mode, int *fd,
             const char **reason)
{
    description_file *f = &files.pending[kind];
    const description_file *current = &files.file[kind];
    struct stat st;
    /* The lock of an opening that did not complete. */
    _PyPerfFileIO_DropLock(&f->lock);
    PyOS_snprintf(f->path, sizeof(f->path), "%s", path);
    f->size = 0;
    f->header_size = 0;
    if (_PyPerfFileIO_OpenChecked(path, access_mode | O_APPEND, fd, &st,
                                  reason) < 0)
    {
        return -1;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    /* Records that no one in this process image wrote are stale: they
       describe code of a process that had this PID before, or of the
       program this process ran before an exec(), whose addresses now
       hold other code.  Static memory starts afresh with each image (and
       the pid tells a forked child from its parent), so this image wrote
       the file if it is the one it opened before.  Someone else in the
       image writes it only while they have it open. */
    int ours = (current->pid == (long)getpid()
                && current->dev == st.st_dev && current->ino == st.st_ino);
    f->lock.addr = NULL;
    if (!ours) {
        int elsewhere = (st.st_size > 0
                         && _PyPerfFileIO_OpenElsewhere(*fd, &st));
        if (_PyPerfFileIO_TakeLock(&f->lock, *fd) < 0) {
            int err = errno;
            *reason = (err == EBUSY
                       ? "another running process writes it (one with the "
                         "same process ID in another PID namespace that "
                         "shares /tmp)"
                       : strerror(err));
            close(*fd);
            errno = err;
            return -1;
        }
        if (st.st_size > 0 && !elsewhere) {
            if (kind == _PyPerfFile_MAP) {
                _PyPerfFileIO_KeepLiveLines(*fd, path, &st);
            }
            else {
                (void)ftruncate(*fd, 0);
            }
        }
    }
    f->size = lseek(*fd, 0, SEEK_END);
    if (f->size < 0) {
        f->size = 0;
    }
    return 0;
}

static void
switch_to_pending(int kind)
{
    description_file *f = &files.file[kind];
    assert(!is_open(f));
    memcpy(f->path, files.pending[kind].path, sizeof(f->path));
    f->dev = files.pending[kind].dev;
    f->ino = files.pending[kind].ino;
    f->size = files.pending[kind].size;
    memcpy(f->header, files.pending[kind].header, sizeof(f->header));
    f->header_size = files.pending[kind].header_size;
    f->pid = (long)getpid();
    f->users = 1;
    if (files.pending[kind].lock.addr != NULL) {
        /* Another file than the one locked before. */
        _PyPerfFileIO_DropLock(&f->lock);
        f->lock = files.pending[kind].lock;
        files.pending[kind].lock.addr = NULL;
    }
}

int
_PyPerfFile_Open(int kind, const char *path, int access_mode, int *fd,
                 const char **reason)
{
    pthread_once(&watching_forks, watch_forks);
    LOCK();
    int res = open_pending(kind, path, access_mode, fd, reason);
    UNLOCK();
    return res;
}

int
_PyPerfFile_Restart(int kind, int fd, const void *header, size_t size)
{
    LOCK();
    description_file *f = &files.pending[kind];
    assert(size <= sizeof(f->header));
    int res = -1;
    if (ftruncate(fd, 0) == 0
        && _PyPerfFileIO_WriteAll(fd, header, size) == 0)
    {
        memcpy(f->header, header, size);
        f->header_size = size;
        f->size = (off_t)size;
        res = 0;
    }
    UNLOCK();
    return res;
}

void
_PyPerfFile_Cancel(int kind)
{
    LOCK();
    _PyPerfFileIO_DropLock(&files.pending[kind].lock);
    UNLOCK();
}

void
_PyPerfFile_Switch(int kind)
{
    LOCK();
    switch_to_pending(kind);
    UNLOCK();
}

int
_PyPerfFile_OpenSimple(int kind, const char *path, const char **reason)
{
    pthread_once(&watching_forks, watch_forks);
    LOCK();
    description_file *f = &files.file[kind];
    int res = 0;
    if (is_open(f)) {
        f->users++;
    }
    else {
        int fd;
        res = open_pending(kind, path, O_RDWR, &fd, reason);
        if (res == 0) {
            close(fd);
            switch_to_pending(kind);
        }
    }
    UNLOCK();
    return res;
}

int
_PyPerfFile_Use(int kind)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res = is_open(f);
    if (res) {
        f->users++;
    }
    UNLOCK();
    return res;
}

int
_PyPerfFile_Close(int kind, int *closed)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res = 0;
    *closed = 0;
    if (is_open(f) && --f->users == 0) {
        res = flush(f);
        *closed = 1;
    }
    UNLOCK();
    return res;
}

const char *
_PyPerfFile_Path(int kind)
{
    return files.file[kind].path;
}

off_t
_PyPerfFile_Size(int kind)
{
    return files.file[kind].size;
}

int
_PyPerfFile_IsFile(int kind, const struct stat *st)
{
    LOCK();
    struct stat own;
    int res = (stat(files.file[kind].path, &own) == 0
               && own.st_dev == st->st_dev && own.st_ino == st->st_ino);
    UNLOCK();
    return res;
}

const char *
_PyPerfFile_PendingPath(int kind)
{
    return files.pending[kind].path;
}

size_t
_PyPerfFile_WrittenBytes(void)
{
    return files.written_bytes;
}

size_t
_PyPerfFile_Writes(void)
{
    return files.writes;
}


/* Imports *******************************************************************/

void
_PyPerfFile_BeginImport(void)
{
    import_depth++;
}

void
_PyPerfFile_EndImport(void)
{
    /* The count starts at zero in a forked child. */
    if (import_depth > 0) {
        import_depth--;
    }
}


/* Writing ******************************************************************/

/* Hold buf for f, made at "now", or write it with what is held if that
   is due. */
static int
hold(description_file *f, const void *buf, size_t size, int64_t now)
{
    if (f->held_len + size > f->held_cap) {
        /* Room for HELD_MAX and more at once: growing it by doubling
           copied what was held into new pages at each step, in the first
           milliseconds of a process making new functions.  What is never
           written costs no memory.  The C library's realloc(), not
           PyMem_RawRealloc(): this runs under files_lock, and a hook on
           the raw allocator (tracemalloc's) takes the GIL, which a thread
           waiting for files_lock may hold. */
        size_t cap = Py_MAX(f->held_len + size,
                            Py_MAX(2 * f->held_cap,
                                   (size_t)HELD_MAX + 16 * 1024));
        char *mem = realloc(f->held, cap);
        if (mem != NULL) {
            f->held = mem;
            f->held_cap = cap;
        }
    }
    if (f->held_len + size <= f->held_cap) {
        int first = f->held_len == 0;
        if (first) {
            f->held_since = now;
            _PyPerfFile_held++;
            _PyPerfFile_ever_held = 1;
        }
        memcpy(f->held + f->held_len, buf, size);
        f->held_len += size;
        f->held_count++;
        if (first) {
            update_deadline();
        }
        int due = (f->held_len >= HELD_MAX || overdue(f, now)
                   || (f->held_count >= HELD_COUNT && holding()));
        return due ? flush(f) : 0;
    }
    /* No memory to hold it: write it now, after what is held. */
    return write_one(f, buf, size);
}

int
_PyPerfFile_Write(int kind, const void *buf, size_t size)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res;
    if (!is_open(f)) {
        /* Closed, or the parent's (a child forked without
           PyOS_AfterFork_Child()). */
        errno = EBADF;
        res = -1;
    }
    else {
        res = holding() ? hold(f, buf, size, now_ns())
                        : write_one(f, buf, size);
    }
    UNLOCK();
    return res;
}

int
_PyPerfFile_WriteLater(int kind, const void *buf, size_t size,
                       int64_t now)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res;
    if (f->users == 0) {
        errno = EBADF;
        res = -1;
    }
    else {
        files.in_burst = (now - files.last_description < BURST_NS
                          ? Py_MIN(files.in_burst + 1, BURST_MIN) : 1);
        files.last_description = now;
        res = hold(f, buf, size, now);
        if (res == 0 && files.in_burst < BURST_MIN && !holding()) {
            res = flush(f);
        }
    }
    UNLOCK();
    return res;
}

int
_PyPerfFile_WriteHeld(int kind)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res = holding() || !is_open(f) ? 0 : flush(f);
    UNLOCK();
    return res;
}

int
_PyPerfFile_WriteHeldNow(int kind, int all, int *wrote)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res = 0;
    *wrote = (f->users > 0 && f->held_len > 0
              && (all || overdue(f, now_ns())));
    if (*wrote) {
        res = flush(f);
    }
    UNLOCK();
    return res;
}

Py_ssize_t
_PyPerfFile_TakeLost(int kind)
{
    LOCK();
    Py_ssize_t lost = files.file[kind].lost;
    files.file[kind].lost = 0;
    UNLOCK();
    return lost;
}

int64_t
_PyPerfFile_Now(void)
{
    return now_ns();
}

int
_PyPerfFile_Holding(void)
{
    return holding();
}

void
_PyPerfFile_Hold(void)
{
    files.holding = 1;
}

void
_PyPerfFile_EndHold(void)
{
    files.holding = 0;
}

void
_PyPerfFile_LockForTesting(int lock)
{
    if (lock) {
        LOCK();
    }
    else {
        UNLOCK();
    }
}


/* Forked children **********************************************************/

void
_PyPerfFile_DropLocksAtFork(void)
{
    /* In the child of every fork, however made: a child that lives on
       without running Python code (a helper forked by C code) holds
       none of the parent's locks (their mappings are not inherited), and
       must not unmap what it maps later at their addresses. */
    for (int kind = 0; kind < _PyPerfFile_KINDS; kind++) {
        _PyPerfFileIO_ForgetLock(&files.file[kind].lock);
        _PyPerfFileIO_ForgetLock(&files.pending[kind].lock);
    }
}

void
_PyPerfFile_AfterFork(void)
{
    import_depth = 0;
    /* The parent's files and what it held stay the parent's: those who
       used them open the child's own. */
    for (int kind = 0; kind < _PyPerfFile_KINDS; kind++) {
        description_file *f = &files.file[kind];
        f->users = 0;
        f->lost = 0;
        /* The parent's locks stay the parent's. */
        _PyPerfFileIO_ForgetLock(&f->lock);
        _PyPerfFileIO_ForgetLock(&files.pending[kind].lock);
        free(files.inherited[kind]);
        files.inherited[kind] = free_at_fork ? f->held : NULL;
        files.inherited_len[kind] = free_at_fork ? f->held_len : 0;
        if (free_at_fork) {
            f->held = NULL;
            f->held_cap = 0;
        }
        drop_held(f);
    }
}

int
_PyPerfFile_WriteInherited(int kind)
{
    LOCK();
    description_file *f = &files.file[kind];
    int res = 0;
    if (files.inherited_len[kind] > 0) {
        res = is_open(f) ? write_now(f, files.inherited[kind],
                                     files.inherited_len[kind]) : -1;
    }
    free(files.inherited[kind]);
    files.inherited[kind] = NULL;
    files.inherited_len[kind] = 0;
    UNLOCK();
    return res;
}

#else  /* !PY_HAVE_PERF_TRAMPOLINE */

void
_PyPerfFile_LockForTesting(int Py_UNUSED(lock))
{
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

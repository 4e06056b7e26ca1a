/* Description files: the rules that the files of every perf trampoline
   backend follow (/tmp/perf-PID.map, /tmp/jit-PID.dump).

   - A file in /tmp is opened safely: never through a symbolic link, never
     a FIFO or anything but a regular file of our own user, created 0600.
   - Records are appended whole, with O_APPEND and one write() each, and a
     write that fails half-way is cut off again: a profiler reading the
     file, or another writer, never sees a partial record.
   - No descriptor stays open that the program could see (or close, and
     reuse for a file of its own).  Each record is written as soon as it is
     made, so that a profiler reading the file while the process runs finds
     it, except during start-up and imports (below).
   - A forked child gets a file of its own that starts with the parent's
     records, since it runs the trampolines it inherited.
   - A file last written before the process started (or forked) is stale
     and is emptied when opened.

   Which file is current, and how many bytes of it this process knows
   about, is kept here; the backends only say what goes into it. */

#include "Python.h"
#include "pycore_perf_backend.h"
#include "pycore_perf_trampoline.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <fcntl.h>                // open()
#include <sys/stat.h>             // fstat()
#include <time.h>                 // clock_gettime()
#include <unistd.h>               // write()

/* Descriptions made while the interpreter starts up are held in memory and
   written with a single write() when start-up is done: a few hundred code
   objects run before the program does, and opening the file for each of
   them would add about a third to the start-up time.  The same holds
   during imports (see below).  Other descriptions are not held: nothing
   would then bound how late one reaches the file, so a profiler reading it
   while the process runs (perf top, bcc, Parca) would miss functions, and
   a process ending in os._exit() (a forked multiprocessing worker) would
   lose them.  What is held is written once it reaches HELD_MAX. */
#define HELD_MAX (256 * 1024)

typedef struct {
    char path[64];
    /* Its bytes as this process knows them (what was there when it was
       opened, plus what it wrote), so that a forked child copies exactly
       what was there at the fork. */
    off_t size;
    /* The header the file starts with, if the backend has one: written
       again if the file is found empty (someone removed it). */
    unsigned char header[64];
    size_t header_size;
} description_file;

static struct {
    description_file current;   /* the one being written to */
    description_file pending;   /* the one a backend is opening */
    size_t written_bytes;       /* statistics */

    /* Held descriptions (see HELD_MAX). */
    int holding;
    char *held;
    size_t held_len;
    size_t held_cap;

    /* When this process started, or was forked, on the clock of file
       modification times. */
    struct timespec process_start;
} files;

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


static int
open_checked(const char *path, int access_mode, int *fd_out,
             struct stat *st_out, const char **reason)
{
    /* O_NOFOLLOW: never write through a symbolic link an attacker planted
       in /tmp.  O_NONBLOCK: a FIFO at the path must not hang the
       interpreter.  The file is private to the user (0600). */
    int fd = open(path,
                  access_mode | O_CREAT | O_NOFOLLOW | O_CLOEXEC
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
   what was written of it, so the file never ends with a partial record. */
static int
write_all(int fd, const void *buf, size_t size)
{
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, (const char *)buf + done, size - done);
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

/* Write the current file's header to fd if the file is empty: it was
   removed since it was started, and a new one was just created. */
static int
restore_header(int fd, const struct stat *st)
{
    if (st->st_size != 0 || files.current.header_size == 0) {
        return 0;
    }
    if (write_all(fd, files.current.header, files.current.header_size) < 0) {
        return -1;
    }
    files.current.size = (off_t)files.current.header_size;
    return 0;
}

/* Append buf to the current file, opened for this write only. */
static int
append_to_file(const void *buf, size_t size)
{
    int fd;
    struct stat st;
    const char *reason;
    if (open_checked(files.current.path, O_WRONLY | O_APPEND, &fd, &st,
                     &reason) < 0) {
        return -1;
    }
    int res = restore_header(fd, &st);
    if (res == 0) {
        res = write_all(fd, buf, size);
    }
    int err = errno;
    close(fd);
    errno = err;
    return res;
}

int
_PyPerfFile_Open(const char *path, int access_mode, int *fd,
                 const char **reason)
{
    description_file *f = &files.pending;
    struct stat st;
    PyOS_snprintf(f->path, sizeof(f->path), "%s", path);
    f->size = 0;
    f->header_size = 0;
    if (open_checked(path, access_mode | O_APPEND, fd, &st, reason) < 0) {
        return -1;
    }
    /* A file last written before this process started (or forked) is
       stale: it describes code of a process that had this PID before, or
       of the program this process ran before an exec().  Its addresses
       now hold other code, so it is replaced. */
    if (st.st_size > 0
        && (st.st_mtim.tv_sec < files.process_start.tv_sec
            || (st.st_mtim.tv_sec == files.process_start.tv_sec
                && st.st_mtim.tv_nsec < files.process_start.tv_nsec)))
    {
        (void)ftruncate(*fd, 0);
    }
    f->size = lseek(*fd, 0, SEEK_END);
    if (f->size < 0) {
        f->size = 0;
    }
    return 0;
}

int
_PyPerfFile_Restart(int fd, const void *header, size_t size)
{
    description_file *f = &files.pending;
    assert(size <= sizeof(f->header));
    if (ftruncate(fd, 0) < 0 || write_all(fd, header, size) < 0) {
        return -1;
    }
    memcpy(f->header, header, size);
    f->header_size = size;
    f->size = (off_t)size;
    return 0;
}

void
_PyPerfFile_Switch(void)
{
    files.current = files.pending;
}

const char *
_PyPerfFile_Path(void)
{
    return files.current.path;
}

const char *
_PyPerfFile_PendingPath(void)
{
    return files.pending.path;
}

off_t
_PyPerfFile_Size(void)
{
    return files.current.size;
}

size_t
_PyPerfFile_WrittenBytes(void)
{
    return files.written_bytes;
}


/* Imports *******************************************************************/

void
_PyPerfFile_BeginImport(void)
{
    import_depth++;
}

int
_PyPerfFile_EndImport(void)
{
    /* The count starts at zero in a forked child. */
    if (import_depth > 0 && --import_depth == 0) {
        return _PyPerfFile_WriteHeld();
    }
    return 0;
}

void
_PyPerfFile_AfterFork(void)
{
    import_depth = 0;
    _PyPerfFile_StartProcess();
}


/* Writing ******************************************************************/

static int
write_now(const void *buf, size_t size)
{
    if (append_to_file(buf, size) < 0) {
        return -1;
    }
    files.current.size += (off_t)size;
    files.written_bytes += size;
    return 0;
}

int
_PyPerfFile_Flush(void)
{
    int res = 0;
    if (files.held_len > 0) {
        res = write_now(files.held, files.held_len);
        files.held_len = 0;
    }
    return res;
}

int
_PyPerfFile_Write(const void *buf, size_t size)
{
    if (_PyPerfFile_Holding()) {
        if (files.held_len + size > files.held_cap) {
            size_t cap = Py_MAX(files.held_len + size, (size_t)16 * 1024);
            char *mem = PyMem_RawRealloc(files.held, cap);
            if (mem != NULL) {
                files.held = mem;
                files.held_cap = cap;
            }
        }
        if (files.held_len + size <= files.held_cap) {
            memcpy(files.held + files.held_len, buf, size);
            files.held_len += size;
            return files.held_len < HELD_MAX ? 0 : _PyPerfFile_Flush();
        }
        /* No memory to hold it: write it now, after what is held. */
        if (_PyPerfFile_Flush() < 0) {
            return -1;
        }
    }
    return write_now(buf, size);
}

void
_PyPerfFile_StartProcess(void)
{
    /* File times come from the kernel's coarse clock. */
    if (clock_gettime(CLOCK_REALTIME_COARSE, &files.process_start) < 0) {
        files.process_start.tv_sec = 0;
        files.process_start.tv_nsec = 0;
    }
}

void
_PyPerfFile_Hold(void)
{
    files.holding = 1;
}

void
_PyPerfFile_DropHeld(void)
{
    files.held_len = 0;
}

int
_PyPerfFile_Holding(void)
{
    return files.holding || import_depth > 0;
}

int
_PyPerfFile_WriteHeld(void)
{
    if (_PyPerfFile_Holding()) {
        return 0;
    }
    return _PyPerfFile_Flush();
}

int
_PyPerfFile_EndHold(void)
{
    files.holding = 0;
    return _PyPerfFile_WriteHeld();
}


/* Forked children **********************************************************/

/* Read the first size bytes of our file at path into a new
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

/* Append size bytes at offset start of our file at path to the current
   file with copy_file_range(), so that the kernel copies them without
   reading them into this process (and where the file system can, without
   copying the data at all).  Return 0 on success; -1 if the kernel cannot
   copy between these files (nothing was written); -2 with errno set if
   writing failed (what was copied is cut off again). */
static int
copy_in_kernel(const char *path, off_t start, size_t size)
{
    int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (in < 0) {
        return -1;
    }
    struct stat st;
    int out = -1;
    int res = -1;
    const char *reason;
    /* copy_file_range() refuses a destination opened with O_APPEND. */
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()
        || open_checked(files.current.path, O_WRONLY, &out, NULL,
                        &reason) < 0)
    {
        goto done;
    }
    off_t end = lseek(out, 0, SEEK_END);
    off_t src = start, dst = end;
    size_t left = size;
    while (end >= 0 && left > 0) {
        ssize_t n = copy_file_range(in, &src, out, &dst, left, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n == 0) {
            /* The file is shorter than it was: copy what is left of it
               the other way. */
            (void)ftruncate(out, end);
            goto done;
        }
        if (n < 0) {
            int err = errno;
            if (left == size && (err == EXDEV || err == ENOSYS
                                 || err == EINVAL || err == EOPNOTSUPP))
            {
                goto done;          /* not between these files: fall back */
            }
            (void)ftruncate(out, end);
            errno = err;
            res = -2;
            goto done;
        }
        left -= (size_t)n;
    }
    res = end >= 0 ? 0 : -1;
done:
    {
        int err = errno;
        close(in);
        if (out >= 0) {
            close(out);
        }
        errno = err;
    }
    return res;
}

void
_PyPerfFile_ClaimHeld(const _PyPerfBackend *backend)
{
    if (backend->claim_records != NULL) {
        (void)backend->claim_records(files.held, files.held_len);
    }
}

int
_PyPerfFile_CopyRecords(const char *path, off_t size,
                        const _PyPerfBackend *backend)
{
    size_t header = backend->header_size;
    if (size <= (off_t)header) {
        return 0;
    }
    if (backend->claim_records == NULL) {
        /* Records that need no rewriting for this process: the kernel
           copies them. */
        int res = copy_in_kernel(path, (off_t)header, (size_t)size - header);
        if (res == 0) {
            files.current.size += size - (off_t)header;
            files.written_bytes += (size_t)size - header;
            return 0;
        }
        if (res == -2) {
            return -2;
        }
    }
    off_t got;
    char *copy = read_file_prefix(path, size, &got);
    if (copy == NULL) {
        return -1;
    }
    size_t records = got > (off_t)header ? (size_t)got - header : 0;
    if (backend->claim_records != NULL) {
        records = backend->claim_records(copy + header, records);
    }
    int res = records > 0 ? write_now(copy + header, records) : 0;
    int err = errno;
    PyMem_RawFree(copy);
    errno = err;
    return res < 0 ? -2 : 0;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

/* System calls on description files: opening a file in /tmp safely,
   appending whole records, telling what of a file found with records in
   it is still live, and the lock that a live writer in a container holds
   on its file.  Python/perf_description_file.c decides when each is
   done. */

#include "Python.h"
#include "pycore_perf_backend.h"

#ifdef PY_HAVE_PERF_TRAMPOLINE

#include <dirent.h>               // opendir()
#include <fcntl.h>                // open()
#include <sys/mman.h>             // mmap()
#include <sys/stat.h>             // fstat()
#include <unistd.h>               // write()

int
_PyPerfFileIO_OpenChecked(const char *path, int access_mode, int *fd_out,
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
int
_PyPerfFileIO_WriteAll(int fd, const void *buf, size_t size)
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

/* Whether a descriptor of this process other than fd refers to the file
   st describes: someone in the process (a JIT compiler of the program
   that embeds Python, say) writes it. */
int
_PyPerfFileIO_OpenElsewhere(int fd, const struct stat *st)
{
    DIR *dir = opendir("/proc/self/fd");
    if (dir == NULL) {
        return 0;
    }
    int found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(dir)) != NULL) {
        char *end;
        long n = strtol(entry->d_name, &end, 10);
        struct stat other;
        if (end != entry->d_name && *end == '\0' && n != fd
            && n != dirfd(dir) && fstat((int)n, &other) == 0)
        {
            found = (other.st_dev == st->st_dev
                     && other.st_ino == st->st_ino);
        }
    }
    closedir(dir);
    return found;
}

/* The most of a stale map that is read to keep its live lines. */
#define KEEP_MAX (16 * 1024 * 1024)

/* All of fd, up to limit bytes, NUL-terminated, in memory of the C
   library's (the caller frees it; see hold() in
   Python/perf_description_file.c for why not Python's); NULL if it cannot
   be read or is longer. */
static char *
read_all(int fd, size_t limit, size_t *len)
{
    size_t cap = 64 * 1024;
    size_t n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        if (n == cap) {
            char *bigger = cap < limit ? realloc(buf, 2 * cap + 1) : NULL;
            if (bigger == NULL) {
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            if (r < 0) {
                break;
            }
            buf[n] = '\0';
            *len = n;
            return buf;
        }
        n += (size_t)r;
    }
    free(buf);
    return NULL;
}

/* An executable mapping of anonymous memory: the code of a JIT compiler
   of this process, which perf names from the map. */
typedef struct {
    uintptr_t lo;
    uintptr_t hi;
} code_range;

/* The executable mappings of anonymous memory listed in maps (the text
   of /proc/self/maps), in memory of the C library's (the caller frees
   it); *n is set to their number.  NULL if there are none or no memory:
   nothing of a stale map is kept then. */
static code_range *
anonymous_code(const char *maps, size_t *n)
{
    code_range *ranges = NULL;
    size_t cap = 0;
    *n = 0;
    for (const char *line = maps; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);
        /* "lo-hi perms offset dev inode [name]": anonymous memory has
           inode 0 and no name (or an "[anon:...]" one). */
        char text[256];
        PyOS_snprintf(text, sizeof(text), "%.*s", (int)Py_MIN(len, 255),
                      line);
        unsigned long long lo, hi, inode;
        char perms[5] = "", name[8] = "";
        if (sscanf(text, "%llx-%llx %4s %*s %*s %llu %7s",
                   &lo, &hi, perms, &inode, name) >= 4
            && perms[2] == 'x' && inode == 0
            && (name[0] == '\0' || strncmp(name, "[anon:", 6) == 0))
        {
            if (*n == cap) {
                cap = cap ? 2 * cap : 8;
                code_range *more = realloc(ranges, cap * sizeof(*more));
                if (more == NULL) {
                    free(ranges);
                    *n = 0;
                    return NULL;
                }
                ranges = more;
            }
            ranges[*n].lo = (uintptr_t)lo;
            ranges[*n].hi = (uintptr_t)hi;
            (*n)++;
        }
        if (eol == NULL) {
            break;
        }
        line = eol + 1;
    }
    return ranges;
}

/* Whether [start, start + size) lies in one of the n ranges. */
static int
in_ranges(const code_range *ranges, size_t n, uintptr_t start,
          uintptr_t size)
{
    for (size_t i = 0; i < n; i++) {
        if (ranges[i].lo <= start && start < ranges[i].hi
            && size <= ranges[i].hi - start)
        {
            return 1;
        }
    }
    return 0;
}

/* Empty the stale map open at fd (for appending) but for its lines that
   name code mapped here: those a JIT compiler of the program that embeds
   Python wrote before Python started, closing the file after each (as
   several do).  The code that a previous process image described is not
   mapped in this one.  The process's mappings are read first: most
   processes have no anonymous code, and then the stale map is not read
   at all (a stale map of 40,000 lines once made start-up take half a
   second, when each line was looked up in the text of the mappings). */
void
_PyPerfFileIO_KeepLiveLines(int fd, const char *path, const struct stat *st)
{
    size_t len = 0, maps_len = 0, n_ranges = 0;
    char *data = NULL, *maps = NULL;
    code_range *ranges = NULL;
    int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (mfd >= 0) {
        maps = read_all(mfd, KEEP_MAX, &maps_len);
        close(mfd);
    }
    if (maps != NULL) {
        ranges = anonymous_code(maps, &n_ranges);
        free(maps);
    }
    int rfd = ranges != NULL ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC
                                          | O_NONBLOCK)
                             : -1;
    struct stat rst;
    if (rfd >= 0) {
        if (fstat(rfd, &rst) == 0 && rst.st_dev == st->st_dev
            && rst.st_ino == st->st_ino)
        {
            data = read_all(rfd, KEEP_MAX, &len);
        }
        close(rfd);
    }
    (void)ftruncate(fd, 0);
    if (data != NULL) {
        /* The lines kept are moved to the front, whole: "ADDR SIZE NAME". */
        size_t out = 0;
        for (size_t pos = 0; pos < len;) {
            char *eol = memchr(data + pos, '\n', len - pos);
            if (eol == NULL) {
                break;          /* a last line being written: not kept */
            }
            size_t line_len = (size_t)(eol - (data + pos)) + 1;
            char *p;
            uintptr_t addr = (uintptr_t)strtoull(data + pos, &p, 16);
            uintptr_t size = 0;
            if (*p == ' ') {
                size = (uintptr_t)strtoull(p + 1, &p, 16);
            }
            if (size > 0 && *p == ' '
                && in_ranges(ranges, n_ranges, addr, size))
            {
                memmove(data + out, data + pos, line_len);
                out += line_len;
            }
            pos += line_len;
        }
        if (out > 0) {
            (void)_PyPerfFileIO_WriteAll(fd, data, out);
        }
    }
    free(data);
    free(ranges);
}

/* A live writer holds a lock on its file (F_OFD_SETLK, an open file
   description lock) for as long as its process image runs, so that
   another process never empties nor appends to a file that a live
   process writes: processes of different PID namespaces may have the
   same PID and share /tmp (two containers whose main processes are both
   PID 1 sharing a Kubernetes pod's emptyDir, a container started with
   -v /tmp:/tmp and a process of the host).  Every writer takes it, in
   the initial PID namespace too: the other process can only see a lock.

   The lock is held through a mapping of the file, not a descriptor: the
   open file description, and so the lock, lives as long as a mapping
   refers to it.  The program's descriptor table stays as it would be
   without the support (programs and their tests list it, close all of
   it, or pass exact sets to children).  The mapping is one inaccessible
   page, never touched; MADV_DONTFORK keeps it out of forked children,
   which must not hold the lock after the parent ends, and exec() drops
   it.  fd must be open for reading and writing (mmap() needs the one,
   a write lock the other).  Return 0 and set *lock; -1 with errno EBUSY
   if another process holds one.  Kernels without these locks (before
   Linux 3.15) and files that cannot be mapped are written unlocked. */
int
_PyPerfFileIO_TakeLock(_PyPerfFileLock *lock, int fd)
{
    lock->addr = NULL;
    struct flock fl;
    memset(&fl, 0, sizeof(fl));
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        if (errno == EINVAL) {
            return 0;
        }
        if (errno == EAGAIN || errno == EACCES) {
            errno = EBUSY;
        }
        return -1;
    }
    size_t size = (size_t)sysconf(_SC_PAGESIZE);
    void *addr = mmap(NULL, size, PROT_NONE, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
        /* The lock goes with fd when the caller closes it: the support
           goes without the lock rather than not at all. */
        return 0;
    }
    (void)madvise(addr, size, MADV_DONTFORK);
    lock->addr = addr;
    lock->size = size;
    lock->pid = (long)getpid();
    return 0;
}

void
_PyPerfFileIO_DropLock(_PyPerfFileLock *lock)
{
    /* A child (of a fork that ran no handler) has no copy to unmap, and
       the address may hold something else of its own by now. */
    if (lock->addr != NULL && lock->pid == (long)getpid()) {
        (void)munmap(lock->addr, lock->size);
    }
    lock->addr = NULL;
}

void
_PyPerfFileIO_ForgetLock(_PyPerfFileLock *lock)
{
    lock->addr = NULL;
}

#endif  /* PY_HAVE_PERF_TRAMPOLINE */

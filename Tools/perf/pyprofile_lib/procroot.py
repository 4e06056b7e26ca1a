"""Processes, as /proc shows them: their PID in their own namespace, their
files, and files opened through their root directory (/proc/PID/root)
following no symbolic link and opening nothing but regular files."""

import errno
import os
import re
import stat

from .common import BACKENDS, read_text


def namespaced_pid(pid):
    """The PID of process pid in its own PID namespace (NSpid's last
    field in /proc/PID/status), which names its files there; pid itself
    outside containers."""
    status = read_text(f"/proc/{pid}/status") or ""
    match = re.search(r"^NSpid:\s*(.*)$", status, re.M)
    if match and match.group(1).split():
        return int(match.group(1).split()[-1])
    return pid


def same_file(a, b):
    try:
        return os.path.samestat(os.stat(a), os.stat(b))
    except OSError:
        return False


def in_other_mount_namespace(pid):
    try:
        return (os.stat(f"/proc/{pid}/ns/mnt").st_ino
                != os.stat("/proc/self/ns/mnt").st_ino)
    except OSError:
        return False


# The most that is copied of a file that a process in a container names
# (its map or dump, the objects it maps): it chooses their contents.
MAX_COPY = 1 << 30


def path_parts(path):
    parts = [part for part in path.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise OSError(errno.EINVAL, "not a plain absolute path", path)
    return parts


def open_directory_in_root(pid, parts):
    """An O_PATH descriptor of the directory named by parts in the root
    directory of process pid (/proc/PID/root), following no symbolic
    link."""
    directory = os.open(f"/proc/{pid}/root",
                        os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            # O_NOFOLLOW with O_PATH opens a symbolic link itself, which
            # O_DIRECTORY then refuses.
            inner = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW
                            | os.O_CLOEXEC, dir_fd=directory)
            os.close(directory)
            directory = inner
    except BaseException:
        os.close(directory)
        raise
    return directory


def open_in_root(pid, path):
    """Open path, absolute as process pid sees it, for reading through its
    root directory (/proc/PID/root) following no symbolic link: resolved
    from here, an absolute one that a container planted would name a file
    of the host.  A regular file only, never waiting for a FIFO's writer.
    The equivalent of openat2() with RESOLVE_IN_ROOT and
    RESOLVE_NO_SYMLINKS, which Python has no wrapper of."""
    parts = path_parts(path)
    if not parts:
        raise OSError(errno.EINVAL, "not a file", path)
    directory = open_directory_in_root(pid, parts[:-1])
    try:
        # O_PATH opens nothing: a device node's driver or a FIFO's writer
        # never sees this open.  What the name is is checked first, then
        # that very file is opened through /proc/self/fd.
        fd = os.open(parts[-1], os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=directory)
    finally:
        os.close(directory)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return open(f"/proc/self/fd/{fd}", "rb")
    finally:
        os.close(fd)


def read_in_root(pid, path, limit):
    """At most limit bytes of the regular file path in the root of
    process pid (see open_in_root()), or None."""
    try:
        with open_in_root(pid, path) as f:
            return f.read(limit)
    except OSError:
        return None


def list_in_root(pid, path):
    """The names in directory path in the root of process pid, or []."""
    try:
        directory = open_directory_in_root(pid, path_parts(path))
    except OSError:
        return []
    try:
        fd = os.open(f"/proc/self/fd/{directory}",
                     os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    finally:
        os.close(directory)
    try:
        return os.listdir(fd)
    except OSError:
        return []
    finally:
        os.close(fd)


def description_file(pid, backend):
    """Where the file that process pid writes is seen from here: through
    /proc/PID/root, under the PID of its own namespace, so that a process
    in a container (its own PID and mount namespaces, its own /tmp) is
    found from the host."""
    name = BACKENDS[backend]["file"].format(pid=namespaced_pid(pid))
    if in_other_mount_namespace(pid):
        return f"/proc/{pid}/root{name}"
    return name


def process_environment(pid):
    """The environment process pid started with, or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read()
    except OSError:
        return None
    env = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def mapped_files(pid):
    """The files that process pid maps, as it names them."""
    paths = []
    for line in (read_text(f"/proc/{pid}/maps") or "").splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            paths.append(fields[5])
    return list(dict.fromkeys(paths))


def start_time(pid):
    """When process pid started (seconds since the epoch, to the second
    the kernel gives the boot time in), or None."""
    stat_line = read_text(f"/proc/{pid}/stat") or ""
    boot = re.search(r"^btime (\d+)$", read_text("/proc/stat") or "", re.M)
    # The fields after the command name, which may hold spaces and ")".
    fields = stat_line[stat_line.rfind(")") + 2:].split()
    if boot is None or len(fields) < 20:
        return None
    return int(boot.group(1)) + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def in_root_exists(pid, backend):
    """Whether process pid has its file of backend, a regular file (see
    open_in_root()) written since it started: a file left by an earlier
    process with the same PID is not its (PIDs are reused)."""
    name = BACKENDS[backend]["file"].format(pid=namespaced_pid(pid))
    try:
        with open_in_root(pid, name) as f:
            written = os.fstat(f.fileno()).st_mtime
    except OSError:
        return False
    started = start_time(pid)
    # The boot time is whole seconds: a second of slack.
    return started is None or written >= started - 1


class LimitedReader:
    """The first limit bytes of a file object."""

    def __init__(self, f, limit):
        self.f, self.left = f, limit

    def read(self, size=-1):
        size = self.left if size < 0 else min(size, self.left)
        data = self.f.read(size)
        self.left -= len(data)
        return data


def ended(pid):
    """Whether process pid has ended (a zombie has)."""
    stat_line = read_text(f"/proc/{pid}/stat")
    if stat_line is None:
        return True
    fields = stat_line[stat_line.rfind(")") + 2:].split()
    return not fields or fields[0] in ("Z", "X")

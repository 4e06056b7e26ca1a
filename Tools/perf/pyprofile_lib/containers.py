"""Recording a process in a container: its map or jitdump copied to the
host as it grows, the objects it maps put in perf's buildid cache, and
perf inject --jit on the host's copy of its jitdump."""

import contextlib
import os
import shutil
import struct
import subprocess
import sys
import threading

from .common import BACKENDS, RecordError, read_text
from .procroot import (
    LimitedReader, MAX_COPY, description_file, namespaced_pid,
    open_in_root, same_file)


def whole_lines(data, offset, pid):
    """The whole lines of data, read from a map at offset: the writer may
    be half-way through one."""
    return data[:data.rfind(b"\n") + 1]


JITDUMP_HEADER = struct.Struct("<IIIIIIQQ")    # magic ... total_size ... pid
JITDUMP_RECORD = struct.Struct("<IIQ")         # id, total_size, timestamp
JIT_CODE_LOAD, JIT_CODE_MOVE = 0, 1            # followed by pid, tid


def whole_records(data, offset, pid):
    """The header and whole records of data, read from a jitdump at
    offset (the writer may be half-way through one), with the process's
    PID in its container replaced by pid, its host PID: perf inject
    gives the code it describes to the process of the PID in the file."""
    data = bytearray(data)
    end = 0
    if offset == 0:
        if len(data) < JITDUMP_HEADER.size:
            return b""
        end = JITDUMP_HEADER.unpack_from(data)[2]
        struct.pack_into("<I", data, 20, pid)
    while end + JITDUMP_RECORD.size <= len(data):
        kind, size, _ = JITDUMP_RECORD.unpack_from(data, end)
        if size < JITDUMP_RECORD.size or end + size > len(data):
            break
        if kind in (JIT_CODE_LOAD, JIT_CODE_MOVE):
            struct.pack_into("<II", data, end + JITDUMP_RECORD.size,
                             pid, pid)
        end += size
    return bytes(data[:end])


class Copier:
    """Keeps a copy of the map or jitdump that a process in a container
    writes in its own /tmp, up to date while perf records it: perf reads
    them after the recording, when the process and its /tmp may be gone.
    Appends what is new every interval seconds; stop() copies the rest."""

    def __init__(self, pid, backend, target, interval=0.2):
        self.source = description_file(pid, backend)
        # Its name as the process sees it, opened through its root.
        self.name = BACKENDS[backend]["file"].format(pid=namespaced_pid(pid))
        self.target = target
        self.pid = pid
        self.whole = whole_lines if backend == "perf" else whole_records
        self.interval = interval
        self.copied = 0
        self.done = threading.Event()
        # A file of that name is stale: for a map, the PID is the container
        # process's on the host.  Made anew (O_EXCL), as another user may
        # have put anything at that name in /tmp.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.target)
        fd = os.open(self.target, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        self.out = os.fdopen(fd, "wb")
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def copy(self):
        try:
            with open_in_root(self.pid, self.name) as f:
                f.seek(self.copied)
                data = f.read(max(0, MAX_COPY - self.copied))
        except OSError:
            return              # the process has gone: keep what we have
        data = self.whole(data, self.copied, self.pid)
        self.out.write(data)
        self.out.flush()
        self.copied += len(data)

    def run(self):
        while not self.done.wait(self.interval):
            self.copy()

    def stop(self):
        self.done.set()
        self.thread.join()
        self.copy()
        self.out.close()

    def remove(self):
        if not self.out.closed:
            # Not stopped: recording never began (SIGTERM, for one).
            self.done.set()
            self.thread.join()
            self.out.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.target)


# perf's pipe format: a 16-byte header, then events, each with its size.
PERF_EVENT_HEADER = struct.Struct("<IHH")      # type, misc, size
PERF_RECORD_MMAP, PERF_RECORD_MMAP2 = 1, 10
FILENAME_OFFSET = {PERF_RECORD_MMAP: 40, PERF_RECORD_MMAP2: 72}
# Events followed by data that their size does not count.
PERF_RECORD_HEADER_TRACING_DATA, PERF_RECORD_AUXTRACE = 66, 71


def rename_mapping(source, target, old, new):
    """Copy the perf recording in pipe format source to target, with the
    mapping of the file named old renamed new.  Event by event: a long
    recording with DWARF stacks takes hundreds of megabytes."""
    old, new = os.fsencode(old), os.fsencode(new)
    with open(source, "rb") as src, open(target, "wb") as out:
        out.write(src.read(16))
        while head := src.read(PERF_EVENT_HEADER.size):
            if len(head) < PERF_EVENT_HEADER.size:
                raise RecordError(f"{source}: truncated event")
            kind, misc, size = PERF_EVENT_HEADER.unpack(head)
            if size < PERF_EVENT_HEADER.size:
                raise RecordError(f"{source}: bad event at offset "
                                  f"{src.tell() - len(head)}")
            event = head + src.read(size - len(head))
            extra = 0
            if kind == PERF_RECORD_HEADER_TRACING_DATA:
                extra = struct.unpack_from("<I", event, 8)[0]
            elif kind == PERF_RECORD_AUXTRACE:
                extra = struct.unpack_from("<Q", event, 8)[0]
            name_at = FILENAME_OFFSET.get(kind)
            if name_at is not None:
                name_end = event.index(b"\0", name_at)
                padded = (name_end + 1 + 7) & ~7
                if event[name_at:name_end] == old:
                    # The name is padded with zeros to 8 bytes; what
                    # follows it (the sample_id fields) is kept as it is.
                    name = new + b"\0" * (8 - len(new) % 8)
                    event = event[:name_at] + name + event[padded:]
                    event = (PERF_EVENT_HEADER.pack(kind, misc, len(event))
                             + event[PERF_EVENT_HEADER.size:])
            out.write(event)
            out.write(src.read(extra))


def cache_container_objects(perf, pid, tmp):
    """Put the executables and libraries that process pid maps, where the
    host has no such file at their path, in perf's buildid cache (under
    tmp): perf reads them by build-id after the recording, when the
    process may be gone, and outside its namespaces for perf_jit."""
    paths = set()
    for line in (read_text(f"/proc/{pid}/maps") or "").splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and "x" in fields[1] and fields[5].startswith("/"):
            paths.add(fields[5])
    objects = os.path.join(tmp, "objects")
    for i, path in enumerate(sorted(paths)):
        inside = f"/proc/{pid}/root{path}"
        if same_file(inside, path):
            continue
        copy = os.path.join(objects, str(i), os.path.basename(path))
        try:
            os.makedirs(os.path.dirname(copy))
            with open_in_root(pid, path) as src, open(copy, "wb") as out:
                shutil.copyfileobj(LimitedReader(src, MAX_COPY), out)
        except OSError:
            continue            # gone, or not a file: perf does without
        subprocess.run([*perf, "buildid-cache", "--add", copy],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.unlink(copy)


# perf, for a process in a container that used perf_jit: in a PID namespace
# of its own, where /proc has no process of the recording's PID, so that
# perf looks for files on the host whether the process lives or not (see
# inject_container()).
OUTSIDE_CONTAINERS = ["unshare", "--pid", "--fork", "--mount-proc"]


def inject_container(perf, data, injected, copier):
    """perf inject --jit for a process in a container, from the host's copy
    of its jitdump that copier made.  perf 6.1 takes the jitdump that the
    recording names (/tmp/jit-NSPID.dump) only if /proc says that the
    process is NSPID in its PID namespace, and then reads it in the
    process's mount namespace: not at all once the process has gone.  So
    the recording is given the copy's name (jit-HOSTPID.dump, as for a
    process outside containers, with the PIDs in it made the host's), and
    perf runs OUTSIDE_CONTAINERS."""
    tmp = os.path.dirname(data)
    stream = os.path.join(tmp, "perf.pipe")
    renamed = os.path.join(tmp, "perf.renamed")
    # Events can be renamed in perf's pipe format (the file format has
    # offsets), which perf inject converts to.
    with open(stream, "wb") as out:
        proc = subprocess.run([*perf, "inject", "-i", data, "-o", "-"],
                              stdout=out, stderr=subprocess.PIPE, text=True,
                              errors="backslashreplace")
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise RecordError(f"perf inject failed (exit status "
                          f"{proc.returncode})")
    rename_mapping(stream, renamed, copier.name, copier.target)
    os.unlink(stream)
    with open(renamed, "rb") as f:
        proc = subprocess.run(
            [*OUTSIDE_CONTAINERS, *perf, "inject", "--jit", "-i", "-",
             "-o", injected],
            stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, errors="backslashreplace")
    os.unlink(renamed)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise RecordError(f"perf inject --jit failed (exit status "
                          f"{proc.returncode})")

"""Turning the support on and off in a running process from outside
(Python/perf_remote.c): find the block _PyPerf_Remote in the process's
memory through the ELF symbol table of the file that defines it, write a
request into it through /proc/PID/mem and set the main interpreter's eval
breaker.  The kernel decides who may write the memory (ptrace
attach rights); nothing of the process is run."""

import contextlib
import os
import stat
import struct
import time

from .common import RecordError
from .procroot import open_in_root

SYMBOL = b"_PyPerf_Remote"
MAGIC = b"CPython perfctl\0"
# The block's layout, version 1 (see _PyPerfRemoteControl).
LAYOUT = struct.Struct("<16sIIQ5I3iI")
FIELDS = ("magic", "version", "size", "runtime", "main_eval_breaker",
          "refused", "command", "lease_ms", "request", "result",
          "interps_on", "interps_by_request", "handled")
OFFSET = {"command": 40, "lease_ms": 44, "request": 48}
COMMANDS = {"off": 0, "perf": 1, "perf_jit": 2}
# How often a request is sent again (the eval breaker a thread stores
# may overwrite the one set from here) while it waits to be handled.
POKE_INTERVAL = 0.05

ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
SECTION = struct.Struct("<IIQQQQIIQQ")
SEGMENT = struct.Struct("<IIQQQQQQ")
SYMBOL_ENTRY = struct.Struct("<IBBHQQ")
SHT_DYNSYM = 11
PT_LOAD = 1


class Unsupported(RecordError):
    """The process's interpreter cannot be turned on from outside."""


# The most of a file's tables that is read: the process chose the file,
# and may have made its header claim anything.
MAX_TABLE = 16 * 1024 * 1024


def read_at(f, offset, size, file_size):
    if offset >= file_size or size > MAX_TABLE:
        return b""
    f.seek(offset)
    return f.read(min(size, file_size - offset))


def dynamic_symbol(f, name):
    """The value of the dynamic symbol name in the ELF file f, and the
    file's loadable segments as (offset, vaddr, filesz); None if f is not
    a 64-bit little-endian ELF file defining it."""
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode):
        return None
    file_size = st.st_size
    header = f.read(ELF_HEADER.size)
    if len(header) < ELF_HEADER.size or header[:6] != b"\x7fELF\x02\x01":
        return None
    (_, _, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize,
     shnum, _) = ELF_HEADER.unpack(header)
    table = read_at(f, phoff, phentsize * phnum, file_size)
    segments = []
    for i in range(phnum):
        entry = table[i * phentsize:i * phentsize + SEGMENT.size]
        if len(entry) < SEGMENT.size:
            break
        p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = SEGMENT.unpack(entry)
        if p_type == PT_LOAD:
            segments.append((p_offset, p_vaddr, p_filesz))
    table = read_at(f, shoff, shentsize * shnum, file_size)
    sections = [SECTION.unpack(table[i * shentsize:
                                     i * shentsize + SECTION.size])
                for i in range(shnum)
                if len(table) >= i * shentsize + SECTION.size]
    for (_, sh_type, _, _, offset, size, link, _, _, entsize) in sections:
        if sh_type != SHT_DYNSYM or link >= len(sections) or not entsize:
            continue
        symbols = read_at(f, offset, size, file_size)
        strings = read_at(f, sections[link][4], sections[link][5], file_size)
        for pos in range(0, len(symbols) - entsize + 1, entsize):
            st_name, _, _, shndx, value, _ = SYMBOL_ENTRY.unpack_from(
                symbols, pos)
            if (shndx != 0 and strings[st_name:st_name + len(name) + 1]
                    == name + b"\0"):
                return value, segments
    return None


def mappings(pid):
    """(start, file offset, path) of each file mapping of process pid."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except OSError as err:
        raise RecordError(f"cannot read the mappings of process {pid}: "
                          f"{err.strerror}") from None
    for line in lines:
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/"):
            start = int(fields[0].split("-")[0], 16)
            yield start, int(fields[2], 16), fields[5], fields[0]


def open_mapped(pid, path, range_):
    """The file mapped at range_ in process pid: through map_files (the
    very file, wherever it is; root only), else through the process's
    root directory, never following its links out of it."""
    try:
        # What it is, first (O_PATH opens no device); then that very file.
        fd = os.open(f"/proc/{pid}/map_files/{range_}",
                     os.O_PATH | os.O_CLOEXEC)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return open(f"/proc/self/fd/{fd}", "rb")
        finally:
            os.close(fd)
    except OSError:
        pass
    try:
        return open_in_root(pid, path)
    except OSError:
        return None


def find_control(pid):
    """The address of process pid's _PyPerf_Remote."""
    seen = set()
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = None
    for start, offset, path, range_ in mappings(pid):
        if path in seen:
            continue
        seen.add(path)
        # The interpreter is the program or libpython.
        base = os.path.basename(path)
        if not (base.startswith("python") or base.startswith("libpython")
                or path == exe):
            continue
        f = open_mapped(pid, path, range_)
        if f is None:
            continue
        with f:
            found = dynamic_symbol(f, SYMBOL)
        if found is None:
            continue
        value, segments = found
        for p_offset, p_vaddr, p_filesz in segments:
            if p_offset <= offset < p_offset + max(p_filesz, 1):
                return start - (p_vaddr + offset - p_offset) + value
    return None


class Control:
    """Process pid's _PyPerf_Remote, read and written through
    /proc/PID/mem."""

    def __init__(self, pid):
        self.pid = pid
        address = find_control(pid)
        if address is None:
            raise Unsupported(
                f"process {pid} runs an interpreter that cannot be turned "
                "on from outside (not Python, or a Python without this "
                "patch's on-demand support)")
        try:
            self.fd = os.open(f"/proc/{pid}/mem", os.O_RDWR | os.O_CLOEXEC)
        except OSError as err:
            raise RecordError(
                f"not allowed to write the memory of process {pid} "
                f"({err.strerror}): that takes root, or the same user where "
                "kernel.yama.ptrace_scope allows ptrace") from None
        self.address = address
        state = self.read()
        if (state["magic"] != MAGIC or state["version"] < 1
                or state["size"] < LAYOUT.size):
            self.close()
            raise Unsupported(f"process {pid}: unknown control block")
        self.layout = state

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read(self):
        try:
            data = os.pread(self.fd, LAYOUT.size, self.address)
        except OSError as err:
            raise RecordError(f"cannot read process {self.pid}: "
                              f"{err.strerror}") from None
        if len(data) < LAYOUT.size:
            raise RecordError(f"process {self.pid} has ended")
        return dict(zip(FIELDS, LAYOUT.unpack(data)))

    def write_u32(self, address, value):
        os.pwrite(self.fd, struct.pack("<I", value), address)

    def poke(self):
        """Set the main interpreter's eval breaker (the threads of the
        others notice a request when they next take the GIL)."""
        layout = self.layout
        with contextlib.suppress(OSError):
            self.write_u32(layout["runtime"] + layout["main_eval_breaker"],
                           1)

    def send(self, command, lease):
        """Send a request (command: "off", "perf" or "perf_jit"; lease in
        seconds); return its number."""
        state = self.read()
        if state["refused"]:
            raise RecordError(
                f"process {self.pid} refuses to be turned on from outside "
                "(started with -X perf=0 or PYTHONPERFSUPPORT=0)")
        request = (state["request"] + 1) & 0xFFFFFFFF or 1
        try:
            os.pwrite(self.fd, struct.pack(
                "<II", COMMANDS[command], max(1, int(lease * 1000))),
                self.address + OFFSET["command"])
            self.write_u32(self.address + OFFSET["request"], request)
        except OSError as err:
            raise RecordError(f"cannot write to process {self.pid}: "
                              f"{err.strerror}") from None
        self.poke()
        return request

    def wait(self, request, timeout):
        """Wait up to timeout seconds for request to be handled; return
        the state then, or None."""
        deadline = time.monotonic() + timeout
        next_poke = time.monotonic() + POKE_INTERVAL
        while True:
            state = self.read()
            if state["handled"] == request:
                return state
            now = time.monotonic()
            if now >= deadline:
                return None
            if now >= next_poke:
                self.poke()
                next_poke = now + POKE_INTERVAL
            time.sleep(0.005)

    def request(self, command, lease, timeout):
        """Send a request and wait for it: the state once handled, or
        None if it was not handled within timeout seconds."""
        state = self.wait(self.send(command, lease), timeout)
        if state is not None and state["result"]:
            raise RecordError(
                f"process {self.pid} could not turn the {command} support "
                f"on: {os.strerror(state['result'])}"
                if command != "off" else
                f"process {self.pid}: {os.strerror(state['result'])}")
        return state


# How long the support stays on after a renewal: a pyprofile that is
# killed leaves a process on for at most this long (and until a thread
# next checks the eval breaker, blocks or makes a new function).
LEASE = 5.0
RENEW_INTERVAL = 1.0
# How long the end of a recording waits for the process to turn off.
OFF_TIMEOUT = 2.0


def describe_wait(seconds):
    return (f"{seconds * 1000:.0f} ms" if seconds < 1
            else f"{seconds:.1f} s")


def say(message):
    import sys
    print(f"pyprofile: {message}", file=sys.stderr)


class Session:
    """The support of process pid turned on for a recording: start()
    sends the request, poll() (every ~0.1 s) says when it was handled
    and renews the lease, stop() turns it off again."""

    def __init__(self, pid, backend, lease=LEASE):
        self.pid, self.backend, self.lease = pid, backend, lease
        self.control = Control(pid)
        self.pending = None
        self.on = False
        self.gone = False

    def start(self):
        self.sent = time.monotonic()
        self.pending = self.control.send(self.backend, self.lease)
        self.renewed = self.sent
        state = self.control.wait(self.pending, 0.5)
        if state is None:
            say(f"process {self.pid} has not checked its eval breaker yet "
                "(a long C call or a blocked thread): waiting, recording "
                "meanwhile")
        else:
            self.handled(state)

    def handled(self, state):
        self.pending = None
        if state["result"]:
            raise RecordError(f"process {self.pid} could not turn the "
                              f"{self.backend} support on: "
                              f"{os.strerror(state['result'])}")
        if not self.on:
            waited = describe_wait(time.monotonic() - self.sent)
            if state["interps_by_request"]:
                say(f"turned the {self.backend} support on in process "
                    f"{self.pid} after {waited} "
                    f"({state['interps_by_request']} interpreter(s))")
            else:
                say(f"process {self.pid} had the support on already")
        self.on = True

    def poll(self):
        if self.gone:
            return
        try:
            self.renew()
        except (RecordError, OSError):
            if os.path.exists(f"/proc/{self.pid}"):
                raise
            # The process ended during the recording, which goes on to
            # the end of perf's.
            self.gone = True

    def renew(self):
        if self.pending is not None:
            state = self.control.read()
            if state["handled"] == self.pending:
                self.handled(state)
            else:
                self.control.poke()
        if time.monotonic() - self.renewed >= RENEW_INTERVAL:
            self.renewed = time.monotonic()
            self.pending = self.control.send(self.backend, self.lease)

    def stop(self):
        if self.gone:
            self.control.close()
            return
        try:
            state = self.control.request("off", self.lease, OFF_TIMEOUT)
            if state is None:
                say(f"process {self.pid} has not turned the support off "
                    f"yet: it does within {self.lease:g} s, at its next "
                    "check of the eval breaker, blocking call or new "
                    "function")
        except (RecordError, OSError) as err:
            if not os.path.exists(f"/proc/{self.pid}"):
                return
            say(str(err))
        finally:
            self.control.close()


__all__ = ["Control", "Session", "Unsupported", "describe_wait"]

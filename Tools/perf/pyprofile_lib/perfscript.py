"""Reading perf script's output from a pipe: the samples counted by their
text as it is read (memory goes with the distinct stacks), then each
distinct stack made into frames."""

import collections
import contextlib
import fcntl
import io
import os
import re
import shutil
import subprocess
import sys
import time

from .common import RecordError
from .folding import Frame, Node, python_view


# perf script -F comm,pid,ip,sym,dso prints a sample as a line "COMM PID"
# (COMM may hold spaces, and start with one), then a line per frame,
# "\tADDRESS SYMBOL (DSO)" innermost first, then an empty line.
SAMPLE_END = b"\n\n"
# The addresses, which vary from sample to sample where the functions do
# not: without them, the samples of a stack are one text.
ADDRESS_RE = re.compile(rb"^\t *[0-9a-f]+ ", re.M)
HEADER_RE = re.compile(r"^(.*?) +(\d+) *$")
FRAME_TEXT_RE = re.compile(r"^\t(.*) \((.*)\)$")


def count_samples(stream, chunk_size=1 << 16, exact_limit=2000):
    """The samples of perf script's output, read from the binary file
    stream as perf writes it: {stack's text without addresses: samples}.
    Memory goes with the number of distinct stacks, not of samples.  Read
    in small chunks: larger ones (mmap()ed by malloc) cost more in page
    faults than all the rest.  The text is cut and counted in C
    (bytes.split(), Counter), first as it is:
    the samples of a stack mostly repeat each other, addresses and all,
    so that the addresses are taken out of a few distinct texts only,
    whenever exact_limit of them are kept, and at the end."""
    counts = collections.Counter()
    exact = collections.Counter()

    def merge():
        for text, count in exact.items():
            counts[ADDRESS_RE.sub(b"\t", text)] += count
        exact.clear()

    rest = b""
    while chunk := stream.read(chunk_size):
        end = chunk.rfind(SAMPLE_END)
        if end < 0:
            rest += chunk
            continue
        exact.update((rest + chunk[:end]).split(SAMPLE_END))
        rest = chunk[end + len(SAMPLE_END):]
        if len(exact) > exact_limit:
            merge()
    exact.update(rest.split(SAMPLE_END))
    merge()
    return counts


def fold_stack(text):
    """The process ("COMM PID"), its PID (or None) and frames (outermost
    first) of the text of a sample."""
    header, *lines = text.strip("\n").split("\n")
    match = HEADER_RE.match(header.rstrip())
    if match:
        # The name as the process has it, leading spaces and all.
        pid = int(match.group(2))
        process = f"{match.group(1)} {pid}"
    else:
        process, pid = header.strip(), None
    stack = []
    for line in lines:
        match = FRAME_TEXT_RE.match(line)
        if match:
            stack.append(Frame(*match.groups()))
    # perf lists the innermost frame first; the process comes first.
    stack.reverse()
    # A function inlined into another (DWARF unwinding shows them) is in
    # the library of the function it was inlined into, listed right
    # before it.
    dso = ""
    for frame in stack:
        if frame.dso == "inlined":
            frame.dso = dso
        else:
            dso = frame.dso
    return process, pid, stack


def fold_perf_script(stream, native=False):
    """The tree of the output of "perf script -F comm,pid,ip,sym,dso",
    read from the binary file stream (a pipe from perf), in the Python
    view unless native is set, and the PIDs sampled."""
    root = Node("all", "root")
    pids = set()
    for text, count in count_samples(stream).items():
        text = text.decode("utf-8", "backslashreplace")
        if not text.strip():
            continue
        process, pid, stack = fold_stack(text)
        if pid is not None:
            pids.add(pid)
        if not native:
            stack = python_view(stack)
        root.add([Frame(process, ""), *stack], count)
    return root, pids


def parse_perf_script(text, native=False):
    """The tree of perf script's output text (see fold_perf_script())."""
    return fold_perf_script(io.BytesIO(os.fsencode(text)), native)[0]


F_SETPIPE_SZ = 1031


class PipeReader:
    """perf script's output from a pipe, in reads of up to size bytes.
    perf writes 4 KiB at a time to a pipe (stdio's buffer), and a read for
    each costs more than all the folding: its buffer is made 1 MiB (with
    stdbuf), the pipe too, and where stdbuf is missing a short read waits
    a moment for more."""

    def __init__(self, fd, size=1 << 16):
        self.fd, self.size = fd, size
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, F_SETPIPE_SZ, 1 << 20)

    def read(self, size):
        data = os.read(self.fd, self.size)
        if 0 < len(data) < self.size:
            time.sleep(0.002)
        return data


def perf_script(args, native, tmp):
    """Run perf script and fold its output as it comes (see
    fold_perf_script()), never all of it in memory."""
    stdbuf = shutil.which("stdbuf")
    if stdbuf:
        args = [stdbuf, "-o", "1M", *args]
    with open(os.path.join(tmp, "perf-script.err"), "w+b") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err,
                                bufsize=0)
        try:
            with proc.stdout:
                tree, pids = fold_perf_script(
                    PipeReader(proc.stdout.fileno()), native)
            status = proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if status != 0:
            err.seek(max(0, err.seek(0, os.SEEK_END) - 3000))
            sys.stderr.write(err.read().decode("utf-8", "backslashreplace"))
            raise RecordError(f"perf script failed (exit status {status})")
    return tree, pids

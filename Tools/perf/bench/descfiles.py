"""The description files (perf maps, jitdumps) that the benchmarks'
processes leave in /tmp: a benchmark's are of no use to a profiler."""

import os
import sys


def remove_files(pid):
    """Remove the perf map and the jitdump of process pid, if it left
    them; return their total size in bytes."""
    size = 0
    for path in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
        try:
            size += os.path.getsize(path)
            os.unlink(path)
        except FileNotFoundError:
            pass
    return size


def remove_own_files():
    """Stop describing trampolines, then remove this process's files."""
    sys.deactivate_stack_trampoline()
    remove_files(os.getpid())

"""What in-process unwinds cost beside many trampolines ("make bench").

Run as: python unwind.py CODE_OBJECTS ROUNDS

Each configuration is a child interpreter that first runs CODE_OBJECTS
new functions, then times C++-style throws: _Unwind_RaiseException()
with no handler, which searches the whole stack as a C++ throw that
nothing catches does, in a native thread that runs no Python code
(_testinternalcapi.raise_native_exceptions()), so that the stack is the
same in every configuration.  glibc's backtrace() and crash handlers look
frames up in the same libgcc registry, which trampolines used to join and
slow down for the whole process.

Then times glibc's backtrace() from C code that Python code called 50
calls deep, against the same walk from the top: with trampolines, each of
those calls adds two native frames (its trampoline and the evaluator's),
which backtrace() walks through since the dynamic loader knows the arenas
(Python/perf_loader.c); without them, none.

The configurations run interleaved, ROUNDS times: without trampolines,
with -X perf, and with -X perf deactivated before the measurement.
Prints the minimum per throw, in microseconds, and the minimum cost of
the deeper walk's extra frames, in nanoseconds per frame.
"""

import os
import subprocess
import sys

from descfiles import remove_files


def child(code_objects, mode):
    import time
    import _testinternalcapi as t

    for i in range(code_objects):
        exec(f"def g{i}(): pass\ng{i}()", {})
    if mode == "deactivated":
        sys.deactivate_stack_trampoline()
    n = 2000
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        t.raise_native_exceptions(n)
        best = min(best, (time.perf_counter() - start) / n)

    import ctypes
    libc = ctypes.PyDLL(None)
    libc.backtrace.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    addrs = (ctypes.c_void_p * 1024)()

    def walk():
        fastest = float("inf")
        for _ in range(200):
            start = time.perf_counter_ns()
            frames = libc.backtrace(addrs, 1024)
            fastest = min(fastest, time.perf_counter_ns() - start)
        return frames, fastest

    def deep(depth):
        return walk() if depth == 0 else deep(depth - 1)

    top_frames, top = deep(0)
    frames, deepest = deep(50)
    extra = frames - top_frames
    per_frame = (deepest - top) / extra if extra else 0.0
    print(f"child {os.getpid()} {best * 1e6:.3f} {extra} {per_frame:.1f}",
          flush=True)


def run(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("child "):
            _, pid, throw, frames, per_frame = line.split()
            remove_files(int(pid))
            return float(throw), int(frames), float(per_frame)
    raise SystemExit(f"{cmd} failed ({out.returncode}):\n"
                     + (out.stdout + out.stderr)[-2000:])


def main():
    if sys.argv[1] == "--child":
        child(int(sys.argv[2]), sys.argv[3])
        return
    code_objects, rounds = int(sys.argv[1]), int(sys.argv[2])
    configs = {
        "no trampolines": [],
        "-X perf": ["-X", "perf"],
        "-X perf, deactivated": ["-X", "perf"],
    }
    modes = {"no trampolines": "plain", "-X perf": "active",
             "-X perf, deactivated": "deactivated"}
    best = {name: float("inf") for name in configs}
    walks = {name: (0, float("inf")) for name in configs}
    for _ in range(rounds):
        for name, flags in configs.items():
            cmd = [sys.executable, *flags, __file__, "--child",
                   str(code_objects), modes[name]]
            throw, frames, per_frame = run(cmd)
            best[name] = min(best[name], throw)
            if frames:
                walks[name] = (frames, min(walks[name][1], per_frame))
    base = best["no trampolines"]
    for name, throw in best.items():
        frames, per_frame = walks[name]
        walk = (f"backtrace() {frames} frames more at 50 calls deep, "
                f"{per_frame:.0f} ns each" if frames
                else "backtrace() no frames more at 50 calls deep")
        print(f"unwind {name:<21} throw {throw:6.2f} us "
              f"({throw / base:.2f}x); {walk}")


if __name__ == "__main__":
    main()

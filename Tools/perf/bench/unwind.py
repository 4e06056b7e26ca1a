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
(Python/perf_loader.c); without them, none.  The same, 50 calls deep
through C (operator.call()), gives every configuration native frames to
walk: without trampolines, only frames of the interpreter's own code.

The configurations run interleaved, ROUNDS times: without trampolines,
with -X perf, and with -X perf deactivated before the measurement.
Prints the minimum per throw, in microseconds, the minimum cost of each
deeper walk's extra frames, in nanoseconds per frame, and the cost of a
frame walked through trampolines against a frame of the interpreter's
own code.
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
    import operator
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

    def deep_through_c(depth):
        if depth == 0:
            return walk()
        return operator.call(deep_through_c, depth - 1)

    top_frames, top = deep(0)
    walks = []
    for frames, fastest in (deep(50), deep_through_c(50)):
        extra = frames - top_frames
        per_frame = (fastest - top) / extra if extra else 0.0
        walks.append(f"{extra} {per_frame:.1f}")
    print(f"child {os.getpid()} {best * 1e6:.3f} {' '.join(walks)}",
          flush=True)


def run(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("child "):
            _, pid, throw, *walks = line.split()
            remove_files(int(pid))
            return float(throw), [(int(frames), float(per_frame))
                                  for frames, per_frame
                                  in zip(walks[::2], walks[1::2])]
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
    # For each configuration and depth: frames more than at the top, and
    # the minimum cost of each.
    walks = {name: [(0, float("inf"))] * 2 for name in configs}
    for _ in range(rounds):
        for name, flags in configs.items():
            cmd = [sys.executable, *flags, __file__, "--child",
                   str(code_objects), modes[name]]
            throw, measured = run(cmd)
            best[name] = min(best[name], throw)
            walks[name] = [(frames, min(old, per_frame))
                           for (_, old), (frames, per_frame)
                           in zip(walks[name], measured)]

    def described(frames, per_frame):
        return f"{frames} frames more, {per_frame:.0f} ns each" if frames \
            else "no frames more"

    base = best["no trampolines"]
    for name, throw in best.items():
        python_calls, c_calls = walks[name]
        print(f"unwind {name:<21} throw {throw:6.2f} us "
              f"({throw / base:.2f}x); backtrace() 50 calls deep: "
              f"{described(*python_calls)}; through C: "
              f"{described(*c_calls)}")
    ordinary = walks["no trampolines"][1][1]
    for what, (frames, per_frame) in zip(("", " through C"),
                                         walks["-X perf"]):
        print(f"unwind -X perf: a frame of the walk{what} costs "
              f"{per_frame / ordinary:.2f}x a frame of the interpreter's "
              f"own code without trampolines")


if __name__ == "__main__":
    main()

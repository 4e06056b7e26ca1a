"""What in-process unwinds cost beside many trampolines ("make bench").

Run as: python unwind.py CODE_OBJECTS ROUNDS

Each configuration is a child interpreter that first runs CODE_OBJECTS
new functions, then times native unwinds from C code (glibc's
backtrace() in a signal handler and C++ exceptions use the same libgcc
unwinder):

- "throw": _Unwind_RaiseException() with no handler, as a C++ throw
  that nothing catches searches the whole stack, from a C function
  (_testinternalcapi's, with the GIL released) that a new thread calls;
- "backtrace": glibc's backtrace() from a C function that Python code
  calls 70 frames deep.

With trampolines active, both stop at the innermost trampoline (see the
howto's "Debuggers and crash reports"); after deactivation, the thread and
the 70 frames started later have none, so the stacks are the same as
without trampolines and the time tells what the trampolines cost every
unwind in the process.

The configurations run interleaved, ROUNDS times: without trampolines,
with -X perf, and with -X perf deactivated before the measurement.
Prints the minimum per unwind, in microseconds.
"""

import os
import subprocess
import sys

from descfiles import remove_files


def child(code_objects, mode):
    import threading
    import time
    import _testinternalcapi as t

    for i in range(code_objects):
        exec(f"def g{i}(): pass\ng{i}()", {})
    if mode == "deactivated":
        sys.deactivate_stack_trampoline()

    def timed(func, n):
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            func(n)
            best = min(best, (time.perf_counter() - start) / n)
        return best * 1e6

    result = []
    worker = threading.Thread(
        target=lambda: result.append(timed(t.raise_native_exceptions, 2000)))
    worker.start()
    worker.join()

    def backtraces(n):
        for _ in range(n):
            t.native_backtrace()

    def deep(depth, n):
        if depth:
            return deep(depth - 1, n)
        return timed(backtraces, n)

    print(f"child {os.getpid()} {result[0]:.3f} {deep(70, 200):.3f}",
          flush=True)


def run(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("child "):
            _, pid, throw, backtrace = line.split()
            remove_files(int(pid))
            return float(throw), float(backtrace)
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
    best = {name: [float("inf")] * 2 for name in configs}
    for _ in range(rounds):
        for name, flags in configs.items():
            cmd = [sys.executable, *flags, __file__, "--child",
                   str(code_objects), modes[name]]
            for i, value in enumerate(run(cmd)):
                best[name][i] = min(best[name][i], value)
    base = best["no trampolines"]
    for name, (throw, backtrace) in best.items():
        print(f"unwind {name:<21} throw {throw:7.2f} us "
              f"({throw / base[0]:.2f}x)  backtrace {backtrace:7.2f} us "
              f"({backtrace / base[1]:.2f}x)")


if __name__ == "__main__":
    main()

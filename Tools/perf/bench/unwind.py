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

The configurations run interleaved, ROUNDS times: without trampolines,
with -X perf, and with -X perf deactivated before the measurement.
Prints the minimum per throw, in microseconds.
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
    print(f"child {os.getpid()} {best * 1e6:.3f}", flush=True)


def run(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("child "):
            _, pid, throw = line.split()
            remove_files(int(pid))
            return float(throw)
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
    for _ in range(rounds):
        for name, flags in configs.items():
            cmd = [sys.executable, *flags, __file__, "--child",
                   str(code_objects), modes[name]]
            best[name] = min(best[name], run(cmd))
    base = best["no trampolines"]
    for name, throw in best.items():
        print(f"unwind {name:<21} throw {throw:6.2f} us ({throw / base:.2f}x)")


if __name__ == "__main__":
    main()

"""What a debugger attached from the start costs ("make bench" runs it).

Run as: python debugger.py FUNCTIONS ROUNDS

A child interpreter defines FUNCTIONS new functions (one exec() of their
source) and calls each once, as fast as it can: every call makes a
trampoline that debuggers are told about, the worst case for them.  It
runs inactive and with -X perf, alone and under gdb ("gdb -batch -ex
run"), interleaved, ROUNDS times.  Prints the minimum of the child's own
time (from before the exec() to after the last call) per configuration.
"""

import os
import re
import shutil
import subprocess
import sys
import time

from descfiles import remove_files


def child(functions):
    namespace = {}
    source = "".join(f"def f{i}():\n    return {i}\n"
                     for i in range(functions))
    start = time.perf_counter()
    exec(source, namespace)
    for i in range(functions):
        namespace[f"f{i}"]()
    print(f"child {os.getpid()} {time.perf_counter() - start:.6f}",
          flush=True)


def run(cmd):
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, check=False)
    match = re.search(r"^child (\d+) ([0-9.]+)$", out.stdout, re.M)
    if match is None:
        raise SystemExit(f"{cmd} failed ({out.returncode}):\n"
                         + (out.stdout + out.stderr)[-2000:])
    pid, seconds = int(match.group(1)), float(match.group(2))
    remove_files(pid)
    return seconds


def main():
    if sys.argv[1] == "--child":
        child(int(sys.argv[2]))
        return
    functions, rounds = int(sys.argv[1]), int(sys.argv[2])
    gdb = shutil.which("gdb")
    if gdb is None:
        raise SystemExit("debugger.py needs gdb")
    python = [sys.executable, __file__, "--child", str(functions)]
    perf = [sys.executable, "-X", "perf", __file__, "--child",
            str(functions)]
    under_gdb = [gdb, "-nx", "-batch", "-ex", "run", "--args"]
    configs = {
        "inactive": python,
        "-X perf": perf,
        "inactive, gdb": under_gdb + python,
        "-X perf, gdb": under_gdb + perf,
    }
    best = {name: float("inf") for name in configs}
    for _ in range(rounds):
        for name, cmd in configs.items():
            best[name] = min(best[name], run(cmd))
    base = best["-X perf"]
    for name, seconds in best.items():
        print(f"debugger {name:<14} {seconds:7.3f} s "
              f"({seconds / base:.2f}x -X perf alone)")


if __name__ == "__main__":
    main()

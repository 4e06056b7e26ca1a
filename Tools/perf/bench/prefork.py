"""What compiling trampolines before fork saves a prefork server's workers.

Run as: python -X perf prefork.py FUNCTIONS CHILDREN

The parent defines FUNCTIONS functions that it never runs (an application
preloaded by the server), then forks CHILDREN workers one after the other;
each runs every function once and leaves with os._exit().  Twice: first
as is, then with the parent calling PyUnstable_PerfTrampoline_CompileCode()
on every function's code before forking (through _testcapi, the only way
to call it from Python).  Prints the median time per worker (fork to the
end of waitpid()) and the size of each worker's map.  Every map is removed
afterwards.
"""

import os
import statistics
import sys
import time

import _testcapi

from descfiles import remove_files, remove_own_files


def run_workers(functions, children):
    times, own = [], []
    for _ in range(children):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            for f in functions:
                f()
            os._exit(0)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - start)
        path = f"/tmp/perf-{pid}.map"
        own.append(os.path.getsize(path))
        remove_files(pid)
    return statistics.median(times), sum(own) / children



def main():
    count, children = int(sys.argv[1]), int(sys.argv[2])
    results = {}
    for precompile in (False, True):
        namespace = {}
        tag = "pre" if precompile else "lazy"
        exec("\n".join(f"def {tag}{i}():\n    return {i}"
                       for i in range(count)), namespace)
        functions = [namespace[f"{tag}{i}"] for i in range(count)]
        if precompile:
            for f in functions:
                _testcapi.perf_trampoline_compile_code(f.__code__)
            _testcapi.perf_trampoline_set_persist_after_fork(1)
        results[tag] = run_workers(functions, children)
    for tag, label in (("lazy", "workers make trampolines"),
                       ("pre", "parent compiled them")):
        seconds, own = results[tag]
        print(f"prefork {label:<25} {seconds * 1e3:7.2f} ms per worker, "
              f"{own / 1e3:8.1f} kB of map per worker")
    remove_own_files()


if __name__ == "__main__":
    main()

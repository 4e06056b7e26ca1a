"""What a fork costs with perf trampolines ("make bench" runs it).

Run as: python [-X perf | -X perf_jit] fork.py FUNCTIONS CHILDREN

The parent makes FUNCTIONS functions and runs each once, so that each has a
trampoline and a description in the parent's file, then forks CHILDREN
children one after the other, twice: children that run only a function
they inherited, then children that also run one function of their own (a
trampoline made in the child), each leaving with os._exit(), as a prefork
worker would.  Prints, for each kind, the median and minimum wall time per
fork (from fork() to the end of waitpid() in the parent) and the mean size
of the children's description files, which are then removed, as is the
parent's own.
"""

import os
import statistics
import sys
import time

from descfiles import remove_files, remove_own_files


def main():
    functions, children = int(sys.argv[1]), int(sys.argv[2])
    namespace = {}
    for i in range(functions):
        exec(f"def f{i}():\n    return {i}\n", namespace)
        namespace[f"f{i}"]()
    backend = ("perf_jit" if "perf_jit" in sys._xoptions
               else "perf" if "perf" in sys._xoptions else "inactive")
    for new_code in (False, True):
        times, sizes = [], []
        for _ in range(children):
            start = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                if new_code:
                    def in_child():
                        return namespace["f0"]()
                    in_child()
                else:
                    namespace["f0"]()
                os._exit(0)
            os.waitpid(pid, 0)
            times.append(time.perf_counter() - start)
            sizes.append(remove_files(pid))
        kind = "new code" if new_code else "inherited"
        print(f"fork {backend:<9} {kind:<9} "
              f"{statistics.median(times) * 1e3:7.2f} ms "
              f"per fork (min {min(times) * 1e3:.2f}), "
              f"{sum(sizes) / children / 1e3:7.1f} kB written per child")
    remove_own_files()


if __name__ == "__main__":
    main()

"""Trampolines do no harm to what the host process does beside them.

Each scenario runs the same program without trampolines and with each
backend, in the same test, and expects the same outcome: in-process
samplers that unwind in a signal handler, native exceptions raised in
other threads, and Python run on a stack that is not the thread's own.
"""

import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (MUSL, PerfTestCase,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")

_testinternalcapi = import_helper.import_module("_testinternalcapi")
if not hasattr(_testinternalcapi, "start_backtrace_sampler"):
    raise unittest.SkipTest("needs _testinternalcapi's host helpers")


CONFIGURATIONS = {
    "no trampolines": (),
    "perf": ("-X", "perf"),
    "perf_jit": ("-X", "perf_jit"),
}


# A sampler calls glibc's backtrace() on SIGPROF every 100 microseconds of
# CPU time while the program runs for a fixed number of iterations
# (never a time: the outcome must not depend on the machine's speed), and
# counts the walks that reach the start of the thread that started it.
SAMPLED = """
    import sys, threading
    import _testinternalcapi as t

    mode, rounds = sys.argv[1], int(sys.argv[2])
    t.start_backtrace_sampler(100)
    if mode == "new_functions":
        # Every function is new: a trampoline, and its descriptions, each.
        for i in range(rounds):
            exec(f"def g{i}(): pass\\ng{i}()", {})
        result = rounds
    else:
        # Native exceptions in another thread, unwinding its whole stack,
        # while the main thread runs Python code.
        results = []
        worker = threading.Thread(
            target=lambda: results.append(t.raise_native_exceptions(rounds)))
        worker.start()
        def spin(n):
            return n if n < 2 else spin(n - 1) + 1
        while worker.is_alive():
            spin(50)
        worker.join()
        result = results[0]
    samples, complete = t.stop_backtrace_sampler()
    # In the main thread only, every walk reaches the thread's start.
    print("done", result, samples > 0,
          mode != "new_functions" or complete == samples)
"""


class TestInProcessUnwinders(PerfTestCase):
    """An unwinder in a signal handler, as in-process samplers and crash
    handlers have, behaves as it does without trampolines."""

    def check_same(self, mode, rounds):
        script = self.write_script(SAMPLED)
        outcomes = {}
        for name, flags in CONFIGURATIONS.items():
            # A hang fails in run_python(), after its timeout.
            pid, rc, out, err = self.run_python(
                *flags, script, mode, str(rounds), expect_rc=None)
            outcomes[name] = (rc, out, err)
        expected = (0, f"done {rounds} True True\n", "")
        baseline = outcomes.pop("no trampolines")
        if baseline != expected:
            # Nothing to compare with: the platform fails the program
            # by itself (as qemu-user for aarch64 does here, where
            # _Unwind_RaiseException() in a thread never reports
            # _URC_END_OF_STACK).
            self.skipTest(f"without trampolines the program gives "
                          f"{baseline!r}, not {expected!r}")
        for name, outcome in outcomes.items():
            self.assertEqual(outcome, expected, name)

    def test_new_functions_under_sampler(self):
        # libgcc's registry of unwind information, if the trampolines were
        # in it, would be sorted with malloc() inside the first lookup,
        # which may be the signal handler's: a corrupted heap.  Each new
        # arena's unwind information is added to the object the dynamic
        # loader knows meanwhile, and every walk goes through the
        # trampolines to the thread's start.
        self.check_same("new_functions", 20000)

    def test_native_exceptions_under_sampler(self):
        # With the trampolines in libgcc's registry, a lookup holds one
        # global lock: the handler interrupting a throw deadlocks.
        self.check_same("native_exceptions", 20000)


FOREIGN = """
    import sys, threading
    import _testinternalcapi as t

    depth = int(sys.argv[1])

    def recurse(n):
        return 0 if n == 0 else recurse(n - 1) + 1

    def run():
        return recurse(depth)

    # The stack is mapped here, before the thread below is started: it
    # lies above that thread's own stack.
    print("main", t.call_on_foreign_stack(run))
    results = []
    worker = threading.Thread(
        target=lambda: results.append(t.call_on_foreign_stack(run)))
    worker.start()
    worker.join()
    print("thread", results[0])
    print("done")
"""


@unittest.skipIf(support.check_sanitizer(address=True),
                 "AddressSanitizer does not support swapcontext()")
@unittest.skipIf(MUSL, "musl has no makecontext()")
class TestForeignStack(PerfTestCase):
    """Python run on a makecontext() stack, as fiber and coroutine
    libraries do, runs as it does without trampolines: the stack's bounds
    are unknown, so calls there are not trampolined."""

    def test_recursion_on_foreign_stack(self):
        # 900 calls, inlined, fit in the 256 KiB stack many times over;
        # 900 trampolined calls (an evaluator frame each) do not.
        script = self.write_script(FOREIGN)
        expected = "main 900\nthread 900\ndone\n"
        for name, flags in CONFIGURATIONS.items():
            with self.subTest(name):
                pid, rc, out, err = self.run_python(*flags, script, "900",
                                                    expect_rc=None)
                self.assertEqual((rc, out, err), (0, expected, ""))


if __name__ == "__main__":
    unittest.main()

"""Recursion: the trampolines add native frames to Python calls, and must
neither change the recursion limit nor crash deep recursion."""

import sys
import unittest

from test import support
from test.support import import_helper, threading_helper
from test.test_perf_profiler.util import (PerfTestCase,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestRecursion(PerfTestCase):

    SCRIPT = """
        import json, sys

        if len(sys.argv) > 1 and sys.argv[1] == "activate":
            sys.activate_stack_trampoline("perf")

        depth = 0

        def plain():
            global depth
            depth += 1
            plain()

        def defaults(a=1, b=2):
            global depth
            depth += 1
            defaults()

        def kwargs(*, k):
            global depth
            depth += 1
            kwargs(k=k)

        def mutual_a():
            global depth
            depth += 1
            mutual_b()

        def mutual_b():
            global depth
            depth += 1
            mutual_a()

        class C:
            def meth(self):
                global depth
                depth += 1
                self.meth()
            def __getitem__(self, i):
                global depth
                depth += 1
                return self[i + 1]

        def generator():
            global depth
            depth += 1
            yield next(generator())

        def catching(n):
            # Catches the error a few frames below the limit and recurses
            # again from there.
            global depth
            depth += 1
            try:
                return catching(n + 1)
            except RecursionError:
                if n == 500:
                    return catching(n + 1)
                raise

        kinds = {
            "plain": plain,
            "defaults": defaults,
            "kwargs": lambda: kwargs(k=1),
            "mutual": mutual_a,
            "method": C().meth,
            "getitem": lambda: C()[0],
            "generator": lambda: next(generator()),
            "catching": lambda: catching(1),
        }
        results = {}
        for name, func in kinds.items():
            for attempt in range(3):
                depth = 0
                try:
                    func()
                except RecursionError as exc:
                    results[f"{name}/{attempt}"] = [depth, str(exc)]
                else:
                    results[f"{name}/{attempt}"] = "no RecursionError"
        results["active"] = sys.is_stack_trampoline_active()
        print(json.dumps(results))
    """

    def test_recursion_depth_unchanged(self):
        script = self.write_script(self.SCRIPT)
        pid, rc, out, err = self.run_python(script)
        baseline = self.last_json(out)
        self.assertIs(baseline.pop("active"), False)
        for depth, message in baseline.values():
            self.assertGreater(depth, 100)
        for name, flags, args in [("-X perf", ("-X", "perf"), ()),
                                  ("runtime", (), ("activate",))]:
            with self.subTest(mode=name):
                pid, rc, out, err = self.run_python(*flags, script, *args)
                self.assertEqual(err, "")
                res = self.last_json(out)
                self.assertIs(res.pop("active"), True)
                self.assertEqual(res, baseline)
                text = self.assert_map_file(pid)
                self.assert_symbol_count(text, f"py::plain:{script}", 1)

    DEEP_SCRIPT = """
        import json, sys, threading

        mode, limit, stack_size = sys.argv[1], int(sys.argv[2]), \\
            int(sys.argv[3])
        depth = 0

        def deep():
            global depth
            depth += 1
            deep()

        def run():
            global result
            try:
                deep()
            except RecursionError:
                result = depth

        sys.setrecursionlimit(limit)
        result = None
        if mode == "thread":
            threading.stack_size(stack_size)
            t = threading.Thread(target=run)
            t.start()
            t.join()
        else:
            run()
        print(json.dumps(result))
    """

    def check_deep(self, mode, limit, stack_size=0):
        script = self.write_script(self.DEEP_SCRIPT)
        args = (script, mode, str(limit), str(stack_size))
        pid, rc, out, err = self.run_python(*args, expect_rc=None)
        if rc != 0:
            self.skipTest(f"recursion to {limit} crashes even without "
                          f"-X perf (exit code {rc})")
        baseline = self.last_json(out)
        self.assertIsNotNone(baseline)
        pid, rc, out, err = self.run_python("-X", "perf", *args,
                                            expect_rc=None)
        self.assertEqual(rc, 0, f"with -X perf, recursion to the limit of "
                                f"{limit} crashed the interpreter: {err}")
        self.assertEqual(self.last_json(out), baseline)

    def test_high_recursion_limit(self):
        # Without -X perf, Python-to-Python calls do not use the C stack,
        # so a high recursion limit is safe: it must remain so.
        self.check_deep("main", 50_000)

    @threading_helper.requires_working_threading()
    def test_default_limit_in_thread_with_small_stack(self):
        self.check_deep("thread", sys.getrecursionlimit(), 256 * 1024)

    # A thread with a 256 KiB stack forks; the child, whose only thread
    # runs on that stack, turns the support on and recurses 15,000 calls
    # deep.  The stack size limit is raised to 64 MiB first: a child that
    # took the main thread's limit for its own (1/32 of 64 MiB: 2 MiB of
    # trampolined calls) would overflow its stack.
    FORKED_BY_THREAD_SCRIPT = """
        import os, resource, sys, threading

        soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
        want = 64 * 1024 * 1024
        if hard == resource.RLIM_INFINITY or hard >= want:
            resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
        sys.setrecursionlimit(20_000)

        def f(n):
            return 0 if n == 0 else f(n - 1) + 1

        def fork_and_recurse():
            pid = os.fork()
            if pid == 0:
                if sys.argv[1] == "activate":
                    sys.activate_stack_trampoline("perf")
                os._exit(0 if f(15_000) == 15_000 else 1)
            statuses.append(os.waitpid(pid, 0)[1])

        statuses = []
        threading.stack_size(256 * 1024)
        t = threading.Thread(target=fork_and_recurse)
        t.start()
        t.join()
        print(statuses)
    """

    @threading_helper.requires_working_threading()
    @support.requires_fork()
    def test_child_forked_by_a_thread(self):
        import_helper.import_module("resource")
        script = self.write_script(self.FORKED_BY_THREAD_SCRIPT)
        for arg in ("plain", "activate"):
            with self.subTest(arg):
                pid, rc, out, err = self.run_python(script, arg)
                self.assertEqual(out.strip(), "[0]", err)

    # Each level goes Python -> C -> Python, so it takes C stack with or
    # without trampolines.
    C_RECURSION_SCRIPT = """
        import sys, threading

        def f(n):
            if n == 0:
                return 0
            return next(map(g, [n]))

        def g(n):
            return f(n - 1) + 1

        stack_size, depth = int(sys.argv[1]), int(sys.argv[2])
        result = []
        if stack_size:
            threading.stack_size(stack_size)
            t = threading.Thread(target=lambda: result.append(f(depth)))
            t.start()
            t.join()
        else:
            sys.setrecursionlimit(1_000_000)
            result.append(f(depth))
        print(result)
    """

    def check_c_recursion(self, stack_size, low, high):
        """Find how deep the recursion goes without trampolines (between
        low and high), then check that nearly as deep works with them."""
        script = self.write_script(self.C_RECURSION_SCRIPT)

        def works(depth, *flags):
            pid, rc, out, err = self.run_python(
                *flags, script, str(stack_size), str(depth), expect_rc=None)
            return rc == 0 and out.strip() == f"[{depth}]"

        if not works(low):
            self.skipTest(f"a recursion of {low} crashes without -X perf")
        while high - low > max(2, low // 100):
            middle = (low + high) // 2
            if works(middle):
                low = middle
            else:
                high = middle
        # Trampolines may take 1/32 of the stack.
        depth = low * 95 // 100
        if support.verbose:
            print(f"\n    without -X perf: {low}, checked with it: {depth}",
                  file=sys.stderr)
        self.assertTrue(works(depth, "-X", "perf"),
                        f"a recursion of {depth} crashed with -X perf; "
                        f"{low} works without it")

    # Finding the depth that works without trampolines overflows the stack
    # on purpose, which the sanitizers report (and their frames are too
    # large for a 5% margin to mean anything).
    skip_under_sanitizers = support.skip_if_sanitizer(
        "overflows the stack on purpose", address=True, memory=True,
        ub=True)

    @skip_under_sanitizers
    @threading_helper.requires_working_threading()
    def test_c_recursion_in_thread_with_128k_stack(self):
        self.check_c_recursion(128 * 1024, 50, 2000)

    @skip_under_sanitizers
    @threading_helper.requires_working_threading()
    def test_c_recursion_in_thread_with_256k_stack(self):
        self.check_c_recursion(256 * 1024, 100, 4000)

    @skip_under_sanitizers
    def test_c_recursion_in_main_thread(self):
        self.check_c_recursion(0, 1000, 200_000)


if __name__ == "__main__":
    unittest.main()

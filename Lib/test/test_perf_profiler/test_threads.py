"""Perf trampolines in threads: activation is process-wide."""

import unittest

from test import support
from test.support import import_helper, threading_helper
from test.test_perf_profiler.util import (PerfTestCase, parse_map,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")
threading_helper.requires_working_threading(module=True)


class TestThreads(PerfTestCase):

    def test_functions_run_in_threads(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            def thread_leaf(n):
                return n * 2

            def thread_main(results, i):
                results[i] = sum(thread_leaf(j) for j in range(100))

            results = [None] * 4
            threads = [threading.Thread(target=thread_main,
                                        args=(results, i))
                       for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(os.getpid(), results)
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        self.assertEqual(out.split(None, 1),
                         [str(pid), f"{[9900] * 4}\n"])
        text = self.assert_map_file(pid)
        for qualname in ("thread_main", "thread_leaf",
                         "thread_main.<locals>.<genexpr>"):
            self.assert_symbol_count(text, f"py::{qualname}:{script}", 1)
        self.assertRegex(text, r"(?m) py::Thread\._bootstrap_inner:.*"
                               r"threading\.py$")
        self.assert_no_overlap(parse_map(text))

    def test_thread_started_before_activation(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            started = threading.Event()
            go = threading.Event()
            results = []

            def late_leaf():
                return 5

            def waiter():
                started.set()
                go.wait()
                results.append(late_leaf())

            t = threading.Thread(target=waiter)
            t.start()
            started.wait()
            sys.activate_stack_trampoline("perf")
            go.set()
            t.join()
            sys.deactivate_stack_trampoline()
            print(os.getpid(), results)
        """)
        self.assertEqual(out.split(), [str(pid), "[5]"])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::late_leaf:{script}", 1)
        self.assert_not_described(text, "waiter")

    def test_cycles_in_threads(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            def cycle_leaf(i):
                return i + 1

            def cycle_worker(n, results):
                total = 0
                for i in range(n):
                    sys.activate_stack_trampoline("perf")
                    total += cycle_leaf(i)
                    sys.deactivate_stack_trampoline()
                    total += cycle_leaf(i)
                results.append(total)

            sys.setswitchinterval(1e-5)
            results = []
            threads = [threading.Thread(target=cycle_worker,
                                        args=(250, results))
                       for _ in range(4)]
            for t in threads:
                t.start()
            cycle_worker(250, results)
            for t in threads:
                t.join()
            print(os.getpid(), sorted(set(results)),
                  sys.is_stack_trampoline_active())
        """)
        self.assertEqual(err, "")
        self.assertEqual(out.split(None, 1),
                         [str(pid), f"[{2 * sum(range(1, 251))}] False\n"])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::cycle_leaf:{script}", 1)
        self.assert_no_overlap(parse_map(text))

    def test_daemon_thread_at_exit(self):
        # A daemon thread still running Python code while the interpreter
        # exits must not crash it.
        pid, rc, out, err, script = self.run_script("""
            import os, threading

            running = threading.Event()

            def spin_leaf(i):
                return i

            def spin():
                i = 0
                while True:
                    i = spin_leaf(i + 1)
                    if i == 100:
                        running.set()

            threading.Thread(target=spin, daemon=True).start()
            running.wait()
            print(os.getpid(), "done")
        """, flags=("-X", "perf"))
        self.assertEqual(out.split(), [str(pid), "done"])
        self.assertEqual(err, "")
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::spin_leaf:{script}", 1)


    def test_raw_allocator_hook_takes_the_gil(self):
        # tracemalloc's hook on the raw allocator takes the GIL.  A map
        # entry written through the C API without the GIL, during an
        # import (so that it is held, and the first one makes the room to
        # hold it), while another thread keeps making trampolines (each
        # needs the description files' lock) must not deadlock.
        import_helper.import_module("_testcapi")
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading, tracemalloc

            tracemalloc.start()
            stop = False

            def make_functions():
                i = 0
                while not stop:
                    exec(f"def new{i}(): pass\\nnew{i}()", {})
                    i += 1

            here = os.path.dirname(os.path.abspath(__file__))
            with open(os.path.join(here, "capi_writer.py"), "w") as f:
                f.write("import _testcapi\\n"
                        "for i in range(20):\\n"
                        "    _testcapi.write_perf_map_entry("
                        "0x1000 + 16 * i, 16, f'capi_entry{i}')\\n")
            maker = threading.Thread(target=make_functions)
            maker.start()
            try:
                import capi_writer
            finally:
                stop = True
                maker.join()
            print(os.getpid())
        """, flags=("-X", "perf_jit"))
        self.assertEqual(err, "")
        entries = parse_map(self.read_map(pid))
        self.assertEqual(sum(name.startswith("capi_entry")
                             for _, _, name in entries), 20)


if __name__ == "__main__":
    unittest.main()

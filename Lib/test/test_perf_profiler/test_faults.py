"""Failures of the machinery (memory for trampolines cannot be mapped)
and hostile events (a very large number of code objects, other users of
co_extra, SIGINT deep in trampolines)."""

import json
import os
import sys
import tempfile
import textwrap
import unittest

from test import support
from test.support import import_helper
from test.support import os_helper
from test.test_perf_profiler.util import (PerfTestCase, parse_map,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestFaults(PerfTestCase):
    """Failures of the machinery and hostile events."""

    def test_warning_that_deactivates_again(self):
        # Deactivation fails to write what start-up held, and the warning
        # goes to a sys.stderr whose write() deactivates again: the state
        # must be consistent before the warning is written.
        tmpdir = self.make_tmpdir()
        with open(os.path.join(tmpdir, "sitecustomize.py"), "w") as f:
            f.write(textwrap.dedent("""
                import os, sys
                path = f"/tmp/perf-{os.getpid()}.map"
                os.unlink(path)
                os.mkdir(path)

                class Deactivating:
                    def write(self, text):
                        sys.deactivate_stack_trampoline()
                        sys.activate_stack_trampoline("perf_jit")
                        sys.deactivate_stack_trampoline()
                        return sys.__stderr__.write(text)
                    def flush(self):
                        pass

                sys.stderr = Deactivating()
                sys.deactivate_stack_trampoline()
                sys.stderr = sys.__stderr__
                os.rmdir(path)
            """))
        script = self.write_script("""
            import os, sys
            print(sys.is_stack_trampoline_active(), os.getpid())
        """)
        env = self.make_env(PYTHONPATH=tmpdir)
        pid, rc, out, err = self.run_python("-X", "perf", script, env=env)
        self.forget_dump(pid)
        self.assertEqual(out.split(), ["False", str(pid)])
        self.assertIn(f"Warning: cannot write to /tmp/perf-{pid}.map", err)
        self.assertEqual(err.count("Warning"), 1, err)

    def make_tmpdir(self):
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        return tmpdir

    def test_arena_allocation_failure(self):
        import_helper.import_module("_testinternalcapi")
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys, _testinternalcapi

            def work(n):
                return sum(helper(i) for i in range(n))

            def helper(i):
                return i * i

            _testinternalcapi.perf_trampoline_fail_arenas(True)
            sys.activate_stack_trampoline("perf")
            results = [work(100), work(10)]
            failed_stats = _testinternalcapi.get_perf_trampoline_stats()
            # Activating again after the failure tries again.
            _testinternalcapi.perf_trampoline_fail_arenas(False)
            sys.deactivate_stack_trampoline()
            sys.activate_stack_trampoline("perf")
            def later():
                return "later"
            results.append(later())
            print(json.dumps([results, failed_stats["trampolines"]]))
            print(os.getpid())
        """)
        lines = out.splitlines()
        self.assertEqual(json.loads(lines[0]), [[328350, 285, "later"], 0])
        warnings = [line for line in err.splitlines() if line.strip()]
        self.assertEqual(len(warnings), 1, err)
        self.assertIn("cannot allocate memory for perf trampolines",
                      warnings[0])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::work:{script}", 0)
        self.assert_not_described(text, "work")
        self.assert_symbol_count(text, f"py::later:{script}", 1)

    def test_many_code_objects(self):
        # One trampoline and one map line per code object, and a bounded
        # amount of executable memory for each.
        count = 100_000
        import_helper.import_module("_testinternalcapi")
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys, types, _testinternalcapi

            def template(x):
                return x + 1

            code = template.__code__
            funcs = [types.FunctionType(code.replace(
                        co_name=f"many{i}",
                        co_qualname=f"many_{i}"), {})
                     for i in range(COUNT)]
            sys.activate_stack_trampoline("perf")
            before = _testinternalcapi.get_perf_trampoline_stats()
            total = 0
            for f in funcs:
                total += f(1)
            after = _testinternalcapi.get_perf_trampoline_stats()
            sys.deactivate_stack_trampoline()
            print(json.dumps([total, before, after]))
            print(os.getpid())
        """.replace("COUNT", str(count)))
        total, before, after = json.loads(out.splitlines()[0])
        self.assertEqual(total, 2 * count)
        text = self.assert_map_file(pid)
        entries = [e for e in parse_map(text)
                   if e[2].startswith("py::many_")]
        self.assertEqual(len(entries), count)
        self.assertEqual({e[2] for e in entries},
                         {f"py::many_{i}:{script}" for i in range(count)})
        self.assert_no_overlap(entries)
        trampolines = after["trampolines"] - before["trampolines"]
        arena_bytes = after["arena_bytes"] - before["arena_bytes"]
        self.assertEqual(trampolines, count)
        per_code = arena_bytes / count
        if support.verbose:
            print(f"\n    {count} code objects: {arena_bytes} bytes of "
                  f"trampoline arenas, {per_code:.1f} bytes per code "
                  f"object ({after['trampoline_size']} bytes of code "
                  f"each); {after['written_bytes']} map bytes written",
                  file=sys.stderr)
        self.assertLessEqual(per_code, 64)

    def test_other_co_extra_users(self):
        # code_dealloc() calls every registered co_extra free function for
        # the slots a code object has, even unset ones (with NULL).  The
        # trampolines' slots are taken when the feature is first used: a
        # tool that took an index before then is called as stock calls it
        # when another tool tags a code object (with NULL for code objects
        # that have trampolines, and its own value for those it tagged); a
        # tool that took one after, only for the code objects it tagged.
        import_helper.import_module("ctypes")
        pid, rc, out, err, script = self.run_script("""
            import ctypes, gc, json, os, sys

            py = ctypes.pythonapi
            freefunc = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
            request = py._PyEval_RequestCodeExtraIndex
            request.argtypes = (freefunc,)
            request.restype = ctypes.c_ssize_t
            set_extra = py._PyCode_SetExtra
            set_extra.argtypes = (ctypes.py_object, ctypes.c_ssize_t,
                                  ctypes.c_void_p)
            calls = {"before": [], "after": []}
            FREE_BEFORE = freefunc(lambda ptr: calls["before"].append(ptr))
            FREE_AFTER = freefunc(lambda ptr: calls["after"].append(ptr))
            before = request(FREE_BEFORE)
            sys.activate_stack_trampoline("perf")
            after = request(FREE_AFTER)
            ns = {}
            exec(compile("def fresh():\\n    return 1\\n", "<f>",
                         "exec"), ns)
            ns["fresh"]()
            tagged = {}
            exec(compile("def tagged():\\n    return 2\\n", "<t>",
                         "exec"), tagged)
            tagged["tagged"]()
            set_extra(tagged["tagged"].__code__, before, 1234)
            set_extra(tagged["tagged"].__code__, after, 5678)
            ns.clear()
            tagged.clear()
            gc.collect()
            print(json.dumps([before, after, calls]), flush=True)
            # The free functions are Python code: none may run once the
            # interpreter is being finalized.
            os._exit(0)
        """)
        before, after, calls = json.loads(out.splitlines()[0])
        self.assertEqual(before, 0)
        self.assertEqual(after, 3)
        self.assertEqual(calls["after"], [5678])
        self.assertEqual(sorted(calls["before"], key=str),
                         [1234] + [None] * (len(calls["before"]) - 1))
        self.assertGreater(len(calls["before"]), 1)

    SIGINT_SCRIPT = """
        import os, signal, sys, threading, traceback

        # A shell's background job starts with SIGINT ignored, and Python
        # then leaves it ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)

        def spin(depth):
            if depth:
                return spin(depth - 1)
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            while True:
                pass

        def generator():
            yield spin(150)

        try:
            list(generator())
        except KeyboardInterrupt as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            print([(f.name, f.lineno) for f in frames][:5], len(frames))
        print(os.getpid())
    """

    def test_sigint_deep_in_trampolines(self):
        results = []
        for flags in ((), ("-X", "perf")):
            pid, rc, out, err, script = self.run_script(self.SIGINT_SCRIPT,
                                                        flags=flags)
            self.assertEqual(err, "")
            results.append(out.splitlines()[0])
        self.assertEqual(results[0], results[1])
        # <module>, the generator and 151 levels of spin().
        self.assertEqual(results[1].split()[-1], "153")


if __name__ == "__main__":
    unittest.main()

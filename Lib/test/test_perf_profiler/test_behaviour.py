"""Python-visible behaviour is the same with and without perf
trampolines: tracebacks, tracing, profiling, PEP 523 frame evaluation
functions and subinterpreters."""

import json
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase, parse_map,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestBehaviourUnchanged(PerfTestCase):
    """Python-visible behaviour is the same with and without -X perf."""

    MODES = [("-X perf", ("-X", "perf"), ()),
             ("runtime", (), ("activate",))]

    WORKLOAD = """
        import sys

        if len(sys.argv) > 1 and sys.argv[1] == "activate":
            sys.activate_stack_trampoline("perf")

        class Box:
            def __getitem__(self, n):
                return via_defaults(n)
            @property
            def prop(self):
                return via_recursion

        def leaf(n):
            if n < 0:
                raise ZeroDivisionError(f"leaf {n}")
            return 1 // (n + 1)

        def via_recursion(n, depth=20):
            if depth:
                return via_recursion(n, depth - 1)
            return leaf(n)

        def via_genexpr(n):
            return sum(Box().prop(n) for _ in range(2))

        def via_lambda(n):
            return (lambda m: via_genexpr(m))(n)

        def via_kwargs(*, n):
            return via_lambda(n)

        def via_defaults(n, a=1, b=2):
            return via_kwargs(n=n)

        def via_getitem(n):
            return Box()[n]

        class Caller:
            def via_method(self, n):
                return via_getitem(n)

        def gen(n):
            yield Caller().via_method(n)

        def via_gen(n):
            return list(gen(n))

        def chaining(n):
            try:
                return via_gen(n)
            except ZeroDivisionError as exc:
                raise RuntimeError(f"chained {n}") from exc

        def in_finally(n):
            try:
                return chaining(n)
            finally:
                via_recursion(0, 5)

        def workload(rounds):
            total = 0
            # Warm up: the call instructions get specialized.
            for i in range(rounds):
                total += len(in_finally(i))
            try:
                in_finally(-1)
            except RuntimeError as exc:
                total += len(str(exc))
            return total
    """

    TRACEBACK_SCRIPT = WORKLOAD + """
        import traceback
        try:
            workload(100)
            in_finally(-2)
        except RuntimeError:
            print(traceback.format_exc())
        print(workload(50))
        in_finally(-3)
    """

    def compare(self, script_source, expect_rc=0):
        script = self.write_script(script_source)
        pid, rc, out, err = self.run_python(script, expect_rc=expect_rc)
        self.assertTrue(out)
        for name, flags, args in self.MODES:
            with self.subTest(mode=name):
                pid2, rc2, out2, err2 = self.run_python(
                    *flags, script, *args, expect_rc=expect_rc)
                self.assertEqual(out2, out)
                self.assertEqual(err2, err)
                self.assertIsNotNone(self.read_map(pid2))
        return out, err

    def test_traceback(self):
        out, err = self.compare(self.TRACEBACK_SCRIPT, expect_rc=1)
        # The tracebacks really cross many frames.
        self.assertGreater(err.count("\n  File "), 15)
        self.assertIn("RuntimeError: chained -3", err)
        self.assertIn("ZeroDivisionError: leaf -3", err)
        self.assertIn("RuntimeError: chained -2", out)

    TRACE_SCRIPT = WORKLOAD + """
        import json

        events = []

        def summarize(arg):
            if arg is None or isinstance(arg, (int, str)):
                return arg
            if isinstance(arg, tuple):      # 'exception' events
                return arg[0].__name__
            return getattr(arg, "__qualname__", type(arg).__name__)

        def tracer(frame, event, arg):
            if frame.f_code.co_filename == __file__:
                events.append([event, frame.f_code.co_qualname,
                               frame.f_lineno, summarize(arg)])
            return tracer

        def enable_inside():
            sys.settrace(tracer)

        def disable_inside():
            sys.settrace(None)

        def phase(n):
            enable_inside()          # tracing starts in a nested frame
            in_finally(n)
            disable_inside()         # and stops in one
            return via_recursion(n, 3)

        workload(60)
        sys.settrace(tracer)
        workload(3)
        sys.settrace(None)
        phase(1)
        phase(2)
        print(json.dumps(events))
    """

    def test_settrace(self):
        out, err = self.compare(self.TRACE_SCRIPT)
        events = json.loads(out)
        kinds = {event for event, *_ in events}
        self.assertGreaterEqual(kinds, {"call", "return", "line",
                                        "exception"})
        self.assertGreater(len(events), 500)

    PROFILE_SCRIPT = WORKLOAD + """
        import json

        events = []

        def profiler(frame, event, arg):
            if frame.f_code.co_filename == __file__:
                if event.startswith("c_"):
                    name = getattr(arg, "__qualname__", repr(arg))
                else:
                    name = frame.f_code.co_qualname
                events.append([event, name, frame.f_lineno])

        def enable_inside():
            sys.setprofile(profiler)

        def disable_inside():
            sys.setprofile(None)

        def phase(n):
            enable_inside()
            in_finally(n)
            disable_inside()
            return via_recursion(n, 3)

        workload(60)
        sys.setprofile(profiler)
        workload(3)
        sys.setprofile(None)
        phase(1)
        print(json.dumps(events))
    """

    def test_setprofile(self):
        out, err = self.compare(self.PROFILE_SCRIPT)
        events = json.loads(out)
        kinds = {event for event, *_ in events}
        self.assertGreaterEqual(kinds, {"call", "return", "c_call",
                                        "c_return", "c_exception"})

    def test_eval_frame_hook(self):
        # A PEP 523 frame evaluation function still sees every frame.
        import_helper.import_module("_testinternalcapi")
        self.compare("""
            import sys, _testinternalcapi
            if len(sys.argv) > 1 and sys.argv[1] == "activate":
                sys.activate_stack_trampoline("perf")

            def hooked_leaf(n):
                return n + 1

            def hooked(n):
                return [hooked_leaf(i) for i in range(n)]

            for _ in range(50):
                hooked(3)
            record = []
            _testinternalcapi.set_eval_frame_record(record)
            hooked(3)
            _testinternalcapi.set_eval_frame_default()
            print(record)
        """)

    def test_eval_frame_hook_keeps_trampolines(self):
        # Frames that run through another tool's PEP 523 hook still start
        # from their trampolines, and the hook is called as before.
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        if not hasattr(_testinternalcapi, "walk_frame_pointers"):
            self.skipTest("needs _testinternalcapi.walk_frame_pointers()")
        script = self.write_script("""
            import json, os, _testinternalcapi

            def hooked_inner():
                return _testinternalcapi.walk_frame_pointers()

            def hooked_outer():
                return hooked_inner()

            record = []
            _testinternalcapi.set_eval_frame_record(record)
            frames = hooked_outer()
            _testinternalcapi.set_eval_frame_default()
            addrs = [ret for ret, _ in frames]
            print(json.dumps([os.getpid(), addrs, record]))
        """)
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                pid, rc, out, err = self.run_python("-X", backend, script)
                pid, addrs, record = self.last_json(out)
                self.assertEqual(record, ["hooked_outer", "hooked_inner"])
                ranges = self.trampoline_ranges(pid, backend)
                self.assertEqual(
                    self.named_addresses(addrs, ranges)[:2],
                    ["hooked_inner", "hooked_outer"])

    def test_subinterpreters(self):
        _testcapi = import_helper.import_module("_testcapi")
        import_helper.import_module("_xxsubinterpreters")
        pid, rc, out, err, script = self.run_script("""
            import os, sys
            import _testcapi, _xxsubinterpreters as interpreters

            code = '''if 1:
                import sys
                def subinterp_probe(n):
                    return n * 2
                assert subinterp_probe(21) == 42
                assert sys.is_stack_trampoline_active()
            '''
            assert _testcapi.run_in_subinterp(code) == 0
            for _ in range(3):
                interp = interpreters.create()
                interpreters.run_string(interp, code.replace("probe",
                                                             "again"))
                interpreters.destroy(interp)
            def main_probe():
                return 1
            main_probe()
            print(os.getpid())
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        text = self.assert_map_file(pid)
        self.assertIn("py::subinterp_probe:<string>", self.symbols(text))
        self.assertIn("py::subinterp_again:<string>", self.symbols(text))
        self.assert_symbol_count(text, f"py::main_probe:{script}", 1)
        self.assert_no_overlap(parse_map(text))


if __name__ == "__main__":
    unittest.main()

"""What the perf map holds (names, format, addresses), and what happens
when the map cannot be opened."""

import collections
import json
import os
import stat
import tempfile
import textwrap
import unittest

from test import support
from test.support import os_helper
from test.support import threading_helper
from test.test_perf_profiler.util import (LOOSE_MAP_LINE_RE,
                                          OBSTACLE_HELPERS, OBSTACLE_KINDS,
                                          PerfTestCase, parse_map,
                                          perf_map_path,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestMapContents(PerfTestCase):

    def test_names_and_format(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys

            class Outer:
                attr = 0
                def method(self):
                    return 1
                @staticmethod
                def static():
                    return 2
                @classmethod
                def cls(cls):
                    return 3
                @property
                def prop(self):
                    return 4
                class Inner:
                    def deep(self):
                        return 5

            def outer():
                def inner():
                    return 6
                return inner()

            def make_lambda():
                return (lambda: 7)()

            def gen():
                yield 8

            async def coro():
                return 9

            async def agen():
                yield 10

            def f\u00fcnf():
                return 11

            def ctl():
                return 12
            ctl.__code__ = ctl.__code__.replace(
                co_qualname="ctl\\t\\n\\x1b\\x7fname")

            def long():
                return 13
            long.__code__ = long.__code__.replace(
                co_qualname="long_" + "x" * 5000)

            def run_coro(coro):
                try:
                    coro.send(None)
                except StopIteration as exc:
                    return exc.value

            results = []
            for _ in range(3):
                o = Outer()
                ag = agen()
                results.append([
                    o.method(), Outer.static(), Outer.cls(),
                    o.prop, Outer.Inner().deep(), outer(),
                    make_lambda(), list(gen()),
                    run_coro(coro()), run_coro(ag.__anext__()),
                    f\u00fcnf(), ctl(), long(),
                ])
                run_coro(ag.aclose())

            ns = {}
            exec(compile("def in_ctl_file():\\n    return 14\\n"
                         "in_ctl_file()\\n",
                         "ctl\\x01file\\r.py", "exec"), ns)
            exec(compile("def in_odd_file():\\n    return 15\\n"
                         "in_odd_file()\\n",
                         "odd_\\udcff_\u20ac.py", "exec"), ns)
            assert results[0] == results[2], results
            print(os.getpid(), results[0])
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        self.assertEqual(out.split(None, 1)[0], str(pid))
        text = self.assert_map_file(pid)
        entries = parse_map(text)
        self.assert_no_overlap(entries)
        expected = [
            "<module>",
            "Outer",
            "Outer.method",
            "Outer.static",
            "Outer.cls",
            "Outer.prop",
            "Outer.Inner",
            "Outer.Inner.deep",
            "outer",
            "outer.<locals>.inner",
            "make_lambda",
            "make_lambda.<locals>.<lambda>",
            "gen",
            "coro",
            "agen",
            "f\u00fcnf",
            "ctl????name",
        ]
        for qualname in expected:
            with self.subTest(qualname=qualname):
                self.assert_symbol_count(text, f"py::{qualname}:{script}", 1)
        # Control characters in the file name are replaced too.
        ctl_file = "ctl?file?.py"
        self.assert_symbol_count(text, f"py::in_ctl_file:{ctl_file}", 1)
        self.assert_symbol_count(text, f"py::<module>:{ctl_file}", 1)
        # A file name that is not valid UTF-8 still gives one valid line.
        odd = [line for line in text.splitlines()
               if "py::in_odd_file:odd_" in line]
        self.assertEqual(len(odd), 1, odd)
        self.assertTrue(odd[0].endswith("_\u20ac.py"), odd[0])
        # An over-long name gives exactly one (possibly truncated) line.
        long_lines = [line for line in text.splitlines(keepends=True)
                      if "py::long_xxxx" in line]
        self.assertEqual(len(long_lines), 1)
        self.assertRegex(long_lines[0], LOOSE_MAP_LINE_RE)
        # No control character survives anywhere.
        for line in text.splitlines():
            self.assertFalse(any(ord(c) < 0x20 or ord(c) == 0x7f
                                 for c in line), repr(line))

    def test_control_characters_at_every_offset(self):
        # Each character from U+0000 to U+00FF, at each of 16 offsets in a
        # qualified name (names are checked eight bytes at a time): control
        # characters become "?", the others stay as they are.  Each name
        # starts with its own 5 characters.
        pid, rc, out, err, script = self.run_script("""
            import os
            def probe():
                return 1
            for c in range(256):
                for at in range(16):
                    pre = f"n{c:02x}{at:x}_"
                    name = pre + "a" * at + chr(c) + "b" * (15 - at)
                    probe.__code__ = probe.__code__.replace(co_qualname=name)
                    probe()
            print(os.getpid())
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        counts = collections.Counter(self.symbols(self.assert_map_file(pid)))
        for c in range(256):
            shown = "?" if c < 0x20 or c == 0x7f else chr(c)
            for at in range(16):
                pre = f"n{c:02x}{at:x}_"
                name = pre + "a" * at + shown + "b" * (15 - at)
                self.assertEqual(counts[f"py::{name}:{script}"], 1, (c, at))

    def test_trampolines_are_executable_not_writable(self):
        # Every described range lies in an executable, non-writable
        # mapping of the process.
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys

            def probe():
                return [i for i in range(3)]
            probe()

            mappings = []
            with open("/proc/self/maps") as f:
                for line in f:
                    fields = line.split()
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    mappings.append((start, end, fields[1]))
            with open(f"/tmp/perf-{os.getpid()}.map") as f:
                entries = [line.split(" ", 2) for line in f]
            bad = []
            for addr, size, name in entries:
                addr, size = int(addr, 16), int(size, 16)
                perms = [p for start, end, p in mappings
                         if start <= addr and addr + size <= end]
                if len(perms) != 1 or "x" not in perms[0] \\
                        or "w" in perms[0]:
                    bad.append([hex(addr), name, perms])
            print(json.dumps({"count": len(entries), "bad": bad[:20]}))
        """, flags=("-X", "perf"))
        res = self.last_json(out)
        self.assertGreater(res["count"], 10)
        self.assertEqual(res["bad"], [])

    def test_addresses_never_reused(self):
        # Code objects die and new ones are created at the same memory
        # address: their trampolines still get fresh, distinct addresses.
        # 3 x 3000 functions need several arenas.
        pid, rc, out, err, script = self.run_script("""
            import gc, os

            def make(batch, i):
                ns = {}
                exec(f"def b{batch}_{i}():\\n    return {i}\\n", ns)
                return ns[f"b{batch}_{i}"]

            total = 0
            for batch in range(3):
                funcs = [make(batch, i) for i in range(3000)]
                for func in funcs:
                    total += func()
                del funcs
                gc.collect()
            print(os.getpid(), total)
        """, flags=("-X", "perf"))
        self.assertEqual(out.split(), [str(pid), str(3 * sum(range(3000)))])
        text = self.assert_map_file(pid)
        entries = parse_map(text)
        self.assert_no_overlap(entries)
        symbols = [symbol for _, _, symbol in entries]
        for batch in range(3):
            for i in range(3000):
                name = f"py::b{batch}_{i}:<string>"
                self.assertEqual(symbols.count(name), 1, name)

    @threading_helper.requires_working_threading()
    def test_nonoverlapping_with_many_code_objects_in_threads(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            def make(prefix, i):
                ns = {}
                exec(f"def {prefix}_{i}():\\n    return {i}\\n", ns)
                return ns[f"{prefix}_{i}"]

            def work(prefix, out):
                out.append(sum(make(prefix, i)() for i in range(500)))

            sys.setswitchinterval(1e-5)
            results = []
            threads = [threading.Thread(target=work,
                                        args=(f"th{n}", results))
                       for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(os.getpid(), sorted(set(results)))
        """, flags=("-X", "perf"))
        self.assertEqual(out.split(), [str(pid), f"[{sum(range(500))}]"])
        text = self.assert_map_file(pid)
        self.assert_no_overlap(parse_map(text))
        symbols = self.symbols(text)
        for n in range(4):
            for i in range(500):
                self.assertEqual(
                    symbols.count(f"py::th{n}_{i}:<string>"), 1)


class TestMapOpenFailure(PerfTestCase):
    """/tmp/perf-PID.map exists and must not be written to."""

    def prepare(self, kind):
        if kind == "foreign_owner" and os.geteuid() != 0:
            self.skipTest("creating a file owned by another user "
                          "needs root")
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        target = os.path.join(tmpdir, "precious")
        if kind == "symlink":
            with open(target, "w") as f:
                f.write("precious\n")
            os.chmod(target, 0o644)
        return target

    def check_target(self, kind, target):
        if kind == "symlink":
            with open(target) as f:
                self.assertEqual(f.read(), "precious\n")
            self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o644)
        elif kind == "dangling_symlink":
            self.assertFalse(os.path.lexists(target),
                             "the symlink target was created")

    def check_obstacle(self, kind, path):
        st = os.lstat(path)
        if kind in ("symlink", "dangling_symlink"):
            self.assertTrue(stat.S_ISLNK(st.st_mode))
        elif kind == "directory":
            self.assertTrue(stat.S_ISDIR(st.st_mode))
            self.assertEqual(os.listdir(path), [])
        elif kind == "fifo":
            self.assertTrue(stat.S_ISFIFO(st.st_mode))
        elif kind == "foreign_owner":
            self.assertTrue(stat.S_ISREG(st.st_mode))
            self.assertEqual(st.st_uid, 65534)
            with open(path) as f:
                self.assertEqual(f.read(), "foreign\n")

    def test_activate_fails(self):
        script = self.write_script(OBSTACLE_HELPERS + textwrap.dedent("""
            import json, sys
            kind, target, keep = sys.argv[1:4]
            path = f"/tmp/perf-{os.getpid()}.map"
            make_obstacle(kind, path, target)
            res = {"pid": os.getpid(), "path": path}
            try:
                sys.activate_stack_trampoline("perf")
            except OSError as exc:
                res["exc"] = [type(exc).__name__, exc.filename, str(exc)]
            else:
                res["exc"] = None
            res["active"] = sys.is_stack_trampoline_active()
            def after_failure():
                return 42
            res["value"] = after_failure()
            try:
                sys.activate_stack_trampoline("perf")
            except OSError as exc:
                res["second"] = exc.filename
            else:
                res["second"] = None
            res["active2"] = sys.is_stack_trampoline_active()
            if keep == "remove":
                # Once the obstacle is gone, activation works.
                remove_obstacle(path)
                sys.activate_stack_trampoline("perf")
                res["retry_active"] = sys.is_stack_trampoline_active()
                def after_retry():
                    return 43
                res["retry_value"] = after_retry()
                sys.deactivate_stack_trampoline()
            print(json.dumps(res))
        """))
        for kind in OBSTACLE_KINDS:
            for keep in ("keep", "remove"):
                with self.subTest(kind=kind, obstacle=keep):
                    target = self.prepare(kind)
                    pid, rc, out, err = self.run_python(script, kind, target,
                                                        keep)
                    res = self.last_json(out)
                    path = perf_map_path(pid)
                    self.assertEqual(res["pid"], pid)
                    self.assertIsNotNone(res["exc"],
                                         "activation did not fail")
                    exc_type, filename, message = res["exc"]
                    self.assertEqual(filename, path)
                    self.assertIn(path, message)
                    self.assertIs(res["active"], False)
                    self.assertEqual(res["value"], 42)
                    self.assertEqual(res["second"], path)
                    self.assertIs(res["active2"], False)
                    self.assertEqual(err, "")
                    self.check_target(kind, target)
                    if keep == "keep":
                        self.check_obstacle(kind, path)
                    else:
                        self.assertIs(res["retry_active"], True)
                        self.assertEqual(res["retry_value"], 43)
                        text = self.assert_map_file(pid)
                        self.assert_symbol_count(
                            text, f"py::after_retry:{script}", 1)
                        self.assert_not_described(text, "after_failure")

    def test_startup_fails(self):
        # The obstacle must be at the path of the process that enables
        # perf support at startup: create it, then exec() (same PID).
        script = self.write_script(OBSTACLE_HELPERS + textwrap.dedent("""
            import sys
            kind, target, how = sys.argv[1:4]
            path = f"/tmp/perf-{os.getpid()}.map"
            make_obstacle(kind, path, target)
            code = (
                "import json, os, sys\\n"
                "def after_failure():\\n"
                "    return 42\\n"
                "print(json.dumps({'pid': os.getpid(),"
                " 'active': sys.is_stack_trampoline_active(),"
                " 'value': after_failure()}))\\n")
            env = dict(os.environ)
            env.pop("PYTHONPERFSUPPORT", None)
            if how == "xoption":
                args = [sys.executable, "-X", "perf", "-c", code]
            else:
                args = [sys.executable, "-c", code]
                env["PYTHONPERFSUPPORT"] = "1"
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(sys.executable, args, env)
        """))
        for kind in OBSTACLE_KINDS:
            for how in ("xoption", "env"):
                with self.subTest(kind=kind, how=how):
                    target = self.prepare(kind)
                    pid, rc, out, err = self.run_python(script, kind, target,
                                                        how)
                    path = perf_map_path(pid)
                    self.assertEqual(json.loads(out), {
                        "pid": pid, "active": False, "value": 42})
                    err_lines = [line for line in err.splitlines()
                                 if line.strip()]
                    self.assertEqual(len(err_lines), 1, err)
                    self.assertIn(path, err_lines[0])
                    self.check_target(kind, target)
                    self.check_obstacle(kind, path)


if __name__ == "__main__":
    unittest.main()

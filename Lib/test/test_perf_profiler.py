"""Tests for perf trampolines (-X perf, PYTHONPERFSUPPORT and
sys.activate_stack_trampoline()).

While perf trampolines are active, every Python code object gets a small
native code copy of its own the first time it runs, and the perf map
/tmp/perf-PID.map names it, so that Linux perf can show Python functions.

Every scenario runs in a fresh child interpreter: activation is
process-wide and leaves a map file behind.  The tests remove every map file
that they cause to be created.
"""

import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest
import uuid

from test import support
from test.support import import_helper
from test.support import os_helper
from test.support import script_helper
from test.support import threading_helper


if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


HAVE_PERF_TRAMPOLINE = (
    sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") == 1)

# Platforms that have a trampoline template (Python/asm_trampoline.S).
PLATFORM_SUPPORTED = (sys.platform == "linux"
                      and platform.machine() in ("x86_64", "aarch64"))

requires_trampoline = unittest.skipUnless(
    HAVE_PERF_TRAMPOLINE,
    "perf trampolines are not supported by this build "
    "(sysconfig PY_HAVE_PERF_TRAMPOLINE is not 1)")

# One line of a perf map: "ADDR SIZE py::QUALNAME:FILENAME\n".  '.' does not
# match a newline, so a match is exactly one line.
MAP_LINE_RE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::.+:.+\n\Z")
# The same, but allowing an empty file name: a very long qualified name
# may be truncated together with what follows it.
LOOSE_MAP_LINE_RE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::[^\n]+\n\Z")

PY_NAME_RE = re.compile(r"py::")

OBSTACLE_KINDS = ("symlink", "dangling_symlink", "directory", "fifo",
                  "foreign_owner")

# Creates something at the perf map path that must not be written to.
# Shared by the child scripts of the map failure tests.
OBSTACLE_HELPERS = r'''
import os

def make_obstacle(kind, path, target):
    if kind in ("symlink", "dangling_symlink"):
        os.symlink(target, path)
    elif kind == "directory":
        os.mkdir(path, 0o700)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "foreign_owner":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"foreign\n")
        os.close(fd)
        os.chown(path, 65534, 65534)
    else:
        raise ValueError(kind)

def remove_obstacle(path):
    if os.path.isdir(path) and not os.path.islink(path):
        os.rmdir(path)
    else:
        os.unlink(path)
'''


def perf_map_path(pid):
    return f"/tmp/perf-{pid}.map"


def map_name(pid):
    return os.path.basename(perf_map_path(pid))


def existing_maps():
    """Names of the perf maps in /tmp."""
    try:
        names = os.listdir("/tmp")
    except OSError:
        return frozenset()
    return frozenset(name for name in names
                     if name.startswith("perf-") and name.endswith(".map"))


# How many times a scenario is run again when a process got the PID of an
# earlier process that left a perf map behind.
MAX_ATTEMPTS = 5


class StaleMapPath(Exception):
    """A process of the scenario found a stale perf map at its path."""


def remove_path(path):
    """Remove whatever lives at path (file, symlink, FIFO or directory)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        os_helper.rmtree(path)
    else:
        os_helper.unlink(path)


def parse_map(text):
    """Return [(address, size, symbol)] for the lines of a perf map."""
    entries = []
    for line in text.splitlines():
        addr, size, symbol = line.split(" ", 2)
        entries.append((int(addr, 16), int(size, 16), symbol))
    return entries


def frame_pointers_enabled():
    for var in ("PY_CFLAGS", "CFLAGS", "CONFIGURE_CFLAGS",
                "PY_CFLAGS_NODIST"):
        value = sysconfig.get_config_var(var) or ""
        if "-fno-omit-frame-pointer" in value:
            return True
    return False


class PerfTestCase(unittest.TestCase):
    """Helpers to run child interpreters and inspect their perf maps."""

    def setUp(self):
        # Unique names make the functions of one test easy to find in the
        # map and impossible to confuse with anything else.
        self.tag = "t" + uuid.uuid4().hex[:16]

    def subst(self, source):
        return textwrap.dedent(source).replace("XTAGX", self.tag)

    def make_env(self, **overrides):
        """A copy of the environment without PYTHONPERFSUPPORT, updated
        with overrides (None removes a variable)."""
        env = dict(os.environ)
        env.pop("PYTHONPERFSUPPORT", None)
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def forget_map(self, pid):
        self.addCleanup(remove_path, perf_map_path(pid))

    def run_python(self, *args, env=None, expect_rc=0, timeout=None,
                   input=None):
        """Run sys.executable with args and return (pid, returncode,
        stdout, stderr).  The perf map of the child is removed when the
        test ends.

        /tmp is shared and PIDs get reused: if a stale map of an earlier
        process happens to exist at the path of the child, the child
        appends to it and the result would be unreliable, so the child is
        run again (it gets another PID)."""
        if env is None:
            env = self.make_env()
        for attempt in range(MAX_ATTEMPTS):
            existing = existing_maps()
            proc = subprocess.Popen(
                [sys.executable, *args],
                stdin=(subprocess.PIPE if input is not None
                       else subprocess.DEVNULL),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            with proc:
                try:
                    out, err = proc.communicate(
                        input, timeout=timeout or support.SHORT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    self.forget_map(proc.pid)
                    self.fail(f"child {args!r} timed out\n"
                              f"stdout:\n{out!r}\nstderr:\n{err!r}")
            if map_name(proc.pid) not in existing:
                break
        else:
            self.skipTest("stale perf maps kept colliding with the PIDs "
                          "of child processes")
        # Maps of the children of the child existed before if their names
        # are in this set: see check_fresh().
        self.existing_maps = existing
        self.forget_map(proc.pid)
        out = out.decode("utf-8", "backslashreplace")
        err = err.decode("utf-8", "backslashreplace")
        if expect_rc is not None and proc.returncode != expect_rc:
            self.fail(f"child {args!r} exited with {proc.returncode}, "
                      f"expected {expect_rc}\n"
                      f"stdout:\n{out}\nstderr:\n{err}")
        return proc.pid, proc.returncode, out, err

    def check_fresh(self, *pids):
        """Raise StaleMapPath if the map of one of the pids (processes
        started by the last child) existed before that child started."""
        stale = [pid for pid in pids if map_name(pid) in self.existing_maps]
        for pid in pids:
            if pid not in stale:
                self.forget_map(pid)
        if stale:
            raise StaleMapPath(stale)

    def retrying(self, func):
        """Call func() again while it raises StaleMapPath."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                return func()
            except StaleMapPath:
                pass
        self.skipTest("stale perf maps kept colliding with the PIDs of "
                      "child processes")

    def write_script(self, source, name="perf_script.py"):
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        return script_helper.make_script(tmpdir, name[:-3],
                                         self.subst(source))

    def run_script(self, source, *script_args, flags=(), env=None,
                   expect_rc=0):
        """Write source (with XTAGX replaced by the test's tag) to a file
        and run it.  Return (pid, rc, stdout, stderr, script path)."""
        script = self.write_script(source)
        pid, rc, out, err = self.run_python(*flags, script, *script_args,
                                            env=env, expect_rc=expect_rc)
        return pid, rc, out, err, script

    def last_json(self, out):
        lines = out.strip().splitlines()
        self.assertTrue(lines, "the child printed nothing")
        return json.loads(lines[-1])

    def read_map(self, pid):
        """The text of the perf map of pid, or None if there is none."""
        path = perf_map_path(pid)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        # The map must be valid UTF-8, whatever the names hold.
        return data.decode("utf-8")

    def assert_map_file(self, pid):
        """Check the file properties and the format of the map of pid and
        return its text."""
        path = perf_map_path(pid)
        text = self.read_map(pid)
        self.assertIsNotNone(text, f"{path} was not created")
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode), path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, path)
        self.assertEqual(st.st_uid, os.geteuid(), path)
        self.assert_map_format(text)
        return text

    def assert_map_format(self, text):
        self.assertTrue(text.endswith("\n"), "last line not terminated")
        lines = text.splitlines(keepends=True)
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, LOOSE_MAP_LINE_RE)
            addr, size, _ = line.split(" ", 2)
            self.assertFalse(addr.startswith("0x"), line)
            self.assertFalse(size.startswith("0x"), line)
            self.assertGreater(int(size, 16), 0, line)
            if len(line) < 900:
                # Not one of the over-long names of test_names_and_format.
                self.assertRegex(line, MAP_LINE_RE)

    def assert_no_overlap(self, entries):
        """Address ranges of different entries never overlap and an
        address is never reused."""
        addrs = [addr for addr, _, _ in entries]
        self.assertEqual(len(addrs), len(set(addrs)),
                         "an address was described twice")
        ordered = sorted(entries)
        for (a1, s1, n1), (a2, s2, n2) in zip(ordered, ordered[1:]):
            self.assertLessEqual(
                a1 + s1, a2,
                f"{a1:x}+{s1:x} ({n1}) overlaps {a2:x} ({n2})")

    def symbols(self, text):
        return [symbol for _, _, symbol in parse_map(text)]

    def assert_symbol_count(self, text, symbol, count, msg=None):
        found = self.symbols(text).count(symbol)
        self.assertEqual(found, count,
                         msg or f"{symbol!r} appears {found} times, "
                                f"expected {count}")


class TestSupportAndArguments(unittest.TestCase):
    """In-process checks that never activate a backend."""

    def test_config_var_on_supported_platform(self):
        if not PLATFORM_SUPPORTED:
            self.skipTest("perf trampolines exist only on Linux "
                          "x86-64 and aarch64")
        self.assertEqual(
            sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE"), 1)

    def test_sys_functions_exist(self):
        for name in ("activate_stack_trampoline",
                     "deactivate_stack_trampoline",
                     "is_stack_trampoline_active"):
            with self.subTest(name=name):
                self.assertTrue(callable(getattr(sys, name)))
        self.assertIsInstance(sys.is_stack_trampoline_active(), bool)

    def test_activate_argument_type(self):
        active = sys.is_stack_trampoline_active()
        for bad in (None, 1, 1.5, b"perf", bytearray(b"perf"), ["perf"],
                    object()):
            with self.subTest(backend=bad):
                with self.assertRaises(TypeError):
                    sys.activate_stack_trampoline(bad)
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline()
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline("perf", "perf")
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline(backend="perf")
        with self.assertRaises(TypeError):
            sys.deactivate_stack_trampoline("perf")
        with self.assertRaises(TypeError):
            sys.is_stack_trampoline_active(1)
        self.assertIs(sys.is_stack_trampoline_active(), active)

    def test_activate_unknown_backend(self):
        active = sys.is_stack_trampoline_active()
        for name in ("perff", "PERF", "Perf", "", "perf ", " perf",
                     "no-such-backend", "p\xe9rf", "perf\u20ac"):
            with self.subTest(backend=name):
                with self.assertRaises(ValueError) as cm:
                    sys.activate_stack_trampoline(name)
                if name:
                    self.assertIn(name, str(cm.exception))
        # An embedded NUL cannot name any backend either.
        with self.assertRaises(ValueError):
            sys.activate_stack_trampoline("perf\0")
        self.assertIs(sys.is_stack_trampoline_active(), active)

    @unittest.skipIf(HAVE_PERF_TRAMPOLINE,
                     "perf trampolines are supported by this build")
    def test_activate_unsupported_build(self):
        with self.assertRaises(ValueError) as cm:
            sys.activate_stack_trampoline("perf")
        self.assertIn("perf", str(cm.exception))
        self.assertFalse(sys.is_stack_trampoline_active())
        sys.deactivate_stack_trampoline()
        self.assertFalse(sys.is_stack_trampoline_active())

    @unittest.skipIf(HAVE_PERF_TRAMPOLINE,
                     "perf trampolines are supported by this build")
    @support.requires_subprocess()
    def test_startup_options_unsupported_build(self):
        # -X perf and PYTHONPERFSUPPORT are accepted and do nothing.
        code = "import sys; print(sys.is_stack_trampoline_active())"
        res = script_helper.assert_python_ok("-X", "perf", "-c", code)
        self.assertEqual(res.out.strip(), b"False")
        res = script_helper.assert_python_ok("-c", code,
                                             PYTHONPERFSUPPORT="1")
        self.assertEqual(res.out.strip(), b"False")


@requires_trampoline
@support.requires_subprocess()
class TestEnabling(PerfTestCase):
    """-X perf, PYTHONPERFSUPPORT and their precedence."""

    CODE = textwrap.dedent("""
        import os, sys
        def probe_XTAGX():
            return 1
        probe_XTAGX()
        print(os.getpid(), sys.is_stack_trampoline_active())
    """)

    # (command line options, PYTHONPERFSUPPORT or None, enabled)
    CASES = [
        ((), None, False),
        (("-X", "perf"), None, True),
        (("-X", "perf=1"), None, True),
        (("-X", "perf=2"), None, True),
        (("-X", "perf=-1"), None, True),
        (("-X", "perf=0"), None, False),
        (("-X", "perf=abc"), None, False),
        (("-X", "perf=1abc"), None, False),
        (("-X", "perf="), None, False),
        ((), "1", True),
        ((), "-1", True),
        ((), "7", True),
        ((), "", False),
        ((), "0", False),
        ((), "abc", False),
        ((), "1abc", False),
        ((), "99999999999999999999", False),
        ((), "-99999999999999999999", False),
        # -X perf wins over the environment variable, whatever its value.
        (("-X", "perf=0"), "1", False),
        (("-X", "perf=abc"), "1", False),
        (("-X", "perf="), "1", False),
        (("-X", "perf"), "0", True),
        (("-X", "perf=1"), "abc", True),
        # The environment is ignored under -E and -I, not the option.
        (("-E",), "1", False),
        (("-I",), "1", False),
        (("-E", "-X", "perf"), None, True),
        (("-I", "-X", "perf"), "0", True),
    ]

    def check_child(self, flags, env_value, enabled, code=None):
        env = self.make_env(PYTHONPERFSUPPORT=env_value)
        code = self.subst(code or self.CODE)
        pid, rc, out, err = self.run_python(*flags, "-c", code, env=env)
        self.assertEqual(err, "")
        child_pid, active = out.split()
        self.assertEqual(int(child_pid), pid)
        self.assertEqual(active, str(enabled))
        probe = f"py::probe_{self.tag}:<string>"
        if enabled:
            text = self.assert_map_file(pid)
            self.assert_symbol_count(text, probe, 1)
            self.assertIn("py::<module>:<string>", self.symbols(text))
        else:
            # Not even created.
            self.assertFalse(os.path.lexists(perf_map_path(pid)))

    def test_enabling(self):
        for flags, env_value, enabled in self.CASES:
            with self.subTest(flags=flags, PYTHONPERFSUPPORT=env_value):
                self.check_child(flags, env_value, enabled)

    def test_runtime_api_overrides_environment(self):
        code = """
            import os, sys
            first = sys.is_stack_trampoline_active()
            sys.deactivate_stack_trampoline()
            def probe_XTAGX():
                return 1
            probe_XTAGX()
            print(os.getpid(), first, sys.is_stack_trampoline_active())
        """
        for flags, env_value in [(("-X", "perf"), None), ((), "1")]:
            with self.subTest(flags=flags, PYTHONPERFSUPPORT=env_value):
                env = self.make_env(PYTHONPERFSUPPORT=env_value)
                pid, rc, out, err = self.run_python(
                    *flags, "-c", self.subst(code), env=env)
                self.assertEqual(out.split(), [str(pid), "True", "False"])
                text = self.assert_map_file(pid)
                self.assertNotIn(f"probe_{self.tag}", text)

    def test_runtime_api_overrides_disabling_option(self):
        code = """
            import os, sys
            first = sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")
            def probe_XTAGX():
                return 1
            probe_XTAGX()
            print(os.getpid(), first, sys.is_stack_trampoline_active())
        """
        for flags, env_value in [(("-X", "perf=0"), "1"), (("-E",), "1"),
                                 ((), "0")]:
            with self.subTest(flags=flags, PYTHONPERFSUPPORT=env_value):
                env = self.make_env(PYTHONPERFSUPPORT=env_value)
                pid, rc, out, err = self.run_python(
                    *flags, "-c", self.subst(code), env=env)
                self.assertEqual(out.split(), [str(pid), "False", "True"])
                text = self.assert_map_file(pid)
                self.assert_symbol_count(
                    text, f"py::probe_{self.tag}:<string>", 1)

    def test_startup_code_is_described(self):
        # Activation at startup covers the code run while starting up and
        # the main script.
        pid, rc, out, err, script = self.run_script("""
            import os
            def probe_XTAGX():
                return 1
            probe_XTAGX()
            print(os.getpid())
        """, flags=("-X", "perf"))
        text = self.assert_map_file(pid)
        symbols = self.symbols(text)
        self.assertIn(f"py::<module>:{script}", symbols)
        self.assertIn(f"py::probe_{self.tag}:{script}", symbols)
        # Something from the import system ran through a trampoline too.
        self.assertTrue(any("importlib" in s for s in symbols), symbols[:20])

    def test_startup_lines_written_when_startup_ends(self):
        # What is described while the interpreter starts up is written
        # all at once when start-up is done: it is in the file before the
        # main script starts, not only when the process exits.
        pid, rc, out, err, script = self.run_script("""
            import os
            with open(f"/tmp/perf-{os.getpid()}.map") as f:
                print(f.read(), end="")
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        self.assert_map_format(out)
        early = self.symbols(out)
        self.assertTrue(any("importlib" in s for s in early), early[:20])
        # After start-up, each line is written as soon as it is made.
        self.assertEqual(early[-1], f"py::<module>:{script}")
        text = self.assert_map_file(pid)
        self.assertTrue(text.startswith(out))


@requires_trampoline
@support.requires_subprocess()
class TestRuntimeActivation(PerfTestCase):

    def test_activate_deactivate(self):
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys
            res = {}
            res["initial"] = sys.is_stack_trampoline_active()
            sys.deactivate_stack_trampoline()      # no-op when inactive
            res["after_noop_deactivate"] = sys.is_stack_trampoline_active()

            def before_XTAGX():
                return 1
            before_XTAGX()

            sys.activate_stack_trampoline("perf")
            res["activated"] = sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")  # no-op when active
            res["activated_twice"] = sys.is_stack_trampoline_active()

            def during_XTAGX():
                return 2
            for _ in range(3):
                during_XTAGX()

            sys.deactivate_stack_trampoline()
            res["deactivated"] = sys.is_stack_trampoline_active()
            sys.deactivate_stack_trampoline()
            res["deactivated_twice"] = sys.is_stack_trampoline_active()

            def after_XTAGX():
                return 3
            after_XTAGX()

            sys.activate_stack_trampoline("perf")
            res["reactivated"] = sys.is_stack_trampoline_active()
            during_XTAGX()     # already has a trampoline
            def again_XTAGX():
                return 4
            again_XTAGX()
            sys.deactivate_stack_trampoline()
            res["pid"] = os.getpid()
            print(json.dumps(res))
        """)
        res = self.last_json(out)
        self.assertEqual(res, {
            "initial": False, "after_noop_deactivate": False,
            "activated": True, "activated_twice": True,
            "deactivated": False, "deactivated_twice": False,
            "reactivated": True, "pid": pid,
        })
        self.assertEqual(err, "")
        text = self.assert_map_file(pid)
        self.assertNotIn(f"before_{self.tag}", text)
        self.assertNotIn(f"after_{self.tag}", text)
        self.assert_symbol_count(text, f"py::during_{self.tag}:{script}", 1)
        self.assert_symbol_count(text, f"py::again_{self.tag}:{script}", 1)
        # The module frame started before activation.
        self.assertNotIn(f"py::<module>:{script}", self.symbols(text))
        self.assert_no_overlap(parse_map(text))

    def test_activation_inside_running_frames(self):
        # Frames started before activation or still running after
        # deactivation return normally, also with exceptions.
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys

            def leaf_XTAGX(x):
                return x + 1

            def activating_XTAGX():
                sys.activate_stack_trampoline("perf")
                return leaf_XTAGX(1)

            def outer_XTAGX():
                # Started without a trampoline, calls through one.
                return activating_XTAGX() + leaf_XTAGX(10)

            def deactivating_inner_XTAGX():
                sys.deactivate_stack_trampoline()
                return "inner"

            def deactivating_outer_XTAGX():
                # Started through a trampoline, returns after deactivation.
                return deactivating_inner_XTAGX() + "+outer"

            def raising_inner_XTAGX():
                sys.deactivate_stack_trampoline()
                raise ValueError("raised after deactivation")

            def raising_middle_XTAGX():
                return raising_inner_XTAGX()

            def raising_outer_XTAGX():
                try:
                    raising_middle_XTAGX()
                except ValueError as exc:
                    return (str(exc), exc.__traceback__.tb_next.tb_frame
                            .f_code.co_name)

            res = {}
            res["outer"] = outer_XTAGX()
            res["deactivating"] = deactivating_outer_XTAGX()
            res["active1"] = sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")
            res["raising"] = raising_outer_XTAGX()
            res["active2"] = sys.is_stack_trampoline_active()
            res["leaf"] = leaf_XTAGX(100)
            print(json.dumps(res))
            print(os.getpid())
        """)
        lines = out.splitlines()
        res = json.loads(lines[0])
        self.assertEqual(res, {
            "outer": 13, "deactivating": "inner+outer", "active1": False,
            "raising": ["raised after deactivation",
                        f"raising_middle_{self.tag}"],
            "active2": False, "leaf": 101,
        })
        text = self.assert_map_file(pid)
        for name, count in [("leaf", 1), ("deactivating_outer", 1),
                            ("deactivating_inner", 1), ("raising_outer", 1),
                            ("raising_middle", 1), ("raising_inner", 1),
                            ("outer", 0), ("activating", 0)]:
            self.assert_symbol_count(
                text, f"py::{name}_{self.tag}:{script}", count)

    def test_many_cycles(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys

            def make(i):
                ns = {}
                exec(f"def cycle_{i}_XTAGX(x):\\n    return x + {i}\\n", ns)
                return ns[f"cycle_{i}_XTAGX"]

            def shared_XTAGX(x):
                return -x

            funcs = [make(i) for i in range(1000)]
            total = 0
            for i, func in enumerate(funcs):
                sys.activate_stack_trampoline("perf")
                assert sys.is_stack_trampoline_active()
                total += func(0) + shared_XTAGX(i)
                sys.deactivate_stack_trampoline()
                assert not sys.is_stack_trampoline_active()
                total += shared_XTAGX(i)
            print(os.getpid(), total)
        """)
        self.assertEqual(err, "")
        self.assertEqual(out.split(), [str(pid), str(sum(range(1000)) -
                                                     2 * sum(range(1000)))])
        text = self.assert_map_file(pid)
        symbols = self.symbols(text)
        for i in range(1000):
            self.assertEqual(
                symbols.count(f"py::cycle_{i}_{self.tag}:<string>"), 1, i)
        self.assertEqual(symbols.count(f"py::shared_{self.tag}:{script}"), 1)
        self.assert_no_overlap(parse_map(text))

    def test_write_failure_keeps_lines_whole(self):
        # When the map cannot grow any more (here: RLIMIT_FSIZE, as with a
        # full disk), the program goes on and the map keeps only whole
        # lines.
        import_helper.import_module("resource")
        pid, rc, out, err, script = self.run_script("""
            import os, resource, signal, sys

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            path = f"/tmp/perf-{os.getpid()}.map"
            sys.activate_stack_trampoline("perf")
            def before_limit_XTAGX():
                return 0
            before_limit_XTAGX()
            size = os.path.getsize(path)
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
            total = 0
            for i in range(20):
                ns = {}
                exec(f"def limited_{i}_XTAGX():\\n    return {i}\\n", ns)
                total += ns[f"limited_{i}_XTAGX"]()
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            print(os.getpid(), total)
        """)
        self.assertEqual(out.split(), [str(pid), str(sum(range(20)))])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(
            text, f"py::before_limit_{self.tag}:{script}", 1)

    def test_existing_map_is_appended_to(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys
            path = f"/tmp/perf-{os.getpid()}.map"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"1000 10 py::earlier_XTAGX:earlier.py\\n")
            os.close(fd)
            sys.activate_stack_trampoline("perf")
            def probe_XTAGX():
                return 1
            probe_XTAGX()
            sys.deactivate_stack_trampoline()
            print(os.getpid())
        """)
        text = self.assert_map_file(pid)
        self.assertTrue(
            text.startswith(f"1000 10 py::earlier_{self.tag}:earlier.py\n"))
        self.assert_symbol_count(text, f"py::probe_{self.tag}:{script}", 1)

    def test_map_lines_written_immediately(self):
        # The line of a function is in the file as soon as the function
        # has started, long before the process exits.
        script = self.write_script("""
            import os, sys
            # A map left behind by an earlier process with the same PID.
            try:
                os.unlink(f"/tmp/perf-{os.getpid()}.map")
            except FileNotFoundError:
                pass
            sys.activate_stack_trampoline("perf")
            def live_probe_XTAGX():
                return 1
            live_probe_XTAGX()
            print(os.getpid(), flush=True)
            sys.stdin.readline()
            def late_probe_XTAGX():
                return 2
            late_probe_XTAGX()
        """)
        proc = subprocess.Popen([sys.executable, script],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self.make_env())
        self.forget_map(proc.pid)
        with proc:
            try:
                line = proc.stdout.readline()
                self.assertEqual(line.strip(), str(proc.pid).encode())
                with open(perf_map_path(proc.pid), encoding="utf-8") as f:
                    text = f.read()
            finally:
                proc.stdin.write(b"\n")
                proc.stdin.close()
                proc.wait(timeout=support.SHORT_TIMEOUT)
        self.assertEqual(proc.returncode, 0)
        self.assert_map_format(text)
        self.assert_symbol_count(text, f"py::live_probe_{self.tag}:{script}",
                                 1)
        self.assertNotIn(f"late_probe_{self.tag}", text)
        text = self.assert_map_file(proc.pid)
        self.assert_symbol_count(text, f"py::late_probe_{self.tag}:{script}",
                                 1)



@requires_trampoline
@support.requires_subprocess()
class TestImports(PerfTestCase):
    """While the program imports, the description file stays open between
    writes; it is closed when the import is done."""

    # The main script: writes the module MODULE (given as argv[1]) next to
    # itself, activates the backend named by argv[2] and imports it.
    MAIN = """
        import json, os, sys

        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "mod_XTAGX.py"), "w") as f:
            f.write(sys.argv[1])
        backend = sys.argv[2]
        if backend == "perf":
            path = f"/tmp/perf-{os.getpid()}.map"
        else:
            path = f"/tmp/jit-{os.getpid()}.dump"
        sys.activate_stack_trampoline(backend)

        def description_fds():
            fds = []
            for name in os.listdir("/proc/self/fd"):
                try:
                    if os.readlink(f"/proc/self/fd/{name}") == path:
                        fds.append(int(name))
                except OSError:
                    pass
            return fds

        import mod_XTAGX
        result = dict(vars(mod_XTAGX).get("result", {}))
        result["module"] = mod_XTAGX.__file__
        result["after"] = description_fds()
        if hasattr(mod_XTAGX, "after_import"):
            result.update(mod_XTAGX.after_import())
        result["pid"] = os.getpid()
        print(json.dumps(result))
    """

    def run_import(self, module, backend="perf"):
        pid, rc, out, err, script = self.run_script(
            self.MAIN, self.subst(module), backend)
        if backend == "perf_jit":
            self.addCleanup(remove_path, jitdump_path(pid))
        self.assertEqual(err, "")
        res = self.last_json(out)
        self.assertEqual(res["pid"], pid)
        return pid, res

    def check_open_only_while_importing(self, backend):
        pid, res = self.run_import("""
            import __main__
            def in_import_XTAGX():
                return 1
            in_import_XTAGX()
            with open(__main__.path, "rb") as f:
                written = f.read()
            result = {"written": b"in_import_XTAGX" in written,
                      "during": __main__.description_fds()}
        """, backend)
        # Written as soon as the function ran, from a descriptor that was
        # open during the import only.
        self.assertTrue(res["written"])
        self.assertEqual(len(res["during"]), 1)
        self.assertEqual(res["after"], [])
        return pid, res

    def test_map_open_only_while_importing(self):
        pid, res = self.check_open_only_while_importing("perf")
        text = self.assert_map_file(pid)
        self.assert_symbol_count(
            text, f"py::in_import_{self.tag}:{res['module']}", 1)

    def test_dump_open_only_while_importing(self):
        pid, res = self.check_open_only_while_importing("perf_jit")
        with open(jitdump_path(pid), "rb") as f:
            _, records = parse_jitdump(f.read())
        names = [f["name"] for rid, _, f in records if rid == JIT_CODE_LOAD]
        self.assertEqual(
            names.count(f"py::in_import_{self.tag}:{res['module']}"), 1)

    # A module that runs first_XTAGX(), then closes the map's descriptor
    # ("kept") and opens a file of its own ("own") under the same number.
    CLOSE_AND_REUSE = """
        import __main__, os
        def first_XTAGX():
            return 1
        first_XTAGX()
        [kept] = __main__.description_fds()
        os.close(kept)
        own = os.path.join(__main__.here, "own.txt")
        fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if fd != kept:
            os.dup2(fd, kept)
            os.close(fd)
    """

    def run_close_and_reuse(self, rest):
        return self.run_import(textwrap.dedent(self.CLOSE_AND_REUSE)
                               + textwrap.dedent(rest))

    def test_program_closes_the_descriptor(self):
        # The program's file is never written to or closed.
        pid, res = self.run_close_and_reuse("""
            def second_XTAGX():
                return 2
            second_XTAGX()
            os.write(kept, b"own data")
            os.close(kept)
            with open(own, "rb") as f:
                result = {"own": f.read().decode()}
        """)
        self.assertEqual(res["own"], "own data")
        self.assertEqual(res["after"], [])
        text = self.assert_map_file(pid)
        for name in ("first", "second"):
            self.assert_symbol_count(
                text, f"py::{name}_{self.tag}:{res['module']}", 1)

    def test_program_closes_the_descriptor_before_import_ends(self):
        # The same, with no function run for the first time before the
        # import is done: the program's file stays open.
        pid, res = self.run_close_and_reuse("""
            def after_import():
                os.write(kept, b"own data")
                os.close(kept)
                with open(own, "rb") as f:
                    return {"own": f.read().decode()}
        """)
        self.assertEqual(res["own"], "own data")
        self.assertEqual(res["after"], [])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(
            text, f"py::first_{self.tag}:{res['module']}", 1)

    def test_map_removed_during_import(self):
        pid, res = self.run_import("""
            import __main__, os
            def first_XTAGX():
                return 1
            first_XTAGX()
            os.unlink(__main__.path)
            def second_XTAGX():
                return 2
            second_XTAGX()
        """)
        self.assertEqual(res["after"], [])
        text = self.assert_map_file(pid)
        self.assertNotIn(f"first_{self.tag}", text)
        self.assert_symbol_count(
            text, f"py::second_{self.tag}:{res['module']}", 1)

    def test_fork_during_import(self):
        # The child must not write to the parent's map through the
        # descriptor it inherits.
        module = """
            import __main__, os
            def before_fork_XTAGX():
                return 1
            before_fork_XTAGX()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    def child_only_XTAGX():
                        return 2
                    child_only_XTAGX()
                    # Nothing open on the parent's map.
                    code = 0 if not __main__.description_fds() else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(child, 0)
            def parent_after_XTAGX():
                return 3
            parent_after_XTAGX()
            result = {"child": child,
                      "exitcode": os.waitstatus_to_exitcode(status)}
        """

        def run():
            pid, res = self.run_import(module)
            self.check_fresh(res["child"])
            return pid, res

        pid, res = self.retrying(run)
        self.assertEqual(res["exitcode"], 0)
        self.assertEqual(res["after"], [])
        t, mod = self.tag, res["module"]
        parent_map = self.assert_map_file(pid)
        child_map = self.assert_map_file(res["child"])
        self.assert_symbol_count(parent_map, f"py::before_fork_{t}:{mod}", 1)
        self.assert_symbol_count(parent_map,
                                 f"py::parent_after_{t}:{mod}", 1)
        self.assertNotIn(f"child_only_{t}", parent_map)
        self.assert_symbol_count(child_map, f"py::before_fork_{t}:{mod}", 1)
        self.assert_symbol_count(child_map, f"py::child_only_{t}:{mod}", 1)
        self.assertNotIn(f"parent_after_{t}", child_map)


@requires_trampoline
@support.requires_subprocess()
class TestMapContents(PerfTestCase):

    def test_names_and_format(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys

            class Outer_XTAGX:
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

            def outer_XTAGX():
                def inner():
                    return 6
                return inner()

            def make_lambda_XTAGX():
                return (lambda: 7)()

            def gen_XTAGX():
                yield 8

            async def coro_XTAGX():
                return 9

            async def agen_XTAGX():
                yield 10

            def f\u00fcnf_XTAGX():
                return 11

            def ctl_XTAGX():
                return 12
            ctl_XTAGX.__code__ = ctl_XTAGX.__code__.replace(
                co_qualname="ctl\\t\\n\\x1b\\x7f_XTAGX")

            def long_XTAGX():
                return 13
            long_XTAGX.__code__ = long_XTAGX.__code__.replace(
                co_qualname="long_XTAGX_" + "x" * 5000)

            def run_coro(coro):
                try:
                    coro.send(None)
                except StopIteration as exc:
                    return exc.value

            results = []
            for _ in range(3):
                o = Outer_XTAGX()
                agen = agen_XTAGX()
                results.append([
                    o.method(), Outer_XTAGX.static(), Outer_XTAGX.cls(),
                    o.prop, Outer_XTAGX.Inner().deep(), outer_XTAGX(),
                    make_lambda_XTAGX(), list(gen_XTAGX()),
                    run_coro(coro_XTAGX()), run_coro(agen.__anext__()),
                    f\u00fcnf_XTAGX(), ctl_XTAGX(), long_XTAGX(),
                ])
                run_coro(agen.aclose())

            ns = {}
            exec(compile("def in_ctl_file_XTAGX():\\n    return 14\\n"
                         "in_ctl_file_XTAGX()\\n",
                         "ctl\\x01file\\r_XTAGX.py", "exec"), ns)
            exec(compile("def in_odd_file_XTAGX():\\n    return 15\\n"
                         "in_odd_file_XTAGX()\\n",
                         "odd_\\udcff_\u20ac_XTAGX.py", "exec"), ns)
            assert results[0] == results[2], results
            print(os.getpid(), results[0])
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        self.assertEqual(out.split(None, 1)[0], str(pid))
        text = self.assert_map_file(pid)
        entries = parse_map(text)
        self.assert_no_overlap(entries)
        t = self.tag
        expected = [
            "<module>",
            f"Outer_{t}",
            f"Outer_{t}.method",
            f"Outer_{t}.static",
            f"Outer_{t}.cls",
            f"Outer_{t}.prop",
            f"Outer_{t}.Inner",
            f"Outer_{t}.Inner.deep",
            f"outer_{t}",
            f"outer_{t}.<locals>.inner",
            f"make_lambda_{t}",
            f"make_lambda_{t}.<locals>.<lambda>",
            f"gen_{t}",
            f"coro_{t}",
            f"agen_{t}",
            f"f\u00fcnf_{t}",
            f"ctl????_{t}",
        ]
        for qualname in expected:
            with self.subTest(qualname=qualname):
                self.assert_symbol_count(text, f"py::{qualname}:{script}", 1)
        # Control characters in the file name are replaced too.
        ctl_file = f"ctl?file?_{t}.py"
        self.assert_symbol_count(text, f"py::in_ctl_file_{t}:{ctl_file}", 1)
        self.assert_symbol_count(text, f"py::<module>:{ctl_file}", 1)
        # A file name that is not valid UTF-8 still gives one valid line.
        odd = [line for line in text.splitlines()
               if f"py::in_odd_file_{t}:odd_" in line]
        self.assertEqual(len(odd), 1, odd)
        self.assertIn(f"\u20ac_{t}.py", odd[0])
        # An over-long name gives exactly one (possibly truncated) line.
        long_lines = [line for line in text.splitlines(keepends=True)
                      if f"py::long_{t}_xxxx" in line]
        self.assertEqual(len(long_lines), 1)
        self.assertRegex(long_lines[0], LOOSE_MAP_LINE_RE)
        # No control character survives anywhere.
        for line in text.splitlines():
            self.assertFalse(any(ord(c) < 0x20 or ord(c) == 0x7f
                                 for c in line), repr(line))

    def test_trampolines_are_executable_not_writable(self):
        # Every described range lies in an executable, non-writable
        # mapping of the process.
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys

            def probe_XTAGX():
                return [i for i in range(3)]
            probe_XTAGX()

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
                exec(f"def b{batch}_{i}_XTAGX():\\n    return {i}\\n", ns)
                return ns[f"b{batch}_{i}_XTAGX"]

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
                name = f"py::b{batch}_{i}_{self.tag}:<string>"
                self.assertEqual(symbols.count(name), 1, name)

    @threading_helper.requires_working_threading()
    def test_nonoverlapping_with_many_code_objects_in_threads(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            def make(prefix, i):
                ns = {}
                exec(f"def {prefix}_{i}_XTAGX():\\n    return {i}\\n", ns)
                return ns[f"{prefix}_{i}_XTAGX"]

            def work_XTAGX(prefix, out):
                out.append(sum(make(prefix, i)() for i in range(500)))

            sys.setswitchinterval(1e-5)
            results = []
            threads = [threading.Thread(target=work_XTAGX,
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
                    symbols.count(f"py::th{n}_{i}_{self.tag}:<string>"), 1)


@requires_trampoline
@support.requires_subprocess()
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
            def after_failure_XTAGX():
                return 42
            res["value"] = after_failure_XTAGX()
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
                def after_retry_XTAGX():
                    return 43
                res["retry_value"] = after_retry_XTAGX()
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
                            text, f"py::after_retry_{self.tag}:{script}", 1)
                        self.assertNotIn(f"after_failure_{self.tag}", text)

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
                "def after_XTAGX():\\n"
                "    return 42\\n"
                "print(json.dumps({'pid': os.getpid(),"
                " 'active': sys.is_stack_trampoline_active(),"
                " 'value': after_XTAGX()}))\\n")
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


@requires_trampoline
@support.requires_subprocess()
@threading_helper.requires_working_threading()
class TestThreads(PerfTestCase):

    def test_functions_run_in_threads(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            def thread_leaf_XTAGX(n):
                return n * 2

            def thread_main_XTAGX(results, i):
                results[i] = sum(thread_leaf_XTAGX(j) for j in range(100))

            results = [None] * 4
            threads = [threading.Thread(target=thread_main_XTAGX,
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
        t = self.tag
        for qualname in (f"thread_main_{t}", f"thread_leaf_{t}",
                         f"thread_main_{t}.<locals>.<genexpr>"):
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

            def late_leaf_XTAGX():
                return 5

            def waiter_XTAGX():
                started.set()
                go.wait()
                results.append(late_leaf_XTAGX())

            t = threading.Thread(target=waiter_XTAGX)
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
        self.assert_symbol_count(text, f"py::late_leaf_{self.tag}:{script}",
                                 1)
        self.assertNotIn(f"waiter_{self.tag}", text)

    def test_cycles_in_threads(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys, threading

            def cycle_leaf_XTAGX(i):
                return i + 1

            def cycle_worker_XTAGX(n, results):
                total = 0
                for i in range(n):
                    sys.activate_stack_trampoline("perf")
                    total += cycle_leaf_XTAGX(i)
                    sys.deactivate_stack_trampoline()
                    total += cycle_leaf_XTAGX(i)
                results.append(total)

            sys.setswitchinterval(1e-5)
            results = []
            threads = [threading.Thread(target=cycle_worker_XTAGX,
                                        args=(250, results))
                       for _ in range(4)]
            for t in threads:
                t.start()
            cycle_worker_XTAGX(250, results)
            for t in threads:
                t.join()
            print(os.getpid(), sorted(set(results)),
                  sys.is_stack_trampoline_active())
        """)
        self.assertEqual(err, "")
        self.assertEqual(out.split(None, 1),
                         [str(pid), f"[{2 * sum(range(1, 251))}] False\n"])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(
            text, f"py::cycle_leaf_{self.tag}:{script}", 1)
        self.assert_no_overlap(parse_map(text))

    def test_daemon_thread_at_exit(self):
        # A daemon thread still running Python code while the interpreter
        # exits must not crash it.
        pid, rc, out, err, script = self.run_script("""
            import os, threading

            running = threading.Event()

            def spin_leaf_XTAGX(i):
                return i

            def spin_XTAGX():
                i = 0
                while True:
                    i = spin_leaf_XTAGX(i + 1)
                    if i == 100:
                        running.set()

            threading.Thread(target=spin_XTAGX, daemon=True).start()
            running.wait()
            print(os.getpid(), "done")
        """, flags=("-X", "perf"))
        self.assertEqual(out.split(), [str(pid), "done"])
        self.assertEqual(err, "")
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::spin_leaf_{self.tag}:{script}",
                                 1)


@requires_trampoline
@support.requires_subprocess()
@support.requires_fork()
class TestFork(PerfTestCase):

    def test_fork_child_map(self):
        script = self.write_script("""
            import json, os, sys

            def parent_before_XTAGX():
                return 1
            parent_before_XTAGX()

            with open(f"/tmp/perf-{os.getpid()}.map") as f:
                snapshot = f.read()

            to_child_r, to_child_w = os.pipe()
            to_parent_r, to_parent_w = os.pipe()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    os.close(to_child_w)
                    os.close(to_parent_r)
                    def child_only_XTAGX():
                        return 2
                    child_only_XTAGX()
                    parent_before_XTAGX()
                    os.write(to_parent_w, b"x")
                    # Wait until the parent ran parent_after_XTAGX().
                    os.read(to_child_r, 1)
                    def child_late_XTAGX():
                        return 3
                    child_late_XTAGX()
                    code = 0 if sys.is_stack_trampoline_active() else 3
                finally:
                    os._exit(code)

            os.close(to_child_r)
            os.close(to_parent_w)
            os.read(to_parent_r, 1)
            def parent_after_XTAGX():
                return 4
            parent_after_XTAGX()
            os.write(to_child_w, b"x")
            _, status = os.waitpid(child, 0)
            print(json.dumps({"parent": os.getpid(), "child": child,
                              "exitcode": os.waitstatus_to_exitcode(status),
                              "snapshot": snapshot}))
        """)

        def run():
            pid, rc, out, err = self.run_python("-X", "perf", script)
            res = self.last_json(out)
            self.check_fresh(res["child"])
            return pid, err, res

        pid, err, res = self.retrying(run)
        child = res["child"]
        self.assertEqual(res["parent"], pid)
        self.assertNotEqual(child, pid)
        self.assertEqual(res["exitcode"], 0)
        self.assertEqual(err, "")

        parent_map = self.assert_map_file(pid)
        child_map = self.assert_map_file(child)
        snapshot = res["snapshot"]
        t = self.tag

        before = f"py::parent_before_{t}:{script}"
        self.assertIn(before, snapshot)
        # The child's map starts with what the parent had written.
        self.assertTrue(child_map.startswith(snapshot))
        self.assertTrue(parent_map.startswith(snapshot))
        self.assert_symbol_count(child_map, before, 1)
        self.assert_symbol_count(child_map, f"py::child_only_{t}:{script}", 1)
        self.assert_symbol_count(child_map, f"py::child_late_{t}:{script}", 1)
        self.assertNotIn(f"parent_after_{t}", child_map)

        self.assert_symbol_count(parent_map, before, 1)
        self.assert_symbol_count(parent_map,
                                 f"py::parent_after_{t}:{script}", 1)
        self.assertNotIn(f"child_only_{t}", parent_map)
        self.assertNotIn(f"child_late_{t}", parent_map)
        self.assert_no_overlap(parse_map(child_map))

    def test_fork_during_startup(self):
        # sitecustomize forks while the interpreter starts up, when the
        # descriptions made so far are still held in memory: each process
        # writes them to its own file, once.
        site_dir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, site_dir)
        with open(os.path.join(site_dir, "sitecustomize.py"), "w") as f:
            f.write(self.subst("""
                import atexit, os
                def site_probe_XTAGX():
                    return 1
                site_probe_XTAGX()
                _child = os.fork()
                if _child:
                    atexit.register(os.waitpid, _child, 0)
            """))
        code = self.subst("""
            import json, os
            def main_probe_XTAGX():
                return 2
            main_probe_XTAGX()
            print(json.dumps([os.getpid(), os.getppid()]), flush=True)
        """)
        env = self.make_env(PYTHONPATH=site_dir)
        site_probe = f"py::site_probe_{self.tag}:" \
                     f"{os.path.join(site_dir, 'sitecustomize.py')}"
        main_probe = f"py::main_probe_{self.tag}:<string>"
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                def run():
                    pid, rc, out, err = self.run_python(
                        "-X", backend, "-c", code, env=env)
                    self.assertEqual(err, "")
                    procs = [json.loads(line) for line in out.splitlines()]
                    self.assertEqual(len(procs), 2, out)
                    self.assertIn([pid, os.getpid()], procs)
                    procs.remove([pid, os.getpid()])
                    child, parent = procs[0]
                    self.assertEqual(parent, pid)
                    self.check_fresh(child)
                    return pid, child

                pid, child = self.retrying(run)
                if backend == "perf":
                    addrs = {}
                    for p in (pid, child):
                        text = self.assert_map_file(p)
                        self.assert_symbol_count(text, site_probe, 1)
                        self.assert_symbol_count(text, main_probe, 1)
                        entries = parse_map(text)
                        self.assert_no_overlap(entries)
                        addrs[p] = {n: a for a, _, n in entries}
                    # The child runs the trampoline it inherited.
                    self.assertEqual(addrs[pid][site_probe],
                                     addrs[child][site_probe])
                else:
                    for p in (pid, child):
                        self.addCleanup(remove_path, jitdump_path(p))
                        with open(jitdump_path(p), "rb") as f:
                            header, records = parse_jitdump(f.read())
                        loads = [f for rid, _, f in records
                                 if rid == JIT_CODE_LOAD]
                        names = [f["name"] for f in loads]
                        self.assertEqual(header["pid"], p)
                        self.assertEqual({f["pid"] for f in loads}, {p})
                        self.assertEqual(names.count(site_probe), 1)
                        self.assertEqual(names.count(main_probe), 1)
                        self.assertEqual(len(names), len(set(
                            f["code_addr"] for f in loads)))

    def test_fork_grandchild(self):
        script = self.write_script("""
            import json, os

            def gen0_XTAGX():
                return 0
            gen0_XTAGX()
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    os.close(r)
                    def gen1_XTAGX():
                        return 1
                    gen1_XTAGX()
                    grandchild = os.fork()
                    if grandchild == 0:
                        def gen2_XTAGX():
                            return 2
                        gen2_XTAGX()
                        os._exit(0)
                    _, status = os.waitpid(grandchild, 0)
                    os.write(w, str(grandchild).encode())
                    code = os.waitstatus_to_exitcode(status)
                finally:
                    os._exit(code)
            os.close(w)
            grandchild = int(os.read(r, 100))
            _, status = os.waitpid(child, 0)
            print(json.dumps([os.getpid(), child, grandchild,
                              os.waitstatus_to_exitcode(status)]))
        """)

        def run():
            pid, rc, out, err = self.run_python("-X", "perf", script)
            res = self.last_json(out)
            self.check_fresh(*res[1:3])
            self.assertEqual(res[0], pid)
            return res

        parent, child, grandchild, exitcode = self.retrying(run)
        self.assertEqual(exitcode, 0)
        maps = [self.assert_map_file(p) for p in (parent, child, grandchild)]
        for generation, text in enumerate(maps):
            for n in range(3):
                count = 1 if n <= generation else 0
                self.assert_symbol_count(
                    text, f"py::gen{n}_{self.tag}:{script}", count,
                    f"generation {generation}: gen{n}")
        # Each map begins with the lines of the one it was forked from.
        gen0_line = [line for line in maps[0].splitlines(keepends=True)
                     if f"gen0_{self.tag}" in line][0]
        prefix0 = maps[0][:maps[0].index(gen0_line) + len(gen0_line)]
        self.assertTrue(maps[1].startswith(prefix0))
        gen1_line = [line for line in maps[1].splitlines(keepends=True)
                     if f"gen1_{self.tag}" in line][0]
        prefix1 = maps[1][:maps[1].index(gen1_line) + len(gen1_line)]
        self.assertTrue(maps[2].startswith(prefix1))

    def test_fork_when_inactive(self):
        script = self.write_script("""
            import json, os, sys

            sys.activate_stack_trampoline("perf")
            def parent_probe_XTAGX():
                return 1
            parent_probe_XTAGX()
            sys.deactivate_stack_trampoline()

            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    def inactive_child_XTAGX():
                        return 2
                    inactive_child_XTAGX()
                    active = sys.is_stack_trampoline_active()
                    # The child can start its own map.
                    sys.activate_stack_trampoline("perf")
                    def active_child_XTAGX():
                        return 3
                    active_child_XTAGX()
                    code = 0 if not active else 3
                finally:
                    os._exit(code)
            _, status = os.waitpid(child, 0)
            print(json.dumps([os.getpid(), child,
                              os.waitstatus_to_exitcode(status)]))
        """)

        def run():
            pid, rc, out, err = self.run_python(script)
            res = self.last_json(out)
            self.check_fresh(res[1])
            return res

        parent, child, exitcode = self.retrying(run)
        self.assertEqual(exitcode, 0)
        child_map = self.assert_map_file(child)
        self.assertNotIn(f"parent_probe_{self.tag}", child_map)
        self.assertNotIn(f"inactive_child_{self.tag}", child_map)
        self.assert_symbol_count(
            child_map, f"py::active_child_{self.tag}:{script}", 1)

    def test_fork_after_reactivation(self):
        # The child's map starts with everything the parent described,
        # also before an earlier deactivation: the child can still run
        # those trampolines.
        script = self.write_script("""
            import json, os, sys

            sys.activate_stack_trampoline("perf")
            def first_phase_XTAGX():
                return 1
            first_phase_XTAGX()
            sys.deactivate_stack_trampoline()
            sys.activate_stack_trampoline("perf")
            def second_phase_XTAGX():
                return 2
            second_phase_XTAGX()
            with open(f"/tmp/perf-{os.getpid()}.map") as f:
                snapshot = f.read()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    first_phase_XTAGX()
                    second_phase_XTAGX()
                    def child_phase_XTAGX():
                        return 3
                    child_phase_XTAGX()
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(child, 0)
            print(json.dumps([child, os.waitstatus_to_exitcode(status),
                              snapshot]))
        """)

        def run():
            pid, rc, out, err = self.run_python(script)
            res = self.last_json(out)
            self.check_fresh(res[0])
            return res

        child, exitcode, snapshot = self.retrying(run)
        self.assertEqual(exitcode, 0)
        child_map = self.assert_map_file(child)
        self.assertTrue(child_map.startswith(snapshot))
        for name in ("first_phase", "second_phase", "child_phase"):
            self.assert_symbol_count(
                child_map, f"py::{name}_{self.tag}:{script}", 1)
        self.assertIn(f"py::first_phase_{self.tag}:{script}", snapshot)

    MP_SCRIPT = """
        import json, os, sys
        import multiprocessing
        import multiprocessing.forkserver
        import multiprocessing.resource_tracker

        def mp_work_XTAGX(queue, x):
            queue.put((os.getpid(), x * x, sys.is_stack_trampoline_active()))

        def main(method):
            ctx = multiprocessing.get_context(method)
            queue = ctx.Queue()
            procs = [ctx.Process(target=mp_work_XTAGX, args=(queue, i))
                     for i in range(3)]
            for p in procs:
                p.start()
            results = sorted(queue.get(timeout=60) for _ in procs)
            for p in procs:
                p.join()
            helpers = [multiprocessing.forkserver._forkserver._forkserver_pid,
                       multiprocessing.resource_tracker._resource_tracker._pid]
            print(json.dumps({
                "pid": os.getpid(),
                "workers": [p.pid for p in procs],
                "exitcodes": [p.exitcode for p in procs],
                "helpers": [h for h in helpers if h is not None],
                "results": results,
            }))

        if __name__ == "__main__":
            main(sys.argv[1])
    """

    def test_multiprocessing(self):
        import_helper.import_module("_multiprocessing")
        import multiprocessing
        script = self.write_script(self.MP_SCRIPT)
        env = self.make_env(PYTHONPERFSUPPORT="1")
        for method in ("fork", "spawn", "forkserver"):
            if method not in multiprocessing.get_all_start_methods():
                continue
            with self.subTest(method=method):
                def run():
                    pid, rc, out, err = self.run_python(
                        script, method, env=env, timeout=support.LONG_TIMEOUT)
                    res = self.last_json(out)
                    self.check_fresh(*res["workers"], *res["helpers"])
                    return pid, res

                pid, res = self.retrying(run)
                self.assertEqual(res["pid"], pid)
                self.assertEqual(res["exitcodes"], [0, 0, 0])
                self.assertEqual(sorted(p for p, _, _ in res["results"]),
                                 sorted(res["workers"]))
                self.assertEqual([sq for _, sq, _ in res["results"]],
                                 sorted([0, 1, 4]))
                self.assertEqual([a for _, _, a in res["results"]],
                                 [True] * 3)
                self.assert_map_file(pid)
                for worker in res["workers"]:
                    text = self.assert_map_file(worker)
                    self.assert_symbol_count(
                        text, f"py::mp_work_{self.tag}:{script}", 1)


@requires_trampoline
@support.requires_subprocess()
class TestGeneratorsAndCoroutines(PerfTestCase):

    SCRIPT = """
        import asyncio, json, os, sys

        out = {}

        def gen_XTAGX(n):
            total = 0
            for i in range(n):
                x = yield i
                if x:
                    total += x
            return total

        def deleg_XTAGX(n):
            r = yield from gen_XTAGX(n)
            return r * 10

        g = deleg_XTAGX(3)
        values = [next(g)]
        try:
            while True:
                values.append(g.send(2))
        except StopIteration as exc:
            out["deleg"] = [values, exc.value]

        def thrown_XTAGX():
            yield 1

        g = thrown_XTAGX()
        try:
            g.throw(KeyError("boom"))   # never started before
        except KeyError as exc:
            out["throw_unstarted"] = repr(exc)

        def catcher_XTAGX():
            try:
                yield 1
            except ValueError as exc:
                yield f"caught {exc}"
            yield "end"

        g = catcher_XTAGX()
        next(g)
        out["throw_started"] = [g.throw(ValueError("v")), next(g)]
        g.close()

        def closer_XTAGX():
            try:
                yield 1
            finally:
                out["closed"] = True

        g = closer_XTAGX()
        next(g)
        g.close()

        out["genexpr"] = sum(x * x for x in range(10))

        async def leaf_XTAGX(x):
            return x + 1

        async def mid_XTAGX(x):
            return await leaf_XTAGX(x) * 2

        async def top_XTAGX():
            return [await mid_XTAGX(i) for i in range(3)]

        def run_coro(coro):
            try:
                coro.send(None)
            except StopIteration as exc:
                return exc.value
            raise AssertionError("coroutine suspended")

        out["coro"] = run_coro(top_XTAGX())

        async def sleeper_XTAGX():
            await asyncio.sleep(0)
            return "slept"

        async def agen_XTAGX():
            for i in range(3):
                await asyncio.sleep(0)
                yield i

        async def consume_XTAGX():
            return [x async for x in agen_XTAGX()]

        async def gather_XTAGX():
            return await asyncio.gather(sleeper_XTAGX(), consume_XTAGX())

        out["asyncio"] = asyncio.run(gather_XTAGX())
        print(json.dumps(out))
        print(os.getpid())
    """

    EXPECTED = {
        "deleg": [[0, 1, 2], 60],
        "throw_unstarted": "KeyError('boom')",
        "throw_started": ["caught v", "end"],
        "closed": True,
        "genexpr": 285,
        "coro": [2, 4, 6],
        "asyncio": ["slept", [0, 1, 2]],
    }

    def test_generators_and_coroutines(self):
        for flags in ((), ("-X", "perf")):
            with self.subTest(flags=flags):
                pid, rc, out, err, script = self.run_script(self.SCRIPT,
                                                            flags=flags)
                self.assertEqual(err, "")
                lines = out.splitlines()
                self.assertEqual(json.loads(lines[0]), self.EXPECTED)
                self.assertEqual(lines[1], str(pid))
                if not flags:
                    continue
                text = self.assert_map_file(pid)
                t = self.tag
                for qualname in (
                        f"gen_{t}", f"deleg_{t}", f"thrown_{t}",
                        f"catcher_{t}", f"closer_{t}", "<genexpr>",
                        f"leaf_{t}", f"mid_{t}", f"top_{t}",
                        f"top_{t}.<locals>.<listcomp>", f"sleeper_{t}",
                        f"agen_{t}", f"consume_{t}",
                        f"consume_{t}.<locals>.<listcomp>", f"gather_{t}"):
                    with self.subTest(qualname=qualname):
                        self.assert_symbol_count(
                            text, f"py::{qualname}:{script}", 1)

    def test_suspended_across_activation_changes(self):
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys

            def counter_XTAGX():
                i = 0
                while True:
                    try:
                        i += 1
                        yield i
                    except ValueError:
                        i += 100

            async def awaiter_XTAGX(fut):
                return (await fut) + 1

            class Future:
                def __init__(self):
                    self.value = None
                def __await__(self):
                    yield "suspended"
                    return self.value

            sys.activate_stack_trampoline("perf")
            g1 = counter_XTAGX()
            values = [next(g1)]              # started through a trampoline
            fut = Future()
            c1 = awaiter_XTAGX(fut)
            values.append(c1.send(None))
            sys.deactivate_stack_trampoline()
            values += [next(g1) for _ in range(3)]
            values.append(g1.throw(ValueError))
            g2 = counter_XTAGX()
            values.append(next(g2))          # started without
            sys.activate_stack_trampoline("perf")
            values += [next(g2), next(g1), g2.throw(ValueError)]
            fut.value = 41
            try:
                c1.send(None)
            except StopIteration as exc:
                values.append(exc.value)
            g1.close()
            g2.close()
            sys.deactivate_stack_trampoline()
            print(json.dumps(values))
            print(os.getpid())
        """)
        lines = out.splitlines()
        self.assertEqual(json.loads(lines[0]),
                         [1, "suspended", 2, 3, 4, 105, 1, 2, 106, 103, 42])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::counter_{self.tag}:{script}", 1)
        self.assert_symbol_count(text, f"py::awaiter_{self.tag}:{script}", 1)
        self.assert_symbol_count(
            text, f"py::Future.__await__:{script}", 1)


@requires_trampoline
@support.requires_subprocess()
class TestRecursion(PerfTestCase):

    SCRIPT = """
        import json, sys

        if len(sys.argv) > 1 and sys.argv[1] == "activate":
            sys.activate_stack_trampoline("perf")

        depth = 0

        def plain_XTAGX():
            global depth
            depth += 1
            plain_XTAGX()

        def defaults_XTAGX(a=1, b=2):
            global depth
            depth += 1
            defaults_XTAGX()

        def kwargs_XTAGX(*, k):
            global depth
            depth += 1
            kwargs_XTAGX(k=k)

        def mutual_a_XTAGX():
            global depth
            depth += 1
            mutual_b_XTAGX()

        def mutual_b_XTAGX():
            global depth
            depth += 1
            mutual_a_XTAGX()

        class C_XTAGX:
            def meth(self):
                global depth
                depth += 1
                self.meth()
            def __getitem__(self, i):
                global depth
                depth += 1
                return self[i + 1]

        def generator_XTAGX():
            global depth
            depth += 1
            yield next(generator_XTAGX())

        def catching_XTAGX(n):
            # Catches the error a few frames below the limit and recurses
            # again from there.
            global depth
            depth += 1
            try:
                return catching_XTAGX(n + 1)
            except RecursionError:
                if n == 500:
                    return catching_XTAGX(n + 1)
                raise

        kinds = {
            "plain": plain_XTAGX,
            "defaults": defaults_XTAGX,
            "kwargs": lambda: kwargs_XTAGX(k=1),
            "mutual": mutual_a_XTAGX,
            "method": C_XTAGX().meth,
            "getitem": lambda: C_XTAGX()[0],
            "generator": lambda: next(generator_XTAGX()),
            "catching": lambda: catching_XTAGX(1),
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
                self.assert_symbol_count(
                    text, f"py::plain_{self.tag}:{script}", 1)

    DEEP_SCRIPT = """
        import json, sys, threading

        mode, limit, stack_size = sys.argv[1], int(sys.argv[2]), \\
            int(sys.argv[3])
        depth = 0

        def deep_XTAGX():
            global depth
            depth += 1
            deep_XTAGX()

        def run():
            global result
            try:
                deep_XTAGX()
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


@requires_trampoline
@support.requires_subprocess()
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

            def hooked_leaf_XTAGX(n):
                return n + 1

            def hooked_XTAGX(n):
                return [hooked_leaf_XTAGX(i) for i in range(n)]

            for _ in range(50):
                hooked_XTAGX(3)
            record = []
            _testinternalcapi.set_eval_frame_record(record)
            hooked_XTAGX(3)
            _testinternalcapi.set_eval_frame_default()
            print(record)
        """)

    def test_subinterpreters(self):
        _testcapi = import_helper.import_module("_testcapi")
        import_helper.import_module("_xxsubinterpreters")
        pid, rc, out, err, script = self.run_script("""
            import os, sys
            import _testcapi, _xxsubinterpreters as interpreters

            code = '''if 1:
                import sys
                def subinterp_probe_XTAGX(n):
                    return n * 2
                assert subinterp_probe_XTAGX(21) == 42
                assert sys.is_stack_trampoline_active()
            '''
            assert _testcapi.run_in_subinterp(code) == 0
            for _ in range(3):
                interp = interpreters.create()
                interpreters.run_string(interp, code.replace("probe",
                                                             "again"))
                interpreters.destroy(interp)
            def main_probe_XTAGX():
                return 1
            main_probe_XTAGX()
            print(os.getpid())
        """, flags=("-X", "perf"))
        self.assertEqual(err, "")
        text = self.assert_map_file(pid)
        t = self.tag
        self.assertIn(f"py::subinterp_probe_{t}:<string>", self.symbols(text))
        self.assertIn(f"py::subinterp_again_{t}:<string>", self.symbols(text))
        self.assert_symbol_count(text, f"py::main_probe_{t}:{script}", 1)
        self.assert_no_overlap(parse_map(text))


@requires_trampoline
@support.requires_subprocess()
@unittest.skipUnless(sys.platform == "linux", "Linux perf")
class TestRealPerf(PerfTestCase):
    """Record a program with Linux perf and check its call stacks."""

    PERF_SCRIPT = """
        import os, time

        def foo():
            x = 0
            deadline = time.perf_counter() + 1.2
            while time.perf_counter() < deadline:
                for i in range(10_000):
                    x += i * i
            return x

        def bar():
            return foo()

        def baz():
            return bar()

        baz()
        print(os.getpid())
    """

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.perf = shutil.which("perf")
        if cls.perf is None:
            raise unittest.SkipTest("perf is not installed")
        if not frame_pointers_enabled():
            raise unittest.SkipTest("Python was not built with "
                                    "-fno-omit-frame-pointer")
        with tempfile.TemporaryDirectory() as tmpdir:
            data = os.path.join(tmpdir, "probe.data")
            cmd = [cls.perf, "record", "-o", data, "-e", "cpu-clock", "--",
                   sys.executable, "-c", "pass"]
            env = dict(os.environ)
            env.pop("PYTHONPERFSUPPORT", None)   # no map to clean up
            try:
                proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                                      capture_output=True, env=env,
                                      timeout=support.SHORT_TIMEOUT)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise unittest.SkipTest(f"perf record cannot run: {exc}")
            if proc.returncode != 0:
                raise unittest.SkipTest(
                    "perf record cannot record: "
                    + proc.stderr.decode(errors="replace").strip()[-300:])

    def record(self, flags):
        """Record the script; return (python's pid, script path,
        [[symbol, ...] innermost first, per sample])."""
        script = self.write_script(self.PERF_SCRIPT)
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        data = os.path.join(tmpdir, "perf.data")
        existing = existing_maps()
        cmd = [self.perf, "record", "-F", "999", "-g", "--call-graph=fp",
               "-e", "cpu-clock", "-o", data, "--",
               sys.executable, *flags, script]
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                                  capture_output=True, env=self.make_env(),
                                  timeout=support.LONG_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.skipTest("perf record timed out")
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        pid = None
        if out.strip().isdigit():
            pid = int(out.strip())
            if map_name(pid) in existing:
                # perf would read a stale map too.
                raise StaleMapPath(pid)
            self.forget_map(pid)
        if proc.returncode != 0 or pid is None:
            if pid is None:
                # Did the program fail, or perf?  The program must work
                # without perf (run_python() fails the test otherwise).
                self.run_python(*flags, script)
            self.skipTest(f"perf record failed: {err[-300:]}")
        try:
            proc = subprocess.run([self.perf, "script", "-i", data],
                                  stdin=subprocess.DEVNULL,
                                  capture_output=True,
                                  timeout=support.LONG_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.skipTest("perf script timed out")
        if proc.returncode != 0:
            self.skipTest("perf script failed: "
                          + proc.stderr.decode(errors="replace")[-300:])
        samples = self.parse_perf_script(
            proc.stdout.decode("utf-8", "replace"))
        if len(samples) < 50:
            self.skipTest(f"perf recorded only {len(samples)} samples")
        return pid, script, samples

    FRAME_RE = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)$")

    def parse_perf_script(self, text):
        samples = []
        for block in re.split(r"\n\s*\n", text):
            lines = block.strip("\n").splitlines()
            if not lines:
                continue
            frames = []
            for line in lines[1:]:
                match = self.FRAME_RE.match(line)
                if match:
                    frames.append(match.group(1))
            samples.append(frames)
        return samples

    def test_python_frames_in_perf_stacks(self):
        pid, script, samples = self.retrying(
            lambda: self.record(("-X", "perf")))
        escaped = re.escape(script)
        patterns = {name: re.compile(rf"^py::{name}:{escaped}(\+0x[0-9a-f]+)?$")
                    for name in ("foo", "bar", "baz")}
        any_py = re.compile(r"^py::")
        with_foo = 0
        good = 0
        for frames in samples:
            if not any(patterns["foo"].match(f) for f in frames):
                continue
            with_foo += 1
            py_frames = [f for f in frames if any_py.match(f)]
            for i, frame in enumerate(py_frames):
                if patterns["foo"].match(frame):
                    rest = py_frames[i + 1:i + 3]
                    if (len(rest) == 2 and patterns["bar"].match(rest[0])
                            and patterns["baz"].match(rest[1])):
                        good += 1
                    break
        self.assertGreater(with_foo, 0,
                           f"no sample names py::foo among {len(samples)}")
        self.assertGreaterEqual(
            good / with_foo, 0.95,
            f"only {good} of {with_foo} samples in foo show foo <- bar <- baz")

    def test_no_python_frames_without_trampolines(self):
        pid, script, samples = self.retrying(lambda: self.record(()))
        names = [frame for frames in samples for frame in frames
                 if PY_NAME_RE.match(frame)]
        self.assertEqual(names[:10], [])


@requires_trampoline
@support.requires_subprocess()
class TestFaults(PerfTestCase):
    """Failures of the machinery and hostile events."""

    def test_arena_allocation_failure(self):
        import_helper.import_module("_testinternalcapi")
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys, _testinternalcapi

            def work_XTAGX(n):
                return sum(helper_XTAGX(i) for i in range(n))

            def helper_XTAGX(i):
                return i * i

            _testinternalcapi.perf_trampoline_fail_arenas(True)
            sys.activate_stack_trampoline("perf")
            results = [work_XTAGX(100), work_XTAGX(10)]
            failed_stats = _testinternalcapi.get_perf_trampoline_stats()
            # Activating again after the failure tries again.
            _testinternalcapi.perf_trampoline_fail_arenas(False)
            sys.deactivate_stack_trampoline()
            sys.activate_stack_trampoline("perf")
            def later_XTAGX():
                return "later"
            results.append(later_XTAGX())
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
        self.assert_symbol_count(text, f"py::work_{self.tag}:{script}", 0)
        self.assert_symbol_count(
            text, f"py::later_{self.tag}:{script}", 1)

    def test_many_code_objects(self):
        # One trampoline and one map line per code object, and a bounded
        # amount of executable memory for each.
        count = 100_000
        import_helper.import_module("_testinternalcapi")
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys, types, _testinternalcapi

            def template_XTAGX(x):
                return x + 1

            code = template_XTAGX.__code__
            funcs = [types.FunctionType(code.replace(
                        co_name=f"many{i}",
                        co_qualname=f"many_XTAGX_{i}"), {})
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
                   if e[2].startswith(f"py::many_{self.tag}_")]
        self.assertEqual(len(entries), count)
        self.assertEqual(len({e[2] for e in entries}), count)
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

    def test_other_co_extra_users_unaffected(self):
        # code_dealloc() calls every registered co_extra free function for
        # the slots a code object has, even unset ones.  Trampolines must
        # not make other users' free functions run for code objects they
        # never tagged.
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
            calls = []
            FREE = freefunc(lambda ptr: calls.append(ptr))
            index = request(FREE)
            sys.activate_stack_trampoline("perf")
            ns = {}
            exec(compile("def fresh_XTAGX():\\n    return 1\\n", "<f>",
                         "exec"), ns)
            ns["fresh_XTAGX"]()
            tagged = {}
            exec(compile("def tagged_XTAGX():\\n    return 2\\n", "<t>",
                         "exec"), tagged)
            tagged["tagged_XTAGX"]()
            set_extra(tagged["tagged_XTAGX"].__code__, index, 1234)
            ns.clear()
            tagged.clear()
            gc.collect()
            print(json.dumps([index, calls]))
            print(os.getpid())
        """)
        index, calls = json.loads(out.splitlines()[0])
        self.assertGreaterEqual(index, 2)
        self.assertEqual(calls, [1234])

    SIGINT_SCRIPT = """
        import os, signal, sys, threading, traceback

        def spin_XTAGX(depth):
            if depth:
                return spin_XTAGX(depth - 1)
            threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
            while True:
                pass

        def generator_XTAGX():
            yield spin_XTAGX(150)

        try:
            list(generator_XTAGX())
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
        # <module>, the generator and 151 levels of spin_XTAGX().
        self.assertEqual(results[1].split()[-1], "153")


# jitdump (perf_jit backend) ------------------------------------------------

JITDUMP_MAGIC = 0x4A695444
JIT_CODE_LOAD = 0
JIT_CODE_UNWINDING_INFO = 4
ELF_TEXT_OFFSET = 64     # where "perf inject --jit" puts the code


def jitdump_path(pid):
    return f"/tmp/jit-{pid}.dump"


def parse_jitdump(data):
    """Return (header dict, [(id, timestamp, fields dict)])."""
    import struct
    (magic, version, total, mach, pad, pid, ts, flags) = struct.unpack_from(
        "<IIIIIIQQ", data, 0)
    header = dict(magic=magic, version=version, total_size=total,
                  elf_mach=mach, pid=pid, timestamp=ts, flags=flags)
    records = []
    pos = total
    while pos < len(data):
        rid, size, ts = struct.unpack_from("<IIQ", data, pos)
        if size < 16 or pos + size > len(data):
            raise ValueError(f"bad record at {pos}: id {rid} size {size}")
        body = data[pos + 16:pos + size]
        if rid == JIT_CODE_LOAD:
            pid, tid, vma, addr, csize, index = struct.unpack_from(
                "<IIQQQQ", body, 0)
            end = body.index(b"\0", 40)
            name = body[40:end].decode("utf-8")
            code = body[end + 1:end + 1 + csize]
            fields = dict(pid=pid, tid=tid, vma=vma, code_addr=addr,
                          code_size=csize, code_index=index, name=name,
                          code=code, extra=len(body) - (end + 1 + csize))
        elif rid == JIT_CODE_UNWINDING_INFO:
            usize, hsize, msize = struct.unpack_from("<QQQ", body, 0)
            fields = dict(unwinding_size=usize, eh_frame_hdr_size=hsize,
                          mapped_size=msize, data=body[24:24 + usize],
                          record_size=size)
        else:
            fields = {}
        records.append((rid, ts, fields))
        pos += size
    return header, records


def read_uleb(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7f) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def read_sleb(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7f) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


def decode_eh_frame(unwind, hdr_size, code_size):
    """Decode the .eh_frame + .eh_frame_hdr of one trampoline as laid out
    in the ELF file perf inject writes.  Return (fde_start, fde_range,
    rows): rows maps a code offset to (cfa_reg, cfa_off, {reg: offset}) in
    effect from that offset on."""
    import struct
    eh_frame = unwind[:len(unwind) - hdr_size]
    hdr = unwind[len(unwind) - hdr_size:]
    eh_addr = (ELF_TEXT_OFFSET + code_size + 7) // 8 * 8
    hdr_addr = eh_addr + len(eh_frame)

    # CIE
    length, cie_id = struct.unpack_from("<Ii", eh_frame, 0)
    assert cie_id == 0, cie_id
    version = eh_frame[8]
    aug_end = eh_frame.index(b"\0", 9)
    aug = eh_frame[9:aug_end]
    pos = aug_end + 1
    code_align, pos = read_uleb(eh_frame, pos)
    data_align, pos = read_sleb(eh_frame, pos)
    ra_reg, pos = read_uleb(eh_frame, pos)
    aug_len, pos = read_uleb(eh_frame, pos)
    fde_enc = eh_frame[pos]
    pos += aug_len
    cie_insns = eh_frame[pos:4 + length]
    cie = dict(version=version, augmentation=aug, code_align=code_align,
               data_align=data_align, ra=ra_reg, fde_encoding=fde_enc)

    # FDE
    fde = 4 + length
    flength, cie_ptr = struct.unpack_from("<II", eh_frame, fde)
    assert fde + 4 - cie_ptr == 0, "CIE pointer"
    (pc_rel,) = struct.unpack_from("<i", eh_frame, fde + 8)
    pc_begin = eh_addr + fde + 8 + pc_rel
    (pc_range,) = struct.unpack_from("<I", eh_frame, fde + 12)
    pos = fde + 16
    aug_len, pos = read_uleb(eh_frame, pos)
    pos += aug_len
    fde_insns = eh_frame[pos:fde + 4 + flength]
    terminator = eh_frame[fde + 4 + flength:]
    assert terminator == b"\0\0\0\0", terminator

    # .eh_frame_hdr
    version, ptr_enc, count_enc, table_enc = hdr[:4]
    assert (version, ptr_enc, count_enc, table_enc) == (1, 0x1b, 0x03, 0x3b)
    eh_ptr, count, loc, fde_ptr = struct.unpack_from("<iIii", hdr, 4)
    hdr_info = dict(eh_frame=hdr_addr + 4 + eh_ptr - eh_addr, count=count,
                    initial_loc=hdr_addr + loc, fde=hdr_addr + fde_ptr
                    - eh_addr)

    # Run the CFA programs.
    state = {"cfa": None, "regs": {}}
    rows = {}
    loc = 0

    def run(insns, initial):
        nonlocal loc
        pos = 0
        while pos < len(insns):
            op = insns[pos]
            pos += 1
            high, low = op & 0xc0, op & 0x3f
            if high == 0x40:        # advance_loc
                rows[loc] = (state["cfa"], dict(state["regs"]))
                loc += low * code_align
            elif high == 0x80:      # offset
                off, pos = read_uleb(insns, pos)
                state["regs"][low] = off * data_align
            elif high == 0xc0:      # restore
                if low in initial_regs:
                    state["regs"][low] = initial_regs[low]
                else:
                    state["regs"].pop(low, None)
            elif op == 0x0c:        # def_cfa
                reg, pos = read_uleb(insns, pos)
                off, pos = read_uleb(insns, pos)
                state["cfa"] = (reg, off)
            elif op == 0x0d:        # def_cfa_register
                reg, pos = read_uleb(insns, pos)
                state["cfa"] = (reg, state["cfa"][1])
            elif op == 0x0e:        # def_cfa_offset
                off, pos = read_uleb(insns, pos)
                state["cfa"] = (state["cfa"][0], off)
            elif op == 0x2d:        # AARCH64_negate_ra_state
                state["regs"]["ra_signed"] = not state["regs"].get(
                    "ra_signed", False)
            elif op == 0x00:        # nop
                pass
            else:
                raise ValueError(f"unexpected CFA opcode {op:#x}")

    initial_regs = {}
    run(cie_insns, True)
    initial_regs = dict(state["regs"])
    run(fde_insns, False)
    rows[loc] = (state["cfa"], dict(state["regs"]))
    return cie, pc_begin, pc_range, hdr_info, rows


@requires_trampoline
@support.requires_subprocess()
class TestJitdump(PerfTestCase):
    """The perf_jit backend's /tmp/jit-PID.dump, parsed here."""

    SCRIPT = """
        import os, sys

        def leaf_XTAGX(x):
            return x + 1

        class Klass_XTAGX:
            def method(self):
                return leaf_XTAGX(1)

        def gen_XTAGX():
            yield Klass_XTAGX().method()

        sys.activate_stack_trampoline("perf_jit")
        assert sys.is_stack_trampoline_active()
        print(list(gen_XTAGX()))
        print(os.getpid())
    """

    def forget_dump(self, pid):
        self.addCleanup(remove_path, jitdump_path(pid))

    def run_jit_script(self, source=None, flags=(), env=None):
        pid, rc, out, err, script = self.run_script(source or self.SCRIPT,
                                                    flags=flags, env=env)
        self.forget_dump(pid)
        return pid, out, err, script

    def read_dump(self, pid):
        path = jitdump_path(pid)
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        with open(path, "rb") as f:
            return parse_jitdump(f.read())

    def test_dump_contents(self):
        pid, out, err, script = self.run_jit_script()
        self.assertEqual(err, "")
        self.assertEqual(out.splitlines()[0], "[2]")
        header, records = self.read_dump(pid)
        machine = platform.machine()
        self.assertEqual(header["magic"], JITDUMP_MAGIC)
        self.assertEqual(header["version"], 1)
        self.assertEqual(header["total_size"], 40)
        self.assertEqual(header["elf_mach"],
                         {"x86_64": 62, "aarch64": 183}[machine])
        self.assertEqual(header["pid"], pid)
        self.assertGreater(len(records), 0)
        # An unwinding record right before every load record.
        ids = [rid for rid, _, _ in records]
        self.assertEqual(ids, [JIT_CODE_UNWINDING_INFO, JIT_CODE_LOAD]
                         * (len(ids) // 2))
        loads = [f for rid, _, f in records if rid == JIT_CODE_LOAD]
        names = [f["name"] for f in loads]
        # (<module> was already running when the backend was activated.)
        for qualname in (f"leaf_{self.tag}", f"Klass_{self.tag}.method",
                         f"gen_{self.tag}"):
            self.assertEqual(names.count(f"py::{qualname}:{script}"), 1,
                             qualname)
        self.assertEqual([f["code_index"] for f in loads],
                         list(range(len(loads))))
        timestamps = [ts for _, ts, _ in records]
        self.assertEqual(timestamps, sorted(timestamps))
        self.assertGreaterEqual(timestamps[0], header["timestamp"])
        codes = [f["code"] for f in loads]
        self.assertEqual(len(set(codes)), len(codes),
                         "code blobs must all differ")
        for f in loads:
            self.assertEqual(f["pid"], pid)
            self.assertEqual(f["vma"], f["code_addr"])
            self.assertEqual(len(f["code"]), f["code_size"])
            self.assertEqual(f["extra"], 0)
            # The template, then the trampoline's own address as a tag.
            self.assertEqual(f["code"][-8:],
                             f["code_addr"].to_bytes(8, "little"))
            self.assertEqual(f["code"][:-8], codes[0][:-8])
        if machine == "x86_64":
            self.assertEqual(codes[0][:12], bytes.fromhex(
                "f30f1efa 55 4889e5 ffd1 5d c3".replace(" ", "")))
        # perf maps each trampoline with its unwind info: no overlap.
        unwinds = [f for rid, _, f in records
                   if rid == JIT_CODE_UNWINDING_INFO]
        spans = sorted((f["code_addr"], f["code_addr"]
                        + (f["code_size"] + 7) // 8 * 8 + u["mapped_size"])
                       for f, u in zip(loads, unwinds))
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            self.assertLessEqual(e1, s2)

    def test_unwind_info(self):
        pid, out, err, script = self.run_jit_script()
        header, records = self.read_dump(pid)
        pairs = list(zip(records[::2], records[1::2]))
        self.assertTrue(pairs)
        for (uid, _, unwind), (lid, _, load) in pairs:
            self.assertEqual((uid, lid),
                             (JIT_CODE_UNWINDING_INFO, JIT_CODE_LOAD))
            self.assertEqual(unwind["record_size"] % 8, 0)
            self.assertGreaterEqual(unwind["mapped_size"],
                                    unwind["unwinding_size"])
            cie, begin, length, hdr, rows = decode_eh_frame(
                unwind["data"], unwind["eh_frame_hdr_size"],
                load["code_size"])
            self.assertEqual(cie["augmentation"], b"zR")
            self.assertEqual(cie["fde_encoding"], 0x1b)
            self.assertEqual(begin, ELF_TEXT_OFFSET)
            self.assertEqual(length, load["code_size"])
            self.assertEqual(hdr["eh_frame"], 0)
            self.assertEqual(hdr["count"], 1)
            self.assertEqual(hdr["initial_loc"], ELF_TEXT_OFFSET)
            self.assertGreater(hdr["fde"], 0)
            if platform.machine() == "x86_64":
                # rsp=7, rbp=6, return address=16
                self.assertEqual(cie["ra"], 16)
                self.assertEqual(cie["data_align"], -8)
                self.assertEqual(rows, {
                    0: ((7, 8), {16: -8}),          # endbr64
                    5: ((7, 16), {16: -8, 6: -16}),  # after push %rbp
                    8: ((6, 16), {16: -8, 6: -16}),  # after mov %rsp,%rbp
                    11: ((7, 8), {16: -8}),          # after pop %rbp
                })
            else:
                self.assertEqual(cie["ra"], 30)
                self.assertEqual(rows[0], ((31, 0), {}))

    def test_enabling_and_switching(self):
        source = """
            import os, sys
            def f_XTAGX():
                return sys.is_stack_trampoline_active()
            print(f_XTAGX())
            sys.activate_stack_trampoline("perf")
            def g_XTAGX():
                return 1
            g_XTAGX()
            sys.activate_stack_trampoline("perf_jit")
            g_XTAGX()
            sys.deactivate_stack_trampoline()
            print(sys.is_stack_trampoline_active())
            print(os.getpid())
        """
        cases = [
            ((), {"PYTHON_PERF_JIT_SUPPORT": "1"}, "perf_jit"),
            (("-X", "perf_jit"), {}, "perf_jit"),
            (("-X", "perf_jit"), {"PYTHONPERFSUPPORT": "1"}, "perf_jit"),
            (("-X", "perf"), {"PYTHON_PERF_JIT_SUPPORT": "1"}, "perf"),
            (("-X", "perf_jit=0"), {"PYTHON_PERF_JIT_SUPPORT": "1"}, None),
            (("-E",), {"PYTHON_PERF_JIT_SUPPORT": "1"}, None),
            ((), {"PYTHON_PERF_JIT_SUPPORT": "abc"}, None),
        ]
        for flags, env, expected in cases:
            with self.subTest(flags=flags, env=env):
                pid, out, err, script = self.run_jit_script(
                    source, flags=flags, env=self.make_env(**env))
                self.assertEqual(err, "")
                lines = out.splitlines()
                self.assertEqual(lines[0], str(expected is not None))
                self.assertEqual(lines[1], "False")
                f_name = f"py::f_{self.tag}:{script}"
                g_name = f"py::g_{self.tag}:{script}"
                header, records = self.read_dump(pid)
                jit_names = [f["name"] for rid, _, f in records
                             if rid == JIT_CODE_LOAD]
                map_text = self.read_map(pid) or ""
                self.assertEqual(jit_names.count(f_name),
                                 int(expected == "perf_jit"))
                self.assertEqual(self.symbols(map_text).count(f_name),
                                 int(expected == "perf"))
                # Switching backends at run time: g is described by both.
                self.assertEqual(jit_names.count(g_name), 1)
                self.assertEqual(self.symbols(map_text).count(g_name), 1)

    def test_fork(self):
        source = """
            import os, sys
            def parent_XTAGX():
                return 1
            def child_XTAGX():
                return 2
            sys.activate_stack_trampoline("perf_jit")
            parent_XTAGX()
            pid = os.fork()
            if pid == 0:
                child_XTAGX()
                os._exit(0)
            os.waitpid(pid, 0)
            print(pid)
            print(os.getpid())
        """
        pid, out, err, script = self.run_jit_script(source)
        child = int(out.splitlines()[0])
        self.forget_dump(child)
        self.forget_map(child)
        _, parent_records = self.read_dump(pid)
        child_header, child_records = self.read_dump(child)
        self.assertEqual(child_header["pid"], child)
        pnames = [f["name"] for rid, _, f in parent_records
                  if rid == JIT_CODE_LOAD]
        cloads = [f for rid, _, f in child_records if rid == JIT_CODE_LOAD]
        cnames = [f["name"] for f in cloads]
        self.assertIn(f"py::parent_{self.tag}:{script}", cnames)
        self.assertIn(f"py::child_{self.tag}:{script}", cnames)
        self.assertNotIn(f"py::child_{self.tag}:{script}", pnames)
        self.assertEqual({f["pid"] for f in cloads}, {child})

    def test_open_failure(self):
        source = """
            import os, sys
            path = f"/tmp/jit-{os.getpid()}.dump"
            os.symlink("/tmp/does-not-exist-XTAGX", path)
            try:
                sys.activate_stack_trampoline("perf_jit")
            except OSError as exc:
                print(type(exc).__name__, exc.filename == path)
            finally:
                os.unlink(path)
            print(sys.is_stack_trampoline_active())
            print(os.getpid())
        """
        pid, out, err, script = self.run_jit_script(source)
        self.assertEqual(out.splitlines()[:2], ["OSError True", "False"])
        self.assertFalse(os.path.exists(f"/tmp/does-not-exist-{self.tag}"))


def nofp_python():
    """An interpreter built without frame pointers for the perf_jit test:
    PYTHON_NOFP_INTERPRETER (make test builds one), or this one if it
    lacks frame pointers."""
    path = os.environ.get("PYTHON_NOFP_INTERPRETER")
    if path:
        return path
    if not frame_pointers_enabled():
        return sys.executable
    return None


@requires_trampoline
@support.requires_subprocess()
@unittest.skipUnless(sys.platform == "linux", "Linux perf")
class TestRealPerfJit(PerfTestCase):
    """perf record --call-graph dwarf + perf inject --jit on an interpreter
    without frame pointers."""

    SCRIPT = TestRealPerf.PERF_SCRIPT
    FRAME_RE = TestRealPerf.FRAME_RE

    def test_dwarf_unwinding_through_trampolines(self):
        python = nofp_python()
        if python is None:
            self.skipTest("no interpreter without frame pointers: set "
                          "PYTHON_NOFP_INTERPRETER (make test does)")
        perf = shutil.which("perf")
        if perf is None:
            self.skipTest("perf is not installed")
        script = self.write_script(self.SCRIPT)
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        data = os.path.join(tmpdir, "perf.data")
        injected = os.path.join(tmpdir, "perf.jit.data")
        cmd = [perf, "record", "-k", "1", "-F", "499", "-g",
               "--call-graph", "dwarf", "-e", "cpu-clock", "-o", data, "--",
               python, "-X", "perf_jit", script]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                              capture_output=True, env=self.make_env(),
                              timeout=support.LONG_TIMEOUT)
        out = proc.stdout.decode()
        if not out.strip().isdigit():
            self.skipTest("perf record failed: "
                          + proc.stderr.decode(errors="replace")[-300:])
        pid = int(out)
        self.forget_map(pid)
        self.addCleanup(remove_path, jitdump_path(pid))
        def remove_jitted():
            for name in os.listdir("/tmp"):
                if name.startswith(f"jitted-{pid}-") and name.endswith(".so"):
                    os_helper.unlink(os.path.join("/tmp", name))
        self.addCleanup(remove_jitted)
        if proc.returncode != 0:
            self.skipTest("perf record failed: "
                          + proc.stderr.decode(errors="replace")[-300:])
        proc = subprocess.run([perf, "inject", "--jit", "-i", data,
                               "-o", injected], capture_output=True,
                              timeout=support.LONG_TIMEOUT)
        if proc.returncode != 0:
            self.skipTest("perf inject --jit failed: "
                          + proc.stderr.decode(errors="replace")[-300:])
        proc = subprocess.run([perf, "script", "-i", injected],
                              capture_output=True,
                              timeout=support.LONG_TIMEOUT)
        if proc.returncode != 0:
            self.skipTest("perf script failed: "
                          + proc.stderr.decode(errors="replace")[-300:])
        samples = TestRealPerf.parse_perf_script(
            self, proc.stdout.decode("utf-8", "replace"))
        if len(samples) < 50:
            self.skipTest(f"perf recorded only {len(samples)} samples")
        in_foo = [s for s in samples if any("py::foo:" in f for f in s)]
        self.assertTrue(in_foo, f"no sample names py::foo among "
                                f"{len(samples)}")
        good = 0
        for frames in in_foo:
            names = [f for f in frames if f.startswith("py::")]
            short = [n.split(":")[2] for n in names[:3]]
            if short == ["foo", "bar", "baz"]:
                good += 1
        ratio = good / len(in_foo)
        if support.verbose:
            print(f"\n    {good}/{len(in_foo)} samples in foo show "
                  f"foo <- bar <- baz", file=sys.stderr)
        self.assertGreaterEqual(ratio, 0.95,
                                f"only {good} of {len(in_foo)} samples")


if __name__ == "__main__":
    unittest.main()

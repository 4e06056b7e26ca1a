"""Tests for Tools/perf/pyprofile: the readiness check, recording with both
backends (a command and a running process) and the flame graph page.

Run by "make test" with the built interpreter:

    build/python -m unittest discover -s Tools/perf/tests

PYTHON_NOFP_INTERPRETER names an interpreter built without frame pointers
(make test builds one); the tests that need it are skipped without it.
"""

import contextlib
import glob
import importlib.machinery
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import time
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
PYPROFILE = os.path.join(os.path.dirname(HERE), "pyprofile")


def load_pyprofile():
    loader = importlib.machinery.SourceFileLoader("pyprofile", PYPROFILE)
    spec = importlib.util.spec_from_loader("pyprofile", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


pyprofile = load_pyprofile()
# Its stages, each tested on its own (the script puts their directory,
# Tools/perf, in sys.path).
from pyprofile_lib import (common, containers, perfscript, procroot,
                           readiness, remote, rendering)

HAVE_TRAMPOLINE = sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") == 1
NOFP_PYTHON = os.environ.get("PYTHON_NOFP_INTERPRETER")

PROGRAM = textwrap.dedent("""
    import sys, time

    def foo():
        x = 0
        data = list(range(3000, 0, -1))
        deadline = time.perf_counter() + float(sys.argv[1])
        while time.perf_counter() < deadline:
            for i in range(1000):
                x += i
            # Native code that Python calls (the sort, in the
            # interpreter's own library): the Python view keeps it.
            x += sorted(data)[0]
        return x

    def bar():
        return foo()

    def baz():
        return bar()

    print("ready", flush=True)
    baz()
""")


# A service, for the support turned on from outside: what it runs after
# that is named (handle, middle and leaf start anew each round).
SERVICE = textwrap.dedent("""
    import time
    def leaf():
        return sum(i * i for i in range(3000))
    def middle():
        return leaf()
    def handle():
        return middle()
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        handle()
        time.sleep(0.001)
""")


def run_pyprofile(*args, timeout=300):
    return subprocess.run([sys.executable, PYPROFILE, *args],
                          capture_output=True, text=True, timeout=timeout)


def page_tree(path):
    """The tree of samples embedded in a flame graph page."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    match = re.search(r"const stacks = \[(.*)\];\n", page)
    return json.loads(match.group(1))


def nodes(node):
    """Every node of the tree."""
    yield node
    for child in node["c"]:
        yield from nodes(child)


def chains(node, prefix=()):
    """Every path from the root, as tuples of (name, libtype)."""
    path = prefix + ((node["n"], node["l"]),)
    yield path
    for child in node["c"]:
        yield from chains(child, path)


def names_program(path, program):
    """Whether the file at path (a map, a dump, a jitted object) names a
    function of program."""
    try:
        with open(path, "rb") as f:
            return os.fsencode(program) in f.read()
    except OSError:
        return False


def ready_or_skip(testcase, backend, python):
    proc = run_pyprofile("--check", "--backend", backend, "--python", python)
    if proc.returncode != 0:
        testcase.skipTest(f"not ready to record here:\n{proc.stdout}")


@unittest.skipUnless(HAVE_TRAMPOLINE, "needs an interpreter with perf "
                     "trampolines (run with build/python)")
class TestReadiness(unittest.TestCase):

    def check(self, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = pyprofile.main(["--check", *args])
        return rc, out.getvalue()

    def test_ready_on_this_machine(self):
        if shutil.which("perf") is None:
            self.skipTest("perf is not installed")
        proc = run_pyprofile("--check", "--python", sys.executable)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for name in ("perf", "permission", "interpreter", "frame pointers",
                     "self-sample", "renderer"):
            self.assertRegex(proc.stdout, rf"(?m)^ok   {name}: ")
        self.assertNotIn("FAIL", proc.stdout)

    def test_paranoid_setting_forbids_recording(self):
        fake = {"/proc/sys/kernel/perf_event_paranoid": "3\n",
                "/proc/self/status": "CapEff:\t0000000000000000\n"}
        with mock.patch.object(readiness, "read_text", fake.get), \
             mock.patch.object(readiness.os, "geteuid", return_value=1000):
            rc, out = self.check("--python", sys.executable)
        self.assertEqual(rc, 1)
        self.assertIn("FAIL permission: perf_event_paranoid=3", out)
        self.assertIn("fix: sudo sysctl kernel.perf_event_paranoid=2", out)
        # A failure stops the check before anything is recorded.
        self.assertNotIn("self-sample", out)

    def test_capability_is_enough(self):
        cap_perfmon = 1 << 38
        fake = {"/proc/sys/kernel/perf_event_paranoid": "3\n",
                "/proc/self/status": f"CapEff:\t{cap_perfmon:016x}\n"}
        with mock.patch.object(readiness, "read_text", fake.get), \
             mock.patch.object(readiness.os, "geteuid", return_value=1000):
            check = readiness.check_permission()
        self.assertTrue(check.ok, check)

    def test_noexec_tmp_fails_for_perf_jit_only(self):
        mountinfo = ("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
                     "40 22 0:35 / /tmp rw,nosuid,nodev,noexec shared:20 - "
                     "tmpfs tmpfs rw\n")
        with mock.patch.object(readiness, "read_text",
                               {"/proc/self/mountinfo": mountinfo}.get):
            jit = readiness.check_tmp("perf_jit")
            perf = readiness.check_tmp("perf")
        self.assertFalse(jit.ok)
        self.assertIn("noexec", jit.detail)
        self.assertEqual(jit.fix, "sudo mount -o remount,exec /tmp")
        self.assertIsNone(perf)

    def test_exec_tmp(self):
        mountinfo = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        with mock.patch.object(readiness, "read_text",
                               {"/proc/self/mountinfo": mountinfo}.get):
            check = readiness.check_tmp("perf_jit")
        self.assertTrue(check.ok, check)
        self.assertIn("on /)", check.detail)

    def test_interpreter_without_support(self):
        with tempfile.TemporaryDirectory() as tmp:
            # An interpreter that says it has no trampolines.
            fake = os.path.join(tmp, "python")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho '{\"version\": \"3.11.2\", "
                        "\"trampoline\": null, \"api\": false, "
                        "\"cflags\": \"\"}'\n")
            os.chmod(fake, 0o755)
            rc, out = self.check("--python", fake)
        self.assertEqual(rc, 1)
        self.assertIn("FAIL interpreter:", out)
        self.assertIn("has no perf trampoline support", out)

    def test_missing_perf(self):
        with mock.patch.object(readiness.shutil, "which", return_value=None):
            check = readiness.check_perf()
        self.assertFalse(check.ok)
        self.assertEqual(check.fix, "sudo apt-get install linux-perf")

    @unittest.skipUnless(NOFP_PYTHON, "PYTHON_NOFP_INTERPRETER is not set")
    def test_no_frame_pointers(self):
        rc, out = self.check("--python", NOFP_PYTHON)
        self.assertEqual(rc, 1)
        self.assertIn("FAIL frame pointers: not built with frame pointers",
                      out)
        self.assertIn("use --backend perf_jit", out)

    def test_file_of_an_earlier_process(self):
        # A map left in /tmp by an earlier process with the same PID (PIDs
        # are reused) is not the running process's.
        # It refuses to be turned on from outside: only its file could
        # say that the support is on.
        proc = subprocess.Popen([sys.executable, "-c",
                                 "print('ready', flush=True); "
                                 "import time; time.sleep(60)"],
                                stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPERFSUPPORT="0"))
        self.assertEqual(proc.stdout.readline(), "ready\n")
        proc.stdout.close()
        # No running process has that PID in this namespace: a file there
        # is an earlier one's, kept or made here.
        path = f"/tmp/perf-{proc.pid}.map"
        try:
            with open(path, "w") as f:
                f.write("1000 10 py::stale:stale.py\n")
            os.utime(path, (time.time() - 3600, time.time() - 3600))
            check = readiness.check_process(proc.pid, "perf")
        finally:
            proc.kill()
            proc.wait()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self.assertFalse(check.ok)

    def test_process_without_support(self):
        # Turned on for the recording, unless it refuses.
        for value, ok in (("", True), ("0", False)):
            with self.subTest(PYTHONPERFSUPPORT=value):
                proc = subprocess.Popen(
                    [sys.executable, "-c", "print('ready', flush=True); "
                     "import time; time.sleep(60)"],
                    stdout=subprocess.PIPE, text=True,
                    env=dict(os.environ, PYTHONPERFSUPPORT=value))
                try:
                    self.assertEqual(proc.stdout.readline(), "ready\n")
                    check = readiness.check_process(proc.pid, "perf")
                finally:
                    proc.kill()
                    proc.wait()
                    proc.stdout.close()
                self.assertEqual(check.ok, ok, check)
                if ok:
                    self.assertIn("turned on for the recording",
                                  check.detail)
                else:
                    self.assertIn("PYTHONPERFSUPPORT=1", check.fix)


# A program that notes, next to itself, whoever runs it with arguments;
# without arguments it is the process to profile, and waits.
CANARY = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 8);
    if (argc > 1 && n > 0) {
        path[n] = 0;
        strcat(path, ".ran");
        FILE *f = fopen(path, "a");
        if (f) {
            fprintf(f, "euid=%d\n", (int)geteuid());
            fclose(f);
        }
        return 1;
    }
    puts("ready");
    fflush(stdout);
    pause();
    return 0;
}
"""


def stop_process(proc):
    proc.kill()
    proc.wait()
    if proc.stdout:
        proc.stdout.close()


class TestTargetNotRun(unittest.TestCase):
    """-p never runs the process's interpreter (issue 50 item 1): as root,
    that runs another user's or a container's program with root's
    credentials."""

    def test_canary(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        source = os.path.join(tmp, "canary.c")
        with open(source, "w") as f:
            f.write(CANARY)
        canary = os.path.join(tmp, "python3.11")
        subprocess.run([cc, "-o", canary, source], check=True)
        proc = subprocess.Popen([canary], stdout=subprocess.PIPE, text=True)
        self.addCleanup(stop_process, proc)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        map_file = f"/tmp/perf-{proc.pid}.map"
        self.addCleanup(lambda: os.path.exists(map_file)
                        and os.unlink(map_file))
        # Without its file, then with one (which says that it has the
        # support, as a Python process of this build would).
        for planted in (False, True):
            if planted:
                with open(map_file, "w") as f:
                    f.write("1000 10 py::foo:app.py\n")
            for args in (["--check"], ["-d", "0.3", "-o",
                                       os.path.join(tmp, "out.txt")]):
                with self.subTest(planted=planted, args=args):
                    run_pyprofile(*args, "-p", str(proc.pid))
                    self.assertFalse(os.path.exists(canary + ".ran"),
                                     "pyprofile ran the process's binary")

    @unittest.skipUnless(HAVE_TRAMPOLINE, "needs an interpreter with perf "
                         "trampolines (run with build/python)")
    def test_python_process(self):
        # A process that has the support active: its interpreter's build
        # configuration is read, and nothing runs it (not even the probe).
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        program = os.path.join(tmp, "program.py")
        with open(program, "w") as f:
            f.write(PROGRAM)
        proc = subprocess.Popen([sys.executable, program, "60"],
                                stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPERFSUPPORT="1"))
        self.addCleanup(stop_process, proc)
        map_file = f"/tmp/perf-{proc.pid}.map"
        self.addCleanup(lambda: os.path.exists(map_file)
                        and os.unlink(map_file))
        self.assertEqual(proc.stdout.readline(), "ready\n")
        exe = os.readlink(f"/proc/{proc.pid}/exe")
        run = []
        real_popen = subprocess.Popen.__init__

        def recording_popen(popen, args, *rest, **kwargs):
            run.append(list(args) if not isinstance(args, str) else [args])
            return real_popen(popen, args, *rest, **kwargs)

        out = io.StringIO()
        with mock.patch.object(subprocess.Popen, "__init__",
                               recording_popen), \
             contextlib.redirect_stdout(out):
            rc = pyprofile.main(["--check", "-p", str(proc.pid)])
        for args in run:
            for arg in args:
                with contextlib.suppress(OSError, TypeError, ValueError):
                    self.assertFalse(os.path.samefile(arg, exe),
                                     f"pyprofile ran {args}")
        self.assertEqual(rc, 0, out.getvalue())
        self.assertIn(f"ok   interpreter: {exe} (Python 3.11) has perf "
                      "trampolines", out.getvalue())
        self.assertIn("ok   frame pointers: built with", out.getvalue())


@unittest.skipUnless(HAVE_TRAMPOLINE, "needs an interpreter with perf "
                     "trampolines (run with build/python)")
class TestRecording(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.program = os.path.join(self.tmp, "program.py")
        with open(self.program, "w") as f:
            f.write(PROGRAM)
        self.output = os.path.join(self.tmp, "flamegraph.html")

    def assert_chain(self, output, native=False):
        tree = page_tree(output)
        self.assertEqual(tree["n"], "all")
        if native:
            return self.assert_native_chain(tree)
        # The Python view: one box per Python function, one after the
        # other, then the native code they call; no evaluator frames.
        base = os.path.basename(self.program)
        calls = [f"{name} ({base})" for name in ("baz", "bar", "foo")]
        found = called = False
        for path in chains(tree):
            names = [name for name, _ in path]
            if "jit" in {lib for _, lib in path}:
                # Stacks without Python frames stay as recorded.
                self.assertNotIn("_PyEval_EvalFrameDefault", names)
                self.assertFalse(any(n.startswith("_PyPerfTrampoline")
                                     for n in names), names)
            for i in range(len(path) - 2):
                if names[i:i + 3] == calls:
                    found = True
                    # Python frames are colored apart from native ones.
                    self.assertEqual({lib for _, lib in path[i:i + 3]},
                                     {"jit"})
                    if any("sort" in n for n in names[i + 3:]):
                        called = True
        self.assertTrue(found, f"no {calls} in the page")
        self.assertTrue(called, "no native frame under foo in the page")
        hover = [node.get("t") for node in nodes(tree)
                 if node["n"] == f"foo ({base})"]
        self.assertTrue(hover)
        self.assertEqual(set(hover), {f"foo ({self.program})"})

    def assert_native_chain(self, tree):
        found = False
        for path in chains(tree):
            py = [(name, lib) for name, lib in path
                  if name.startswith("py::")]
            names = [name.split(":")[2] for name, _ in py]
            if names[-3:] == ["baz", "bar", "foo"]:
                found = True
                # Python frames are colored apart from native ones.
                self.assertEqual({lib for _, lib in py}, {"jit"})
                self.assertEqual(py[-1][0], f"py::foo:{self.program}")
        self.assertTrue(found, "no py::foo <- py::bar <- py::baz in the page")
        native = [lib for path in chains(tree) for name, lib in path
                  if name == "_PyEval_EvalFrameDefault"]
        self.assertTrue(native)
        self.assertNotIn("jit", native)

    def record(self, backend, python):
        ready_or_skip(self, backend, python)
        proc = run_pyprofile("--backend", backend, "-o", self.output,
                             "--", python, self.program, "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn(f"flame graph: {self.output}", proc.stdout)
        self.assert_chain(self.output)
        return proc

    def test_perf_backend(self):
        self.record("perf", sys.executable)

    def test_native_view_and_collapsed_stacks(self):
        ready_or_skip(self, "perf", sys.executable)
        collapsed = os.path.join(self.tmp, "profile.txt")
        proc = run_pyprofile("--native", "-o", self.output, "-o", collapsed,
                             "--", sys.executable, self.program, "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assert_chain(self.output, native=True)
        # The same stacks, one "frame;frame;... count" line each.
        with open(collapsed, encoding="utf-8") as f:
            lines = f.read().splitlines()
        tree = page_tree(self.output)
        self.assertEqual(
            sum(int(line.rsplit(" ", 1)[1]) for line in lines),
            sum(node["v"] for node in nodes(tree)))
        self.assertTrue(any(f"py::baz:{self.program};" in line
                            for line in lines))

    def test_perf_jit_backend(self):
        self.record("perf_jit", NOFP_PYTHON or sys.executable)

    def test_files_left_behind(self):
        # Files of the recorded program only: other processes on the
        # machine may make their own meanwhile.
        before = set(os.listdir("/tmp"))
        self.record("perf_jit", NOFP_PYTHON or sys.executable)
        new = set(os.listdir("/tmp")) - before
        left = [name for name in new
                if name.startswith(("perf-", "jit-", "jitted-"))
                and names_program(os.path.join("/tmp", name), self.program)]
        self.assertEqual(left, [])

    def test_attach_to_running_process(self):
        ready_or_skip(self, "perf", sys.executable)
        env = dict(os.environ, PYTHONPERFSUPPORT="1")
        proc = subprocess.Popen([sys.executable, self.program, "6"],
                                stdout=subprocess.PIPE, text=True, env=env)
        self.addCleanup(lambda: os.path.exists(f"/tmp/perf-{proc.pid}.map")
                        and os.unlink(f"/tmp/perf-{proc.pid}.map"))
        try:
            self.assertEqual(proc.stdout.readline(), "ready\n")
            time.sleep(0.5)
            result = run_pyprofile("-p", str(proc.pid), "-d", "1.5",
                                   "-o", self.output)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
        self.assertEqual(result.returncode, 0,
                         result.stdout + result.stderr)
        self.assert_chain(self.output)

    def start_service(self, env=None):
        """A service started without the support: it handles requests
        (handle, middle, leaf) between short sleeps, for a minute."""
        service = os.path.join(self.tmp, "service.py")
        with open(service, "w") as f:
            f.write(SERVICE)
        env = dict(os.environ if env is None else env)
        env.pop("PYTHONPERFSUPPORT", None)
        proc = subprocess.Popen([sys.executable, service],
                                stdout=subprocess.PIPE, text=True, env=env)

        def stop():
            proc.kill()
            proc.wait()
            proc.stdout.close()
            for path in (f"/tmp/perf-{proc.pid}.map",
                         f"/tmp/jit-{proc.pid}.dump"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

        self.addCleanup(stop)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        return proc, service

    def assert_service_chain(self, collapsed, service):
        base = os.path.basename(service)
        chain = ";".join(f"{name} ({base})"
                         for name in ("handle", "middle", "leaf"))
        with open(collapsed, encoding="utf-8") as f:
            text = f.read()
        self.assertIn(chain, text)

    def interps_on(self, pid):
        with remote.Control(pid) as control:
            return control.read()["interps_on"]

    def test_on_demand(self):
        # A process started without the support: on for the recording,
        # off after it.
        for backend, python in (("perf", sys.executable),
                                ("perf_jit", sys.executable)):
            with self.subTest(backend):
                ready_or_skip(self, backend, python)
                proc, service = self.start_service()
                collapsed = os.path.join(self.tmp, f"{backend}.txt")
                result = run_pyprofile("--backend", backend, "-p",
                                       str(proc.pid), "-d", "2",
                                       "-o", collapsed)
                self.assertEqual(result.returncode, 0,
                                 result.stdout + result.stderr)
                self.assertIn(f"turned the {backend} support on in process "
                              f"{proc.pid} after", result.stderr)
                self.assert_service_chain(collapsed, service)
                self.assertEqual(self.interps_on(proc.pid), 0)

    def test_on_demand_twice(self):
        # The first recording leaves the map: the second one turns the
        # support on again all the same.
        ready_or_skip(self, "perf", sys.executable)
        proc, service = self.start_service()
        for run in range(2):
            collapsed = os.path.join(self.tmp, f"run{run}.txt")
            result = run_pyprofile("-p", str(proc.pid), "-d", "1.5",
                                   "-o", collapsed)
            self.assertEqual(result.returncode, 0,
                             result.stdout + result.stderr)
            self.assertIn("turned the perf support on", result.stderr)
            self.assert_service_chain(collapsed, service)

    def test_activate_and_deactivate(self):
        ready_or_skip(self, "perf", sys.executable)
        proc, service = self.start_service()
        result = run_pyprofile("--activate", "-p", str(proc.pid))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"perf support on in process {proc.pid} for 600 s",
                      result.stdout)
        self.assertEqual(self.interps_on(proc.pid), 1)
        path = f"/tmp/perf-{proc.pid}.map"
        for _ in range(500):
            if names_program(path, service):
                break
            time.sleep(0.01)
        self.assertTrue(names_program(path, service))
        result = run_pyprofile("--deactivate", "-p", str(proc.pid))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(self.interps_on(proc.pid), 0)

    def test_refusing_process(self):
        ready_or_skip(self, "perf", sys.executable)
        proc, service = self.start_service(
            dict(os.environ, PYTHON_PERF_JIT_SUPPORT="0"))
        result = run_pyprofile("-p", str(proc.pid), "-d", "1",
                               "-o", self.output)
        self.assertEqual(result.returncode, 1)
        self.assertIn("refuses to be turned on from outside", result.stdout)
        result = run_pyprofile("--activate", "-p", str(proc.pid))
        self.assertEqual(one_line_error(self, result),
                         f"pyprofile: process {proc.pid} refuses to be turned "
                         "on from outside (started with -X perf=0 or "
                         "PYTHONPERFSUPPORT=0)")
        self.assertEqual(self.interps_on(proc.pid), 0)

    def test_killed_pyprofile(self):
        # The lease ends: the service turns itself off.
        ready_or_skip(self, "perf", sys.executable)
        proc, service = self.start_service()
        tool = subprocess.Popen(
            [sys.executable, PYPROFILE, "-p", str(proc.pid), "-d", "60",
             "-o", self.output], stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        self.addCleanup(kill_session, tool.pid)
        with tool:
            for line in tool.stderr:
                if "turned the perf support on" in line:
                    break
            self.assertEqual(self.interps_on(proc.pid), 1)
            kill_session(tool.pid)
        deadline = time.monotonic() + 60
        while self.interps_on(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.interps_on(proc.pid), 0)

    def test_not_ready_stops(self):
        fake = os.path.join(self.tmp, "python")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(fake, 0o755)
        proc = run_pyprofile("-o", self.output, "--", fake, self.program)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("FAIL interpreter", proc.stdout)
        self.assertIn("not ready to record", proc.stderr)
        self.assertFalse(os.path.exists(self.output))


def session_members(sid):
    """The PIDs of the processes of session sid."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                line = f.read()
        except OSError:
            continue
        fields = line[line.rfind(")") + 2:].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            pids.append(int(name))
    return pids


def kill_session(sid):
    """Kill what is left of session sid (a test's)."""
    for pid in session_members(sid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def alive(pid):
    """Whether pid is a process that has not ended (zombies have)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            line = f.read()
    except OSError:
        return False
    return line[line.rfind(")") + 2:].split()[0] not in ("Z", "X")


def one_line_error(testcase, proc):
    """proc failed with one line of error from pyprofile, no traceback."""
    testcase.assertNotEqual(proc.returncode, 0, proc.stdout + proc.stderr)
    testcase.assertNotIn("Traceback", proc.stderr)
    lines = proc.stderr.splitlines()
    testcase.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
    testcase.assertTrue(lines[0].startswith("pyprofile: "), lines)
    return lines[0]


class TestRemoteSymbol(unittest.TestCase):
    """Reading the target's ELF symbol table: the target chose the file."""

    def test_huge_tables_are_not_read(self):
        import struct
        with tempfile.TemporaryFile() as f:
            # An ELF header whose section table claims 2**40 bytes.
            header = struct.pack("<16sHHIQQQIHHHHHH",
                                 b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62,
                                 1, 0, 64, 128, 0, 64, 56, 0, 64,
                                 0xFFFF, 0)
            f.write(header + bytes(4096))
            f.flush()
            f.seek(0)
            self.assertIsNone(remote.dynamic_symbol(f, b"_PyPerf_Remote"))

    def test_this_interpreter(self):
        if not HAVE_TRAMPOLINE:
            self.skipTest("needs an interpreter with perf trampolines")
        control = remote.Control(os.getpid())
        with control:
            state = control.read()
        self.assertEqual(state["magic"], remote.MAGIC)
        self.assertEqual(state["version"], 1)


class TestCommandLine(unittest.TestCase):
    """Bad input, as an operator gives it: one line of error and a
    non-zero status, found before anything is recorded (issue 50 items 9
    and 11)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_outputs_checked_before_recording(self):
        good = os.path.join(self.tmp, "good.txt")
        # Not a device such as /dev/null, which a pyprofile that fails
        # this test would replace.
        special = os.path.join(self.tmp, "special")
        os.mkdir(special)
        fifo = os.path.join(special, "fifo.txt")
        os.mkfifo(fifo)
        link = os.path.join(special, "link.txt")
        os.symlink(good, link)
        for bad, reason in (
                (special, "it is a directory"),
                (os.path.join(self.tmp, "missing", "x.html"), "no directory"),
                ("/proc/x.txt", "cannot write /proc/x.txt"),
                (fifo, "not a regular file"),
                (link, "it is a symbolic link")):
            with self.subTest(output=bad):
                proc = run_pyprofile("-o", bad, "-o", good, "--",
                                     sys.executable, "-c", "pass")
                line = one_line_error(self, proc)
                self.assertIn(reason, line)
                self.assertFalse(os.path.exists(good))
                self.assertEqual(os.listdir(self.tmp), ["special"])
                self.assertEqual(sorted(os.listdir(special)),
                                 ["fifo.txt", "link.txt"])

    def test_no_process(self):
        # A PID that no process has: a child's, once it is waited for.
        proc = subprocess.Popen(["true"])
        proc.wait()
        line = one_line_error(self, run_pyprofile("-p", str(proc.pid)))
        self.assertEqual(line, f"pyprofile: no process {proc.pid}")

    def test_zombie(self):
        proc = subprocess.Popen(["true"])
        self.addCleanup(proc.wait)
        deadline = time.monotonic() + 30
        while alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        line = one_line_error(self, run_pyprofile("-p", str(proc.pid)))
        self.assertEqual(line, f"pyprofile: process {proc.pid} (true) "
                         "has ended")

    def test_kernel_thread(self):
        for pid in ["2", *sorted(os.listdir("/proc"))]:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    line = f.read()
            except OSError:
                continue
            flags = int(line[line.rfind(")") + 2:].split()[6])
            if flags & 0x00200000:
                break
        else:
            self.skipTest("no kernel thread is visible here")
        line = one_line_error(self, run_pyprofile("-p", pid))
        self.assertRegex(line, rf"^pyprofile: process {pid} \(.*\) is a "
                         "kernel thread")

    def test_pid_1(self):
        # init: not Python, or not ours to inspect.
        one_line_error(self, run_pyprofile("-p", "1"))
        one_line_error(self, run_pyprofile("--check", "-p", "1"))

    def test_pid_1_as_another_user(self):
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            self.skipTest("needs root and setpriv")
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             sys.executable, PYPROFILE, "-p", "1"],
            capture_output=True, text=True, timeout=300, cwd="/")
        line = one_line_error(self, proc)
        self.assertIn("permission denied", line)

    def test_not_python(self):
        proc = subprocess.Popen(["sleep", "60"])
        self.addCleanup(stop_process, proc)
        line = one_line_error(self, run_pyprofile("-p", str(proc.pid)))
        self.assertIn("does not run Python", line)

    def test_usage_error(self):
        one_line_error(self, run_pyprofile("-p", "1", "--", "python"))
        one_line_error(self, run_pyprofile("--backend", "nope", "-p", "1"))


@unittest.skipUnless(HAVE_TRAMPOLINE, "needs an interpreter with perf "
                     "trampolines (run with build/python)")
class TestCommand(unittest.TestCase):
    """pyprofile -- COMMAND as operators and CI use it: the command's
    errors and status, Ctrl-C, SIGTERM, its processes' files (issue 50
    items 5-8, 10, 12)."""

    def setUp(self):
        ready_or_skip(self, "perf", sys.executable)
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.output = os.path.join(self.tmp, "profile.txt")

    def program(self, text, name="program.py"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_stderr_and_status(self):
        program = self.program("""
            import sys, time
            deadline = time.perf_counter() + 0.3
            while time.perf_counter() < deadline:
                pass
            print("the program's error", file=sys.stderr)
            sys.exit(3)
            """)
        proc = run_pyprofile("-o", self.output, "--", sys.executable,
                             program)
        self.assertIn("the program's error\n", proc.stderr)
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertTrue(os.path.exists(self.output))

    def test_killed_by_a_signal(self):
        program = self.program("""
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
            """)
        proc = run_pyprofile("-o", self.output, "--", sys.executable,
                             program)
        self.assertEqual(proc.returncode, 128 + 9, proc.stderr)

    LONG = """
        import sys, time
        print("ready", flush=True)
        try:
            while True:
                sum(range(1000))
        except KeyboardInterrupt:
            pass
        """

    def start(self, *args):
        """pyprofile in a session (and process group) of its own, once its
        command runs, and the processes of its session."""
        env = dict(os.environ, TMPDIR=os.path.join(self.tmp, "tmpdir"))
        os.mkdir(env["TMPDIR"])
        proc = subprocess.Popen(
            [sys.executable, PYPROFILE, *args, "--", sys.executable,
             self.program(self.LONG)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, env=env)
        self.addCleanup(proc.wait)
        self.addCleanup(kill_session, proc.pid)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.stderr.close)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        time.sleep(1)
        return proc, session_members(proc.pid)

    def wait_for_the_end(self, members):
        deadline = time.monotonic() + 30
        while (any(alive(pid) for pid in members)
               and time.monotonic() < deadline):
            time.sleep(0.1)
        self.assertEqual([pid for pid in members if alive(pid)], [])

    def test_ctrl_c(self):
        # The terminal sends SIGINT to the whole process group.
        proc, members = self.start("-o", self.output)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
        self.assertNotIn("Traceback", err)
        self.assertEqual(proc.returncode, 128 + signal.SIGINT, err)
        with open(self.output) as f:
            self.assertIn("<module> (program.py)", f.read())
        self.wait_for_the_end(members)
        self.assertEqual(os.listdir(os.path.join(self.tmp, "tmpdir")), [])

    def test_sigterm(self):
        # As timeout and supervisors send it: to pyprofile alone.
        proc, members = self.start("-o", self.output)
        self.assertGreaterEqual(len(members), 3)    # with perf and python
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
        self.assertNotIn("Traceback", err)
        self.assertEqual(proc.returncode, 128 + signal.SIGTERM, err)
        self.wait_for_the_end(members)
        # No perf.data left.
        self.assertEqual(os.listdir(os.path.join(self.tmp, "tmpdir")), [])

    def test_files_of_running_processes_stay(self):
        # The command starts a helper that outlives it: the helper's map
        # is its own to the end (a later profile needs it); the
        # command's goes.
        stop = os.path.join(self.tmp, "stop")
        helper = self.program(f"""
            import os

            def helper():
                while not os.path.exists({stop!r}):
                    sum(range(10000))

            helper()
            """, "helper.py")
        program = self.program(f"""
            import subprocess, sys, time
            helper = subprocess.Popen([sys.executable, {helper!r}],
                                      stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL,
                                      start_new_session=True)
            print(helper.pid, flush=True)
            deadline = time.perf_counter() + 1
            while time.perf_counter() < deadline:
                sum(range(1000))
            """)
        try:
            proc = run_pyprofile("-o", self.output, "--", sys.executable,
                                 program)
            pid = int(proc.stdout.split()[0])
        except BaseException:
            with open(stop, "w"):
                pass
            raise
        map_file = f"/tmp/perf-{pid}.map"
        try:
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(self.output) as f:
                self.assertIn("helper (helper.py)", f.read())
            self.assertTrue(alive(pid))
            self.assertTrue(os.path.exists(map_file))
        finally:
            with open(stop, "w"):
                pass
            self.wait_for_the_end([pid])
            with contextlib.suppress(FileNotFoundError):
                os.unlink(map_file)

    def test_process_name_with_leading_space(self):
        program = self.program("""
            import time
            with open("/proc/self/comm", "w") as f:
                f.write(" spaced")
            deadline = time.perf_counter() + 0.5
            while time.perf_counter() < deadline:
                pass
            """)
        proc = run_pyprofile("-o", self.output, "--", sys.executable,
                             program)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(self.output) as f:
            counts = [int(line.rsplit(" ", 1)[1]) for line in f
                      if line.startswith(" spaced ")]
        self.assertGreater(sum(counts), 50)

    def test_collapsed_stacks_without_the_renderer(self):
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.tmp, "c"))
        program = self.program(PROGRAM)
        proc = subprocess.run(
            [sys.executable, PYPROFILE, "-o", self.output, "--",
             sys.executable, program, "0.3"],
            capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(self.output) as f:
            self.assertIn("foo (program.py)", f.read())
        # A page needs it.
        proc = subprocess.run(
            [sys.executable, PYPROFILE, "-o", self.output + ".html", "--",
             sys.executable, program, "0.3"],
            capture_output=True, text=True, timeout=300, env=env)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("FAIL renderer", proc.stdout)


def unshare_usable():
    """None if this process can make a container with unshare, else why
    not."""
    if shutil.which("unshare") is None:
        return "unshare is not installed"
    if os.geteuid() != 0:
        return "making PID and mount namespaces needs root"
    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount",
                           "--mount-proc", "true"], capture_output=True)
    if proc.returncode != 0:
        return f"unshare cannot run here: {proc.stderr[-300:]!r}"
    return None


def leftovers(pid):
    """The files in the host's /tmp that name pid: its map, its jitdump
    and the ELF files that perf inject --jit makes from a jitdump."""
    return sorted(name for name in os.listdir("/tmp")
                  if name in (f"perf-{pid}.map", f"jit-{pid}.dump")
                  or name.startswith(f"jitted-{pid}-"))


class TestForeignRoot(unittest.TestCase):
    """pyprofile, run as root, on a process in a container whose root
    directory is not the host's: what the container plants at the paths of
    its map and dump is never followed to a host file, nor waited on."""

    # In the container: a root of its own (a tmpfs with the host's /usr),
    # where /tmp/perf-1.map is an absolute symbolic link to a file that
    # only the host has, and /tmp/jit-1.dump a FIFO.
    CONTAINER = (
        'mount -t tmpfs tmpfs "$0" && mkdir "$0/usr" "$0/tmp" '
        '&& mount --rbind /usr "$0/usr" && ln -s usr/bin "$0/bin" '
        '&& ln -s usr/lib "$0/lib" && ln -s usr/lib64 "$0/lib64" '
        '&& ln -s "$1" "$0/tmp/perf-1.map" && mkfifo "$0/tmp/jit-1.dump" '
        '&& exec chroot "$0" /bin/sh -c "echo ready; exec sleep 1000"')

    def setUp(self):
        reason = unshare_usable()
        if reason:
            self.skipTest(reason)
        self.tmp = tempfile.mkdtemp(dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.secret = os.path.join(self.tmp, "secret")
        with open(self.secret, "w") as f:
            f.write("1000 10 py::host_secret:host\n")
        root = os.path.join(self.tmp, "root")
        os.mkdir(root)
        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount",
             "sh", "-c", self.CONTAINER, root, self.secret],
            stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.addCleanup(proc.stdout.close)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            self.pid = int(f.read().split()[0])
        self.assertEqual(procroot.namespaced_pid(self.pid), 1)
        self.assertNotEqual(os.stat(f"/proc/{self.pid}/root").st_dev,
                            os.stat("/").st_dev)

    def in_thread(self, func):
        """func()'s result; fail if it takes long (a FIFO's open())."""
        result = []
        thread = threading.Thread(target=lambda: result.append(func()),
                                  daemon=True)
        thread.start()
        thread.join(30)
        self.assertFalse(thread.is_alive(), "blocked")
        return result[0]

    def test_planted_files_are_not_ready(self):
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                check = self.in_thread(
                    lambda: readiness.check_process(self.pid, backend))
                self.assertFalse(check.ok, check)

    def test_planted_files_are_not_copied(self):
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                target = os.path.join(self.tmp, f"copy-{backend}")
                copier = self.in_thread(
                    lambda: containers.Copier(self.pid, backend, target))
                self.in_thread(copier.stop)
                with open(target, "rb") as f:
                    self.assertEqual(f.read(), b"")

    def test_open_in_root(self):
        with self.assertRaises(OSError):
            procroot.open_in_root(self.pid, "/tmp/perf-1.map")
        with self.assertRaises(OSError):
            procroot.open_in_root(self.pid, "/tmp/jit-1.dump")
        with self.assertRaises(OSError):
            procroot.open_in_root(self.pid, "/tmp/../tmp/perf-1.map")
        # /bin is a symbolic link in the container's root.
        with self.assertRaises(OSError):
            procroot.open_in_root(self.pid, "/bin/sh")
        with procroot.open_in_root(self.pid, "/usr/bin/dash") as f:
            self.assertEqual(f.read(4), b"\x7fELF")


class ContainerTestCase(unittest.TestCase):
    """A service in a container, profiled from the host with pyprofile -p
    HOSTPID; a subclass starts it (start())."""

    # The interpreter that the container runs.
    python = sys.executable

    # Runs baz() <- bar() <- foo() until the file argv[1] exists: the test
    # says when the program ends, whatever the machine's speed.
    SERVICE = textwrap.dedent("""
        import os, sys

        def foo():
            x = 0
            for i in range(100000):
                x += i
            return x

        def bar():
            return foo()

        def baz():
            return bar()

        print("ready", flush=True)
        while not os.path.exists(sys.argv[1]):
            baz()
    """)

    def setUp(self):
        reason = unshare_usable()
        if reason:
            self.skipTest(reason)
        if os.path.realpath(sys.executable).startswith("/tmp/"):
            self.skipTest("the interpreter is under /tmp, which the "
                          "container mounts over")
        # Not under /tmp, which the container mounts over.
        self.tmp = tempfile.mkdtemp(dir="/var/tmp")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.program = os.path.join(self.tmp, "program.py")
        with open(self.program, "w") as f:
            f.write(self.SERVICE)
        self.stop_file = os.path.join(self.tmp, "stop")

    def started(self, proc):
        """Wait until the service that unshare process proc started is
        ready; return its host PID."""
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        self.addCleanup(proc.stdout.close)
        self.assertEqual(proc.stdout.readline(), "ready\n")
        # unshare --fork: the Python process is unshare's only child.
        children = f"/proc/{proc.pid}/task/{proc.pid}/children"
        with open(children) as f:
            pid = int(f.read().split()[0])
        self.assertEqual(procroot.namespaced_pid(pid), 1)
        # PIDs wrap (pid_max is 32768 on Debian 12), and processes that
        # other tests kill leave their maps: a file of this host PID is
        # a dead process's, which the checks after the profile must not
        # count as pyprofile's.
        for name in leftovers(pid):
            os.unlink(os.path.join("/tmp", name))
        return pid

    def stop(self):
        with open(self.stop_file, "w"):
            pass

    def profile(self, backend, exits, on_demand=False):
        """Profile the service in a container for 6 s (ending it 1.5 s
        into the recording if exits is set) and return the collapsed
        stacks."""
        ready_or_skip(self, backend, self.python)
        proc, pid = self.start(backend, on_demand=on_demand)
        output = os.path.join(self.tmp, f"profile-{backend}.txt")
        profiler = subprocess.Popen(
            [sys.executable, PYPROFILE, "--backend", backend,
             "-p", str(pid), "-d", "6", "-o", output],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with profiler:
            if exits:
                # Once it records (after its checks, however long they
                # take), let the program sample a while, then end it.
                for line in profiler.stderr:
                    if line.startswith("pyprofile: recording"):
                        break
                time.sleep(1.5)
                self.stop()
                proc.wait(timeout=300)
            out, err = profiler.communicate(timeout=300)
        if not exits:
            self.assertIsNone(proc.poll())
            self.stop()
            proc.wait(timeout=300)
        self.assertEqual(profiler.returncode, 0, out + err)
        with open(output, encoding="utf-8") as f:
            text = f.read()
        # Nothing left on the host: the copies were pyprofile's.
        self.assertEqual(leftovers(pid), [])
        return text


@unittest.skipUnless(HAVE_TRAMPOLINE, "needs an interpreter with perf "
                     "trampolines (run with build/python)")
class TestContainer(ContainerTestCase):
    """pyprofile -p HOSTPID on a process in its own PID and mount
    namespaces with a /tmp of its own, as Docker, podman and Kubernetes
    run them."""

    def start(self, backend, own_stdlib=False, on_demand=False):
        """Start the service in a container; return its unshare process
        and its host PID.  It runs until stop().  With own_stdlib, the
        standard library is at /mnt/lib, which only PYTHONPATH names: the
        interpreter cannot start with -E there.  With on_demand, it starts
        without the support."""
        if os.path.exists(self.stop_file):
            os.unlink(self.stop_file)
        env_var = ("PYTHON_PERF_UNUSED" if on_demand
                   else common.BACKENDS[backend]["env"])
        # As in a container image, the interpreter is at a path that the
        # host does not have: /mnt/bin is mounted in the container only.
        directory, name = os.path.split(os.path.realpath(sys.executable))
        stdlib = os.path.dirname(os.__file__)
        hide = ('&& mkdir /mnt/lib && mount --bind "$3" /mnt/lib '
                '&& mount -t tmpfs tmpfs "$3" && export PYTHONPATH=/mnt/lib '
                if own_stdlib else '')
        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount", "--mount-proc",
             "sh", "-c", 'mount -t tmpfs tmpfs /tmp '
                         '&& mount -t tmpfs tmpfs /mnt && mkdir /mnt/bin '
                         '&& mount --bind "$0" /mnt/bin '
                         f'{hide}'
                         f'&& {env_var}=1 exec /mnt/bin/{name} "$1" "$2"',
             directory, self.program, self.stop_file, stdlib],
            stdout=subprocess.PIPE, text=True)
        return proc, self.started(proc)

    def test_check_finds_the_process(self):
        for backend, name in (("perf", "perf-1.map"),
                              ("perf_jit", "jit-1.dump")):
            with self.subTest(backend=backend):
                ready_or_skip(self, backend, sys.executable)
                proc, pid = self.start(backend)
                result = run_pyprofile("--check", "--backend", backend,
                                       "-p", str(pid))
                self.stop()
                proc.wait(timeout=300)
                self.assertEqual(result.returncode, 0, result.stdout)
                self.assertIn(f"ok   process: {pid} (PID 1 in its "
                              f"container) writes /proc/{pid}/root/tmp/"
                              f"{name}", result.stdout)
                self.assertRegex(result.stdout,
                                 r"(?m)^ok   interpreter: /mnt/bin/")

    def test_check_with_the_process_environment(self):
        # The interpreter starts only with the environment the process
        # has (PYTHONPATH): the check, which does not run it, finds its
        # build configuration all the same.
        ready_or_skip(self, "perf", sys.executable)
        proc, pid = self.start("perf", own_stdlib=True)
        result = run_pyprofile("--check", "-p", str(pid))
        self.stop()
        proc.wait(timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertRegex(result.stdout, r"(?m)^ok   interpreter: /mnt/bin/")

    def test_check_without_the_interpreter(self):
        # The interpreter's file is gone from the container (unmounted
        # after it started): the process writes its map, so it is ready,
        # with a warning that its build cannot be checked.
        ready_or_skip(self, "perf", sys.executable)
        proc, pid = self.start("perf")
        subprocess.run(["nsenter", "--target", str(pid), "--mount", "--pid",
                        "--",
                        "umount", "-l", "/mnt/bin"], check=True)
        result = run_pyprofile("--check", "-p", str(pid))
        self.stop()
        proc.wait(timeout=300)
        self.assertEqual(result.returncode, 0, result.stdout)
        # (The kernel names the unmounted file relative to its mount.)
        self.assertRegex(result.stdout,
                         r"(?m)^warn interpreter: no build configuration ")

    def test_process_exits_during_recording(self):
        # The names resolve from the host's copy of the map or the
        # jitdump: the container's /tmp is gone when perf reads them.
        for backend in "perf", "perf_jit":
            with self.subTest(backend=backend):
                text = self.profile(backend, exits=True)
                self.assertIn("baz (program.py);bar (program.py);"
                              "foo (program.py)", text)

    def test_on_demand(self):
        # Started without the support: turned on from the host for the
        # recording, and off after it.
        for backend in "perf", "perf_jit":
            with self.subTest(backend=backend):
                text = self.profile(backend, exits=False, on_demand=True)
                self.assertIn("baz (program.py);bar (program.py);"
                              "foo (program.py)", text)

    def test_process_lives(self):
        # perf_jit: perf 6.1 would read the jitdump through the live
        # process's namespaces, and the injected files through them too.
        text = self.profile("perf_jit", exits=False)
        self.assertIn("baz (program.py);bar (program.py);foo (program.py)",
                      text)

    def test_sigterm(self):
        # pyprofile -p ends on SIGTERM with perf, and removes the host's
        # copy of the container's map; the process runs on (issue 50
        # item 8).
        ready_or_skip(self, "perf", sys.executable)
        proc, pid = self.start("perf")
        output = os.path.join(self.tmp, "profile.txt")
        profiler = subprocess.Popen(
            [sys.executable, PYPROFILE, "-p", str(pid), "-d", "600",
             "-o", output],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True)
        self.addCleanup(profiler.wait)
        self.addCleanup(kill_session, profiler.pid)
        with profiler:
            for line in profiler.stderr:
                if line.startswith("pyprofile: recording"):
                    break
            time.sleep(1)
            members = session_members(profiler.pid)
            os.kill(profiler.pid, signal.SIGTERM)
            # (perf, if it ran on, would keep the pipes open.)
            out, err = profiler.communicate(timeout=120)
        self.assertEqual(profiler.returncode, 128 + signal.SIGTERM, err)
        self.assertNotIn("Traceback", err)
        deadline = time.monotonic() + 30
        while (any(alive(p) for p in members)
               and time.monotonic() < deadline):
            time.sleep(0.1)
        self.assertEqual([p for p in members if alive(p)], [])
        self.assertFalse(os.path.exists(output))
        self.assertEqual(leftovers(pid), [])
        self.assertIsNone(proc.poll())
        self.stop()
        proc.wait(timeout=300)


MUSL_PYTHON = os.environ.get("PYTHON_MUSL_INTERPRETER")


@unittest.skipUnless(MUSL_PYTHON, "needs PYTHON_MUSL_INTERPRETER, an "
                     "interpreter built against musl (make test LIBC=musl "
                     "runs these tests with it)")
class TestMuslContainer(ContainerTestCase):
    """pyprofile -p HOSTPID, run on the host (glibc), on a process of the
    interpreter built against musl in a container as an Alpine image runs
    it: its own root (musl's dynamic loader, the interpreter and its
    library and nothing else), mount and PID namespaces."""

    python = MUSL_PYTHON

    # The root, made the mount namespace's root as container runtimes do
    # (perf looks for the map and the dump there): a tmpfs with musl's
    # loader, and the build directory, the standard library and the
    # program's directory at their own paths.
    CONTAINER = (
        'root=$0 loader=$1 && shift '
        '&& mount -t tmpfs tmpfs "$root" '
        '&& mkdir "$root/lib" "$root/tmp" "$root/proc" "$root/.old" '
        '&& cp "$loader" "$root/lib/" '
        '&& for d in "$@"; do mkdir -p "$root$d" '
        '&& mount --bind "$d" "$root$d" || exit 1; done '
        '&& mount -t proc proc "$root/proc" '
        '&& cd "$root" && pivot_root . .old && cd / '
        '&& export "$SUPPORT" && exec "$PYTHON" "$PROGRAM" "$STOP"')

    def start(self, backend, on_demand=False):
        if os.path.exists(self.stop_file):
            os.unlink(self.stop_file)
        loaders = glob.glob("/lib/ld-musl-*.so.1")
        if len(loaders) != 1:
            self.skipTest(f"musl's dynamic loader: {loaders}")
        python = os.path.realpath(self.python)
        stdlib = subprocess.run(
            [python, "-c", "import os; print(os.path.dirname(os.__file__))"],
            capture_output=True, text=True, check=True).stdout.strip()
        env_var = ("PYTHON_PERF_UNUSED" if on_demand
                   else common.BACKENDS[backend]["env"])
        root = tempfile.mkdtemp(dir="/var/tmp")
        self.addCleanup(os.rmdir, root)
        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount", "sh", "-c",
             self.CONTAINER, root, loaders[0], os.path.dirname(python),
             stdlib, self.tmp],
            env={"PATH": os.environ["PATH"], "SUPPORT": f"{env_var}=1",
                 "PYTHON": python, "PROGRAM": self.program,
                 "STOP": self.stop_file},
            stdout=subprocess.PIPE, text=True)
        return proc, self.started(proc)

    def test_profile(self):
        # Both backends, the process running on; started with the
        # support and started without it (turned on from the host).
        for backend in "perf", "perf_jit":
            for on_demand in False, True:
                with self.subTest(backend=backend, on_demand=on_demand):
                    text = self.profile(backend, exits=False,
                                        on_demand=on_demand)
                    self.assertIn("baz (program.py);bar (program.py);"
                                  "foo (program.py)", text)


class TestPythonView(unittest.TestCase):
    """The Python view of perf script's stacks, from a sample made up."""

    SAMPLE = textwrap.dedent("""\
        python 4242
        \t    7f0000001000 math_factorial (/b/lib/math.cpython-311.so)
        \t    5500000a0000 cfunction_vectorcall_O (/b/python)
        \t    5500000b0000 PyObject_Vectorcall (/b/python)
        \t    5500000c0000 _PyEval_EvalFrameDefault (/b/python)
        \t    7f0000003000 py::foo:/srv/app.py (/tmp/perf-4242.map)
        \t    5500000d0000 _PyPerfTrampoline_EnterFrame (inlined)
        \t    5500000d0000 _PyEval_Vector (/b/python)
        \t    7f0000004000 ufunc_generic_call (/b/lib/numpy.so)
        \t    5500000c0000 _PyEval_EvalFrameDefault (/b/python)
        \t    7f0000005000 py::<module>:/srv/app.py (/tmp/perf-4242.map)
        \t    5500000e0000 PyEval_EvalCode (/b/python)
        \t    5500000f0000 Py_BytesMain (/b/python)
        \t    7f0000006000 __libc_start_main (/lib/libc.so.6)

        python 4242
        \t    5500000a0000 gc_collect_main (/b/python)
        \t    5500000f0000 Py_BytesMain (/b/python)

        """)

    def test_folded(self):
        tree = perfscript.parse_perf_script(self.SAMPLE).to_json()
        paths = [[(node["n"], node.get("t")) for node in path[1:]]
                 for path in chains_of_nodes(tree) if not path[-1]["c"]]
        self.assertEqual(paths, [
            [("python 4242", None),
             ("<module> (app.py)", "<module> (/srv/app.py)"),
             ("ufunc_generic_call", None),
             ("foo (app.py)", "foo (/srv/app.py)"),
             ("math_factorial", None)],
            # No Python frame: as perf recorded it.
            [("python 4242", None), ("Py_BytesMain", None),
             ("gc_collect_main", None)],
        ])

    def test_native(self):
        tree = perfscript.parse_perf_script(self.SAMPLE, native=True)
        first = next(iter(tree.stacks()))[0]
        self.assertEqual(len(first), 14)
        self.assertIn("_PyEval_EvalFrameDefault", first)

    def test_collapsed(self):
        tree = perfscript.parse_perf_script(self.SAMPLE)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "profile.txt")
            rendering.write_collapsed(tree, path)
            with open(path, encoding="utf-8") as f:
                text = f.read()
        self.assertEqual(text, "python 4242;<module> (app.py);"
                         "ufunc_generic_call;foo (app.py);math_factorial 1\n"
                         "python 4242;Py_BytesMain;gc_collect_main 1\n")

    def test_process_name_with_leading_space(self):
        # perf prints the name as the process set it (prctl, or
        # /proc/self/comm): one that starts with a space keeps its samples
        # (issue 50 item 13).
        sample = self.SAMPLE.replace("python 4242", " worker 1  4242", 1)
        tree = perfscript.parse_perf_script(sample)
        self.assertEqual([(names[0], count) for names, count in tree.stacks()],
                         [(" worker 1 4242", 1), ("python 4242", 1)])

    def test_real_header(self):
        # As perf 6.1 prints it: the PID right-aligned in 5 columns.
        sample = ("python  6381 \n"
                  "\t    7f0000003000 py::foo:/srv/app.py "
                  "(/tmp/perf-6381.map)\n\n")
        tree, pids = perfscript.fold_perf_script(io.BytesIO(sample.encode()))
        self.assertEqual(list(tree.stacks()),
                         [(("python 6381", "foo (app.py)"), 1)])
        self.assertEqual(pids, {6381})


class TestStreaming(unittest.TestCase):
    """perf script's output is folded as it is read, in memory that goes
    with the number of distinct stacks, not of samples (issue 50 item
    14)."""

    class Output(io.RawIOBase):
        """Samples of perf script's output, made as they are read: blocks
        of 100 samples with the same 60 frames at addresses that differ."""

        def __init__(self, blocks):
            self.block = "".join(
                "python 4242\n" + "".join(
                    f"\t{sample * 64 + i:16x} func{i} (/b/python)\n"
                    for i in range(60)) + "\n"
                for sample in range(100)).encode()
            self.left = blocks
            self.offset = len(self.block)

        def readable(self):
            return True

        def readinto(self, buffer):
            if self.offset == len(self.block):
                if not self.left:
                    return 0
                self.left -= 1
                self.offset = 0
            n = min(len(buffer), len(self.block) - self.offset)
            buffer[:n] = self.block[self.offset:self.offset + n]
            self.offset += n
            return n

    def test_memory_goes_with_the_stacks(self):
        import tracemalloc
        samples = 20000             # about 40 MB of text
        stream = io.BufferedReader(self.Output(samples // 100), 1 << 16)
        tracemalloc.start()
        try:
            tree, pids = perfscript.fold_perf_script(stream, native=True)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertEqual(list(tree.stacks()),
                         [(("python 4242",
                            *(f"func{i}" for i in reversed(range(60)))),
                           samples)])
        self.assertEqual(pids, {4242})
        self.assertLess(peak, 16 << 20)


def renderer_or_skip(testcase):
    if rendering.template_path() is None:
        testcase.skipTest("the flame graph renderer is not installed "
                          "(pyprofile --setup)")


# A file name that ends the page's <script> element if put in it as it is.
EVIL = "/srv/</script><script>document.title='pwned'</script><!--.py"


class TestOutput(unittest.TestCase):
    """What pyprofile writes: the page keeps the program's text inside
    its script element (issue 50 item 2), and outputs are written through
    a temporary file of their own (item 3)."""

    SAMPLE = textwrap.dedent(f"""\
        python 4242
        \t    7f0000001000 py::foo:{EVIL} (/tmp/perf-4242.map)
        \t    7f0000002000 py::<module>:{EVIL} (/tmp/perf-4242.map)

        """)

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_page_keeps_the_program_text_in_its_script(self):
        renderer_or_skip(self)
        tree = perfscript.parse_perf_script(self.SAMPLE)
        page = os.path.join(self.tmp, "page.html")
        title = "pyprofile: python '</script><script>alert(1)</script>'"
        rendering.render(tree, page, title + "\n2 samples")
        with open(page, encoding="utf-8") as f:
            text = f.read()
        with open(rendering.template_path(), encoding="utf-8") as f:
            template = f.read()
        self.assertEqual(text.count("<script"), template.count("<script"))
        self.assertEqual(text.count("</script"), template.count("</script"))
        self.assertNotIn("<!--", text)
        self.assertIn("<title>pyprofile: python &#x27;&lt;/script&gt;"
                      "&lt;script&gt;alert(1)&lt;/script&gt;&#x27;</title>",
                      text)
        # The names are whole for the page's code.
        titles = {node.get("t") for node in nodes(page_tree(page))}
        self.assertIn(f"foo ({EVIL})", titles)
        options = re.search(r"const options = \[(.*)\];\n", text).group(1)
        self.assertEqual(json.loads(options)["context"],
                         title + "\n2 samples")

    def planted_link(self, name):
        """A symbolic link at the output's old temporary name, planted by
        another user, and the file it points to."""
        victim = os.path.join(self.tmp, "victim")
        with open(victim, "w") as f:
            f.write("precious\n")
        os.symlink(victim, os.path.join(self.tmp, name + ".tmp"))
        return victim

    def assert_written(self, victim, output):
        with open(victim) as f:
            self.assertEqual(f.read(), "precious\n")
        self.assertTrue(os.path.isfile(output))
        self.assertFalse(os.path.islink(output))
        # Nothing else left.
        self.assertEqual(sorted(os.listdir(self.tmp)),
                         sorted([os.path.basename(output),
                                 os.path.basename(output) + ".tmp",
                                 "victim"]))

    def test_collapsed_not_through_a_link(self):
        victim = self.planted_link("out.txt")
        output = os.path.join(self.tmp, "out.txt")
        rendering.write_collapsed(perfscript.parse_perf_script(self.SAMPLE),
                                  output)
        self.assert_written(victim, output)
        with open(output, encoding="utf-8") as f:
            self.assertIn("foo (", f.read())

    def test_page_not_through_a_link(self):
        renderer_or_skip(self)
        victim = self.planted_link("out.html")
        output = os.path.join(self.tmp, "out.html")
        rendering.render(perfscript.parse_perf_script(self.SAMPLE), output,
                         "title")
        self.assert_written(victim, output)

    def test_mode(self):
        # As open() would make it, not mkstemp()'s 0600.
        output = os.path.join(self.tmp, "out.txt")
        old = os.umask(0o027)
        try:
            rendering.write_collapsed(
                perfscript.parse_perf_script(self.SAMPLE), output)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(output).st_mode & 0o777, 0o640)


class TestOpenInRoot(unittest.TestCase):
    """open_in_root() opens nothing but a regular file (issue 50 item 4):
    a device node's driver, or a FIFO's writer, never sees an open."""

    def test_fifo_is_not_opened(self):
        tmp = os.path.realpath(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        fifo = os.path.join(tmp, "jit-1.dump")
        os.mkfifo(fifo)
        # A writer's open() returns once a reader opens the FIFO.
        opened = threading.Event()

        def writer():
            os.close(os.open(fifo, os.O_WRONLY))
            opened.set()

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        try:
            with self.assertRaises(OSError):
                procroot.open_in_root(os.getpid(), fifo)
            self.assertFalse(opened.wait(0.5), "the FIFO was opened")
        finally:
            # Let the writer go.
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            thread.join(10)

    def test_regular_file(self):
        tmp = os.path.realpath(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, tmp)
        path = os.path.join(tmp, "perf-1.map")
        with open(path, "w") as f:
            f.write("1000 10 py::foo:app.py\n")
        with procroot.open_in_root(os.getpid(), path) as f:
            self.assertEqual(f.read(), b"1000 10 py::foo:app.py\n")
        os.symlink(path, path + ".link")
        with self.assertRaises(OSError):
            procroot.open_in_root(os.getpid(), path + ".link")


def chains_of_nodes(node, prefix=()):
    """Every path from the root, as tuples of nodes."""
    path = prefix + (node,)
    yield path
    for child in node["c"]:
        yield from chains_of_nodes(child, path)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@unittest.skipUnless(HAVE_TRAMPOLINE, "needs an interpreter with perf "
                     "trampolines (run with build/python)")
class TestPage(unittest.TestCase):
    """The page, opened in headless Chromium, draws the Python frames."""

    def test_rendered_in_chromium(self):
        browser = chromium()
        if browser is None:
            self.skipTest("Chromium is not installed")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        program = os.path.join(tmp, "program.py")
        with open(program, "w") as f:
            f.write(PROGRAM)
        ready_or_skip(self, "perf", sys.executable)
        page = os.path.join(tmp, "flamegraph.html")
        proc = run_pyprofile("-o", page, "--", sys.executable, program, "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

        options = ["--headless", "--no-sandbox", "--disable-gpu",
                   "--disable-quic", "--no-first-run",
                   "--disable-background-networking",
                   "--disable-component-update", "--disable-sync",
                   f"--user-data-dir={os.path.join(tmp, 'profile')}",
                   "--window-size=1400,900",
                   # The boxes get their labels at the end of an animated
                   # transition: draw frames, and let it end.
                   "--run-all-compositor-stages-before-draw",
                   "--virtual-time-budget=5000"]
        url = "file://" + page
        shot = os.path.join(tmp, "flamegraph.png")
        try:
            subprocess.run([browser, *options, f"--screenshot={shot}", url],
                           capture_output=True, timeout=120)
            dom = subprocess.run([browser, *options, "--dump-dom", url],
                                 capture_output=True, text=True,
                                 timeout=120).stdout
        except (OSError, subprocess.TimeoutExpired) as err:
            self.skipTest(f"Chromium cannot start here: {err}")
        if not os.path.exists(shot) and not dom:
            self.skipTest("Chromium cannot start here")
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(shot), 10_000)
        # Each Python function is a box labelled "name (file.py)", with
        # the full path on hover.
        titles = re.findall(r"<title>([^<]*)</title>", dom)
        # The box's name is set at once; its label text only at the end
        # of the page's transition, which a loaded machine may not reach.
        labels = re.findall(r'<g[^>]* name="([^"]*)"', dom)
        for name in ("foo", "bar", "baz"):
            self.assertTrue(
                any(t.startswith(f"{name} ({program}) (") for t in titles),
                f"no box with the hover text {name} ({program}) in the page")
            self.assertIn(f"{name} (program.py)", labels)
        self.assertFalse(any("_PyEval_EvalFrameDefault" in t
                             for t in titles))


if __name__ == "__main__":
    unittest.main()

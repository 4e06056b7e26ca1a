"""Record a program with Linux perf and check the call stacks it shows.

The same tests run for both backends: the perf map backend, unwound with
frame pointers by "perf record -g" on this interpreter, and the perf_jit
backend, unwound with DWARF information by "perf record --call-graph
dwarf" and "perf inject --jit" on an interpreter without frame pointers.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from test import support
from test.support import os_helper
from test.test_perf_profiler.util import (
    PY_NAME_RE, PerfTestCase, StaleMapPath, check_perf_record,
    existing_maps, frame_pointers_enabled, map_name, nofp_python,
    perf_command, perf_samples, perf_samples_by_pid, remove_jitted_objects,
    requires_perf_trampoline, run_perf)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")
if sys.platform != "linux":
    raise unittest.SkipTest("Linux perf is needed")


class RealPerfTests:
    """The real-perf tests, shared by the two backends.

    A concrete class derives from this mixin and PerfTestCase, and says
    how its backend is recorded."""

    # The interpreter to record.
    python = None
    # The backend: the value of the -X option that turns it on.
    xoption = None
    # Options of "perf record" that choose the sampling frequency and how
    # call chains are unwound.
    record_options = ()
    # Whether "perf inject --jit" must run on the recording before
    # "perf script" can name the trampolines.
    inject_jit = False

    # Fewer samples than this make the test meaningless: it is skipped.
    MIN_SAMPLES = 50
    # The share of the samples in foo() whose call chain must be right.
    MIN_RATIO = 0.95

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
        check_perf_record(cls.perf, cls.python, cls.record_options)

    def new_recording(self):
        """(the start of perf's command lines, the path of the recording,
        the maps in /tmp before it), in a new directory that goes away
        with the test."""
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        return (perf_command(self.perf, tmpdir),
                os.path.join(tmpdir, "perf.data"), existing_maps())

    def inject(self, perf, data):
        """The recording to read: data itself, or for a backend that needs
        it, a copy with the trampolines injected by "perf inject --jit"."""
        if not self.inject_jit:
            return data
        injected = os.path.splitext(data)[0] + ".jit.data"
        run_perf([*perf, "inject", "--jit", "-i", data, "-o", injected],
                 "perf inject --jit")
        return injected

    def record(self, trampolines):
        """Record PERF_SCRIPT, with the backend active if trampolines is
        true; return (python's pid, script path, [[symbol, ...] innermost
        first, per sample])."""
        script = self.write_script(self.PERF_SCRIPT)
        flags = ("-X", self.xoption) if trampolines else ()
        perf, data, existing = self.new_recording()
        cmd = [*perf, "record", *self.record_options,
               "-e", "cpu-clock", "-o", data, "--",
               self.python, *flags, script]
        proc = run_perf(cmd, "perf record", env=self.make_env(),
                        check=False)
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        pid = None
        if out.strip().isdigit():
            pid = int(out.strip())
            if trampolines and self.inject_jit:
                self.forget_dump(pid)
                self.addCleanup(remove_jitted_objects, pid)
            if map_name(pid) in existing:
                # perf would read a stale map too.
                raise StaleMapPath(pid)
            self.forget_map(pid)
        if proc.returncode != 0 or pid is None:
            if pid is None:
                # Did the program fail, or perf?  The program must work
                # without perf (run_python() fails the test otherwise).
                self.run_python(*flags, script, executable=self.python)
            self.skipTest(f"perf record failed: {err[-300:]}")
        data = self.inject(perf, data)
        samples = perf_samples(perf, data)
        if len(samples) < self.MIN_SAMPLES:
            self.skipTest(f"perf recorded only {len(samples)} samples")
        return pid, script, samples

    def test_python_frames_in_perf_stacks(self):
        pid, script, samples = self.retrying(lambda: self.record(True))
        escaped = re.escape(script)
        patterns = {
            name: re.compile(rf"^py::{name}:{escaped}(\+0x[0-9a-f]+)?$")
            for name in ("foo", "bar", "baz")}
        # Every sample in which anything names foo, even in an unexpected
        # form, must show the right call chain.
        in_foo = [frames for frames in samples
                  if any("py::foo:" in frame for frame in frames)]
        self.assertTrue(in_foo,
                        f"no sample names py::foo among {len(samples)}")
        # foo is called by bar, called by baz.
        callers = 0
        # foo, bar and baz are the three innermost Python frames.
        innermost = 0
        for frames in in_foo:
            py_frames = [f for f in frames if PY_NAME_RE.match(f)]
            for i, frame in enumerate(py_frames):
                if patterns["foo"].match(frame):
                    rest = py_frames[i + 1:i + 3]
                    if (len(rest) == 2 and patterns["bar"].match(rest[0])
                            and patterns["baz"].match(rest[1])):
                        callers += 1
                    break
            top = py_frames[:3]
            if len(top) == 3 and all(patterns[name].match(frame)
                                     for name, frame
                                     in zip(("foo", "bar", "baz"), top)):
                innermost += 1
        if support.verbose:
            print(f"\n    {self.xoption}: of {len(in_foo)} samples in foo, "
                  f"{callers} show foo <- bar <- baz, {innermost} as the "
                  f"innermost Python frames", file=sys.stderr)
        self.assertGreaterEqual(
            callers / len(in_foo), self.MIN_RATIO,
            f"only {callers} of {len(in_foo)} samples in foo show "
            f"foo <- bar <- baz")
        self.assertGreaterEqual(
            innermost / len(in_foo), self.MIN_RATIO,
            f"only {innermost} of {len(in_foo)} samples in foo show "
            f"foo, bar and baz as the innermost Python frames")

    FORK_SCRIPT = """
        import os, time

        def spin(seconds):
            x = 0
            deadline = time.perf_counter() + seconds
            while time.perf_counter() < deadline:
                for i in range(1000):
                    x += i
            return x

        def before_fork():
            return spin(0.01)

        before_fork()
        child = os.fork()
        if child == 0:
            # The first function the child runs for the first time: its
            # trampoline must not be where the parent's next one is.
            def in_child():
                return spin(1.0)
            in_child()
            os._exit(0)

        def in_parent():
            return spin(1.0)
        in_parent()
        os.waitpid(child, 0)
        print(os.getpid(), child)
    """

    def record_fork(self):
        script = self.write_script(self.FORK_SCRIPT)
        perf, data, existing = self.new_recording()
        proc = run_perf([*perf, "record", *self.record_options,
                         "-e", "cpu-clock", "-o", data, "--",
                         self.python, "-X", self.xoption, script],
                        "perf record", env=self.make_env(), check=False)
        out = proc.stdout.decode("utf-8", "replace").split()
        if proc.returncode != 0 or len(out) != 2:
            self.skipTest("perf record failed: "
                          + proc.stderr.decode(errors="replace")[-300:])
        pids = [int(pid) for pid in out]
        for pid in pids:
            self.forget_dump(pid)
            self.addCleanup(remove_jitted_objects, pid)
        if any(map_name(pid) in existing for pid in pids):
            raise StaleMapPath(pids)
        for pid in pids:
            self.forget_map(pid)
        data = self.inject(perf, data)
        return pids, perf_samples_by_pid(perf, data)

    def test_forked_child_named_after_its_own_functions(self):
        (parent, child), samples = self.retrying(self.record_fork)
        names = {parent: "in_parent", child: "in_child"}
        for pid, own in names.items():
            other = names[child if pid == parent else parent]
            in_spin = [frames for p, frames in samples if p == pid
                       and any(f.startswith("py::spin:") for f in frames)]
            if len(in_spin) < self.MIN_SAMPLES:
                self.skipTest(f"only {len(in_spin)} samples of {pid}")
            named = sum(any(f.startswith(f"py::{own}:") for f in frames)
                        for frames in in_spin)
            wrong = sum(any(f.startswith(f"py::{other}:") for f in frames)
                        for frames in in_spin)
            self.assertEqual(wrong, 0,
                             f"{wrong} of {len(in_spin)} samples of "
                             f"{own}() in process {pid} name {other}()")
            self.assertGreaterEqual(
                named / len(in_spin), self.MIN_RATIO,
                f"only {named} of {len(in_spin)} samples of process {pid} "
                f"show {own}()")

    WORKER_SCRIPT = """
        import os

        def work():
            x = 0
            for i in range(20000):
                x += i
            return x

        def serve():
            # Forks while running: the child's frame of serve() was
            # entered before the fork.
            child = os.fork()
            if child == 0:
                os.write(1, b"%d\\n" % os.getpid())
                # Until the test closes stdin.
                os.set_blocking(0, False)
                while True:
                    try:
                        if not os.read(0, 1):
                            break
                    except BlockingIOError:
                        pass
                    # Nearly all the time in work(), not in the check.
                    for _ in range(100):
                        work()
                os._exit(0)
            os.waitpid(child, 0)

        work()
        serve()
    """

    def record_worker(self):
        """Fork a worker that runs functions the parent described before
        the fork, and record it alone with "perf record -p"; return the
        worker's pid and its samples."""
        script = self.write_script(self.WORKER_SCRIPT)
        perf, data, existing = self.new_recording()
        proc = subprocess.Popen([self.python, "-X", self.xoption, script],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=self.make_env())
        try:
            line = proc.stdout.readline()
            if not line.strip().isdigit():
                self.fail(f"the program printed {line!r}, not a pid")
            worker = int(line)
            self.forget_dump(worker)
            self.addCleanup(remove_jitted_objects, worker)
            self.forget_map(worker)
            self.forget_map(proc.pid)
            self.forget_dump(proc.pid)
            if map_name(worker) in existing:
                raise StaleMapPath(worker)
            rec = run_perf([*perf, "record", *self.record_options,
                            "-e", "cpu-clock", "-o", data, "-p", str(worker),
                            "--", "sleep", "1"],
                           "perf record", check=False)
        finally:
            proc.stdin.close()
            proc.wait(timeout=support.LONG_TIMEOUT)
            proc.stdout.close()
        if rec.returncode != 0:
            self.skipTest("perf record failed: "
                          + rec.stderr.decode(errors="replace")[-300:])
        data = self.inject(perf, data)
        return worker, perf_samples_by_pid(perf, data)

    def test_worker_recorded_alone(self):
        # perf record -p on a forked worker: the trampolines it inherited
        # are named in its own file, the ones it runs and the one of the
        # frame that forked.
        worker, samples = self.retrying(self.record_worker)
        # The samples taken in Python code whose chain goes down to the
        # interpreter's main() (one taken in a library without frame
        # pointers, as the sanitizers' runtime is, may stop anywhere).
        in_python = [frames for p, frames in samples if p == worker
                     and any(f.startswith("_PyEval_EvalFrameDefault")
                             for f in frames)
                     and any(f.startswith("Py_BytesMain") for f in frames)]
        if len(in_python) < self.MIN_SAMPLES:
            self.skipTest(f"only {len(in_python)} samples of the worker "
                          f"in Python code")
        # serve() runs below everything else; work() takes most of the
        # time (the check of stdin takes the rest, more of it under the
        # sanitizers).
        for name, ratio in (("serve", self.MIN_RATIO), ("work", 0.5)):
            named = sum(any(f.startswith(f"py::{name}:") for f in frames)
                        for frames in in_python)
            self.assertGreaterEqual(named / len(in_python), ratio,
                                    f"only {named} of {len(in_python)} "
                                    f"samples in Python code show "
                                    f"{name}()")

    def test_no_python_frames_without_trampolines(self):
        pid, script, samples = self.retrying(lambda: self.record(False))
        names = [frame for frames in samples for frame in frames
                 if PY_NAME_RE.match(frame)]
        self.assertEqual(names[:10], [])


@unittest.skipUnless(frame_pointers_enabled(),
                     "Python was not built with -fno-omit-frame-pointer")
class TestPerfMapBackend(RealPerfTests, PerfTestCase):
    """The perf map backend: "perf record -g" unwinds with frame pointers
    through this interpreter, which must have them."""

    python = sys.executable
    xoption = "perf"
    record_options = ("-F", "999", "-g", "--call-graph=fp")


NOFP_PYTHON = nofp_python()


@unittest.skipIf(NOFP_PYTHON is None,
                 "no interpreter without frame pointers: set "
                 "PYTHON_NOFP_INTERPRETER (make test does)")
class TestPerfJitBackend(RealPerfTests, PerfTestCase):
    """The perf_jit backend: "perf record --call-graph dwarf" and
    "perf inject --jit" on an interpreter without frame pointers
    (PYTHON_NOFP_INTERPRETER)."""

    python = NOFP_PYTHON
    xoption = "perf_jit"
    # -k 1: timestamps from CLOCK_MONOTONIC, the clock of the jitdump.
    record_options = ("-k", "1", "-F", "499", "-g", "--call-graph", "dwarf")
    inject_jit = True


if __name__ == "__main__":
    unittest.main()

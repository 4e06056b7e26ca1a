"""Descriptions are held in memory and written together, but never for
long: a program that keeps making new functions does not pay a write for
each, and a profiler reading the file while the process runs finds every
name soon after its function first ran, whatever the thread does next."""

import contextlib
import os
import subprocess
import sys
import time
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase, jitdump_path,
                                          perf_map_path,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")

BACKENDS = ("perf", "perf_jit")


class TestHeld(PerfTestCase):

    def written(self, pid, backend, name):
        """Whether the file of backend of pid describes name now (read as
        it is, maybe while a record is being appended)."""
        path = (perf_map_path(pid) if backend == "perf"
                else jitdump_path(pid))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return False
        if backend == "perf":
            return b" " + name.encode() + b"\n" in data
        return name.encode() + b"\0" in data

    def wait_for_name(self, source, name):
        """Run source with each backend until it prints its pid, then
        wait (at most LONG_TIMEOUT) for name to appear in its file while
        it goes on running; the process is killed afterwards."""
        script = self.write_script(source)
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                proc = subprocess.Popen(
                    [sys.executable, "-X", backend, script],
                    stdout=subprocess.PIPE, env=self.make_env())
                try:
                    pid = int(proc.stdout.readline())
                    self.forget_map(pid)
                    self.forget_dump(pid)
                    deadline = time.monotonic() + support.LONG_TIMEOUT
                    full = name.replace("SCRIPT", script)
                    while not self.written(pid, backend, full):
                        self.assertLess(time.monotonic(), deadline,
                                        f"{full} not written")
                        time.sleep(0.05)
                    self.assertIsNone(proc.poll(), "the program ended")
                finally:
                    proc.kill()
                    proc.wait()
                    proc.stdout.close()

    def test_busy_thread(self):
        # The thread runs Python code for ever, makes no new function and
        # never releases the GIL: the eval breaker writes the name.
        self.wait_for_name("""
            import os
            os.write(1, b"%d\\n" % os.getpid())
            def busy():
                while True:
                    pass
            busy()
        """, "py::busy:SCRIPT")

    def busy_in_import(self, functions, name):
        """Wait for name while the program makes the given number of new
        functions in an import, then runs Python code for ever in it."""
        self.wait_for_name(f"""
            import os, sys
            os.write(1, b"%d\\n" % os.getpid())
            here = os.path.dirname(os.path.abspath(__file__))
            with open(os.path.join(here, "busy_module.py"), "w") as f:
                f.write("for i in range({functions}):\\n"
                        "    exec(f'def f{{i}}(): return 1\\\\n'\\n"
                        "         f'f{{i}}()', {{}})\\n"
                        "while True:\\n"
                        "    pass\\n")
            sys.path.insert(0, here)
            import busy_module
        """, name)

    def test_busy_in_import(self):
        # 200 new functions: the names are written by count (all but fewer
        # than 64 of them), with no eval breaker to write them.
        self.busy_in_import(200, "py::f136:<string>")

    def test_few_names_in_import(self):
        # 10, too few to be written by count, then a loop at module level
        # that neither releases the GIL nor makes a new function: nothing
        # of ours interrupts it (no thread, no signal, no eval breaker kept
        # set while importing), so the names are written when the import
        # ends, the bound that Python/perf_description_file.c states.  The
        # process has no thread but those it has without the support
        # meanwhile (one; under qemu-user, the emulator's own too).
        plain = None
        for backend in (None, *BACKENDS):
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script("""
                    import os, sys

                    here = os.path.dirname(os.path.abspath(__file__))
                    with open(os.path.join(here, "looping.py"), "w") as f:
                        f.write("import os\\n"
                                "for i in range(10):\\n"
                                "    exec(f'def f{i}(): return 1\\\\n'\\n"
                                "         f'f{i}()', {})\\n"
                                "n = 0\\n"
                                "while n < 10**6:\\n"
                                "    n += 1\\n"
                                "threads = len(os.listdir('/proc/self/task'))\\n")
                    sys.path.insert(0, here)
                    import looping
                    print(looping.threads,
                          len(os.listdir("/proc/self/task")))
                """, flags=("-X", backend) if backend else ())
                if backend is None:
                    plain = out.split()
                    self.assertEqual(len(plain), 2)
                    continue
                self.assertEqual(out.split(), plain)
                names = [n for _, _, n in self.described_entries(pid,
                                                                 backend)]
                for i in range(10):
                    self.assertIn(f"py::f{i}:<string>", names)

    def test_sleeping_thread(self):
        # The thread sleeps for ever right after its new function ran.
        self.wait_for_name("""
            import os, time
            os.write(1, b"%d\\n" % os.getpid())
            def before_sleep():
                return 1
            before_sleep()
            time.sleep(1000)
        """, "py::before_sleep:SCRIPT")

    @contextlib.contextmanager
    def running(self, script, backend):
        """Run script with backend, with pipes to its standard input and
        output; yield (process, pid) once it has printed its pid, and
        kill it afterwards."""
        proc = subprocess.Popen(
            [sys.executable, "-X", backend, script],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=self.make_env())
        try:
            pid = int(proc.stdout.readline())
            self.forget_files(pid)
            yield proc, pid
        finally:
            proc.kill()
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()

    def check_thread_end(self, source):
        """Run source, whose main thread stays blocked in a read while
        another thread prints its native id, makes 100 new functions in a
        burst and ends: every name must be written by the time it has
        ended.  (The thread's own id, not the count of the process's
        threads: an emulator such as qemu-user has threads of its own.)"""
        script = self.write_script(source)
        for backend in BACKENDS:
            with self.subTest(backend=backend), \
                 self.running(script, backend) as (proc, pid):
                tid = int(proc.stdout.readline())
                deadline = time.monotonic() + support.LONG_TIMEOUT
                while os.path.exists(f"/proc/{pid}/task/{tid}"):
                    self.assertLess(time.monotonic(), deadline,
                                    "the thread did not end")
                    time.sleep(0.01)
                missing = [i for i in range(100)
                           if not self.written(pid, backend,
                                               f"py::in_thread{i}:<string>")]
                self.assertEqual(missing, [])

    MAKE_100 = """
        import _thread, os
        def make(arg=None):
            os.write(1, b"%d\\n" % _thread.get_native_id())
            for i in range(100):
                exec(f"def in_thread{i}(): return 1\\nin_thread{i}()", {})
            return None
        os.write(1, b"%d\\n" % os.getpid())
    """

    def test_thread_end(self):
        # The names are written when the thread gives up the GIL for good
        # (the main thread released it once, before most were made).
        self.check_thread_end(self.MAKE_100 + """
        _thread.start_new_thread(make, ())
        os.read(0, 1)
        """)

    def test_foreign_thread_end(self):
        # The same for a ctypes callback run by a C thread: its thread
        # state ends in PyGILState_Release().
        ctypes = import_helper.import_module("ctypes")
        self.check_thread_end(self.MAKE_100 + """
        import ctypes
        libc = ctypes.CDLL(None)
        START = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
        start = START(make)
        thread = ctypes.c_ulong()
        if libc.pthread_create(ctypes.byref(thread), None, start, None):
            raise OSError("pthread_create failed")
        os.read(0, 1)
        """)

    def test_release_thread(self):
        # A thread of an embedding program gives up the GIL with
        # PyEval_ReleaseThread() and waits: the 100 names it made in a
        # burst are in the file while it waits.
        import_helper.import_module("_testcapi")
        script = self.write_script("""
            import os, _testcapi
            os.write(1, b"%d\\n" % os.getpid())
            for i in range(100):
                exec(f"def released{i}(): return 1\\nreleased{i}()", {})
            _testcapi.release_thread_until_read(1, 0)
        """)
        for backend in BACKENDS:
            with self.subTest(backend=backend), \
                 self.running(script, backend) as (proc, pid):
                self.assertEqual(proc.stdout.read(1), b"r")
                missing = [i for i in range(100)
                           if not self.written(pid, backend,
                                               f"py::released{i}:<string>")]
                proc.stdin.write(b"x")
                proc.stdin.flush()
                self.assertEqual(proc.wait(support.SHORT_TIMEOUT), 0)
                self.assertEqual(missing, [])

    def test_os_exit(self):
        # A forked worker's way out writes what is held.
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script("""
                    import os
                    def last():
                        return 1
                    last()
                    os._exit(0)
                """, flags=("-X", backend))
                names = [n for _, _, n in self.described_entries(pid,
                                                                 backend)]
                self.assertIn(f"py::last:{script}", names)

    def test_write_failure_said_once_when_it_happens(self):
        # 300 new functions in a burst, then a file size limit that lets
        # nothing more be written, then the thread sleeps (which writes
        # what is held, and fails) and then runs Python code without
        # making new functions: one warning, at once, that says how many
        # names are not in the file.
        import_helper.import_module("resource")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script("""
                    import io, json, resource, signal, sys, time
                    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                    ns = {}
                    exec("\\n".join(f"def f{i}(): return {i}"
                                     for i in range(300)), ns)
                    functions = [ns[f"f{i}"] for i in range(300)]
                    captured = sys.stderr = io.StringIO()
                    for f in functions:
                        f()
                    # No call that releases the GIL before the limit:
                    # that would write what is held.
                    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
                    resource.setrlimit(resource.RLIMIT_FSIZE, (1, hard))
                    time.sleep(0.001)
                    deadline = time.monotonic() + 10
                    while ("Warning" not in captured.getvalue()
                           and time.monotonic() < deadline):
                        pass
                    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
                    def later():
                        return 1
                    later()
                    sys.stderr = sys.__stderr__
                    print(json.dumps(captured.getvalue()))
                """, flags=("-X", backend))
                warnings = self.last_json(out).splitlines()
                in_file = sum(self.written(pid, backend, f"py::f{i}:<string>")
                              for i in range(300))
                if in_file == 300:
                    self.skipTest("every name was written before the limit")
                self.assertEqual(len(warnings), 1, warnings)
                self.assertIn(
                    f"; the names of {300 - in_file} functions are not in "
                    f"it, and Python functions started from now on will not "
                    f"appear in native profiles", warnings[0])

    def test_new_functions_written_together(self):
        # 2,000 new functions run one after the other, with no other
        # reason to write: far fewer writes than functions, and every name
        # there.  What is held depends on time (Python/perf_description_
        # file.c): a description that comes 1 ms or more after the one
        # before starts a new burst, whose first 7 are written at once, and
        # what is held is written once 10 ms old (by a clock of 4 ms
        # steps) or 256 KiB long.  On a loaded machine, or under
        # emulation, the program is descheduled or slow now and then; so
        # the bound is computed from its own clock, and is the same
        # whatever the load.
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script("""
                    import json, time, _testinternalcapi
                    ns = {}
                    exec("\\n".join(f"def f{i}(): return {i}"
                                    for i in range(2000)), ns)
                    functions = [ns[f"f{i}"] for i in range(2000)]
                    before = _testinternalcapi.get_perf_trampoline_stats()
                    stamps = []
                    for f in functions:
                        stamps.append(time.monotonic_ns())
                        f()
                    stamps.append(time.monotonic_ns())
                    after = _testinternalcapi.get_perf_trampoline_stats()
                    print(json.dumps([before, after, stamps]))
                """, flags=("-X", backend))
                before, after, stamps = self.last_json(out)
                self.assertGreaterEqual(
                    after["trampolines"] - before["trampolines"], 2000)
                writes = after["writes"] - before["writes"]
                written = after["written_bytes"] - before["written_bytes"]
                # The description of f{i} is made between stamps[i] and
                # stamps[i + 1], so two in a row are at most
                # stamps[i + 2] - stamps[i] apart.
                breaks = sum(stamps[i + 2] - stamps[i] >= 1_000_000
                             for i in range(len(stamps) - 2))
                elapsed = stamps[-1] - stamps[0]
                bound = (7 * (breaks + 1) + elapsed // 6_000_000 + 1
                         + written // (256 * 1024) + 1 + 4)
                if bound >= 1000:
                    self.skipTest(f"too slow to make bursts here: {breaks} "
                                  f"gaps of 1 ms or more in {elapsed} ns")
                self.assertLessEqual(writes, bound,
                                     (breaks, elapsed, written))
                names = {n for _, _, n in self.described_entries(pid,
                                                                 backend)}
                self.assertGreaterEqual(
                    names, {f"py::f{i}:<string>" for i in range(2000)})

    def test_import_leaves_eval_breaker_alone(self):
        # An import holds what it describes, and its thread does not keep
        # the eval breaker set meanwhile: a loop in the import takes no
        # check of it, where it took one per iteration until the first
        # clock reading, at the 64th.
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script("""
                    import json, os, sys, _testinternalcapi
                    here = os.path.dirname(os.path.abspath(__file__))
                    with open(os.path.join(here, "loop_module.py"), "w") as f:
                        f.write("def g():\\n"
                                "    return 1\\n"
                                "g()\\n"
                                "import _testinternalcapi\\n"
                                "before = _testinternalcapi"
                                ".get_perf_trampoline_stats()\\n"
                                "for i in range(1000):\\n"
                                "    pass\\n"
                                "after = _testinternalcapi"
                                ".get_perf_trampoline_stats()\\n")
                    sys.path.insert(0, here)
                    import loop_module
                    print(json.dumps([loop_module.before,
                                      loop_module.after]))
                """, flags=("-X", backend))
                before, after = self.last_json(out)
                checks = (after["eval_breaker_checks"]
                          - before["eval_breaker_checks"])
                self.assertLess(checks, 64)


if __name__ == "__main__":
    unittest.main()

"""Turning the perf backend on and off: -X perf, PYTHONPERFSUPPORT, their
precedence, and sys.activate_stack_trampoline() at run time."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase, code_loads,
                                          parse_map, perf_map_path,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestEnabling(PerfTestCase):
    """-X perf, PYTHONPERFSUPPORT and their precedence."""

    CODE = textwrap.dedent("""
        import os, sys
        def probe():
            return 1
        probe()
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

    def check_child(self, flags, env_value, enabled):
        env = self.make_env(PYTHONPERFSUPPORT=env_value)
        pid, rc, out, err = self.run_python(*flags, "-c", self.CODE,
                                            env=env)
        self.assertEqual(err, "")
        child_pid, active = out.split()
        self.assertEqual(int(child_pid), pid)
        self.assertEqual(active, str(enabled))
        if enabled:
            text = self.assert_map_file(pid)
            self.assert_symbol_count(text, "py::probe:<string>", 1)
            self.assertIn("py::<module>:<string>", self.symbols(text))
        else:
            # Not even created.
            self.assertFalse(os.path.lexists(perf_map_path(pid)))

    def test_enabling(self):
        for flags, env_value, enabled in self.CASES:
            with self.subTest(flags=flags, PYTHONPERFSUPPORT=env_value):
                self.check_child(flags, env_value, enabled)

    def test_runtime_api_overrides_environment(self):
        code = textwrap.dedent("""
            import os, sys
            first = sys.is_stack_trampoline_active()
            sys.deactivate_stack_trampoline()
            def probe():
                return 1
            probe()
            print(os.getpid(), first, sys.is_stack_trampoline_active())
        """)
        for flags, env_value in [(("-X", "perf"), None), ((), "1")]:
            with self.subTest(flags=flags, PYTHONPERFSUPPORT=env_value):
                env = self.make_env(PYTHONPERFSUPPORT=env_value)
                pid, rc, out, err = self.run_python(*flags, "-c", code,
                                                    env=env)
                self.assertEqual(out.split(), [str(pid), "True", "False"])
                text = self.assert_map_file(pid)
                self.assert_not_described(text, "probe")

    def test_runtime_api_overrides_disabling_option(self):
        code = textwrap.dedent("""
            import os, sys
            first = sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")
            def probe():
                return 1
            probe()
            print(os.getpid(), first, sys.is_stack_trampoline_active())
        """)
        for flags, env_value in [(("-X", "perf=0"), "1"), (("-E",), "1"),
                                 ((), "0")]:
            with self.subTest(flags=flags, PYTHONPERFSUPPORT=env_value):
                env = self.make_env(PYTHONPERFSUPPORT=env_value)
                pid, rc, out, err = self.run_python(*flags, "-c", code,
                                                    env=env)
                self.assertEqual(out.split(), [str(pid), "False", "True"])
                text = self.assert_map_file(pid)
                self.assert_symbol_count(text, "py::probe:<string>", 1)

    def test_startup_code_is_described(self):
        # Activation at startup covers the code run while starting up and
        # the main script.
        pid, rc, out, err, script = self.run_script("""
            import os
            def probe():
                return 1
            probe()
            print(os.getpid())
        """, flags=("-X", "perf"))
        text = self.assert_map_file(pid)
        symbols = self.symbols(text)
        self.assertIn(f"py::<module>:{script}", symbols)
        self.assertIn(f"py::probe:{script}", symbols)
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

    def run_testembed(self, test):
        """Run a test of Programs/_testembed as test_embed does: from the
        build directory."""
        builddir = os.path.dirname(sys.executable)
        exe = os.path.join(builddir, "Programs", "_testembed")
        if not os.path.exists(exe):
            self.skipTest(f"{exe} does not exist")
        return self.run_python(test, executable=exe, cwd=builddir)

    def test_host_lines_written_before_python_started(self):
        # An embedding program's JIT compiler appended lines to the map and
        # closed it before Py_Initialize(): the line of code mapped in the
        # process is kept, the one of code that is not is dropped.
        pid, rc, out, err = self.run_testembed("test_perf_map_host_lines")
        self.assertEqual(out.split(), [str(pid)])
        names = [name for _, _, name in parse_map(self.read_map(pid))]
        self.assertEqual(names.count("host_jit_live"), 1, names)
        self.assertNotIn("host_jit_gone", names)
        self.assertEqual(names.count("py::probe:<string>"), 1)

    @unittest.skipUnless(shutil.which("setarch"), "needs setarch")
    def test_exec_without_address_randomization(self):
        # The program this process ran before an exec(), both without
        # address randomization (setarch -R, inherited across exec()), so
        # that the new image's mappings are where the old one's were: none
        # of the old image's lines is kept.
        after = self.write_script("""
            import os
            def after_exec():
                return 2
            after_exec()
            print(os.getpid())
        """, name="after_exec.py")
        script = self.write_script(f"""
            import os, sys
            def before_exec():
                return 1
            before_exec()
            os.execv(sys.executable, [sys.executable, "-X", "perf",
                                      {after!r}])
        """)
        pid, rc, out, err = self.run_python(
            "-R", sys.executable, "-X", "perf", script,
            executable=shutil.which("setarch"), expect_rc=None)
        if rc != 0 and "setarch" in err:
            self.skipTest(f"setarch -R cannot run here: {err}")
        self.assertEqual((rc, out.split()), (0, [str(pid)]), err)
        names = [name for _, _, name in parse_map(self.read_map(pid))]
        self.assertNotIn(f"py::before_exec:{script}", names)
        self.assertEqual(names.count(f"py::after_exec:{after}"), 1)

    def test_reinitialization_reads_its_own_configuration(self):
        # An embedding application that finalizes, unsets
        # PYTHONPERFSUPPORT and initializes again gets an interpreter
        # without trampolines.
        pid, rc, out, err = self.run_testembed("test_perf_trampoline_reinit")
        lines = out.split()
        self.assertEqual(lines[1::2], ["True", "False"], out)
        self.assertEqual(lines[0], lines[2])
        self.assertEqual(lines[0], str(pid))


class TestChildren(PerfTestCase):
    """-X perf, -X perf_jit and -X perf=0 reach the Python children that
    multiprocessing starts with its spawn and forkserver methods."""

    SCRIPT = """
        import json, multiprocessing, os, sys

        def probe(_):
            return os.getpid(), sys.is_stack_trampoline_active()

        if __name__ == "__main__":
            ctx = multiprocessing.get_context(sys.argv[1])
            with ctx.Pool(1) as pool:
                pid, active = pool.map(probe, [0])[0]
            # The helpers that multiprocessing started with the same
            # options: their files are left to the test to remove.
            from multiprocessing import forkserver, resource_tracker
            helpers = [forkserver._forkserver._forkserver_pid,
                       resource_tracker._resource_tracker._pid]
            print(json.dumps([pid, active, sys.is_stack_trampoline_active(),
                              [p for p in helpers if p is not None]]))
    """

    def check(self, method, flags, env, active):
        support.skip_if_broken_multiprocessing_synchronize()
        pid, rc, out, err, script = self.run_script(
            self.SCRIPT, method, flags=flags, env=env)
        worker, worker_active, parent_active, helpers = self.last_json(out)
        for child in (worker, *helpers):
            self.forget_files(child)
        self.assertNotEqual(worker, pid)
        self.assertEqual((parent_active, worker_active), (active, active))

    def test_start_methods(self):
        for method in ("spawn", "forkserver"):
            for flags, env, active in (
                    (("-X", "perf"), None, True),
                    (("-X", "perf_jit"), None, True),
                    (("-X", "perf=0"),
                     self.make_env(PYTHONPERFSUPPORT="1"), False)):
                with self.subTest(method=method, flags=flags):
                    self.check(method, flags, env, active)


class TestRuntimeActivation(PerfTestCase):
    """sys.activate_stack_trampoline() and
    sys.deactivate_stack_trampoline() while the program runs."""

    def test_activate_deactivate(self):
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys
            res = {}
            res["initial"] = sys.is_stack_trampoline_active()
            sys.deactivate_stack_trampoline()      # no-op when inactive
            res["after_noop_deactivate"] = sys.is_stack_trampoline_active()

            def before_activation():
                return 1
            before_activation()

            sys.activate_stack_trampoline("perf")
            res["activated"] = sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")  # no-op when active
            res["activated_twice"] = sys.is_stack_trampoline_active()

            def while_active():
                return 2
            for _ in range(3):
                while_active()

            sys.deactivate_stack_trampoline()
            res["deactivated"] = sys.is_stack_trampoline_active()
            sys.deactivate_stack_trampoline()
            res["deactivated_twice"] = sys.is_stack_trampoline_active()

            def after_deactivation():
                return 3
            after_deactivation()

            sys.activate_stack_trampoline("perf")
            res["reactivated"] = sys.is_stack_trampoline_active()
            while_active()     # already has a trampoline
            def active_again():
                return 4
            active_again()
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
        self.assert_not_described(text, "before_activation")
        self.assert_not_described(text, "after_deactivation")
        self.assert_symbol_count(text, f"py::while_active:{script}", 1)
        self.assert_symbol_count(text, f"py::active_again:{script}", 1)
        # The module frame started before activation.
        self.assertNotIn(f"py::<module>:{script}", self.symbols(text))
        self.assert_no_overlap(parse_map(text))

    def test_activation_inside_running_frames(self):
        # Frames started before activation or still running after
        # deactivation return normally, also with exceptions.
        pid, rc, out, err, script = self.run_script("""
            import json, os, sys

            def leaf(x):
                return x + 1

            def activating():
                sys.activate_stack_trampoline("perf")
                return leaf(1)

            def outer():
                # Started without a trampoline, calls through one.
                return activating() + leaf(10)

            def deactivating_inner():
                sys.deactivate_stack_trampoline()
                return "inner"

            def deactivating_outer():
                # Started through a trampoline, returns after deactivation.
                return deactivating_inner() + "+outer"

            def raising_inner():
                sys.deactivate_stack_trampoline()
                raise ValueError("raised after deactivation")

            def raising_middle():
                return raising_inner()

            def raising_outer():
                try:
                    raising_middle()
                except ValueError as exc:
                    return (str(exc), exc.__traceback__.tb_next.tb_frame
                            .f_code.co_name)

            res = {}
            res["outer"] = outer()
            res["deactivating"] = deactivating_outer()
            res["active1"] = sys.is_stack_trampoline_active()
            sys.activate_stack_trampoline("perf")
            res["raising"] = raising_outer()
            res["active2"] = sys.is_stack_trampoline_active()
            res["leaf"] = leaf(100)
            print(json.dumps(res))
            print(os.getpid())
        """)
        lines = out.splitlines()
        res = json.loads(lines[0])
        self.assertEqual(res, {
            "outer": 13, "deactivating": "inner+outer", "active1": False,
            "raising": ["raised after deactivation", "raising_middle"],
            "active2": False, "leaf": 101,
        })
        text = self.assert_map_file(pid)
        for name, count in [("leaf", 1), ("deactivating_outer", 1),
                            ("deactivating_inner", 1), ("raising_outer", 1),
                            ("raising_middle", 1), ("raising_inner", 1),
                            ("outer", 0), ("activating", 0)]:
            self.assert_symbol_count(text, f"py::{name}:{script}", count)
        self.assert_not_described(text, "outer")
        self.assert_not_described(text, "activating")

    def test_many_cycles(self):
        pid, rc, out, err, script = self.run_script("""
            import os, sys

            def make(i):
                ns = {}
                exec(f"def cycle_{i}(x):\\n    return x + {i}\\n", ns)
                return ns[f"cycle_{i}"]

            def shared(x):
                return -x

            funcs = [make(i) for i in range(1000)]
            total = 0
            for i, func in enumerate(funcs):
                sys.activate_stack_trampoline("perf")
                assert sys.is_stack_trampoline_active()
                total += func(0) + shared(i)
                sys.deactivate_stack_trampoline()
                assert not sys.is_stack_trampoline_active()
                total += shared(i)
            print(os.getpid(), total)
        """)
        self.assertEqual(err, "")
        self.assertEqual(out.split(), [str(pid), str(sum(range(1000)) -
                                                     2 * sum(range(1000)))])
        text = self.assert_map_file(pid)
        symbols = self.symbols(text)
        for i in range(1000):
            self.assertEqual(symbols.count(f"py::cycle_{i}:<string>"), 1, i)
        self.assertEqual(symbols.count(f"py::shared:{script}"), 1)
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
            def before_limit():
                return 0
            before_limit()
            size = os.path.getsize(path)
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
            total = 0
            for i in range(20):
                ns = {}
                exec(f"def limited_{i}():\\n    return {i}\\n", ns)
                total += ns[f"limited_{i}"]()
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            print(os.getpid(), total)
        """)
        self.assertEqual(out.split(), [str(pid), str(sum(range(20)))])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::before_limit:{script}", 1)

    # Whether a map found at the path is stale is decided by who wrote it
    # (this process image, or a descriptor of the process), never by file
    # times: the tests below set times that a clock-based rule gets wrong.

    def test_map_open_in_the_process_is_appended_to(self):
        # A JIT compiler of the program keeps its map open and writes it
        # (V8's --perf-basic-prof, LuaJIT): its lines are kept, however
        # old the file looks.
        pid, rc, out, err, script = self.run_script("""
            import os, sys
            path = f"/tmp/perf-{os.getpid()}.map"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b"1000 10 py::earlier:earlier.py\\n")
            os.utime(path, (0, 1_000_000_000))
            sys.activate_stack_trampoline("perf")
            def probe():
                return 1
            probe()
            sys.deactivate_stack_trampoline()
            os.close(fd)
            print(os.getpid())
        """)
        self.assertEqual(out.split(), [str(pid)])
        text = self.assert_map_file(pid)
        self.assertTrue(text.startswith("1000 10 py::earlier:earlier.py\n"))
        self.assert_symbol_count(text, "py::earlier:earlier.py", 1)
        self.assert_symbol_count(text, f"py::probe:{script}", 1)

    def test_dump_open_in_the_process_is_appended_to(self):
        # The same for the dump: a JIT compiler of the program that keeps
        # the dump open keeps its header and records.
        pid, rc, out, err, script = self.run_script("""
            import os, struct, sys
            path = f"/tmp/jit-{os.getpid()}.dump"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, struct.pack("<IIIIIIQQ", 0x4A695444, 1, 40, 62, 0,
                                     os.getpid(), 12345, 0))
            sys.activate_stack_trampoline("perf_jit")
            def probe():
                return 1
            probe()
            sys.deactivate_stack_trampoline()
            os.close(fd)
            print(os.getpid())
        """)
        self.assertEqual(out.split(), [str(pid)])
        header, records = self.read_dump(pid)
        self.assertEqual(header["timestamp"], 12345)
        names = [load["name"] for load in code_loads(records)]
        self.assertEqual(names.count(f"py::probe:{script}"), 1)

    @unittest.skipUnless(shutil.which("unshare") and os.geteuid() == 0,
                         "needs unshare and root")
    def test_two_live_writers_of_one_file(self):
        # Two containers (PID and mount namespaces of their own, both main
        # processes PID 1) that share /tmp, as a pod's containers may: the
        # first writer's map is never emptied nor appended to by the
        # second, which runs without trampolines after one warning.
        shared = tempfile.mkdtemp(dir="/var/tmp")
        self.addCleanup(shutil.rmtree, shared)
        here = tempfile.mkdtemp(dir="/var/tmp")
        self.addCleanup(shutil.rmtree, here)
        script = os.path.join(here, "service.py")
        stop = os.path.join(here, "stop")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""
                import os, sys, time
                name = sys.argv[1]
                exec(f"def writer_{name}():\\n    return 1\\n"
                     f"writer_{name}()")
                print("ready", sys.is_stack_trampoline_active(), flush=True)
                while not os.path.exists(sys.argv[2]):
                    time.sleep(0.01)
            """))
        # An interpreter under /tmp (a checkout there) stays visible: the
        # directory it is in is mounted into the shared /tmp first.
        keep = ""
        parts = os.path.realpath(sys.executable).split("/")
        if parts[1] == "tmp":
            os.mkdir(os.path.join(shared, parts[2]))
            keep = f'mount --rbind /tmp/{parts[2]} "$0/{parts[2]}" && '
        procs = []
        def start(name):
            proc = subprocess.Popen(
                ["unshare", "--pid", "--fork", "--kill-child", "--mount",
                 "--mount-proc", "sh", "-c",
                 keep + 'mount --rbind "$0" /tmp '
                        '&& exec "$1" -X perf "$2" "$3" "$4"',
                 shared, sys.executable, script, name, stop],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=self.make_env())
            procs.append(proc)
            return proc.stdout.readline()
        def lines():
            with open(os.path.join(shared, "perf-1.map")) as f:
                return [line.split()[2] for line in f]
        try:
            self.assertEqual(start("first"), "ready True\n")
            self.assertIn("py::writer_first:<string>", lines())
            self.assertEqual(start("second"), "ready False\n")
            self.assertIn("py::writer_first:<string>", lines())
            self.assertNotIn("py::writer_second:<string>", lines())
        finally:
            with open(stop, "w"):
                pass
            errors = [proc.communicate(timeout=support.SHORT_TIMEOUT)[1]
                      for proc in procs]
        self.assertEqual(errors[0], "")
        self.assertEqual(errors[1].count("another running process writes "
                                         "it"), 1, errors[1])
        self.assertIn("/tmp/perf-1.map", errors[1])

    def test_map_open_before_the_interpreter_started(self):
        # The same for a writer that opened the map before Py_Initialize():
        # here a shell that keeps it open on descriptor 7 and then becomes
        # the interpreter.
        script = self.write_script("""
            import os
            def probe():
                return 1
            probe()
            print(os.getpid())
        """)
        pid, rc, out, err = self.run_python(
            "-c", "import os, sys; os.execv('/bin/sh', ['sh', '-c', "
            "'umask 077 && exec 7>>/tmp/perf-$$.map "
            "&& echo 1000 10 py::host:jit >&7 "
            "&& exec \"$0\" -X perf \"$1\"', sys.executable, sys.argv[1]])",
            script)
        self.assertEqual(out.split(), [str(pid)])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, "py::host:jit", 1)
        self.assert_symbol_count(text, f"py::probe:{script}", 1)

    def test_recreated_file_stays_the_process_s(self):
        # A cleanup job removes the file while the program runs; the next
        # description creates it again.  It is this process's file: a
        # later activation appends to it, as to the file it replaced.
        # (The removed file is kept open meanwhile, so that the new one
        # gets another inode on any file system.)
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script("""
                    import os, sys
                    backend = sys.argv[1]
                    path = (f"/tmp/perf-{os.getpid()}.map" if backend == "perf"
                            else f"/tmp/jit-{os.getpid()}.dump")
                    sys.activate_stack_trampoline(backend)
                    def before_removal():
                        return 1
                    before_removal()
                    old = os.open(path, os.O_RDONLY)
                    os.unlink(path)
                    def after_removal():
                        return 2
                    after_removal()
                    sys.deactivate_stack_trampoline()
                    sys.activate_stack_trampoline(backend)
                    def after_reactivation():
                        return 3
                    after_reactivation()
                    sys.deactivate_stack_trampoline()
                    os.close(old)
                    print(os.getpid())
                """, backend, flags=())
                names = [n for _, _, n in self.described_entries(pid,
                                                                 backend)]
                self.assertNotIn(f"py::before_removal:{script}", names)
                self.assertEqual(names.count(f"py::after_removal:{script}"),
                                 1, names)
                self.assertEqual(
                    names.count(f"py::after_reactivation:{script}"), 1)

    def test_stale_map_is_replaced(self):
        # A map that no one in the process wrote or has open was left by an
        # earlier process with the same PID: its addresses now hold other
        # code, so activation empties it, whatever its time (here later
        # than the process's start).
        for mtime in 1_000_000_000, time.time() + 3600:
            with self.subTest(mtime=mtime):
                pid, rc, out, err, script = self.run_script(f"""
                    import os, sys
                    path = f"/tmp/perf-{{os.getpid()}}.map"
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                 0o600)
                    os.write(fd, b"1000 10 py::stale:stale.py\\n")
                    os.close(fd)
                    os.utime(path, ({mtime}, {mtime}))
                    sys.activate_stack_trampoline("perf")
                    def probe():
                        return 1
                    probe()
                    print(os.getpid())
                """)
                self.assertEqual(out.split(), [str(pid)])
                text = self.assert_map_file(pid)
                self.assertEqual(self.symbols(text), [f"py::probe:{script}"])

    def test_stale_map_not_read_without_host_code(self):
        # A stale map keeps only the lines of code mapped in the process,
        # in anonymous executable memory.  A process with none of it
        # (the usual case) empties the file without reading it: looking
        # each line of a 40,000-line map up in the process's mappings
        # once made start-up take half a second.  Bytes read, from
        # /proc/self/io, around the activation.
        pid, rc, out, err, script = self.run_script("""
            import os, sys
            def bytes_read():
                with open("/proc/self/io") as f:
                    for line in f:
                        if line.startswith("rchar:"):
                            return int(line.split()[1])
            path = f"/tmp/perf-{os.getpid()}.map"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            line = b"7f0000001000 10 py::stale:stale.py\\n"
            os.write(fd, line * (4 * 1024 * 1024 // len(line)))
            os.close(fd)
            def anonymous_code():
                with open("/proc/self/maps") as f:
                    for line in f:
                        fields = line.split()
                        if (fields[1][2] == "x" and fields[4] == "0"
                            and (len(fields) == 5
                                 or fields[5].startswith("[anon:"))):
                            return 1
                return 0
            host_code = anonymous_code()
            before = bytes_read()
            sys.activate_stack_trampoline("perf")
            after = bytes_read()
            def probe():
                return 1
            probe()
            print(os.getpid(), after - before, host_code)
        """)
        child, read, host_code = out.split()
        self.assertEqual(int(child), pid)
        if int(host_code):
            # Under qemu-user, say.
            self.skipTest("the process has anonymous executable memory")
        self.assertLess(int(read), 1024 * 1024)
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, "py::stale:stale.py", 0)
        self.assert_symbol_count(text, f"py::probe:{script}", 1)

    def test_own_map_kept_across_activations(self):
        # What this interpreter wrote stays when it activates again, even
        # if the file's time went back (as after a clock step).
        pid, rc, out, err, script = self.run_script("""
            import os, sys
            path = f"/tmp/perf-{os.getpid()}.map"
            sys.activate_stack_trampoline("perf")
            def first():
                return 1
            first()
            sys.deactivate_stack_trampoline()
            os.utime(path, (1_000_000_000, 1_000_000_000))
            sys.activate_stack_trampoline("perf")
            def second():
                return 2
            second()
            print(os.getpid())
        """)
        self.assertEqual(out.split(), [str(pid)])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::first:{script}", 1)
        self.assert_symbol_count(text, f"py::second:{script}", 1)

    EXEC_SCRIPT = """
        import os, sys
        if len(sys.argv) == 1:
            def before_exec():
                return 1
            before_exec()
            # A time that a clock-based rule would take for the new
            # program's own.
            path = f"/tmp/perf-{os.getpid()}.map"
            os.utime(path, (time.time() + 3600,) * 2)
            sys.stdout.flush()
            os.execv(sys.executable,
                     [sys.executable, "-X", "perf", __file__, "again"])
        def after_exec():
            return 2
        after_exec()
        print(os.getpid())
    """

    def check_exec_replaces_map(self, *prefix):
        # After exec() the process keeps its PID, but the addresses its
        # earlier program described hold other code (with ASLR off, the
        # same addresses as the new program's).
        script = self.write_script("import time\n"
                                   + textwrap.dedent(self.EXEC_SCRIPT))
        pid, rc, out, err = self.run_python(
            "-c", "import os, sys; os.execvp(sys.argv[1], sys.argv[1:])",
            *prefix, sys.executable, "-X", "perf", script)
        self.assertEqual(out.split(), [str(pid)])
        text = self.assert_map_file(pid)
        self.assert_not_described(text, "before_exec")
        self.assert_symbol_count(text, f"py::after_exec:{script}", 1)

    def test_exec_replaces_map(self):
        self.check_exec_replaces_map()

    @unittest.skipUnless(shutil.which("setarch"), "needs setarch")
    def test_exec_replaces_map_without_aslr(self):
        self.check_exec_replaces_map("setarch", "-R")

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
            def live_probe():
                return 1
            live_probe()
            print(os.getpid(), flush=True)
            sys.stdin.readline()
            def late_probe():
                return 2
            late_probe()
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
        self.assert_symbol_count(text, f"py::live_probe:{script}", 1)
        self.assert_not_described(text, "late_probe")
        text = self.assert_map_file(proc.pid)
        self.assert_symbol_count(text, f"py::late_probe:{script}", 1)


if __name__ == "__main__":
    unittest.main()

"""The description file while the program imports: what the import makes
is held, with no descriptor open, and written when the import is done, or
once it has waited 100 ms, when the thread next releases the GIL."""

import json
import os
import textwrap
import unittest

from test import support
from test.test_perf_profiler.util import (PerfTestCase, code_loads,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestImports(PerfTestCase):
    """While the program imports, descriptions are held; they are written
    when the outermost import is done, or once they have waited long
    enough."""

    # The main script: writes the module source given as argv[1] to
    # imported_module.py next to itself, activates the backend named by
    # argv[2] and imports the module.  The script is in a new directory,
    # first on sys.path; run_import() checks that this file is the one
    # imported.
    MAIN = """
        import json, os, sys

        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "imported_module.py"), "w") as f:
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

        import imported_module
        result = dict(vars(imported_module).get("result", {}))
        result["module"] = imported_module.__file__
        result["after"] = description_fds()
        if hasattr(imported_module, "after_import"):
            result.update(imported_module.after_import())
        result["pid"] = os.getpid()
        print(json.dumps(result))
    """

    def run_import(self, module, backend="perf"):
        pid, rc, out, err, script = self.run_script(
            self.MAIN, textwrap.dedent(module), backend)
        if backend == "perf_jit":
            self.forget_dump(pid)
        self.assertEqual(err, "")
        res = self.last_json(out)
        self.assertEqual(res["pid"], pid)
        self.assertEqual(res["module"],
                         os.path.join(os.path.dirname(script),
                                      "imported_module.py"))
        return pid, res

    def check_written_when_import_ends(self, backend):
        pid, res = self.run_import("""
            import __main__
            def in_import():
                return 1
            in_import()
            result = {"during": __main__.description_fds()}
        """, backend)
        # Held while the module is imported (whether it is written before
        # the import ends depends on time), with no descriptor open; in
        # the file once the import is done.
        self.assertEqual(res["during"], [])
        self.assertEqual(res["after"], [])
        return pid, res

    def test_map_written_when_import_ends(self):
        pid, res = self.check_written_when_import_ends("perf")
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::in_import:{res['module']}", 1)

    def test_dump_written_when_import_ends(self):
        pid, res = self.check_written_when_import_ends("perf_jit")
        _, records = self.read_dump(pid)
        names = [f["name"] for f in code_loads(records)]
        self.assertEqual(names.count(f"py::in_import:{res['module']}"), 1)

    # A service that runs in an import and never ends it: it sleeps between
    # rounds of work (as servers wait for requests), and ends without
    # finishing the import (as a killed process does).  Each round, the
    # thread given as argv[3] ("main" or "other") looks for its function's
    # name in the file; the run ends when it is there, or after 30 s.
    SERVICE = """
        import __main__, os, sys, threading, time

        def serve():
            return 1

        def look(name):
            for _ in range(600):
                serve()
                time.sleep(0.05)
                with open(__main__.path, "rb") as f:
                    if name in f.read():
                        return "written"
            return "missing"

        if sys.argv[3] == "main":
            found = look(b"py::serve:")
        else:
            # Another thread, while this one imports.
            results = []
            def other():
                def in_other_thread():
                    return 2
                in_other_thread()
                results.append(look(b"py::other.<locals>.in_other_thread:"))
            worker = threading.Thread(target=other)
            worker.start()
            worker.join()
            found = results[0]
        print(found, flush=True)
        os._exit(0)
    """

    def test_service_loop_in_import(self):
        for backend in "perf", "perf_jit":
            for thread in "main", "other":
                with self.subTest(backend=backend, thread=thread):
                    pid, rc, out, err, script = self.run_script(
                        self.MAIN, textwrap.dedent(self.SERVICE), backend,
                        thread)
                    if backend == "perf_jit":
                        self.forget_dump(pid)
                    self.assertEqual((out, err), ("written\n", ""))

    # A module that runs first(), then closes every descriptor above 2 (as
    # daemons do) and opens a file of its own ("own") under the lowest
    # number.
    CLOSE_AND_REUSE = """
        import __main__, os
        def first():
            return 1
        first()
        os.closerange(3, 1024)
        own = os.path.join(__main__.here, "own.txt")
        fd = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    """

    def run_close_and_reuse(self, rest):
        return self.run_import(textwrap.dedent(self.CLOSE_AND_REUSE)
                               + textwrap.dedent(rest))

    def test_program_closes_descriptors(self):
        # The program's file is never written to or closed.
        pid, res = self.run_close_and_reuse("""
            def second():
                return 2
            second()
            os.write(fd, b"own data")
            os.close(fd)
            with open(own, "rb") as f:
                result = {"own": f.read().decode()}
        """)
        self.assertEqual(res["own"], "own data")
        self.assertEqual(res["after"], [])
        text = self.assert_map_file(pid)
        for name in ("first", "second"):
            self.assert_symbol_count(text, f"py::{name}:{res['module']}", 1)

    def test_program_closes_descriptors_before_import_ends(self):
        # The same, with no function run for the first time after the
        # descriptors are closed: the program's file stays open across the
        # end of the import.
        pid, res = self.run_close_and_reuse("""
            def after_import():
                os.write(fd, b"own data")
                os.close(fd)
                with open(own, "rb") as f:
                    return {"own": f.read().decode()}
        """)
        self.assertEqual(res["own"], "own data")
        self.assertEqual(res["after"], [])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::first:{res['module']}", 1)

    def test_map_removed_during_import(self):
        pid, res = self.run_import("""
            import __main__, os
            def first():
                return 1
            first()
            os.unlink(__main__.path)
            def second():
                return 2
            second()
        """)
        # first() was written before the thread released the GIL to remove
        # the file, and went with it; the file is created again for
        # second().
        self.assertEqual(res["after"], [])
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::first:{res['module']}", 0)
        self.assert_symbol_count(text, f"py::second:{res['module']}", 1)

    @support.requires_fork()
    def test_fork_during_import(self):
        # The child names what it runs, inherited or not, in its own map;
        # the parent writes what it held when its import ends.
        module = """
            import __main__, os
            def before_fork():
                return 1
            before_fork()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    def child_only():
                        return 2
                    child_only()
                    before_fork()
                    # Nothing open on the parent's map.
                    code = 0 if not __main__.description_fds() else 2
                finally:
                    os._exit(code)
            _, status = os.waitpid(child, 0)
            def parent_after():
                return 3
            parent_after()
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
        mod = res["module"]
        parent_map = self.assert_map_file(pid)
        child_map = self.assert_map_file(res["child"])
        self.assert_symbol_count(parent_map, f"py::before_fork:{mod}", 1)
        self.assert_symbol_count(parent_map, f"py::parent_after:{mod}", 1)
        self.assert_not_described(parent_map, "child_only")
        self.assert_symbol_count(child_map, f"py::before_fork:{mod}", 1)
        self.assert_symbol_count(child_map, f"py::child_only:{mod}", 1)
        self.assert_not_described(child_map, "parent_after")


class TestDescriptorTable(PerfTestCase):
    """A process with the support has the descriptors it would have
    without it: programs list them, close them all, or pass an exact set
    to children (test_subprocess's close_fds and pass_fds tests run the
    child under the support of the test run)."""

    # Lists the descriptors open in this process after it described code
    # and imported a module; in a child it forked, after that described
    # code of its own; and in a child interpreter started with the -X
    # options given as argv[2] (and this environment), close_fds and one
    # descriptor passed.  argv[1] names a backend to activate, or "-".
    PROGRAM = """
        import json, os, subprocess, sys

        LIST = ("import json, os; print(json.dumps(sorted(int(n) for n in "
                "os.listdir('/proc/self/fd'))))")

        def fds():
            return sorted(int(n) for n in os.listdir("/proc/self/fd"))

        if sys.argv[1] != "-":
            sys.activate_stack_trampoline(sys.argv[1])
        def work():
            return sum(i for i in range(10))
        work()
        import json.tool
        before_fork = fds()
        pid = os.fork()
        if pid == 0:
            def in_child():
                return 1
            in_child()
            os._exit(0 if fds() == before_fork else 1)
        _, status = os.waitpid(pid, 0)
        r, w = os.pipe()
        child = subprocess.Popen([sys.executable, *json.loads(sys.argv[2]),
                                  "-c", LIST],
                                 close_fds=True, pass_fds=(w,),
                                 stdout=subprocess.PIPE)
        out, _ = child.communicate()
        print(json.dumps({"parent": before_fork,
                          "fork_status": status,
                          "child": json.loads(out), "passed": w,
                          "pids": [pid, child.pid]}))
    """

    def run_program(self, flags, env, backend="-"):
        pid, rc, out, err, _ = self.run_script(
            self.PROGRAM, backend, json.dumps(flags), flags=flags, env=env)
        res = self.last_json(out)
        for child in res.pop("pids"):
            self.forget_files(child)
        self.assertEqual(err, "")
        self.assertEqual(res.pop("fork_status"), 0)
        self.assertIn(res["passed"], res["child"])
        return res

    def test_same_descriptors_as_without(self):
        plain = self.run_program([], self.make_env())
        for name, flags, env, backend in (
                ("-X perf", ["-X", "perf"], self.make_env(), "-"),
                ("-X perf_jit", ["-X", "perf_jit"], self.make_env(), "-"),
                ("PYTHONPERFSUPPORT=1", [],
                 self.make_env(PYTHONPERFSUPPORT="1"), "-"),
                ("sys perf", [], self.make_env(), "perf"),
                ("sys perf_jit", [], self.make_env(), "perf_jit")):
            with self.subTest(name):
                self.assertEqual(self.run_program(flags, env, backend),
                                 plain)


if __name__ == "__main__":
    unittest.main()

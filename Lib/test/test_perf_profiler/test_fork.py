"""fork() and multiprocessing: every process describes its code in a file
of its own."""

import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import unittest

from test import support
from test.support import import_helper
from test.support import os_helper
from test.test_perf_profiler.util import (PerfTestCase, code_loads,
                                          parse_map,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")
if not support.has_fork_support:
    raise unittest.SkipTest("requires working os.fork()")


class TestFork(PerfTestCase):

    def run_forking(self, script, *flags):
        """Run script, which forks one child and prints [child pid, child
        exit code] last; return (pid, child, exit code, stderr)."""
        def run():
            pid, rc, out, err = self.run_python(*flags, script)
            child, exitcode = self.last_json(out)
            self.check_fresh(child)
            return pid, child, exitcode, err
        return self.retrying(run)

    def assert_no_address_named_twice(self, *texts):
        names = {}
        for text in texts:
            for addr, size, symbol in parse_map(text):
                names.setdefault(addr, set()).add(symbol)
        twice = {hex(addr): sorted(symbols)
                 for addr, symbols in names.items() if len(symbols) > 1}
        self.assertEqual(twice, {})

    def test_fork_child_map(self):
        script = self.write_script("""
            import json, os, sys

            def parent_before():
                return 1
            parent_before()

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
                    def child_only():
                        return 2
                    child_only()
                    parent_before()
                    os.write(to_parent_w, b"x")
                    # Wait until the parent ran parent_after().
                    os.read(to_child_r, 1)
                    def child_late():
                        return 3
                    child_late()
                    code = 0 if sys.is_stack_trampoline_active() else 3
                finally:
                    os._exit(code)

            os.close(to_child_r)
            os.close(to_parent_w)
            os.read(to_parent_r, 1)
            def parent_after():
                return 4
            parent_after()
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

        before = f"py::parent_before:{script}"
        self.assertIn(before, snapshot)
        # The child's map starts with what the parent had written.
        self.assertTrue(child_map.startswith(snapshot))
        self.assertTrue(parent_map.startswith(snapshot))
        self.assert_symbol_count(child_map, before, 1)
        self.assert_symbol_count(child_map, f"py::child_only:{script}", 1)
        self.assert_symbol_count(child_map, f"py::child_late:{script}", 1)
        self.assert_not_described(child_map, "parent_after")

        self.assert_symbol_count(parent_map, before, 1)
        self.assert_symbol_count(parent_map, f"py::parent_after:{script}", 1)
        self.assert_not_described(parent_map, "child_only")
        self.assert_not_described(parent_map, "child_late")
        self.assert_no_overlap(parse_map(child_map))

    def test_fork_during_startup(self):
        # sitecustomize forks while the interpreter starts up, when the
        # descriptions made so far are still held in memory: each process
        # writes them to its own file, once.
        site_dir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, site_dir)
        with open(os.path.join(site_dir, "sitecustomize.py"), "w") as f:
            f.write(textwrap.dedent("""
                import atexit, os
                def site_probe():
                    return 1
                site_probe()
                _child = os.fork()
                if _child:
                    atexit.register(os.waitpid, _child, 0)
            """))
        code = textwrap.dedent("""
            import json, os
            def main_probe():
                return 2
            main_probe()
            # One write: the two processes share the pipe.
            os.write(1, (json.dumps([os.getpid(), os.getppid()])
                         + "\\n").encode())
        """)
        env = self.make_env(PYTHONPATH=site_dir)
        site_probe = ("py::site_probe:"
                      + os.path.join(site_dir, "sitecustomize.py"))
        main_probe = "py::main_probe:<string>"
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
                        self.forget_dump(p)
                        header, records = self.read_dump(p)
                        loads = code_loads(records)
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

            def gen0():
                return 0
            gen0()
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    os.close(r)
                    def gen1():
                        return 1
                    gen1()
                    grandchild = os.fork()
                    if grandchild == 0:
                        def gen2():
                            return 2
                        gen2()
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
                    text, f"py::gen{n}:{script}", count,
                    f"generation {generation}: gen{n}")
        # Each map begins with the lines of the one it was forked from.
        gen0_line = [line for line in maps[0].splitlines(keepends=True)
                     if f" py::gen0:{script}\n" in line][0]
        prefix0 = maps[0][:maps[0].index(gen0_line) + len(gen0_line)]
        self.assertTrue(maps[1].startswith(prefix0))
        gen1_line = [line for line in maps[1].splitlines(keepends=True)
                     if f" py::gen1:{script}\n" in line][0]
        prefix1 = maps[1][:maps[1].index(gen1_line) + len(gen1_line)]
        self.assertTrue(maps[2].startswith(prefix1))

    def test_fork_new_trampolines_in_own_mappings(self):
        # perf names addresses in a mapping a child inherited from the
        # parent's map, so a trampoline the child makes after the fork
        # must never lie where the parent may put one of its own.
        script = self.write_script("""
            import json, os

            def before_fork():
                return 0
            before_fork()
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                for i in range(50):
                    exec(f"def child_{i}():\\n    return {i}\\n"
                         f"child_{i}()")
                before_fork()
                os._exit(0)
            for i in range(50):
                exec(f"def parent_{i}():\\n    return {i}\\n"
                     f"parent_{i}()")
            _, status = os.waitpid(child, 0)
            print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
        """)

        parent, child, exitcode, err = self.run_forking(script, "-X", "perf")
        self.assertEqual(exitcode, 0)
        self.assert_no_address_named_twice(self.assert_map_file(parent),
                                           self.assert_map_file(child))
        child_names = self.symbols(self.read_map(child))
        self.assertIn("py::child_49:<string>", child_names)
        self.assertIn(f"py::before_fork:{script}", child_names)

    @unittest.skipUnless(shutil.which("strace"), "needs strace")
    def test_fork_map_copied_by_the_kernel(self):
        # The child's map starts with a copy of the parent's, which the
        # kernel makes (copy_file_range()): the child reads nothing of the
        # parent's map itself, however large that is.
        script = self.write_script("""
            import json, os

            def before_fork():
                return 0
            before_fork()
            child = os.fork()
            if child == 0:
                def in_child():
                    return 1
                in_child()
                os._exit(0)
            _, status = os.waitpid(child, 0)
            print(json.dumps([os.getpid(), child,
                              os.waitstatus_to_exitcode(status)]))
        """)
        log = os.path.join(tempfile.mkdtemp(), "strace.log")
        self.addCleanup(os_helper.rmtree, os.path.dirname(log))

        def run():
            _, _, out, err = self.run_python(
                "-f", "-qq", "-o", log,
                "-e", "trace=openat,close,read,pread64,readv,preadv,"
                      "mmap,copy_file_range,sendfile",
                sys.executable, "-X", "perf", script,
                executable=shutil.which("strace"))
            parent, child, exitcode = self.last_json(out)
            self.forget_map(parent)
            self.forget_map(child)
            self.check_fresh(child)
            return parent, child, exitcode

        parent, child, exitcode = self.retrying(run)
        self.assertEqual(exitcode, 0)
        self.assert_symbol_count(self.read_map(child),
                                 f"py::before_fork:{script}", 1)
        opened = re.escape(f'"/tmp/perf-{parent}.map"')
        fds, opens, copied, reads = set(), 0, 0, []
        with open(log) as f:
            for line in f:
                pid, call = line.split(None, 1)
                call = call.strip()
                if int(pid) != child:
                    continue
                m = re.match(rf"openat\(\w+, {opened}, .*\) = (\d+)$",
                             call)
                if m:
                    fds.add(int(m.group(1)))
                    opens += 1
                    continue
                m = re.match(r"close\((\d+)\)", call)
                if m:
                    fds.discard(int(m.group(1)))
                    continue
                m = re.match(r"mmap\([^,]*, [^,]*, [^,]*, [^,]*, (\d+),", call)
                if m and int(m.group(1)) in fds:
                    reads.append(call)
                    continue
                m = re.match(r"(\w+)\((\d+),.* = (-?\d+)", call)
                if m and int(m.group(2)) in fds:
                    if m.group(1) == "copy_file_range":
                        copied += max(0, int(m.group(3)))
                    else:
                        reads.append(call)
        self.assertGreater(opens, 0, "the child never opened the parent's map")
        self.assertGreater(copied, 0)
        self.assertEqual(reads, [])

    def test_fork_after_parent_map_removed(self):
        # The parent's map is gone when the child starts its own: the child
        # goes on without the copy, its own functions described.
        script = self.write_script("""
            import json, os

            def before_fork():
                return 0
            before_fork()
            os.unlink(f"/tmp/perf-{os.getpid()}.map")
            child = os.fork()
            if child == 0:
                def in_child():
                    return 1
                in_child()
                os._exit(0)
            _, status = os.waitpid(child, 0)
            print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
        """)

        parent, child, exitcode, err = self.run_forking(script, "-X", "perf")
        self.assertEqual(exitcode, 0)
        self.assertEqual(err, "")
        child_map = self.assert_map_file(child)
        self.assertEqual(self.symbols(child_map),
                         [f"py::in_child:{script}"])

    def test_fork_after_parent_write_failure(self):
        # The parent can no longer write its map (a directory took its
        # place); a child it forks writes a map of its own.
        script = self.write_script("""
            import json, os

            path = f"/tmp/perf-{os.getpid()}.map"
            os.unlink(path)
            os.mkdir(path)
            def fails_in_parent():
                return 0
            fails_in_parent()
            child = os.fork()
            if child == 0:
                def in_child():
                    return 1
                in_child()
                os._exit(0)
            _, status = os.waitpid(child, 0)
            os.rmdir(path)
            print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
        """)

        parent, child, exitcode, err = self.run_forking(script, "-X", "perf")
        self.assertEqual(exitcode, 0)
        self.assertEqual(err.count("Warning: cannot write to "
                                   f"/tmp/perf-{parent}.map"), 1, err)
        child_map = self.assert_map_file(child)
        self.assert_symbol_count(child_map, f"py::in_child:{script}", 1)

    def test_fork_without_after_fork_hooks(self):
        # fork() called directly (through ctypes) skips
        # PyOS_AfterFork_Child(): the child must still write its own map.
        script = self.write_script("""
            import ctypes, json, os

            libc = ctypes.CDLL(None, use_errno=True)
            def before_fork():
                return 0
            before_fork()
            child = libc.fork()
            if child == 0:
                def in_raw_child():
                    return 1
                in_raw_child()
                before_fork()
                os._exit(0)
            _, status = os.waitpid(child, 0)
            def in_parent():
                return 2
            in_parent()
            print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
        """)

        parent, child, exitcode, err = self.run_forking(script, "-X", "perf")
        self.assertEqual(exitcode, 0)
        parent_map = self.assert_map_file(parent)
        self.assert_not_described(parent_map, "in_raw_child")
        self.assert_symbol_count(parent_map, f"py::in_parent:{script}", 1)
        child_map = self.assert_map_file(child)
        self.assert_symbol_count(child_map, f"py::in_raw_child:{script}", 1)
        self.assert_symbol_count(child_map, f"py::before_fork:{script}", 1)
        # Its trampoline is in a mapping of the child's own.
        self.assert_no_address_named_twice(parent_map, child_map)

    def test_fork_when_inactive(self):
        script = self.write_script("""
            import json, os, sys

            sys.activate_stack_trampoline("perf")
            def parent_probe():
                return 1
            parent_probe()
            sys.deactivate_stack_trampoline()

            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    def inactive_child():
                        return 2
                    inactive_child()
                    active = sys.is_stack_trampoline_active()
                    # The child can start its own map.
                    sys.activate_stack_trampoline("perf")
                    def active_child():
                        return 3
                    active_child()
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
        # The child runs through the trampoline it inherited: its map
        # names it, at the parent's address.
        self.assert_symbol_count(child_map, f"py::parent_probe:{script}", 1)
        parent_entries = [e for e in parse_map(self.read_map(parent))
                          if e[2] == f"py::parent_probe:{script}"]
        self.assertIn(parent_entries[0], parse_map(child_map))
        self.assert_not_described(child_map, "inactive_child")
        self.assert_symbol_count(child_map, f"py::active_child:{script}", 1)

    def test_fork_after_reactivation(self):
        # The child's map starts with everything the parent described,
        # also before an earlier deactivation: the child can still run
        # those trampolines.
        script = self.write_script("""
            import json, os, sys

            sys.activate_stack_trampoline("perf")
            def first_phase():
                return 1
            first_phase()
            sys.deactivate_stack_trampoline()
            sys.activate_stack_trampoline("perf")
            def second_phase():
                return 2
            second_phase()
            with open(f"/tmp/perf-{os.getpid()}.map") as f:
                snapshot = f.read()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    first_phase()
                    second_phase()
                    def child_phase():
                        return 3
                    child_phase()
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
            self.assert_symbol_count(child_map, f"py::{name}:{script}", 1)
        self.assertIn(f"py::first_phase:{script}", snapshot)

    MP_SCRIPT = """
        import json, os, sys
        import multiprocessing
        import multiprocessing.forkserver
        import multiprocessing.resource_tracker

        def mp_work(queue, x):
            queue.put((os.getpid(), x * x, sys.is_stack_trampoline_active()))

        def main(method):
            ctx = multiprocessing.get_context(method)
            queue = ctx.Queue()
            procs = [ctx.Process(target=mp_work, args=(queue, i))
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
                        text, f"py::mp_work:{script}", 1)


if __name__ == "__main__":
    unittest.main()

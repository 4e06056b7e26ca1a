"""fork() and multiprocessing: every process describes its code in a file
of its own."""

import json
import os
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
            def parent_only():
                return 5
            parent_only()

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
        self.assertTrue(parent_map.startswith(snapshot))
        # The child names the trampolines it inherited as it runs them,
        # where they are, and only those: its map does not grow with the
        # parent's.
        self.assert_symbol_count(child_map, before, 1)
        parent_entries = [e for e in parse_map(parent_map) if e[2] == before]
        self.assertIn(parent_entries[0], parse_map(child_map))
        self.assert_not_described(child_map, "parent_only")
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
        # describes what it runs in its own file, once, the trampoline
        # the child inherited too.
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
                site_probe()
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
        # Each generation runs the functions of those before it and one of
        # its own; "unused" runs only in the first.
        script = self.write_script("""
            import json, os

            def gen0():
                return 0
            def unused():
                return -1
            gen0()
            unused()
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                code = 1
                try:
                    os.close(r)
                    gen0()
                    def gen1():
                        return 1
                    gen1()
                    grandchild = os.fork()
                    if grandchild == 0:
                        gen0()
                        gen1()
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
        addrs = {}
        for generation, text in enumerate(maps):
            for n in range(3):
                count = 1 if n <= generation else 0
                self.assert_symbol_count(
                    text, f"py::gen{n}:{script}", count,
                    f"generation {generation}: gen{n}")
            self.assert_symbol_count(text, f"py::unused:{script}",
                                     1 if generation == 0 else 0)
            for addr, size, name in parse_map(text):
                addrs.setdefault(name, set()).add(addr)
        # Inherited trampolines keep their addresses.
        for n in range(3):
            self.assertEqual(len(addrs[f"py::gen{n}:{script}"]), 1)

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

    def test_fork_child_file_independent_of_parent(self):
        # The parent described thousands of functions; a child that runs
        # one of them and one of its own describes those, and the frame
        # that forked: a fork costs the same however large the parent is.
        script = self.write_script("""
            import json, os

            ns = {}
            exec("\\n".join(f"def f{i}(): return {i}" for i in range(3000)),
                 ns)
            for i in range(3000):
                ns[f"f{i}"]()
            child = os.fork()
            if child == 0:
                def in_child():
                    return ns["f7"]()
                in_child()
                os._exit(0)
            _, status = os.waitpid(child, 0)
            print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
        """)
        expected = sorted([f"py::<module>:{script}", "py::f7:<string>",
                           f"py::in_child:{script}"])
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                parent, child, exitcode, err = self.run_forking(
                    script, "-X", backend)
                self.assertEqual(exitcode, 0)
                self.assertEqual(err, "")
                if backend == "perf":
                    parent_entries = parse_map(self.assert_map_file(parent))
                    entries = parse_map(self.assert_map_file(child))
                else:
                    for p in (parent, child):
                        self.forget_dump(p)
                    parent_entries = [
                        (f["code_addr"], f["code_size"], f["name"])
                        for f in code_loads(self.read_dump(parent)[1])]
                    header, records = self.read_dump(child)
                    self.assertEqual(header["pid"], child)
                    loads = code_loads(records)
                    self.assertEqual({f["pid"] for f in loads}, {child})
                    entries = [(f["code_addr"], f["code_size"], f["name"])
                               for f in loads]
                self.assertGreater(len(parent_entries), 3000)
                self.assertEqual(sorted(name for _, _, name in entries),
                                 expected)
                # The inherited ones where the parent has them.
                for entry in entries:
                    if entry[2] != f"py::in_child:{script}":
                        self.assertIn(entry, parent_entries)

    # Under AddressSanitizer, whose allocator pads every heap block, the
    # child's private memory with trampolines is over the bound (2.8 MB
    # more than without, perf; 4.0 MB, perf_jit; about 0.15 MB without
    # the sanitizer).
    @support.skip_if_sanitizer("memory is measured without the sanitizer's "
                               "allocator", address=True)
    def test_fork_does_not_copy_trampolines(self):
        # Arenas and debugger images never change once written: a child
        # shares them with its parent instead of getting a copy of their
        # page tables at the fork, which would make each fork cost in
        # proportion to the trampolines the parent made.  What a fork
        # copies is the private memory resident in the child.
        script = self.write_script("""
            import json, os

            def resident_kib():
                # [private, shared] kB resident.
                total, shared = [0, 0], False
                with open("/proc/self/smaps") as f:
                    for line in f:
                        fields = line.split()
                        if "-" in fields[0] and ":" not in fields[0]:
                            shared = fields[1].endswith("s")
                        elif fields[0] == "Rss:":
                            total[shared] += int(fields[1])
                return total

            def emulated():
                # Under qemu-user, smaps is the emulator's: it lists files
                # (the emulator's own) that the program's maps do not,
                # and memory that grows with every address translated.
                def files(name):
                    with open(name) as f:
                        return {fields[5] for fields in map(str.split, f)
                                if len(fields) == 6 and "-" in fields[0]}
                return bool(files("/proc/self/smaps")
                            - files("/proc/self/maps"))

            ns = {}
            exec("\\n".join(f"def f{i}(): return {i}" for i in range(40000)),
                 ns)
            for i in range(40000):
                ns[f"f{i}"]()
            resident_kib()              # not new code in the child
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                os.write(w, json.dumps(resident_kib()).encode())
                os._exit(0)
            os.close(w)
            in_child = json.loads(os.read(r, 100))
            _, status = os.waitpid(child, 0)
            print(json.dumps([child, os.waitstatus_to_exitcode(status),
                              resident_kib(), in_child, emulated()]))
        """)
        env = self.make_env(PYTHONHASHSEED="0")
        # The private heap's size depends on where ASLR puts it, by a
        # megabyte either way: each configuration runs three times, and
        # the backends' least is compared with the most without them.
        results = {}
        for name, flags in (("none", ()), ("perf", ("-X", "perf")),
                            ("perf_jit", ("-X", "perf_jit"))) * 3:
            pid, rc, out, err = self.run_python(*flags, script, env=env)
            child, exitcode, parent_kib, child_kib, emulated = (
                self.last_json(out))
            self.forget_files(child)
            self.assertEqual(exitcode, 0)
            if emulated:
                self.skipTest("the process's memory is an emulator's "
                              "(qemu-user): its translations of each "
                              "trampoline address are private memory")
            results.setdefault(name, []).append((sum(parent_kib),
                                                 child_kib[0]))
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                made = (min(p for p, c in results[backend])
                        - max(p for p, c in results["none"]))
                copied = (min(c for p, c in results[backend])
                          - max(c for p, c in results["none"]))
                # 40,000 trampolines: their arenas and images take 3 MiB
                # (perf) and 8 MiB (perf_jit), twice what a copy may be.
                self.assertGreaterEqual(made, 2048, results)
                # A few pages: the ones the child touched since the fork
                # (and the ASLR-dependent noise of a private heap).
                self.assertLessEqual(copied, 1024, results)

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
        # The frame that forked, then what the child ran.
        self.assertEqual(self.symbols(child_map),
                         [f"py::<module>:{script}",
                          f"py::in_child:{script}"])

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
                    parent_probe()
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
        # The child names the trampolines the parent made before an
        # earlier deactivation too, when it runs them.
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

    def check_children_leave_no_file(self, source, count):
        """Run source with each backend: it prints the PIDs of the count
        children it made, which exec'd interpreters run without the
        support (those write no file of their own)."""
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                # Files of earlier processes whose PIDs the children got
                # are not theirs.
                before = set(os.listdir("/tmp"))
                pid, rc, out, err, script = self.run_script(
                    source, flags=("-X", backend))
                children = self.last_json(out)
                self.assertEqual(len(children), count)
                for child in children:
                    self.forget_files(child)
                left = [name for child in children
                        for name in (f"perf-{child}.map", f"jit-{child}.dump")
                        if name not in before
                        and os.path.exists(os.path.join("/tmp", name))]
                self.assertEqual(left, [])

    def test_children_that_exec_leave_no_file(self):
        # A service that spawns programs: children that exec without
        # running Python code (subprocess with a preexec_fn that is a C
        # function, fork() then execv()) create no file and describe
        # nothing; each backend's files stay the parent's alone.
        self.check_children_leave_no_file("""
            import json, os, subprocess, sys
            def work():
                return 1
            work()
            children = []
            for _ in range(3):
                proc = subprocess.Popen([sys.executable, "-c", ""],
                                        preexec_fn=os.getpid, env={})
                proc.wait()
                children.append(proc.pid)
            child = os.fork()
            if child == 0:
                os.execv(sys.executable, [sys.executable, "-c", ""])
            os.waitpid(child, 0)
            children.append(child)
            print(json.dumps(children))
        """, 4)

    def test_preexec_fn_in_python_leaves_no_file(self):
        # A preexec_fn written in Python that calls a helper the parent
        # ran and one it never ran, then sets the child up: the child
        # execs after it, so it creates no file and describes nothing
        # (before: 3 of 3 children left their map, and their jitdump).
        self.check_children_leave_no_file("""
            import json, os, subprocess, sys
            def known():
                return os.getpid()
            def new_in_child():
                return os.umask(0o022)
            def setup():
                known()
                new_in_child()
                os.setpgid(0, 0)
            known()
            children = []
            for _ in range(3):
                proc = subprocess.Popen([sys.executable, "-c", ""],
                                        preexec_fn=setup, env={})
                proc.wait()
                children.append(proc.pid)
            print(json.dumps(children))
        """, 3)

    def test_child_running_its_inherited_frame(self):
        # A child that runs Python code in the frame it was forked from,
        # calling nothing, is started at its first loop iteration: its map
        # names that frame.
        script = self.write_script("""
            import json, os
            def forker():
                child = os.fork()
                if child == 0:
                    total = 0
                    for i in range(1000):
                        total += i
                    os._exit(0 if total else 1)
                return child
            child = forker()
            _, status = os.waitpid(child, 0)
            print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
        """)
        pid, child, exitcode, err = self.run_forking(script, "-X", "perf")
        self.assertEqual(exitcode, 0)
        child_map = self.assert_map_file(child)
        self.assert_symbol_count(child_map, f"py::forker:{script}", 1)


if __name__ == "__main__":
    unittest.main()

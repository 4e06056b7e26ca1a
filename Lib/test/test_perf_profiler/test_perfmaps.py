"""The perf map C API: PyUnstable_PerfMapState_Init(),
PyUnstable_WritePerfMapEntry(), PyUnstable_PerfMapState_Fini(),
PyUnstable_CopyPerfMapFile(), PyUnstable_PerfTrampoline_CompileCode() and
PyUnstable_PerfTrampoline_SetPersistAfterFork().

Each scenario runs in a child interpreter, which writes a perf map of its
own (/tmp/perf-PID.map)."""

import json
import os
import re
import stat
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase, OBSTACLE_HELPERS,
                                          parse_map, requires_perf_trampoline)

_testcapi = import_helper.import_module("_testcapi")

requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")

# Any entry: "ADDR SIZE NAME", NAME without control characters.
ENTRY_RE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ [^\x00-\x1f\x7f]+\n\Z")


class PerfMapTestCase(PerfTestCase):

    def run_capi(self, source, *flags, expect_rc=0):
        """Run source (with _testcapi imported) and return (pid, the JSON
        it prints last, stderr)."""
        pid, rc, out, err, script = self.run_script(
            "import _testcapi\n" + source, flags=flags, expect_rc=expect_rc)
        return pid, self.last_json(out), err

    def read_entries(self, pid):
        text = self.read_map(pid)
        self.assertIsNotNone(text, f"no map for {pid}")
        path = f"/tmp/perf-{pid}.map"
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)
        for line in text.splitlines(keepends=True):
            self.assertRegex(line, ENTRY_RE)
        return parse_map(text)


class TestWritePerfMapEntry(PerfMapTestCase):

    def test_without_trampolines(self):
        pid, res, err = self.run_capi("""
import json, sys
res = [_testcapi.perf_map_state_init(),
       _testcapi.write_perf_map_entry(0x1000, 16, "jit:compiled_loop"),
       _testcapi.write_perf_map_entry(0x7f0000001020, 0xab, "stub [x]"),
       sys.is_stack_trampoline_active()]
print(json.dumps(res))
""")
        self.assertEqual(res, [0, 0, 0, False])
        self.assertEqual(err, "")
        self.assertEqual(self.read_entries(pid),
                         [(0x1000, 16, "jit:compiled_loop"),
                          (0x7f0000001020, 0xab, "stub [x]")])

    def test_init_is_not_needed(self):
        pid, res, err = self.run_capi("""
import json
print(json.dumps(_testcapi.write_perf_map_entry(0x2000, 8, "first")))
""")
        self.assertEqual(res, 0)
        self.assertEqual(self.read_entries(pid), [(0x2000, 8, "first")])

    def test_with_trampolines(self):
        # The entries and the trampolines' share one map.
        pid, res, err = self.run_capi("""
import json
def before():
    return 1
before()
r = _testcapi.write_perf_map_entry(0x3000, 32, "jit:between")
def after():
    return 2
after()
print(json.dumps(r))
""", "-X", "perf")
        self.assertEqual(res, 0)
        names = [name for _, _, name in self.read_entries(pid)]
        self.assertIn("jit:between", names)
        i = names.index("jit:between")
        self.assertTrue(any(n.startswith("py::before:") for n in names[:i]))
        self.assertTrue(any(n.startswith("py::after:") for n in names[i:]))

    def test_names_as_given(self):
        pid, res, err = self.run_capi("""
import json
r = [_testcapi.write_perf_map_entry(0x4000, 1, "a\\nb\\tc\\x7fd"),
     _testcapi.write_perf_map_entry(0x4010, 1, "\\u00e9t\\u00e9 :: x.py")]
print(json.dumps(r))
""")
        self.assertEqual(res, [0, 0])
        # Only what would break the line format is replaced.
        self.assertEqual(self.read_entries(pid),
                         [(0x4000, 1, "a?b?c?d"),
                          (0x4010, 1, "\u00e9t\u00e9 :: x.py")])

    def test_bad_input(self):
        pid, res, err = self.run_capi("""
import json, os
res = [_testcapi.write_perf_map_entry(0x5000, 16, None),
       _testcapi.write_perf_map_entry(0x5000, 0, "empty"),
       os.path.exists(f"/tmp/perf-{os.getpid()}.map")]
print(json.dumps(res))
""")
        self.assertEqual(res, [-1, -1, False])
        self.assertIsNone(self.read_map(pid))

    def test_map_cannot_be_opened(self):
        pid, res, err = self.run_capi(OBSTACLE_HELPERS + """
import json, os
path = f"/tmp/perf-{os.getpid()}.map"
make_obstacle("directory", path, None)
try:
    res = [_testcapi.perf_map_state_init(),
           _testcapi.write_perf_map_entry(0x6000, 16, "lost")]
finally:
    remove_obstacle(path)
print(json.dumps(res))
""")
        self.assertEqual(res, [-1, -1])

    def test_fini_then_write(self):
        pid, res, err = self.run_capi("""
import json
r = [_testcapi.write_perf_map_entry(0x7000, 16, "one")]
_testcapi.perf_map_state_fini()
_testcapi.perf_map_state_fini()     # twice is harmless
r.append(_testcapi.write_perf_map_entry(0x7010, 16, "two"))
print(json.dumps(r))
""")
        self.assertEqual(res, [0, 0])
        self.assertEqual(self.read_entries(pid),
                         [(0x7000, 16, "one"), (0x7010, 16, "two")])

    def test_threads_without_the_gil(self):
        # 4 C threads write 2,000 entries each with the GIL released, while
        # the main thread makes trampolines: every line is whole, none is
        # lost.
        pid, res, err = self.run_capi("""
import json, os, threading
failures = []
writer = threading.Thread(target=lambda: failures.append(
    _testcapi.write_perf_map_entries_in_threads(4, 0x10000000, 2000)))
writer.start()
ns = {}
exec("\\n".join(f"def fn{i}(): return {i}" for i in range(3000)), ns)
for i in range(3000):
    ns[f"fn{i}"]()
writer.join()
# A forked child's map starts with a copy of what the parent knows it
# wrote: every write must have been counted, or the copy is cut short.
# (The child makes its map once it runs Python code: here a function.)
written = os.stat(f"/tmp/perf-{os.getpid()}.map").st_size
def in_child():
    return 0
child = os.fork()
if child == 0:
    os._exit(in_child())
os.waitpid(child, 0)
print(json.dumps([failures, child, written]))
""", "-X", "perf")
        failures, child, written = res
        self.forget_map(child)
        self.assertEqual(failures, [0])
        entries = self.read_entries(pid)
        self.read_entries(child)
        parent_map = self.read_map(pid).encode()
        self.assertTrue(self.read_map(child).encode().startswith(
            parent_map[:written]))
        capi = {(addr, name) for addr, size, name in entries
                if name.startswith("capi_thread")}
        self.assertEqual(len(capi), 8000)
        self.assertEqual(
            sum(1 for _, _, name in entries if name.startswith("capi_")),
            8000)
        expected = {(0x10000000 + (t * 2000 + i) * 16,
                     f"capi_thread{t}_entry{i}")
                    for t in range(4) for i in range(2000)}
        self.assertEqual(capi, expected)
        fns = {name.split(":")[2] for _, _, name in entries
               if name.startswith("py::fn")}
        self.assertEqual(fns, {f"fn{i}" for i in range(3000)})


class TestCopyPerfMapFile(PerfMapTestCase):

    def test_copy(self):
        pid, res, err = self.run_capi("""
import json, os, tempfile
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    f.write("a000 10 parent:one\\nb000 20 parent:two\\nc000 30 cut sh")
try:
    r = [_testcapi.write_perf_map_entry(0x1000, 16, "own"),
         _testcapi.copy_perf_map_file(f.name)]
finally:
    os.unlink(f.name)
print(json.dumps(r))
""")
        self.assertEqual(res, [0, 0])
        # Every line, the unterminated last one too (perf reads it).
        self.assertEqual(self.read_entries(pid),
                         [(0x1000, 16, "own"), (0xa000, 16, "parent:one"),
                          (0xb000, 32, "parent:two"), (0xc000, 48, "cut sh")])

    def test_long_lines(self):
        # Lines longer than any buffer, before and after others.
        pid, res, err = self.run_capi("""
import json, os, tempfile
long = "x" * 200_000
with tempfile.NamedTemporaryFile("w", delete=False) as f:
    for i in range(1000):
        f.write(f"{0xa000 + i:x} 10 before{i}\\n")
    f.write(f"d000 10 {long}\\n")
    for i in range(1000):
        f.write(f"{0xe000 + i:x} 10 after{i}\\n")
try:
    r = _testcapi.copy_perf_map_file(f.name)
finally:
    os.unlink(f.name)
print(json.dumps(r))
""")
        self.assertEqual(res, 0)
        names = [name for _, _, name in self.read_entries(pid)]
        self.assertEqual(names, [f"before{i}" for i in range(1000)]
                         + ["x" * 200_000]
                         + [f"after{i}" for i in range(1000)])

    def test_own_map_refused(self):
        # Copying the map into itself would never end.
        pid, res, err = self.run_capi("""
import errno, json, os
_testcapi.write_perf_map_entry(0x1000, 16, "own")
own = f"/tmp/perf-{os.getpid()}.map"
link = own + ".link"
os.link(own, link)
try:
    r = [_testcapi.copy_perf_map_file(own),
         _testcapi.copy_perf_map_file(link)]
finally:
    os.unlink(link)
print(json.dumps(r))
""")
        self.assertEqual(res, [-1, -1])
        self.assertEqual(self.read_entries(pid), [(0x1000, 16, "own")])

    def test_bad_input(self):
        pid, res, err = self.run_capi("""
import json
print(json.dumps([_testcapi.copy_perf_map_file(None),
                  _testcapi.copy_perf_map_file("/nonexistent/perf-1.map")]))
""")
        self.assertEqual(res, [-1, -1])


class TestCompileCode(PerfMapTestCase):

    def test_compile_before_running(self):
        pid, res, err = self.run_capi("""
import json
def never_run():
    return 1
_testcapi.perf_trampoline_compile_code(never_run.__code__)
_testcapi.perf_trampoline_compile_code(never_run.__code__)  # once only
print(json.dumps(0))
""", "-X", "perf")
        names = [name for _, _, name in self.read_entries(pid)]
        self.assertEqual(sum(1 for n in names
                             if n.startswith("py::never_run:")), 1)

    def test_inactive(self):
        pid, res, err = self.run_capi("""
import json, os
def f():
    pass
_testcapi.perf_trampoline_compile_code(f.__code__)
print(json.dumps(os.path.exists(f"/tmp/perf-{os.getpid()}.map")))
""")
        self.assertIs(res, False)

    def test_not_a_code_object(self):
        with self.assertRaises(TypeError):
            _testcapi.perf_trampoline_compile_code(len)
        with self.assertRaises(TypeError):
            _testcapi.perf_trampoline_compile_code(None)

    def test_set_persist_after_fork(self):
        self.assertEqual(
            _testcapi.perf_trampoline_set_persist_after_fork(1), 1)
        self.assertEqual(
            _testcapi.perf_trampoline_set_persist_after_fork(0), 0)


@unittest.skipUnless(support.has_fork_support, "requires os.fork()")
class TestFork(PerfMapTestCase):

    # A pre-fork server: the parent compiles the trampolines of code it
    # never runs itself, persists them, and forks; the child runs them
    # and code of its own.
    PREFORK = """
import json, os
def handler():
    return 1
_testcapi.perf_trampoline_compile_code(handler.__code__)
persist = _testcapi.perf_trampoline_set_persist_after_fork(PERSIST)
_testcapi.write_perf_map_entry(0x1000, 16, "jit:parent")
child = os.fork()
if child == 0:
    handler()
    def child_only():
        return 2
    child_only()
    _testcapi.write_perf_map_entry(0x2000, 16, "jit:child")
    os._exit(0)
_, status = os.waitpid(child, 0)
print(json.dumps([child, os.waitstatus_to_exitcode(status), persist]))
"""

    def check_prefork(self, persist, *flags):
        def run():
            pid, (child, exitcode, result), err = self.run_capi(
                self.PREFORK.replace("PERSIST", str(persist)), *flags)
            self.check_fresh(child)
            return pid, child, exitcode, result
        pid, child, exitcode, result = self.retrying(run)
        self.assertEqual((exitcode, result), (0, persist))
        parent = self.read_entries(pid)
        child_entries = self.read_entries(child)
        parent_names = {name.split(":")[2] if name.startswith("py::")
                        else name: addr for addr, _, name in parent}
        child_names = {}
        for addr, _, name in child_entries:
            key = name.split(":")[2] if name.startswith("py::") else name
            child_names.setdefault(key, []).append(addr)
        # The child names what it inherited (the trampoline compiled
        # before the fork, at the same address, and the parent's entry),
        # and what it made itself.
        self.assertEqual(child_names["jit:parent"], [0x1000])
        self.assertEqual(child_names["jit:child"], [0x2000])
        if flags:
            self.assertEqual(child_names["handler"],
                             [parent_names["handler"]])
            self.assertEqual(len(child_names["child_only"]), 1)
        self.assertNotIn("jit:child", parent_names)
        self.assertNotIn("child_only", parent_names)

    def test_prefork_persisting(self):
        self.check_prefork(1, "-X", "perf")

    def test_prefork_not_persisting(self):
        # The same: children are always profiled completely.
        self.check_prefork(0, "-X", "perf")

    def test_entries_only(self):
        self.check_prefork(1)

    def test_names_held_at_fork(self):
        # The parent, which uses the C API, made 200 new functions in a
        # burst right before the fork: their names were held, not yet in
        # its map.  The child's map starts as a copy of the parent's and
        # names them all (before, 6 or 7 of them).
        def run():
            pid, (child, status), err = self.run_capi("""
import json, os
_testcapi.write_perf_map_entry(0x1000, 16, "jit:parent")
ns = {}
exec("\\n".join(f"def burst{i}(): return {i}" for i in range(200)), ns)
for i in range(200):
    ns[f"burst{i}"]()
child = os.fork()
if child == 0:
    for i in range(200):
        ns[f"burst{i}"]()
    os._exit(0)
_, status = os.waitpid(child, 0)
print(json.dumps([child, os.waitstatus_to_exitcode(status)]))
""", "-X", "perf")
            self.check_fresh(child)
            return pid, child, status
        pid, child, status = self.retrying(run)
        self.assertEqual(status, 0)
        for who in (pid, child):
            names = [name for _, _, name in self.read_entries(who)]
            missing = [i for i in range(200)
                       if f"py::burst{i}:<string>" not in names]
            self.assertEqual(missing, [], who)

    def test_lock_held_at_fork(self):
        # The lock of the description files, held by the parent at the
        # fork, is free in the child before any code runs there: here a
        # finalizer that os.fork() runs in the child (of the thread-local
        # data of a thread the child does not have) writes an entry.
        # Before, the child waited for the lock for ever.
        import_helper.import_module("_testinternalcapi")
        def run():
            pid, (child, status), err = self.run_capi("""
import json, os, signal, threading, time
import _testinternalcapi

class WritesWhenDeleted:
    def __del__(self):
        _testcapi.write_perf_map_entry(0x3000, 16, "jit:finalizer")

local = threading.local()
ready = threading.Event()
done = threading.Event()
def keep_local():
    local.obj = WritesWhenDeleted()
    ready.set()
    done.wait()
thread = threading.Thread(target=keep_local)
thread.start()
ready.wait()
_testcapi.write_perf_map_entry(0x1000, 16, "jit:parent")
time.sleep(0.05)    # the GIL released: nothing is held
_testinternalcapi.perf_files_lock(True)
child = os.fork()
if child == 0:
    os._exit(0)
_testinternalcapi.perf_files_lock(False)
done.set()
thread.join()
for _ in range(2000):
    pid, status = os.waitpid(child, os.WNOHANG)
    if pid:
        status = os.waitstatus_to_exitcode(status)
        break
    time.sleep(0.01)
else:
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    status = "the child hung"
print(json.dumps([child, status]))
""")
            self.check_fresh(child)
            return child, status
        child, status = self.retrying(run)
        self.assertEqual(status, 0)
        self.assertIn((0x3000, 16, "jit:finalizer"), self.read_entries(child))


if __name__ == "__main__":
    unittest.main()

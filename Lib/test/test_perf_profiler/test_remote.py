"""Requests from outside the process (Python/perf_remote.c): the support
turned on for a lease and off again, refused, and what holds while it is
on.  The child writes its own _PyPerf_Remote and sets its interpreters'
eval breakers, as a tool does through /proc/PID/mem (pyprofile -p, whose
tests cover that side)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import unittest

from test import support
from test.test_perf_profiler.util import (PerfTestCase, parse_map,
                                          perf_map_path,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


# The tool's side, in the process itself: the block's layout is that of
# _PyPerfRemoteControl (Include/internal/pycore_perf_trampoline.h).
CLIENT = """
import ctypes, json, os, sys, time
_addr = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi,
                                              "_PyPerf_Remote"))

def _u32(offset):
    return ctypes.c_uint32.from_address(_addr + offset)

def _ptr(address):
    return ctypes.c_void_p.from_address(address).value or 0

def poke():
    ctypes.c_int.from_address(_ptr(_addr + 24) + _u32(32).value).value = 1

def send(command, lease_ms):
    _u32(40).value = command
    _u32(44).value = lease_ms
    request = _u32(48).value + 1
    _u32(48).value = request
    poke()
    return request

def request(command, lease_ms=60000):
    number = send(command, lease_ms)
    # Handled at the next check of the eval breaker: a backward jump.
    for _ in range(100000):
        if _u32(64).value == number:
            break
    else:
        raise AssertionError("the request was not handled")
    return [ctypes.c_int32.from_address(_addr + off).value
            for off in (52, 56, 60)]

def refused():
    return _u32(36).value

def active():
    return sys.is_stack_trampoline_active()
"""

EPERM = 1
EINVAL = 22


class TestRemote(PerfTestCase):

    def run_client(self, code, *, flags=(), env=None, expect_rc=0):
        source = CLIENT + textwrap.dedent(code)
        pid, rc, out, err, self.last_script = self.run_script(
            source, flags=flags, env=env, expect_rc=expect_rc)
        self.assertEqual(err, "")
        return pid, self.last_json(out)

    def test_on_and_off(self):
        for command, backend in ((1, "perf"), (2, "perf_jit")):
            with self.subTest(backend):
                pid, res = self.run_client("""
                    def before():
                        return 1
                    before()
                    result = {"never_asked": [_u32(48).value, refused()],
                              "before": active()}
                    result["on"] = request(%d)
                    def during():
                        return 2
                    during()
                    result["during"] = active()
                    result["off"] = request(0)
                    def after():
                        return 3
                    after()
                    result["after"] = active()
                    print(json.dumps(result))
                """ % command)
                self.assertEqual(res["never_asked"], [0, 0])
                self.assertFalse(res["before"])
                self.assertEqual(res["on"], [0, 1, 1])
                self.assertTrue(res["during"])
                self.assertEqual(res["off"], [0, 0, 0])
                self.assertFalse(res["after"])
                if backend == "perf":
                    text = self.assert_map_file(pid)
                    names = {e[2].rsplit(":", 1)[0] for e in parse_map(text)}
                    self.assertIn("py::during", names)
                    self.assertNotIn("py::before", names)
                    self.assertNotIn("py::after", names)

    def test_refused(self):
        code = """
            result = {"refused": refused(), "on": request(1),
                      "active": active()}
            print(json.dumps(result))
        """
        for name, flags, env in (
                ("-X perf=0", ("-X", "perf=0"), {}),
                ("-X perf_jit=0", ("-X", "perf_jit=0"), {}),
                ("PYTHONPERFSUPPORT=0", (), {"PYTHONPERFSUPPORT": "0"}),
                ("PYTHON_PERF_JIT_SUPPORT=0", (),
                 {"PYTHON_PERF_JIT_SUPPORT": "0"})):
            with self.subTest(name):
                pid, res = self.run_client(code, flags=flags,
                                           env=self.make_env(**env))
                self.assertEqual(res, {"refused": 1, "on": [EPERM, 0, 0],
                                       "active": False})
                self.assertFalse(os.path.exists(perf_map_path(pid)))
        # Neither an empty value, nor -I (environment ignored), nor a
        # variable that an -X option overrides refuses.
        for name, flags, env in (("empty", (), {"PYTHONPERFSUPPORT": ""}),
                                 ("-I", ("-I",), {"PYTHONPERFSUPPORT": "0"}),
                                 ("-X perf=abc", ("-X", "perf=abc"),
                                  {"PYTHONPERFSUPPORT": "0"})):
            with self.subTest(name):
                pid, res = self.run_client(code, flags=flags,
                                           env=self.make_env(**env))
                self.assertEqual(res, {"refused": 0, "on": [0, 1, 1],
                                       "active": True})

    def test_bad_requests(self):
        pid, res = self.run_client("""
            print(json.dumps([request(3), request(1, lease_ms=0),
                              request(0xFFFFFFFF), active()]))
        """)
        self.assertEqual(res, [[EINVAL, 0, 0], [EINVAL, 0, 0],
                               [EINVAL, 0, 0], False])

    def test_lease_ends(self):
        # The lease is checked where a thread blocks, makes a new function
        # or checks the eval breaker.
        pid, res = self.run_client("""
            result = {}
            request(1, lease_ms=50)
            result["on"] = active()
            time.sleep(0.2)
            # Checked as the thread blocks (releases the GIL): again.
            time.sleep(0)
            result["after_sleep"] = active()

            request(1, lease_ms=50)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:
                pass
            # A new function, with no blocking call before it.
            exec("def new(): return 1\\nnew()")
            result["after_new_function"] = active()

            request(1, lease_ms=50)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:
                pass
            poke()
            for _ in range(1000):
                pass
            result["after_eval_breaker"] = active()

            # Renewed: stays on.
            request(1, lease_ms=500)
            for _ in range(5):
                request(1, lease_ms=500)
                time.sleep(0.05)
            result["renewed"] = active()
            print(json.dumps(result))
        """)
        self.assertEqual(res, {"on": True, "after_sleep": False,
                               "after_new_function": False,
                               "after_eval_breaker": False,
                               "renewed": True})

    def test_program_activation_is_kept(self):
        pid, res = self.run_client("""
            result = {}
            sys.activate_stack_trampoline("perf")
            result["on_own"] = request(1)
            result["off_own"] = request(0)
            result["own_kept"] = active()
            sys.deactivate_stack_trampoline()
            request(1)
            # The program takes it over.
            sys.activate_stack_trampoline("perf")
            result["off_taken"] = request(0)
            result["taken_kept"] = active()
            print(json.dumps(result))
        """)
        self.assertEqual(res, {"on_own": [0, 1, 0], "off_own": [0, 1, 0],
                               "own_kept": True, "off_taken": [0, 1, 0],
                               "taken_kept": True})

    def test_sub_interpreters(self):
        pid, res = self.run_client("""
            import _xxsubinterpreters as interpreters
            CHECK = ("import sys\\n"
                     "if sys.is_stack_trampoline_active() != %s:\\n"
                     "    raise SystemExit(1)\\n")
            result = {}
            before = interpreters.create()
            result["on"] = request(1)
            interpreters.run_string(before, CHECK % True)
            later = interpreters.create()
            interpreters.run_string(later, CHECK % True)
            result["off"] = request(0)
            interpreters.run_string(before, CHECK % False)
            interpreters.run_string(later, CHECK % False)
            interpreters.destroy(before)
            interpreters.destroy(later)
            print(json.dumps(result))
        """)
        self.assertEqual(res, {"on": [0, 2, 2], "off": [0, 0, 0]})

    def test_many_cycles_with_frames_on_the_stack(self):
        # On and off at the bottom of a recursion and inside generators,
        # 300 times: the frames started through trampolines return through
        # them, and the results are those of a run without requests.
        code = """
            def rec(n, toggle):
                if n == 0:
                    toggle()
                    return 0
                return rec(n - 1, toggle) + n

            def gen(toggle):
                for i in range(3):
                    toggle()
                    yield i

            state = [0]
            def toggle():
                if REQUESTS:
                    state[0] ^= 1
                    request(state[0])

            total = 0
            for i in range(300):
                total += rec(30, toggle) + sum(gen(toggle))
            if REQUESTS:
                request(0)
            print(json.dumps([total, active()]))
        """
        code = textwrap.dedent(code)
        _, plain = self.run_client("REQUESTS = False\n" + code)
        _, asked = self.run_client("REQUESTS = True\n" + code)
        self.assertEqual(asked, plain)

    @support.requires_fork()
    def test_fork_during_lease(self):
        # The child inherits the lease and turns off when it ends; the
        # parent is turned off by its own request.
        pid, res = self.run_client("""
            request(1, lease_ms=300)
            r, w = os.pipe()
            child = os.fork()
            if child == 0:
                def in_child():
                    return 1
                in_child()
                on = active()
                time.sleep(0.5)
                time.sleep(0)
                os.write(w, json.dumps([on, active()]).encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r) as f:
                in_child = json.load(f)
            os.waitpid(child, 0)
            off = request(0)
            print(json.dumps({"child": child, "in_child": in_child,
                              "off": off, "parent": active()}))
        """)
        self.forget_files(res["child"])
        self.assertEqual(res["in_child"], [True, False])
        self.assertEqual(res["off"], [0, 0, 0])
        self.assertFalse(res["parent"])
        text = self.assert_map_file(res["child"])
        self.assert_symbol_count(
            text, f"py::in_child:{self.last_script}", 1)


class TestInstructionCount(PerfTestCase):
    """A process turned on and off from outside runs as one never asked:
    callgrind's instruction count of the same work, after three cycles,
    against a process that was never sent a request, in the same run."""

    PROGRAM = """
        if sys.argv[1] == "cycled":
            for _ in range(3):
                request(1)
                def warm():
                    return 1
                warm()
                request(0)
        # Counted: what runs inside exec() (--toggle-collect).
        exec(\"\"\"
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        fib(20)
        \"\"\")
    """

    def count(self, mode, script, tmpdir):
        out = os.path.join(tmpdir, f"callgrind.{mode}")
        # A fixed hash seed: dictionaries laid out alike in both.
        env = self.make_env(PYTHONHASHSEED="0")
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             "--collect-atstart=no", "--toggle-collect=builtin_exec",
             sys.executable, script, mode],
            env=env, capture_output=True, text=True,
            timeout=support.LONG_TIMEOUT)
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        with open(out) as f:
            for line in f:
                if line.startswith("summary:"):
                    return int(line.split()[1])
        self.fail("no summary in callgrind's output")

    def test_as_never_asked(self):
        if shutil.which("valgrind") is None:
            self.skipTest("valgrind is not installed")
        if {"QEMU_CPU", "QEMU_LD_PREFIX"} & os.environ.keys():
            self.skipTest("the program runs under qemu-user")
        if "-fsanitize" in (sysconfig.get_config_var("CFLAGS") or ""):
            self.skipTest("a sanitizer build does not run under valgrind")
        script = self.write_script(
            CLIENT + textwrap.dedent(self.PROGRAM))
        tmpdir = os.path.dirname(script)
        never = self.count("never", script, tmpdir)
        cycled = self.count("cycled", script, tmpdir)
        self.assertGreater(never, 1_000_000)
        self.assertLess(abs(cycled - never) / never, 0.001,
                        f"never asked: {never}, after 3 cycles: {cycled}")


if __name__ == "__main__":
    unittest.main()

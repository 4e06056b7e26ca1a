"""Unwinders inside the process walk through every trampoline.

glibc's backtrace(), libgcc's _Unwind_Backtrace() and libunwind (on musl,
libgcc's unwinder linked into _testinternalcapi) find
unwind information through the dynamic loader, which knows each arena of
trampolines as an object of its own (Python/perf_loader.c).  Each test runs
one program plain and with each backend, in the same run, and expects the
same walk to the start of the thread, with the trampolines' frames in
between.
"""

import ctypes
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import unittest

from test import support
from test.test_perf_profiler.util import (MUSL, PerfTestCase,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


# Walks the stack from C code called by Python code three calls deep, in
# the main thread, another thread, a forked child and a subinterpreter.
# Prints, for each unwinder and place: the number of frames, how many are
# in trampolines (anonymous executable shared memory), and the last three
# frames, which are where the thread started.
PROGRAM = r"""
import ctypes, json, os, sys, threading

libc = ctypes.PyDLL(None)
libgcc = libunwind = None
if hasattr(libc, "backtrace"):
    libc.backtrace.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
    libc.backtrace_symbols.restype = ctypes.POINTER(ctypes.c_char_p)
    libc.backtrace_symbols.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.c_int]
    libgcc = ctypes.PyDLL("libgcc_s.so.1")
    TRACE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    libgcc._Unwind_GetIP.restype = ctypes.c_void_p
    libgcc._Unwind_GetIP.argtypes = [ctypes.c_void_p]
    try:
        libunwind = ctypes.PyDLL("libunwind.so.8", os.RTLD_LOCAL)
        libunwind.unw_backtrace.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.c_int]
    except OSError:
        pass
else:
    # musl has no backtrace(), and the libgcc_s and libunwind here are
    # glibc's: libgcc's unwinder linked into _testinternalcapi walks.
    import _testinternalcapi

def trampoline_ranges():
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if fields[1].startswith("r-x") and line.rstrip().endswith(
                    "/dev/zero (deleted)"):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((lo, hi))
    return ranges

def summary(addrs, names=None):
    n = len(addrs)
    if names is None:
        buf = (ctypes.c_void_p * max(n, 1))(*addrs)
        syms = libc.backtrace_symbols(buf, n)
        names = [syms[i] for i in range(n)]
    ranges = trampoline_ranges()
    in_trampolines = sum(1 for a in addrs
                         if any(lo <= (a or 0) < hi for lo, hi in ranges))
    # The last frames, as object and offset: the same in every process.
    tail = [name.split(b" [")[0].decode() for name in names[-3:]]
    return {"frames": n, "trampolines": in_trampolines, "tail": tail}

def with_backtrace():
    if libgcc is None:
        frames = _testinternalcapi.native_backtrace()
        return summary([a for a, _ in frames],
                       [n.encode() for _, n in frames])
    buf = (ctypes.c_void_p * 512)()
    n = libc.backtrace(buf, 512)
    return summary(list(buf[:n]))

def with_unwind_backtrace():
    addrs = []
    def trace(context, arg):
        addrs.append(libgcc._Unwind_GetIP(context))
        return 0
    callback = TRACE(trace)
    rc = libgcc._Unwind_Backtrace(callback, None)
    result = summary(addrs)
    result["end_of_stack"] = rc == 5
    return result

def with_libunwind():
    buf = (ctypes.c_void_p * 512)()
    n = libunwind.unw_backtrace(buf, 512)
    return summary(list(buf[:n]))

# A ctypes callback takes the GIL with the PyGILState API, which a
# subinterpreter does not support.
CALLBACKS = True

def walks():
    results = {"backtrace": with_backtrace()}
    if CALLBACKS and libgcc is not None:
        results["_Unwind_Backtrace"] = with_unwind_backtrace()
    if libunwind is not None:
        results["libunwind"] = with_libunwind()
    return results

def a():
    return b()
def b():
    return c()
def c():
    return walks()

out = {"main": a()}
# Under qemu-user (as Tools/perf/cross/test-cross.sh runs it), libgcc's
# unwinder never ends in a thread but the main one, without trampolines.
if not {"QEMU_CPU", "QEMU_LD_PREFIX"} & os.environ.keys():
    thread_result = []
    t = threading.Thread(target=lambda: thread_result.append(a()))
    t.start()
    t.join()
    out["thread"] = thread_result[0]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, json.dumps(a()).encode())
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 65536):
    data += chunk
os.waitpid(pid, 0)
out["child"] = json.loads(data)
import _testcapi
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sub.json")
code = f'''
import json
exec(open({__file__!r}.replace("program.py", "walk.py")).read())
CALLBACKS = False
with open({path!r}, "w") as f:
    json.dump(a(), f)
'''
if _testcapi.run_in_subinterp(code) == 0:
    with open(path) as f:
        out["subinterpreter"] = json.load(f)
print(json.dumps(out))
"""


class TestInProcessUnwinders(PerfTestCase):

    def run_walks(self, flags):
        tmpdir = os.path.dirname(self.write_script("", name="walk.py"))
        program = os.path.join(tmpdir, "program.py")
        # The subinterpreter runs the part of PROGRAM that walks.
        with open(os.path.join(tmpdir, "walk.py"), "w") as f:
            f.write(PROGRAM.split("out = {")[0])
        with open(program, "w") as f:
            f.write(PROGRAM)
        pid, rc, out, err = self.run_python(*flags, program)
        return self.last_json(out)

    def test_walk_to_the_start(self):
        plain = self.run_walks(())
        for backend in ("perf", "perf_jit"):
            active = self.run_walks(("-X", backend))
            self.assertEqual(active.keys(), plain.keys())
            for place, results in plain.items():
                self.assertEqual(active[place].keys(), results.keys())
                for unwinder, walk in results.items():
                    with self.subTest(backend=backend, place=place,
                                      unwinder=unwinder):
                        # (musl's dladdr() names no function there.)
                        if place != "thread" and not MUSL:
                            self.assertIn("__libc_start_main",
                                          " ".join(walk["tail"]), walk)
                        self.assertEqual(walk["trampolines"], 0)
                        got = active[place][unwinder]
                        self.assertEqual(got["tail"], walk["tail"])
                        # a(), b(), c(), walks() and the walker at least.
                        self.assertGreaterEqual(got["trampolines"], 4, got)
                        self.assertGreater(got["frames"], walk["frames"])
                        if "end_of_stack" in walk:
                            self.assertTrue(got["end_of_stack"])


# Times backtrace() beside 300,000 code objects (with perf_jit, about 36
# arenas), from 50 Python calls deep (with trampolines, a trampoline and an
# evaluator's frame per call) and from 50 calls through C with the support
# deactivated (frames of the interpreter's own code only), each against the
# same walk from the top.  Prints the frames each depth adds and the least
# time per added frame, in ns, over rounds that alternate the two.
COST_PROGRAM = r"""
import ctypes, json, operator, sys, time

backend = sys.argv[1]
for chunk in range(30):
    ns = {}
    exec("\n".join(f"def fn{i}(): return {i}" for i in range(10000)), ns)
    for i in range(10000):
        ns[f"fn{i}"]()
del ns

libc = ctypes.PyDLL(None)
libc.backtrace.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
addrs = (ctypes.c_void_p * 1024)()

def walk():
    start = time.perf_counter_ns()
    n = libc.backtrace(addrs, 1024)
    return n, time.perf_counter_ns() - start

def python_calls(depth):
    return walk() if depth == 0 else python_calls(depth - 1)

def c_calls(depth):
    return walk() if depth == 0 else operator.call(c_calls, depth - 1)

best = {}
for _ in range(200):
    for name, calls in (("trampolined", python_calls),
                        ("interpreter", c_calls)):
        if name == "interpreter":
            sys.deactivate_stack_trampoline()
        for depth in (0, 50):
            frames, ns = calls(depth)
            old = best.get((name, depth), (frames, ns))
            best[name, depth] = (frames, min(ns, old[1]))
        if name == "interpreter":
            sys.activate_stack_trampoline(backend)
out = {}
for name in ("trampolined", "interpreter"):
    (top_frames, top), (frames, deep) = best[name, 0], best[name, 50]
    extra = frames - top_frames
    out[name] = {"frames": extra,
                 "per_frame": (deep - top) / extra if extra else None}
print(json.dumps(out))
"""


@unittest.skipIf(MUSL, "musl has no backtrace()")
class TestUnwindCost(PerfTestCase):

    def test_cost_beside_many_code_objects(self):
        # The bound is 1.2 times a frame of the interpreter's own
        # code (measured: 1.04); twice leaves room for a loaded machine.
        script = self.write_script(COST_PROGRAM)
        pid, rc, out, err = self.run_python("-X", "perf_jit", script,
                                            "perf_jit",
                                            timeout=support.LONG_TIMEOUT)
        result = self.last_json(out)
        trampolined, interpreter = (result["trampolined"],
                                    result["interpreter"])
        self.assertGreaterEqual(trampolined["frames"], 100, result)
        self.assertGreaterEqual(interpreter["frames"], 100, result)
        self.assertLess(trampolined["per_frame"],
                        2 * interpreter["per_frame"], result)


# A C++ exception thrown in C++ code that Python called, and caught in C++
# code that called Python: the search for its handler walks through every
# Python frame and trampoline between the two.  Nothing between them is
# cleaned up (CPython does not support an exception that crosses its
# frames), so the handler prints and ends the process at once.  Also an
# exception thrown and caught below Python, after which Python goes on.
CXX_LIBRARY = r"""
#include <cstdio>
#include <unistd.h>

extern "C" {

/* The interpreter's, found when the library is loaded. */
int PyRun_SimpleStringFlags(const char *command, void *flags);

int caught_below(int value)
{
    try {
        throw value;
    }
    catch (int caught) {
        return caught;
    }
    return -1;
}

void throw_int(int value)
{
    throw value;
}

int run_and_catch(const char *command)
{
    try {
        PyRun_SimpleStringFlags(command, NULL);
    }
    catch (int caught) {
        std::printf("caught %d\n", caught);
        std::fflush(stdout);
        _exit(0);
    }
    return -1;
}

}
"""

# Run in the main thread, another thread, a forked child (the parent then
# reports how it ended) or a subinterpreter.
CXX_PROGRAM = r"""
import os, sys, threading

THROWER = '''
import ctypes, sys
lib = ctypes.PyDLL(sys.argv[1])
lib.run_and_catch.argtypes = [ctypes.c_char_p]

def a():
    return b()
def b():
    return c()
def c():
    lib.throw_int(42)
    return 0

def throw_across_python():
    print("below", lib.caught_below(7), flush=True)
    # a() runs in __main__, where this code runs.
    lib.run_and_catch(b"a()")
'''
exec(THROWER)

place = sys.argv[2]
if place == "main":
    throw_across_python()
elif place == "thread":
    t = threading.Thread(target=throw_across_python)
    t.start()
    t.join()
elif place == "child":
    pid = os.fork()
    if pid == 0:
        throw_across_python()
        os._exit(1)
    status = os.waitpid(pid, 0)[1]
    print("child", os.waitstatus_to_exitcode(status), flush=True)
else:
    import _testcapi
    _testcapi.run_in_subinterp(f"import sys\nsys.argv = {sys.argv!r}\n"
                               + THROWER + "\nthrow_across_python()\n")
"""


class TestCxxExceptions(PerfTestCase):

    def build_library(self, directory):
        """Build CXX_LIBRARY with the C++ compiler Python was built with,
        and return its path; skip the test if that cannot be done."""
        cxx = shlex.split(sysconfig.get_config_var("CXX") or "")
        if not cxx or shutil.which(cxx[0]) is None:
            self.skipTest("no C++ compiler")
        library = os.path.join(directory, "libthrow.so")
        proc = subprocess.run([*cxx, "-shared", "-fPIC", "-O2", "-x", "c++",
                               "-", "-o", library],
                              input=CXX_LIBRARY.encode(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            self.skipTest(f"{cxx[0]} cannot build a C++ library: "
                          f"{proc.stdout[-500:]!r}")
        # A C compiler driver (CXX of a cross build) does not link the C++
        # runtime.
        try:
            ctypes.CDLL(library)
        except OSError as exc:
            self.skipTest(f"the C++ library cannot be loaded: {exc}")
        return library

    def test_throw_across_python_frames(self):
        program = self.write_script(CXX_PROGRAM)
        library = self.build_library(os.path.dirname(program))
        # A forked child does what the main thread does; the parent reports.
        expected = {"main": "below 7\ncaught 42\n",
                    "thread": "below 7\ncaught 42\n",
                    "child": "below 7\ncaught 42\nchild 0\n",
                    "subinterpreter": "below 7\ncaught 42\n"}
        for flags in ((), ("-X", "perf"), ("-X", "perf_jit")):
            for place, output in expected.items():
                with self.subTest(flags=flags, place=place):
                    pid, rc, out, err = self.run_python(
                        *flags, program, library, place, expect_rc=None)
                    self.assertEqual((rc, out), (0, output), err)


if __name__ == "__main__":
    unittest.main()


# Which arenas the in-process unwinders know (Python/perf_loader.c): all of
# a process that turned the support on, and all that its forked children
# make; none of a forked child whose parent had not turned the backend on
# (a child never enters the dynamic loader).  Prints, for each process,
# the bytes of arenas made there and how many of them are unwindable.
WHICH_ARENAS_PROGRAM = r"""
import json, os, sys
from _testinternalcapi import get_perf_trampoline_stats

def new_functions(n, tag):
    ns = {}
    exec("\n".join(f"def {tag}{i}(): return {i}" for i in range(n)), ns)
    for i in range(n):
        ns[f"{tag}{i}"]()

def arenas(work):
    before = get_perf_trampoline_stats()
    work()
    after = get_perf_trampoline_stats()
    return [after[k] - before[k] for k in ("arena_bytes", "unwindable_bytes")]

def in_child(work):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, json.dumps(arenas(work)).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 1000)
    os.waitpid(pid, 0)
    return json.loads(data)

backend = sys.argv[1]
out = {}
if sys.argv[2] == "startup":
    out["process"] = arenas(lambda: new_functions(60000, "p"))
    out["child"] = in_child(lambda: new_functions(20000, "c"))
else:
    def activate_then_work():
        sys.activate_stack_trampoline(backend)
        new_functions(20000, "a")
    out["child activating"] = in_child(activate_then_work)
    out["process activating"] = arenas(activate_then_work)
print(json.dumps(out))
"""


class TestWhichArenas(PerfTestCase):

    def run_program(self, backend, how):
        flags = ("-X", backend) if how == "startup" else ()
        script = self.write_script(WHICH_ARENAS_PROGRAM)
        pid, rc, out, err = self.run_python(*flags, script, backend, how)
        return self.last_json(out)

    def test_which_arenas_are_unwindable(self):
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                result = self.run_program(backend, "startup")
                result.update(self.run_program(backend, "sys"))
                for place in ("process", "child", "process activating"):
                    made, unwindable = result[place]
                    self.assertGreater(made, 0, (place, result))
                    self.assertEqual(unwindable, made, (place, result))
                # The documented fallback: anonymous arenas.
                made, unwindable = result["child activating"]
                self.assertGreater(made, 0, result)
                self.assertEqual(unwindable, 0, result)

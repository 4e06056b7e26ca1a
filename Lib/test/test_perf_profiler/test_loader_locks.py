"""Trampolines never make the program wait for the dynamic loader's
locks, and change nothing of what it gets from the loader or the kernel.

Each arena of trampolines was made known to the dynamic loader by a
dlopen() of a small object whenever a new arena was needed, by the thread
that needed it, holding the GIL.  With another thread inside the loader
(walking its list with dl_iterate_phdr(), as threadpoolctl does, or in a
library's constructor), that thread waited for the loader's lock while
holding the GIL; if the other thread needed the GIL before it left the
loader, the process hung.  A child forked while another thread held a
loader lock hung at its first new arena.  A thread of the interpreter's
own ("perf-watchdog") ran during start-up and imports, where system calls
that need a process of a single thread (setns() into a mount namespace,
unshare(CLONE_NEWUSER)) failed.  The first object's path, /proc/PID/fd/N,
stayed known to the loader, which gave that object back instead of a
library the program loaded from the same path later.  And a process with
trampolines in a PID namespace of its own emptied the live map (or dump)
of a process of the initial namespace that had the same PID and shared
/tmp, and the reverse.  See issue 49.

Each test runs one program without trampolines and with -X perf and
-X perf_jit, in the same run, and expects the same outcome (the tests of
PID namespaces run the second process of the pair so).  The order of
events in each scenario is forced with events and pipes, never with
sleeps, so that it does not depend on the machine's speed; timeouts only
turn a hang into a failure.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import unittest

from test import support
from test.support import import_helper, os_helper, threading_helper
from test.test_perf_profiler.util import (PerfTestCase, code_loads,
                                          jitdump_path, map_name,
                                          parse_jitdump, perf_map_path,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")
threading_helper.requires_working_threading(module=True)
# The programs call the C library through ctypes.
import_helper.import_module("_ctypes")


CONFIGURATIONS = {
    "no trampolines": (),
    "perf": ("-X", "perf"),
    "perf_jit": ("-X", "perf_jit"),
}

# New functions that the main thread makes and calls while another thread
# is inside the loader: more than fit in what is left of the arenas made at
# start-up with either backend (a perf trampoline takes 16 bytes, a
# perf_jit one 112; arenas grow from 64 KiB), so that several new arenas
# are needed.
NEW_FUNCTIONS = 20000

# Defines and calls n functions never run before; returns how many ran.
MAKE_FUNCTIONS = """
def make_functions(prefix, n):
    namespace = {}
    total = 0
    for i in range(n):
        exec(f"def {prefix}_{i}():\\n    return 1", namespace)
        total += namespace[f"{prefix}_{i}"]()
    return total
"""


def compile_library(testcase, source, name, *cflags):
    """Build a shared library from the C source with the interpreter's
    compiler, in a temporary directory removed at cleanup, and return its
    path; skip the test if it cannot be built.  Symbols of Python's C API
    are left undefined: the loader binds them to the interpreter's own
    (the executable exports them, or a shared libpython does)."""
    cc = (sysconfig.get_config_var("CC") or "").split()[:1]
    cc = shutil.which(cc[0]) if cc else shutil.which("cc")
    if cc is None:
        testcase.skipTest("needs a C compiler (sysconfig CC)")
    tmp = tempfile.mkdtemp()
    testcase.addCleanup(os_helper.rmtree, tmp)
    path = os.path.join(tmp, f"{name}.c")
    with open(path, "w") as f:
        f.write(textwrap.dedent(source))
    lib = os.path.join(tmp, f"lib{name}.so")
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", *cflags,
                           "-o", lib, path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        testcase.skipTest(f"cannot build lib{name}.so with {cc}: "
                          f"{proc.stderr[-500:]}")
    return lib


class LoaderTestCase(PerfTestCase):

    maxDiff = None

    def outcome(self, flags, script, *args, timeout=None):
        """Run script with flags; return (exit code, the JSON object it
        printed last, stderr).  A hang fails the test in run_python()."""
        pid, rc, out, err = self.run_python(*flags, script, *args,
                                            expect_rc=None, timeout=timeout)
        try:
            result = self.last_json(out)
        except (AssertionError, ValueError):
            result = out
        return rc, result, err

    def check_same(self, script, *args, timeout=None, check_plain=None):
        """Run script plain, then with each backend (a subtest each), and
        expect the same outcome.  check_plain(outcome) may skip the test
        where the program fails by itself."""
        plain = self.outcome((), script, *args, timeout=timeout)
        if check_plain is not None:
            check_plain(plain)
        else:
            self.assertEqual((plain[0], plain[2]), (0, ""), plain)
        for name in ("perf", "perf_jit"):
            with self.subTest(backend=name):
                outcome = self.outcome(CONFIGURATIONS[name], script, *args,
                                       timeout=timeout)
                self.assertEqual(outcome, plain)
        return plain


# Scenario 1: threadpoolctl, on import, walks the loader's list with
# dl_iterate_phdr() and a Python callback.  dl_iterate_phdr() holds a
# loader lock for the whole walk, and the callback takes the GIL; the main
# thread meanwhile runs code it has never run before.
WALK_WHILE_MAKING = MAKE_FUNCTIONS + """
import ctypes, json, sys, threading

functions, timeout = int(sys.argv[1]), float(sys.argv[2])
libc = ctypes.CDLL(None)
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                            ctypes.c_void_p)
libc.dl_iterate_phdr.argtypes = [CALLBACK, ctypes.c_void_p]
libc.dl_iterate_phdr.restype = ctypes.c_int

inside = threading.Event()
made = threading.Event()
state = {"visits": 0, "waited": None}

def visit(info, size, data):
    state["visits"] += 1
    if state["visits"] == 1:
        # In the walk: tell the main thread, and wait (without the GIL)
        # until it has made its functions.
        inside.set()
        state["waited"] = made.wait(timeout)
    return 0

callback = CALLBACK(visit)
# A foreign function call through CDLL: ctypes releases the GIL around
# dl_iterate_phdr(), and the callback takes it again.
walker = threading.Thread(target=libc.dl_iterate_phdr,
                          args=(callback, None))
walker.start()
entered = inside.wait(timeout)
# The walker is inside dl_iterate_phdr() from here until made is set.
total = make_functions("f", functions)
made.set()
walker.join(timeout)
print(json.dumps({"walker entered": entered, "functions": total,
                  "callback saw them made": state["waited"],
                  "walk finished": not walker.is_alive(),
                  "objects visited": state["visits"] > 1}))
"""


class TestLoaderWalk(LoaderTestCase):

    def test_new_functions_during_dl_iterate_phdr(self):
        # Baseline: the main thread, holding the GIL, waits in dlopen()
        # for the lock that the walk holds, and the walk's callback waits
        # for the GIL: the process hangs.
        script = self.write_script(WALK_WHILE_MAKING)
        plain = self.check_same(script, str(NEW_FUNCTIONS),
                                str(support.SHORT_TIMEOUT))
        self.assertEqual(plain[1], {
            "walker entered": True, "functions": NEW_FUNCTIONS,
            "callback saw them made": True, "walk finished": True,
            "objects visited": True})


# Scenarios 2 and 4: another thread loads a library with dlopen(), the GIL
# released (as a C extension may do, or a foreign function call through
# ctypes.CDLL: ctypes.CDLL(path) itself keeps the GIL in 3.11), and its
# constructor runs in the loader, holding the loader's lock.  It tells the
# main thread that it has started (a byte on the descriptor in
# LOADER_TEST_ENTERED_FD), then waits for a byte on LOADER_TEST_GO_FD;
# built with -DRUN_PYTHON, as a plugin that embeds Python, it then takes
# the GIL and runs the code in LOADER_TEST_CODE.
CONSTRUCTOR_SOURCE = r"""
    #include <stdlib.h>
    #include <unistd.h>

    #ifdef RUN_PYTHON
    /* Declared here rather than from Python.h, whose directory an
       uninstalled build does not give; PyGILState_STATE is an enum. */
    extern int PyGILState_Ensure(void);
    extern void PyGILState_Release(int);
    extern int PyRun_SimpleString(const char *);
    #endif

    static int
    fd_from(const char *name)
    {
        const char *value = getenv(name);
        return value != NULL ? atoi(value) : -1;
    }

    __attribute__((constructor)) static void
    slow_constructor(void)
    {
        char byte = 'e';
        int entered = fd_from("LOADER_TEST_ENTERED_FD");
        int go = fd_from("LOADER_TEST_GO_FD");
        if (entered < 0 || go < 0) {
            return;
        }
        if (write(entered, &byte, 1) != 1 || read(go, &byte, 1) != 1) {
            return;
        }
    #ifdef RUN_PYTHON
        const char *code = getenv("LOADER_TEST_CODE");
        if (code != NULL) {
            int state = PyGILState_Ensure();
            PyRun_SimpleString(code);
            PyGILState_Release(state);
        }
    #endif
    }
"""

LOAD_WHILE_MAKING = MAKE_FUNCTIONS + """
import ctypes, json, os, select, sys, threading

library, functions, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
plugin = sys.argv[4] == "plugin"

entered_r, entered_w = os.pipe()
go_r, go_w = os.pipe()
os.environ["LOADER_TEST_ENTERED_FD"] = str(entered_w)
os.environ["LOADER_TEST_GO_FD"] = str(go_r)
# The plugin's constructor calls new functions too, in __main__.
os.environ["LOADER_TEST_CODE"] = "plugin_ran = make_functions('plugin', 1000)"

libc = ctypes.CDLL(None)
libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.dlopen.restype = ctypes.c_void_p
libc.dlerror.restype = ctypes.c_char_p
# Functions of a PyDLL keep the GIL while they run.
gil_holding_libc = ctypes.PyDLL(None)
gil_holding_libc.write.argtypes = [ctypes.c_int, ctypes.c_char_p,
                                   ctypes.c_size_t]
loaded = []

def load():
    # Through CDLL: the GIL is released around dlopen().
    handle = libc.dlopen(library.encode(), os.RTLD_NOW)
    loaded.append(handle is not None or libc.dlerror().decode())

if plugin:
    # The main thread keeps the GIL until it waits for the loading thread
    # below: the plugin's constructor waits for the GIL while it is in the
    # loader, all the time the main thread makes its functions.
    sys.setswitchinterval(1e4)
loader = threading.Thread(target=load)
loader.start()
ready, _, _ = select.select([entered_r], [], [], timeout)
entered = bool(ready) and os.read(entered_r, 1) == b"e"
if plugin:
    # Let the constructor go on to PyGILState_Ensure(), without releasing
    # the GIL.
    gil_holding_libc.write(go_w, b"g", 1)
total = make_functions("f", functions)
# The constructor waits for go (or for the GIL, which the main thread has
# held since): the other thread is still in dlopen().
during = not loaded and "plugin_ran" not in globals()
if not plugin:
    os.write(go_w, b"g")
loader.join(timeout)
print(json.dumps({"constructor entered": entered,
                  f"main made new functions while the other thread was "
                  f"in dlopen()": [total, during],
                  "loaded": loaded,
                  "plugin ran": globals().get("plugin_ran")}))
"""


class TestLoadingThread(LoaderTestCase):

    def test_new_functions_while_another_thread_is_in_dlopen(self):
        # Baseline: the main thread waits in its own dlopen(), holding the
        # GIL, for the loading thread, whose constructor waits for the main
        # thread: the process hangs.
        library = compile_library(self, CONSTRUCTOR_SOURCE, "slowctor")
        script = self.write_script(LOAD_WHILE_MAKING)
        plain = self.check_same(script, library, str(NEW_FUNCTIONS),
                                str(support.SHORT_TIMEOUT), "library")
        self.assertEqual(plain[1], {
            "constructor entered": True,
            "main made new functions while the other thread was in "
            "dlopen()": [NEW_FUNCTIONS, True],
            "loaded": [True], "plugin ran": None})

    def test_plugin_constructor_runs_python(self):
        # A plugin that embeds Python and runs Python code in its
        # constructor (PyGILState_Ensure() in the loader), loaded by
        # another thread while the main thread, holding the GIL, makes new
        # functions.  Baseline: the main thread waits in dlopen() for the
        # loader's lock, which the constructor holds while it waits for
        # the GIL: the process hangs.
        library = compile_library(self, CONSTRUCTOR_SOURCE, "plugin",
                                  "-DRUN_PYTHON")
        script = self.write_script(LOAD_WHILE_MAKING)
        plain = self.check_same(script, library, str(NEW_FUNCTIONS),
                                str(support.SHORT_TIMEOUT), "plugin")
        self.assertEqual(plain[1], {
            "constructor entered": True,
            "main made new functions while the other thread was in "
            "dlopen()": [NEW_FUNCTIONS, True],
            "loaded": [True], "plugin ran": 1000})


# Scenario 3: a child forked while another thread is inside
# dl_iterate_phdr() inherits the loader's lock held, by a thread it does
# not have; it runs new Python code only.  The parent waits for each child
# with a deadline, and kills it and reports it as hung after that.
FORK_DURING_WALK = MAKE_FUNCTIONS + """
import ctypes, json, os, signal, sys, threading, time

children, functions = int(sys.argv[1]), int(sys.argv[2])
timeout = float(sys.argv[3])
libc = ctypes.CDLL(None)
prctl = libc.prctl          # looked up before any fork
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                            ctypes.c_void_p)
libc.dl_iterate_phdr.argtypes = [CALLBACK, ctypes.c_void_p]

inside = threading.Event()
release = threading.Event()

def visit(info, size, data):
    if not inside.is_set():
        inside.set()
        release.wait(timeout)
    return 0

callback = CALLBACK(visit)
walker = threading.Thread(target=libc.dl_iterate_phdr,
                          args=(callback, None))
walker.start()
entered = inside.wait(timeout)
parent = os.getpid()
pids = []
statuses = []
for n in range(children):
    pid = os.fork()
    if pid == 0:
        # A hung child must not outlive its parent (PR_SET_PDEATHSIG).
        prctl(1, int(signal.SIGKILL))
        if os.getppid() != parent:
            os._exit(3)
        os._exit(0 if make_functions(f"child{n}", functions) == functions
                 else 1)
    pids.append(pid)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            statuses.append(os.waitstatus_to_exitcode(status))
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            statuses.append("hung")
            break
        time.sleep(0.01)
    if statuses[-1] != 0:
        break
release.set()
walker.join(timeout)
print(json.dumps({"pids": pids, "walker entered": entered,
                  "children": statuses,
                  "walk finished": not walker.is_alive()}))
"""


@unittest.skipUnless(support.has_fork_support, "requires os.fork()")
class TestForkDuringWalk(LoaderTestCase):

    def test_fork_while_another_thread_walks_the_loader(self):
        # Baseline: each child waits for ever in dlopen() at its first new
        # arena, for the loader lock that the walking thread of its parent
        # held at the fork.
        children = 5
        script = self.write_script(FORK_DURING_WALK)
        outcomes = {}
        for name, flags in CONFIGURATIONS.items():
            with self.subTest(configuration=name):
                # The children's deadline is the program's; the program's
                # own is longer, so that it reports a hung child itself.
                pid, rc, out, err = self.run_python(
                    *flags, script, str(children), str(NEW_FUNCTIONS),
                    str(support.SHORT_TIMEOUT), expect_rc=None,
                    timeout=support.LONG_TIMEOUT)
                result = self.last_json(out)
                for child in result.pop("pids"):
                    if map_name(child) not in self.existing_maps:
                        self.forget_files(child)
                outcomes[name] = (rc, result, err)
                self.assertEqual(outcomes[name], (0, {
                    "walker entered": True, "children": [0] * children,
                    "walk finished": True}, ""))


# Scenario 5: a library that the program writes into a memfd and loads
# from /proc/PID/fd/N and /proc/self/fd/N, for each N from 3 to 10 that is
# free, after the interpreter has made trampolines (and arenas).  The
# loader must load that library, not give back an object it loaded under
# that name before.
ANSWER_SOURCE = """
    int answer(void) { return 42; }
"""

LOAD_FROM_MEMFD = MAKE_FUNCTIONS + """
import ctypes, json, os, sys

with open(sys.argv[1], "rb") as f:
    image = f.read()
made = make_functions("f", 1000)
pid = os.getpid()
# The first 8 free descriptor numbers from 3 (with the support, one of
# them holds the lock of the map or dump): the same outcomes expected, in
# order, whatever numbers they are.
results = {"/proc/PID/fd/N": [], "/proc/self/fd/N": []}
kept = []
for n in range(3, 64):
    if len(kept) == 8:
        break
    try:
        os.fstat(n)
        continue            # not free: not tried
    except OSError:
        pass
    fd = os.memfd_create("answer")
    os.write(fd, image)
    if fd != n:
        os.dup2(fd, n, inheritable=False)
        os.close(fd)
    kept.append(n)          # open until the end: each its own library
    for template in ("/proc/{pid}/fd/{n}", "/proc/self/fd/{n}"):
        path = template.format(pid=pid, n=n)
        try:
            value = ctypes.CDLL(path).answer()
        except (OSError, AttributeError) as exc:
            value = str(exc).replace(str(pid), "PID")
        results[template.format(pid="PID", n="N")].append(
            value if isinstance(value, int) else f"{n}: {value}")
print(json.dumps({"made": made, "loaded": results}))
"""


@unittest.skipUnless(hasattr(os, "memfd_create"), "needs os.memfd_create()")
class TestMemfdLibrary(LoaderTestCase):

    def test_library_loaded_from_proc_fd(self):
        # Baseline: the first arena's object was opened as /proc/PID/fd/3
        # and the loader still knows it by that name: dlopen() of the
        # program's library at that path returns it, which has no symbol
        # "answer".
        library = compile_library(self, ANSWER_SOURCE, "answer")
        script = self.write_script(LOAD_FROM_MEMFD)
        plain = self.check_same(script, library)
        self.assertEqual(plain[1]["made"], 1000)
        self.assertTrue(plain[1]["loaded"])
        self.assertEqual(plain[1]["loaded"],
                         {"/proc/PID/fd/N": [42] * 8,
                          "/proc/self/fd/N": [42] * 8}, plain)


# Scenario 6: a process of a single thread, right after start-up, after
# imports (of the standard library, and of a module that computes with new
# functions at module level), and then system calls that need a process of
# a single thread: setns() into a mount namespace (its own; EINVAL in a
# process of several threads) and unshare(CLONE_NEWUSER) (EINVAL too).
THREADS = """
def threads():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
"""

SINGLE_THREADED = THREADS + """
import os, sys
report = {"start-up": threads()}
import ctypes, decimal, json
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "computed_module.py"), "w") as f:
    f.write("for i in range(2000):\\n"
            "    exec(f'def m_{i}():\\\\n    return 1\\\\nm_{i}()', {})\\n")
sys.path.insert(0, here)
import computed_module
report["after imports"] = threads()
libc = ctypes.CDLL(None, use_errno=True)

def call(func, *args):
    if func(*args) == 0:
        return "ok"
    return os.strerror(ctypes.get_errno())

# setns() first: once in a new user namespace, the process may no longer
# enter its mount namespace.
with open(f"/proc/{os.getpid()}/ns/mnt") as ns:
    report["setns(CLONE_NEWNS)"] = call(libc.setns, ns.fileno(), 0x00020000)
report["unshare(CLONE_NEWUSER)"] = call(libc.unshare, 0x10000000)
print(json.dumps(report))
"""

STARTUP_THREADS = THREADS + "import json; print(json.dumps(threads()))"


@unittest.skipUnless(os.path.exists("/proc/self/status"), "needs /proc")
class TestSingleThread(LoaderTestCase):

    def skip_unless_one_thread(self, count):
        # Under qemu-user the emulator runs a thread of its own in every
        # process: nothing to tell an extra thread from.
        if count != 1:
            self.skipTest(f"{count} threads without trampolines")

    def test_one_thread_after_startup(self):
        # Baseline: the watchdog thread, started during start-up, is still
        # there when the program's first line runs (2 threads).
        def check_plain(outcome):
            self.assertEqual((outcome[0], outcome[2]), (0, ""), outcome)
            self.skip_unless_one_thread(outcome[1])

        self.check_same("-c", STARTUP_THREADS, check_plain=check_plain)

    def test_single_threaded_system_calls(self):
        # Baseline: 2 threads after start-up and imports, and both system
        # calls fail with EINVAL.
        script = self.write_script(SINGLE_THREADED)

        def check_plain(outcome):
            rc, report, err = outcome
            self.assertEqual((rc, err), (0, ""), outcome)
            self.skip_unless_one_thread(report["start-up"])
            self.assertEqual(report["after imports"], 1, report)
            for call in "setns(CLONE_NEWNS)", "unshare(CLONE_NEWUSER)":
                if report[call] != "ok":
                    self.skipTest(f"{call} fails without trampolines: "
                                  f"{report[call]}")

        self.check_same(script, check_plain=check_plain)


# Scenario 8: a process of the initial PID namespace and one of a PID
# namespace of its own that has the same PID there, sharing /tmp (as a
# container that mounts the host's /tmp, or a pod's containers beside a
# host agent).  Each writes the same paths, /tmp/perf-PID.map and
# /tmp/jit-PID.dump: the second must leave the first's file as it is.

# Makes new functions, whose names reach the file when the GIL is released
# (below, waiting), says so, and waits for a line on stdin.
WRITER = MAKE_FUNCTIONS + """
import os, sys
prefix = sys.argv[1]
made = make_functions(prefix, 200)
print(os.getpid(), made, flush=True)
sys.stdin.readline()
"""

# Runs argv[2:] as the process of PID argv[1] in its PID namespace; run as
# PID 1 of a new one, where no other process forks meanwhile.
PID_SETTER = """
import json, os, subprocess, sys
target = int(sys.argv[1])
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(target - 1))
proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE, text=True)
if proc.pid != target:
    proc.kill()
    proc.wait()
    print(json.dumps({"pid": proc.pid}), flush=True)
    sys.exit(2)
# Relay the writer's line, and then ours to it.
print(proc.stdout.readline(), end="", flush=True)
proc.communicate(sys.stdin.readline())
print(json.dumps({"pid": proc.pid, "rc": proc.returncode}), flush=True)
"""

# Waits for a byte on stdin, and then becomes argv[1:] (same PID).
EXEC_AFTER_BYTE = """
import os, sys
os.read(0, 1)
os.execv(sys.argv[1], sys.argv[1:])
"""

# (first process's backend, second process's configuration): the second
# writes the file of the first too, or none (no trampolines).
NAMESPACE_CASES = [
    ("perf", "no trampolines"),
    ("perf", "perf"),
    ("perf_jit", "no trampolines"),
    ("perf_jit", "perf_jit"),
]


def can_run_pid_namespaces():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare"
    try:
        proc = subprocess.run(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
             sys.executable, "-S", "-c",
             "import os\n"
             "with open('/proc/sys/kernel/ns_last_pid', 'w') as f:\n"
             "    f.write('99')\n"
             "print(os.getpid())"],
            capture_output=True, text=True, timeout=support.SHORT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare --pid does not work: {exc}"
    if proc.returncode != 0 or proc.stdout != "1\n":
        return f"unshare --pid does not work: {proc.stderr[-300:]}"
    return None


class TestPidNamespaces(LoaderTestCase):

    def setUp(self):
        reason = can_run_pid_namespaces()
        if reason:
            self.skipTest(reason)
        self.here = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, self.here)
        self.scripts = {}
        for name, source in (("writer", WRITER), ("pid_setter", PID_SETTER),
                             ("exec_after_byte", EXEC_AFTER_BYTE)):
            self.scripts[name] = os.path.join(self.here, f"{name}.py")
            with open(self.scripts[name], "w") as f:
                f.write(source)

    def file_path(self, backend, pid):
        return (perf_map_path(pid) if backend == "perf"
                else jitdump_path(pid))

    def names(self, backend, pid, data=None):
        """The names that pid's file of backend (or data) describes."""
        if data is None:
            try:
                with open(self.file_path(backend, pid), "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                return []
        if backend == "perf":
            return [line.split(" ", 2)[2]
                    for line in data.decode().splitlines()]
        try:
            return [load["name"] for load in code_loads(
                parse_jitdump(data)[1])]
        except Exception:
            # A record being written.
            return []

    def wait_described(self, backend, pid, name):
        """Wait until the file of pid describes name; return its bytes."""
        deadline = time.monotonic() + support.LONG_TIMEOUT
        while not any(n.startswith(f"py::{name}:") for n in
                      self.names(backend, pid)):
            self.assertLess(time.monotonic(), deadline,
                            f"{name} never reached "
                            f"{self.file_path(backend, pid)}")
            time.sleep(0.01)
        with open(self.file_path(backend, pid), "rb") as f:
            return f.read()

    def python(self, config, *args):
        return [sys.executable, *CONFIGURATIONS[config],
                self.scripts["writer"], *args]

    def popen(self, argv):
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=self.make_env())
        def stop():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        self.addCleanup(stop)
        return proc

    def in_namespace(self, pid, argv):
        """Start argv as the process of PID pid in a new PID namespace
        (and mount namespace, with its own /proc) that shares /tmp."""
        return self.popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
             sys.executable, self.scripts["pid_setter"], str(pid), *argv])

    def finish(self, proc):
        out, err = proc.communicate("\n", timeout=support.SHORT_TIMEOUT)
        return proc.returncode, out, err

    def expect_line(self, proc, expected):
        """Read a line from proc and expect its words to be expected."""
        line = proc.stdout.readline()
        if line.split()[-len(expected):] != expected:
            self.fail(f"expected {expected!r} from {proc.args!r}, got "
                      f"{line!r}; then {self.finish(proc)!r}")
        return line

    def assert_left_alone(self, backend, pid, before, other):
        """The file of backend of pid starts with before, and describes
        nothing of the process whose functions start with other."""
        path = self.file_path(backend, pid)
        with open(path, "rb") as f:
            after = f.read()
        self.assertGreater(len(before), 0)
        if after[:len(before)] != before:
            names = self.names(backend, pid, after)
            lost = [n for n in self.names(backend, pid, before)
                    if n not in names]
            self.fail(f"{path} of the first process was changed: "
                      f"{len(before)} bytes before, {len(after)} after; "
                      f"{len(lost)} of its names lost, such as {lost[-3:]}")
        self.assertEqual([n for n in self.names(backend, pid, after)
                          if n.startswith(f"py::{other}_")], [],
                         f"the second process wrote into {path}")

    def test_host_process_first(self):
        # Baseline: the process in the namespace takes the host process's
        # live map (or dump) for a stale one and empties it.
        for backend, second in NAMESPACE_CASES:
            with self.subTest(first=backend, second=second):
                host = self.popen(self.python(backend, "host"))
                pid = int(self.expect_line(host, ["200"]).split()[0])
                self.forget_files(pid)
                before = self.wait_described(backend, pid, "host_199")
                container = self.in_namespace(pid,
                                              self.python(second, "guest"))
                self.expect_line(container, ["200"])
                rc, out, err = self.finish(container)
                self.assertEqual(rc, 0, (out, err))
                self.assertEqual(json.loads(out.splitlines()[-1]),
                                 {"pid": pid, "rc": 0})
                self.assert_left_alone(backend, pid, before, "guest")
                self.assertEqual(self.finish(host)[0], 0)
                self.assert_left_alone(backend, pid, before, "guest")
                os_helper.unlink(self.file_path(backend, pid))

    def free_pid(self):
        """A PID that no process of the initial namespace has, with no
        file of ours at its paths, a little after the last one given."""
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        with open("/proc/sys/kernel/ns_last_pid") as f:
            pid = int(f.read()) + 100
        while True:
            if pid >= pid_max - 1:
                pid = 300
            if not any(os.path.lexists(path) for path in (
                    f"/proc/{pid}", perf_map_path(pid), jitdump_path(pid))):
                return pid
            pid += 1

    def test_container_process_first(self):
        # Baseline: the host process of the same PID takes the live map (or
        # dump) of the process in the namespace for a stale one and empties
        # it.
        for backend, second in NAMESPACE_CASES:
            with self.subTest(first=backend, second=second):
                for attempt in range(5):
                    pid = self.free_pid()
                    self.addCleanup(os_helper.unlink, perf_map_path(pid))
                    self.addCleanup(os_helper.unlink, jitdump_path(pid))
                    container = self.in_namespace(
                        pid, self.python(backend, "guest"))
                    self.expect_line(container, ["200"])
                    before = self.wait_described(backend, pid, "guest_199")
                    # The next PID given in the initial namespace is pid,
                    # unless another process of the machine forks first.
                    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                        f.write(str(pid - 1))
                    host = self.popen([sys.executable,
                                       self.scripts["exec_after_byte"],
                                       *self.python(second, "host")])
                    if host.pid == pid:
                        break
                    host.kill()
                    host.communicate()
                    self.finish(container)
                else:
                    self.skipTest("other processes kept taking the PIDs "
                                  "chosen")
                host.stdin.write("g")
                host.stdin.flush()
                self.expect_line(host, [str(pid), "200"])
                self.assert_left_alone(backend, pid, before, "host")
                self.assertEqual(self.finish(host)[0], 0)
                rc, out, err = self.finish(container)
                self.assertEqual(rc, 0, (out, err))
                self.assertEqual(json.loads(out.splitlines()[-1]),
                                 {"pid": pid, "rc": 0})
                self.assert_left_alone(backend, pid, before, "host")
                os_helper.unlink(self.file_path(backend, pid))


if __name__ == "__main__":
    unittest.main()

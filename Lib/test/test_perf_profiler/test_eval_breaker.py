"""What another thread asks of the eval breaker is never lost to ours.

In a process that held descriptions of trampolines, the eval breaker's
handler computes the eval breaker again once they are written
(Python/ceval.c.patch).  Another thread can ask for it (an asynchronous
exception, a pending call) between that computation's loads and its
store, which then clears the request.  Such a race cannot be made to
happen by timing; gdb makes it happen on every run: it stops the
interpreter just after the computation has read the pending asynchronous
exception flag and raises that exception there, as
PyThreadState_SetAsyncExc() does from another thread.
"""

import os
import sys
import unittest

from test import support
from test.test_perf_profiler.util import requires_perf_trampoline


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")

from test.test_perf_profiler.test_debuggers import (DebuggerTestCase,
                                                    requires_gdb)


# The program: names held and written (in a process that uses perf
# trampolines), then a signal whose handling ends in the eval breaker's
# handler, then a loop in which a pending asynchronous exception is
# raised at once.  Nothing else sets the eval breaker in that loop.
PROGRAM = """
import os, signal, sys, time, _testinternalcapi
print("PID", os.getpid(), flush=True)
def handler(*args):
    pass
handler()                               # its trampoline is made here
signal.signal(signal.SIGUSR1, handler)
if sys.is_stack_trampoline_active():
    # New functions until names are held and the eval breaker is checked.
    n = 0
    while not _testinternalcapi.get_perf_trampoline_stats()[
            "eval_breaker_checks"]:
        exec(f"def f{n}(): pass\\nf{n}()", {})
        n += 1
time.sleep(0.001)                       # releases the GIL: names are written
signal.raise_signal(signal.SIGUSR2)     # the debugger sets its watchpoint
try:
    signal.raise_signal(signal.SIGUSR1)
    for i in range(1_000_000):
        pass
except ZeroDivisionError:
    print("raised")
else:
    print("not raised")
"""

# The gdb script.  A read of the flag is ours if the computation that
# reads it is not one of stock's (COMPUTE_EVAL_BREAKER() and its callers).
GDB_SCRIPT = """
import gdb
gdb.execute("set pagination off")
gdb.execute("handle SIGUSR2 stop print nopass")
gdb.execute("handle SIGUSR1 nostop noprint pass")
gdb.execute("run")
if not gdb.selected_inferior().pid:
    raise SystemExit("the program did not stop at SIGUSR2")
interp = "_PyRuntime.interpreters.main"
try:
    flag = int(gdb.parse_and_eval(f"&{interp}->ceval.pending.async_exc"))
    watch = gdb.Breakpoint(f"*(int *){flag}", gdb.BP_WATCHPOINT,
                           gdb.WP_READ, internal=True)
except gdb.error as exc:
    print("CANNOT WATCH:", exc)
    gdb.execute("kill")
    raise SystemExit
# Continue; False once the program has ended (gdb can fail to read the
# registers of a thread that ends with the process).
def resume():
    try:
        gdb.execute("continue", to_string=True)
    except gdb.error:
        return False
    return bool(gdb.selected_inferior().pid)
ours = stock = 0
while resume():
    frame = gdb.newest_frame()
    while (frame.name() == "compute_eval_breaker"
           and frame.type() == gdb.INLINE_FRAME):
        frame = frame.older()
    if frame.name() not in ("perf_trampolines_at_eval_breaker",
                            "eval_frame_handle_pending"):
        stock += 1
        continue
    ours += 1
    watch.delete()
    # What PyThreadState_SetAsyncExc() does from another thread.
    tstate = "((PyThreadState *)_PyRuntime.gilstate.tstate_current._value)"
    gdb.execute("set var PyExc_ZeroDivisionError->ob_refcnt += 1")
    gdb.execute(f"set var {tstate}->async_exc = PyExc_ZeroDivisionError")
    gdb.execute(f"set var {interp}->ceval.pending.async_exc = 1")
    gdb.execute(f"set var {interp}->ceval.eval_breaker._value = 1")
    while resume():
        pass
print(f"OURS {ours} STOCK {stock}")
"""


# Whether gdb's read watchpoints stop a program here at all: on some
# virtual machines the hypervisor does not deliver the traps of the debug
# registers, gdb sets the watchpoint and it never fires, and the race
# above never happens.  One read that must stop the program:
# sys.getrecursionlimit() reads the interpreter's recursion limit
# (Py_GetRecursionLimit()), in the only thread, after the watchpoint is set.
PROBE = """
import signal, sys
signal.raise_signal(signal.SIGUSR2)     # the debugger sets its watchpoint
print("LIMIT", sys.getrecursionlimit(), flush=True)
"""

PROBE_GDB_SCRIPT = """
import gdb
gdb.execute("set pagination off")
gdb.execute("handle SIGUSR2 stop print nopass")
gdb.execute("run")
if not gdb.selected_inferior().pid:
    raise SystemExit("the program did not stop at SIGUSR2")
try:
    limit = int(gdb.parse_and_eval(
        "&_PyRuntime.interpreters.main->ceval.recursion_limit"))
    watch = gdb.Breakpoint(f"*(int *){limit}", gdb.BP_WATCHPOINT,
                           gdb.WP_READ, internal=True)
except gdb.error as exc:
    print("CANNOT WATCH:", exc)
    gdb.execute("kill")
    raise SystemExit
try:
    gdb.execute("continue")
except gdb.error:
    pass
print("HITS", watch.hit_count)
if gdb.selected_inferior().pid:
    gdb.execute("kill")
"""


class TestLostWakeUp(DebuggerTestCase):

    # Why read watchpoints cannot be used here ("" if they can; None
    # until checked): checked once for the class.
    no_watchpoints = None

    def require_watchpoints(self):
        """Skip the test unless a read watchpoint stops a program here:
        without one, gdb never stops our computation, no race happens and
        no count of our computations means anything."""
        cls = type(self)
        if cls.no_watchpoints is None:
            cls.no_watchpoints = self.check_watchpoints()
        if cls.no_watchpoints:
            self.skipTest(cls.no_watchpoints)

    def check_watchpoints(self):
        """Return "" if a read watchpoint stops the program here, else
        why not.  Fails if the check itself proves nothing (the read did
        not happen)."""
        program = self.write_script(PROBE, name="probe.py")
        script = os.path.join(os.path.dirname(program), "probe_gdb.py")
        with open(script, "w") as f:
            f.write(PROBE_GDB_SCRIPT)
        out = self.run_debugger(
            ["gdb", "-nx", "-batch",
             "-iex", "add-auto-load-safe-path "
                     + os.path.dirname(sys.executable),
             "-x", script, "--args", sys.executable, program])
        if "CANNOT WATCH:" in out:
            return ("gdb cannot set a read watchpoint here: "
                    + out.split("CANNOT WATCH:", 1)[1][:300])
        hits = [line.split() for line in out.splitlines()
                if line.startswith("HITS ")]
        self.assertEqual(len(hits), 1, out)
        if int(hits[0][1]):
            return ""
        # Not vacuous: the program read the limit while being watched.
        self.assertRegex(out, r"(?m)^LIMIT \d+$")
        return ("hardware watchpoints do not fire on this machine: gdb's "
                "read watchpoint on the interpreter's recursion limit did "
                "not stop sys.getrecursionlimit() (a hypervisor that does "
                "not deliver debug register traps?)")

    def run_race(self, flags):
        """Run PROGRAM under gdb with flags; return (our computations of
        the eval breaker, the program's verdict)."""
        program = self.write_script(PROGRAM)
        script = os.path.join(os.path.dirname(program), "race.py")
        with open(script, "w") as f:
            f.write(GDB_SCRIPT)
        out = self.run_debugger(
            ["gdb", "-nx", "-batch",
             "-iex", "add-auto-load-safe-path "
                     + os.path.dirname(sys.executable),
             "-x", script, "--args", sys.executable, *flags, program])
        if "CANNOT WATCH:" in out:
            self.skipTest("gdb cannot watch the interpreter's eval breaker "
                          "here (no debug info or no hardware watchpoint): "
                          + out.split("CANNOT WATCH:", 1)[1][:300])
        counts = [line.split() for line in out.splitlines()
                  if line.startswith("OURS ")]
        verdicts = [line for line in out.splitlines()
                    if line in ("raised", "not raised")]
        self.assertEqual(len(counts), 1, out)
        self.assertEqual(len(verdicts), 1, out)
        return int(counts[0][1]), verdicts[0], out

    @requires_gdb
    def test_request_during_our_computation(self):
        # The asynchronous exception asked for between the loads and the
        # store is raised, with either backend.
        self.require_watchpoints()
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                ours, verdict, out = self.run_race(("-X", backend))
                self.assertGreaterEqual(ours, 1, out)
                self.assertEqual(verdict, "raised", out)

    @requires_gdb
    def test_inactive_process_computes_nothing(self):
        # A process that never used perf trampolines handles the eval
        # breaker as stock does: no computation of ours to race with.
        self.require_watchpoints()
        ours, verdict, out = self.run_race(())
        self.assertEqual(ours, 0, out)
        self.assertEqual(verdict, "not raised", out)


if __name__ == "__main__":
    unittest.main()

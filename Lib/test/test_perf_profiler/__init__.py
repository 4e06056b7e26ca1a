"""Tests for perf trampolines: -X perf, -X perf_jit, PYTHONPERFSUPPORT,
PYTHON_PERF_JIT_SUPPORT and sys.activate_stack_trampoline().

While perf trampolines are active, every Python code object gets a small
native code copy of its own the first time it runs.  The "perf" backend
names it in the perf map /tmp/perf-PID.map, the "perf_jit" backend
describes it, with its unwind information, in the jitdump
/tmp/jit-PID.dump, so that Linux perf can show Python functions.

The package has one test module per concern; util holds what they share:
the base class PerfTestCase that runs scenarios in child interpreters,
the parsers of perf maps, jitdumps and "perf script" output, the runners
of Linux perf and the skip helpers.  Only test_support runs on builds
without perf trampolines; the other modules are skipped as a whole when
what they need is missing.

Every scenario runs in a fresh child interpreter: activation is
process-wide and leaves a map file behind.  The tests remove every map
file and jitdump that they cause to be created.
"""

import os
from test.support import load_package_tests


def load_tests(*args):
    return load_package_tests(os.path.dirname(__file__), *args)

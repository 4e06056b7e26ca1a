"""The files of the patch's C code call each other in one direction only:
no two of them call each other, directly or around a circle, and the core
follows the order that Include/internal/pycore_perf_core.h lists.

Read from the object files of the build that runs this test (nm).

Run by "make test" with the built interpreter (see test_pyprofile.py)."""

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CORE_HEADER = os.path.join(TOP, "Include", "internal", "pycore_perf_core.h")


def build_dir():
    if not sysconfig.is_python_build():
        return None
    return os.path.dirname(os.path.realpath(sys.executable))


def calls_between_files(objects):
    """{file: {file it calls}} for the functions each object file defines
    and uses (data, such as the shared state, is not a call)."""
    defined = {}
    used = {}
    for path in objects:
        name = os.path.basename(path)[:-2] + ".c"
        out = subprocess.run(["nm", path], capture_output=True, text=True,
                             check=True).stdout
        used[name] = set()
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] == "T":
                defined[fields[2]] = name
            elif len(fields) == 2 and fields[0] == "U":
                used[name].add(fields[1])
    return {name: {defined[s] for s in symbols
                   if s in defined and defined[s] != name}
            for name, symbols in used.items()}


def find_circle(calls):
    """A list of files that call each other around a circle, or None."""
    # Depth-first search: a file met again on the current path closes a
    # circle.
    state = {}

    def visit(name, path):
        state[name] = "open"
        for callee in sorted(calls.get(name, ())):
            if state.get(callee) == "open":
                return path[path.index(callee):] + [callee]
            if callee not in state:
                found = visit(callee, path + [callee])
                if found:
                    return found
        state[name] = "done"
        return None

    for name in sorted(calls):
        if name not in state:
            found = visit(name, [name])
            if found:
                return found
    return None


def core_order():
    """The core's files in the order of pycore_perf_core.h."""
    with open(CORE_HEADER, encoding="utf-8") as f:
        text = f.read()
    # The lines of the list: "     Python/perf_NAME.c    what it holds".
    listing = text[:text.index("#ifdef PY_HAVE_PERF_TRAMPOLINE")]
    return re.findall(r"^ +Python/(perf_\w+\.c) ", listing, re.MULTILINE)


@unittest.skipIf(build_dir() is None, "needs a build tree")
@unittest.skipIf(shutil.which("nm") is None, "needs nm")
class TestLayers(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        objects = glob.glob(os.path.join(build_dir(), "Python", "perf_*.o"))
        if not objects:
            raise unittest.SkipTest("no object files of the patch")
        cls.calls = calls_between_files(objects)

    def test_no_circle(self):
        self.assertIsNone(find_circle(self.calls))

    def test_core_calls_only_earlier_files(self):
        order = core_order()
        self.assertIn("perf_trampoline.c", order)
        for i, name in enumerate(order):
            self.assertIn(name, self.calls, "listed but not built")
            later = set(order[i + 1:])
            self.assertEqual(self.calls[name] & later, set(),
                             f"{name} calls files listed after it")


if __name__ == "__main__":
    unittest.main()

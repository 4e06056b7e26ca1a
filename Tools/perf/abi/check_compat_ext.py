"""Run by "make abi-check" with the patched interpreter and -X perf: use an
extension module compiled against pristine 3.11.2 headers."""

import os
import sys

import compat_ext

assert sys.is_stack_trampoline_active(), "run with -X perf"


def where():
    return compat_ext.caller()


def add(a, b):
    return a + b


def gen():
    yield compat_ext.call(add, 1, 2)


# Calls from C into trampolined Python code, and frames seen from C.
assert compat_ext.call(add, 2, 3) == 5
assert list(gen()) == [3]
assert where() == ("where", where.__code__.co_firstlineno + 1), where()

# Our own co_extra slot next to the one the patch reserves.
index = compat_ext.tag_code(add.__code__, 12345)
assert index >= 1, index
assert compat_ext.get_tag(add.__code__) == 12345
assert add(1, 1) == 2
assert compat_ext.get_tag(add.__code__) == 12345

# A code object that dies: our free function runs for it.
namespace = {}
exec(compile("def temporary():\n    return 1\n", "<temporary>", "exec"),
     namespace)
namespace["temporary"]()
compat_ext.tag_code(namespace["temporary"].__code__, 7)
namespace.clear()
assert compat_ext.freed() == 1, compat_ext.freed()
print("compat_ext: ok")

# This check's map is of no use to a profiler: leave none behind.
sys.deactivate_stack_trampoline()
os.unlink(f"/tmp/perf-{os.getpid()}.map")

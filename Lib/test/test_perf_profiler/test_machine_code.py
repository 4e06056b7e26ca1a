"""What the machine sees of trampolines: the frame-pointer chain through
them, pointer authentication on aarch64, memory protections and address
ranges.  These checks need no profiler, so they run on every architecture,
under emulation too (make test-cross)."""

import json
import os
import platform
import re
import struct
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase,
                                          frame_pointers_enabled,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")
_testinternalcapi = import_helper.import_module("_testinternalcapi")

BACKENDS = ("perf", "perf_jit")

# Walks the frame-pointer chain three trampolined calls deep and prints
# [pid, walk] last.
WALK_THREE_DEEP = """
import _testinternalcapi, json, os
def inner():
    return _testinternalcapi.walk_frame_pointers()
def middle():
    return inner()
def outer():
    return middle()
print(json.dumps([os.getpid(), outer()]))
"""

AT_HWCAP = 16
HWCAP_PACA = 1 << 30


def pointer_authentication():
    """Whether this process runs with pointer authentication (aarch64)."""
    if platform.machine() != "aarch64":
        return False
    with open("/proc/self/auxv", "rb") as f:
        auxv = f.read()
    for key, value in struct.iter_unpack("<QQ", auxv):
        if key == AT_HWCAP:
            return bool(value & HWCAP_PACA)
    return False


class MachineCodeTestCase(PerfTestCase):

    def trampolines(self, pid, backend):
        """{name: (start, size)} of the trampolines pid described."""
        return {name.split(":")[2]: (addr, size)
                for addr, size, name in self.described_entries(pid, backend)}



@unittest.skipUnless(hasattr(_testinternalcapi, "walk_frame_pointers"),
                     "no frame-pointer walker for this platform")
@unittest.skipUnless(frame_pointers_enabled(),
                     "the interpreter is built without frame pointers")
class TestFramePointers(MachineCodeTestCase):

    def walk(self, backend):
        pid, rc, out, err, script = self.run_script(WALK_THREE_DEEP,
                                                    flags=("-X", backend))
        pid, walk = self.last_json(out)
        entries = self.described_entries(pid, backend)
        trampolines = {name.split(":", 3)[2]: (addr, size)
                       for addr, size, name in entries
                       if name.endswith(":" + script)}

        def owner(addr):
            for name in ("inner", "middle", "outer", "<module>"):
                start, size = trampolines[name]
                if start <= addr < start + size:
                    return name
            return None
        return walk, [owner(ret) for ret, stored in walk]

    def test_walk_finds_the_trampolines_in_order(self):
        # What perf record -g finds: each Python frame's trampoline, in
        # order, and the chain goes on past them.
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                walk, owners = self.walk(backend)
                found = [name for name in owners if name is not None]
                self.assertEqual(found,
                                 ["inner", "middle", "outer", "<module>"])
                self.assertGreater(len(owners),
                                   owners.index("<module>") + 1)

    @unittest.skipUnless(pointer_authentication(),
                         "no pointer authentication (aarch64 only; under "
                         "qemu, QEMU_CPU=max)")
    def test_trampolines_sign_their_return_address(self):
        # Each trampoline signs its return address (paci[ab]sp) before it
        # stores it in its frame record, and authenticates it before it
        # returns: a template whose instructions did not run, or that
        # authenticated with another key than it signed with (which
        # crashes), fails here.  A code can happen to be all zero bits
        # (one in 128 for a 7-bit code, as seen under qemu-user: one of 16
        # addresses came out unsigned), so one signed address of the four
        # is proof enough: they all come from the same template.
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                walk, owners = self.walk(backend)
                signed = [walk[i + 1][1] != walk[i + 1][0]
                          for i, name in enumerate(owners)
                          if name is not None]
                self.assertEqual(len(signed), 4, walk)
                self.assertTrue(any(signed), walk)


class TestMemory(MachineCodeTestCase):

    SCRIPT = """
import json, os
ns = {}
exec("\\n".join(f"def fn{i}(): return {i}" for i in range(5000)), ns)
for i in range(5000):
    ns[f"fn{i}"]()
with open("/proc/self/maps") as f:
    maps = f.read()
print(json.dumps([os.getpid(), maps]))
"""

    def test_never_writable_and_executable(self):
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script(
                    self.SCRIPT, flags=("-X", backend))
                pid, maps = self.last_json(out)
                mappings = []
                for line in maps.splitlines():
                    span, perms = line.split()[:2]
                    start, end = (int(x, 16) for x in span.split("-"))
                    mappings.append((start, end, perms))
                    self.assertFalse("w" in perms and "x" in perms, line)
                trampolines = self.trampolines(pid, backend)
                self.assertGreater(len(trampolines), 5000)
                for name, (addr, size) in trampolines.items():
                    perms = [p for start, end, p in mappings
                             if start <= addr and addr + size <= end]
                    self.assertEqual(perms, ["r-xs"], name)

    def test_ranges_never_overlap(self):
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script(
                    self.SCRIPT, flags=("-X", backend))
                pid, maps = self.last_json(out)
                ranges = sorted((addr, size) for addr, size, _
                                in self.described_entries(pid, backend))
                for (a, a_size), (b, b_size) in zip(ranges, ranges[1:]):
                    self.assertLessEqual(a + a_size, b,
                                         f"{a:#x}+{a_size} {b:#x}")

    def test_mappings_grow_with_megabytes(self):
        # A mapping per batch of trampolines, or of debugger images, would
        # reach vm.max_map_count (65,530) in a long-running process, after
        # which every mmap() fails.
        script = self.write_script("""
            import json, os, sys
            def mappings():
                with open("/proc/self/maps") as f:
                    return len(f.readlines())
            def make(n):
                ns = {}
                exec("\\n".join(f"def fn{i}(): return {i}"
                                 for i in range(n)), ns)
                for i in range(n):
                    ns[f"fn{i}"]()
            def arenas():
                # Arenas of 64 KiB, each twice the one before, up to 1 MiB
                # (Python/perf_arena.c).
                try:
                    from _testinternalcapi import get_perf_trampoline_stats
                except ImportError:
                    return 0
                left = get_perf_trampoline_stats()["arena_bytes"]
                count, size = 0, 64 * 1024
                while left > 0:
                    left -= size
                    count += 1
                    size = min(2 * size, 1024 * 1024)
                return count
            make(1000)
            before = mappings()
            before_arenas = arenas()
            make(20000)
            print(json.dumps([os.getpid(), before, mappings(),
                              arenas() - before_arenas]))
        """)
        # The program's own memory takes mappings too: compare with the
        # same program without trampolines.
        pid, rc, out, err = self.run_python(script)
        _, before, after, _ = self.last_json(out)
        plain = after - before
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err = self.run_python("-X", backend, script)
                pid, before, after, arenas = self.last_json(out)
                self.described_entries(pid, backend)      # removes the file
                # 20,000 trampolines: 5 MB of perf_jit arenas and 80
                # debugger images, which took 2 mappings per 256.  Each
                # arena is an object the dynamic loader knows, of two
                # mappings (Python/perf_loader.c).
                self.assertLessEqual(after - before, plain + 10 + 2 * arenas)


if __name__ == "__main__":
    unittest.main()


class TestCoreFiles(PerfTestCase):

    def test_core_file_keeps_what_is_used(self):
        # The address space reserved for trampolines and their unwind
        # information (Python/perf_loader.c) is shared memory, which a core
        # file (and gcore) would take whole where it is readable, reading
        # every page of it into memory: 100 MiB (perf) and 200 MiB
        # (perf_jit) more per core, before they were marked.  Only what is
        # in use is dumped.
        if {"QEMU_CPU", "QEMU_LD_PREFIX"} & os.environ.keys():
            # As Tools/perf/cross/test-cross.sh runs the tests.
            self.skipTest("qemu-user does not pass madvise(MADV_DONTDUMP) "
                          "on to the kernel")
        script = self.write_script("""
            import json
            ns = {}
            exec("\\n".join(f"def fn{i}(): return {i}"
                             for i in range(2000)), ns)
            for i in range(2000):
                ns[f"fn{i}"]()
            dumped = reserved = 0
            with open("/proc/self/smaps") as f:
                name = None
                for line in f:
                    fields = line.split()
                    if "-" in fields[0] and len(fields) >= 5:
                        lo, hi = (int(x, 16) for x in fields[0].split("-"))
                        readable = fields[1].startswith("r")
                        name = " ".join(fields[5:])
                    elif (fields[0] == "VmFlags:"
                          and name == "/dev/zero (deleted)"):
                        reserved += hi - lo
                        if readable and "dd" not in fields[1:]:
                            dumped += hi - lo
            print(json.dumps([dumped, reserved]))
        """)
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                pid, rc, out, err = self.run_python("-X", backend, script)
                self.forget_files(pid)
                dumped, reserved = self.last_json(out)
                self.assertGreater(reserved, 16 * 1024 * 1024)
                self.assertLess(dumped, 8 * 1024 * 1024)

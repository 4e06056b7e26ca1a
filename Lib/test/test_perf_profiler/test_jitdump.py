"""The perf_jit backend's jitdump, /tmp/jit-PID.dump, parsed here: its
records, the code and the DWARF unwind information of the trampolines,
how the backend is enabled, fork() and failures to open the dump."""

import os
import platform
import tempfile
import unittest

from test import support
from test.support import os_helper
from test.test_perf_profiler.util import (ELF_TEXT_OFFSET, JIT_CODE_LOAD,
                                          JIT_CODE_UNWINDING_INFO,
                                          JITDUMP_MAGIC, PerfTestCase,
                                          code_loads, decode_eh_frame,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestJitdump(PerfTestCase):
    """The perf_jit backend's /tmp/jit-PID.dump, parsed here."""

    SCRIPT = """
        import os, sys

        def leaf(x):
            return x + 1

        class Klass:
            def method(self):
                return leaf(1)

        def gen():
            yield Klass().method()

        sys.activate_stack_trampoline("perf_jit")
        assert sys.is_stack_trampoline_active()
        print(list(gen()))
        print(os.getpid())
    """

    def run_jit_script(self, source=None, flags=(), env=None):
        pid, rc, out, err, script = self.run_script(source or self.SCRIPT,
                                                    flags=flags, env=env)
        self.forget_dump(pid)
        return pid, out, err, script

    def test_dump_contents(self):
        pid, out, err, script = self.run_jit_script()
        self.assertEqual(err, "")
        self.assertEqual(out.splitlines()[0], "[2]")
        header, records = self.read_dump(pid)
        machine = platform.machine()
        self.assertEqual(header["magic"], JITDUMP_MAGIC)
        self.assertEqual(header["version"], 1)
        self.assertEqual(header["total_size"], 40)
        elf_mach = {"x86_64": 62, "aarch64": 183, "riscv64": 243}
        self.assertEqual(header["elf_mach"], elf_mach[machine])
        self.assertEqual(header["pid"], pid)
        self.assertGreater(len(records), 0)
        # An unwinding record right before every load record.
        ids = [rid for rid, _, _ in records]
        self.assertEqual(ids, [JIT_CODE_UNWINDING_INFO, JIT_CODE_LOAD]
                         * (len(ids) // 2))
        loads = code_loads(records)
        names = [f["name"] for f in loads]
        # (<module> was already running when the backend was activated.)
        for qualname in ("leaf", "Klass.method", "gen"):
            self.assertEqual(names.count(f"py::{qualname}:{script}"), 1,
                             qualname)
        self.assertEqual([f["code_index"] for f in loads],
                         list(range(len(loads))))
        timestamps = [ts for _, ts, _ in records]
        self.assertEqual(timestamps, sorted(timestamps))
        self.assertGreaterEqual(timestamps[0], header["timestamp"])
        codes = [f["code"] for f in loads]
        self.assertEqual(len(set(codes)), len(codes),
                         "code blobs must all differ")
        for f in loads:
            self.assertEqual(f["pid"], pid)
            self.assertEqual(f["vma"], f["code_addr"])
            self.assertEqual(len(f["code"]), f["code_size"])
            self.assertEqual(f["extra"], 0)
            # The template, then the trampoline's own address as a tag.
            self.assertEqual(f["code"][-8:],
                             f["code_addr"].to_bytes(8, "little"))
            self.assertEqual(f["code"][:-8], codes[0][:-8])
        if machine == "x86_64":
            self.assertEqual(codes[0][:12], bytes.fromhex(
                "f30f1efa 55 4889e5 ffd1 5d c3".replace(" ", "")))
        # perf maps each trampoline with its unwind info: no overlap.
        unwinds = [f for rid, _, f in records
                   if rid == JIT_CODE_UNWINDING_INFO]
        spans = sorted((f["code_addr"], f["code_addr"]
                        + (f["code_size"] + 7) // 8 * 8 + u["mapped_size"])
                       for f, u in zip(loads, unwinds))
        for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
            self.assertLessEqual(e1, s2)
        # ... and no further apart than that, rounded up to the arenas'
        # 16-byte alignment: memory made and touched for each new function.
        # Trampolines made one after another are neighbours, unless a new
        # arena started between them.
        stride = (spans[0][1] - spans[0][0] + 15) // 16 * 16
        gaps = [s2 - s1 for (s1, _), (s2, _) in zip(spans, spans[1:])]
        self.assertEqual(max(set(gaps), key=gaps.count), stride, gaps)

    def test_unwind_info(self):
        pid, out, err, script = self.run_jit_script()
        header, records = self.read_dump(pid)
        pairs = list(zip(records[::2], records[1::2]))
        self.assertTrue(pairs)
        for (uid, _, unwind), (lid, _, load) in pairs:
            self.assertEqual((uid, lid),
                             (JIT_CODE_UNWINDING_INFO, JIT_CODE_LOAD))
            self.assertEqual(unwind["record_size"] % 8, 0)
            self.assertGreaterEqual(unwind["mapped_size"],
                                    unwind["unwinding_size"])
            cie, begin, length, hdr, rows = decode_eh_frame(
                unwind["data"], unwind["eh_frame_hdr_size"],
                load["code_size"])
            self.assertEqual(cie["augmentation"], b"zR")
            self.assertEqual(cie["fde_encoding"], 0x1b)
            self.assertEqual(begin, ELF_TEXT_OFFSET)
            self.assertEqual(length, load["code_size"])
            self.assertEqual(hdr["eh_frame"], 0)
            self.assertEqual(hdr["count"], 1)
            self.assertEqual(hdr["initial_loc"], ELF_TEXT_OFFSET)
            self.assertGreater(hdr["fde"], 0)
            if platform.machine() == "x86_64":
                # rsp=7, rbp=6, return address=16
                self.assertEqual(cie["ra"], 16)
                self.assertEqual(cie["data_align"], -8)
                self.assertEqual(rows, {
                    0: ((7, 8), {16: -8}),          # endbr64
                    5: ((7, 16), {16: -8, 6: -16}),  # after push %rbp
                    8: ((6, 16), {16: -8, 6: -16}),  # after mov %rsp,%rbp
                    11: ((7, 8), {16: -8}),          # after pop %rbp
                })
            elif platform.machine() == "riscv64":
                # sp=2, s0=8, ra=1; the offsets depend on whether the
                # assembler chose compressed instructions.
                self.assertEqual(cie["ra"], 1)
                self.assertEqual(list(rows.values()), [
                    ((2, 0), {}),                   # addi sp, sp, -16
                    ((2, 16), {}),                  # sd ra; sd s0
                    ((2, 16), {1: -8, 8: -16}),     # the body
                    ((2, 0), {}),                   # after addi sp, sp, 16
                ])
                self.assertEqual(sorted(rows), list(rows))
                self.assertLess(max(rows), load["code_size"])
            else:
                self.assertEqual(cie["ra"], 30)
                self.assertEqual(rows[0], ((31, 0), {}))

    def test_enabling_and_switching(self):
        source = """
            import os, sys
            def f():
                return sys.is_stack_trampoline_active()
            print(f())
            sys.activate_stack_trampoline("perf")
            def g():
                return 1
            g()
            sys.activate_stack_trampoline("perf_jit")
            g()
            sys.deactivate_stack_trampoline()
            print(sys.is_stack_trampoline_active())
            print(os.getpid())
        """
        cases = [
            ((), {"PYTHON_PERF_JIT_SUPPORT": "1"}, "perf_jit"),
            (("-X", "perf_jit"), {}, "perf_jit"),
            (("-X", "perf_jit"), {"PYTHONPERFSUPPORT": "1"}, "perf_jit"),
            (("-X", "perf"), {"PYTHON_PERF_JIT_SUPPORT": "1"}, "perf"),
            (("-X", "perf_jit=0"), {"PYTHON_PERF_JIT_SUPPORT": "1"}, None),
            (("-E",), {"PYTHON_PERF_JIT_SUPPORT": "1"}, None),
            ((), {"PYTHON_PERF_JIT_SUPPORT": "abc"}, None),
        ]
        for flags, env, expected in cases:
            with self.subTest(flags=flags, env=env):
                pid, out, err, script = self.run_jit_script(
                    source, flags=flags, env=self.make_env(**env))
                self.assertEqual(err, "")
                lines = out.splitlines()
                self.assertEqual(lines[0], str(expected is not None))
                self.assertEqual(lines[1], "False")
                f_name = f"py::f:{script}"
                g_name = f"py::g:{script}"
                header, records = self.read_dump(pid)
                jit_names = [f["name"] for f in code_loads(records)]
                map_text = self.read_map(pid) or ""
                self.assertEqual(jit_names.count(f_name),
                                 int(expected == "perf_jit"))
                self.assertEqual(self.symbols(map_text).count(f_name),
                                 int(expected == "perf"))
                # Switching backends at run time: g is described by both.
                self.assertEqual(jit_names.count(g_name), 1)
                self.assertEqual(self.symbols(map_text).count(g_name), 1)

    @support.requires_fork()
    def test_fork(self):
        source = """
            import os, sys
            def parent():
                return 1
            def child():
                return 2
            sys.activate_stack_trampoline("perf_jit")
            parent()
            pid = os.fork()
            if pid == 0:
                child()
                parent()
                os._exit(0)
            os.waitpid(pid, 0)
            print(pid)
            print(os.getpid())
        """
        pid, out, err, script = self.run_jit_script(source)
        child = int(out.splitlines()[0])
        self.forget_dump(child)
        self.forget_map(child)
        _, parent_records = self.read_dump(pid)
        child_header, child_records = self.read_dump(child)
        self.assertEqual(child_header["pid"], child)
        pnames = [f["name"] for f in code_loads(parent_records)]
        cloads = code_loads(child_records)
        cnames = [f["name"] for f in cloads]
        self.assertIn(f"py::parent:{script}", cnames)
        self.assertIn(f"py::child:{script}", cnames)
        self.assertNotIn(f"py::child:{script}", pnames)
        self.assertEqual({f["pid"] for f in cloads}, {child})
        self.assertEqual({f["tid"] for f in cloads}, {child})
        # The child describes the trampoline it inherited when it runs it,
        # where the parent has it; nothing of the parent's dump is copied.
        paddrs = {f["name"]: f["code_addr"]
                  for f in code_loads(parent_records)}
        caddrs = {f["name"]: f["code_addr"] for f in cloads}
        self.assertEqual(caddrs[f"py::parent:{script}"],
                         paddrs[f"py::parent:{script}"])
        self.assertEqual(sorted(cnames), sorted([f"py::child:{script}",
                                                 f"py::parent:{script}"]))

    def test_open_failure(self):
        # A symbolic link at the path of the dump: activation fails and
        # nothing is created at the link's target.  The target is in a
        # new directory, so nothing else can create it.
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        target = os.path.join(tmpdir, "does-not-exist")
        source = """
            import os, sys
            path = f"/tmp/jit-{os.getpid()}.dump"
            # A dump left behind by an earlier process with the same PID.
            if os.path.lexists(path):
                os.unlink(path)
            os.symlink(sys.argv[1], path)
            try:
                sys.activate_stack_trampoline("perf_jit")
            except OSError as exc:
                print(type(exc).__name__, exc.filename == path)
            finally:
                os.unlink(path)
            print(sys.is_stack_trampoline_active())
            print(os.getpid())
        """
        pid, rc, out, err, script = self.run_script(source, target)
        self.forget_dump(pid)
        self.assertEqual(out.splitlines(), ["OSError True", "False",
                                            str(pid)])
        self.assertFalse(os.path.lexists(target))
        self.assertEqual(os.listdir(tmpdir), [])

    def test_failed_switch_keeps_active_backend(self):
        # Switching to perf_jit fails (a directory is in the way of the
        # dump): the perf backend that was working goes on working.
        source = """
            import os, sys
            sys.activate_stack_trampoline("perf")
            def before():
                return 1
            before()
            path = f"/tmp/jit-{os.getpid()}.dump"
            if os.path.lexists(path):
                os.unlink(path)
            os.mkdir(path)
            try:
                sys.activate_stack_trampoline("perf_jit")
            except OSError as exc:
                print("OSError", exc.filename == path)
            finally:
                os.rmdir(path)
            print(sys.is_stack_trampoline_active())
            def after():
                return 2
            after()
            print(os.getpid())
        """
        pid, rc, out, err, script = self.run_script(source)
        self.forget_dump(pid)
        self.assertEqual(out.splitlines(), ["OSError True", "True",
                                            str(pid)])
        self.assertEqual(err, "")
        text = self.assert_map_file(pid)
        self.assert_symbol_count(text, f"py::before:{script}", 1)
        self.assert_symbol_count(text, f"py::after:{script}", 1)

    def test_removed_dump_is_recreated_with_header(self):
        source = """
            import os, sys
            def first():
                return 1
            first()
            os.unlink(f"/tmp/jit-{os.getpid()}.dump")
            def second():
                return 2
            second()
            print(os.getpid())
        """
        pid, rc, out, err, script = self.run_script(
            source, flags=("-X", "perf_jit"))
        self.forget_dump(pid)
        header, records = self.read_dump(pid)
        self.assertEqual(header["magic"], JITDUMP_MAGIC)
        self.assertEqual(header["pid"], pid)
        names = [fields["name"] for fields in code_loads(records)]
        self.assertEqual(names, [f"py::second:{script}"])


if __name__ == "__main__":
    unittest.main()

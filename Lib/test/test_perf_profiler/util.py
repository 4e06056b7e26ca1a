"""Helpers shared by the test modules of test_perf_profiler.

- constants, and the skip helpers of the modules;
- paths of perf maps and jitdumps, and parsers for both (including the
  DWARF unwind information of a jitdump);
- PerfTestCase, the base class of the tests that run scenarios in child
  interpreters and inspect the files those leave behind;
- runners of Linux perf and a parser of "perf script" output.
"""

import json
import os
import platform
import re
import stat
import struct
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

from test import support
from test.support import os_helper
from test.support import script_helper


HAVE_PERF_TRAMPOLINE = (
    sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") == 1)

# Platforms that have a trampoline template (Python/asm_trampoline.S).
PLATFORM_SUPPORTED = (sys.platform == "linux"
                      and platform.machine() in ("x86_64", "aarch64", "riscv64"))

NO_TRAMPOLINE_REASON = ("perf trampolines are not supported by this build "
                        "(sysconfig PY_HAVE_PERF_TRAMPOLINE is not 1)")


# Built against musl libc (as Alpine's Python is), not glibc.
MUSL = getattr(sys.implementation, "_multiarch", "").endswith("-musl")


def requires_perf_trampoline(*, module=False):
    """Skip tests, or a whole test module, if this build has no perf
    trampolines.

    Used as a decorator, or called at the top of a module with
    module=True."""
    if module:
        if not HAVE_PERF_TRAMPOLINE:
            raise unittest.SkipTest(NO_TRAMPOLINE_REASON)
    else:
        return unittest.skipUnless(HAVE_PERF_TRAMPOLINE,
                                   NO_TRAMPOLINE_REASON)


# One line of a perf map: "ADDR SIZE py::QUALNAME:FILENAME\n".  '.' does not
# match a newline, so a match is exactly one line.
MAP_LINE_RE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::.+:.+\n\Z")
# The same, but allowing an empty file name: a very long qualified name
# may be truncated together with what follows it.
LOOSE_MAP_LINE_RE = re.compile(r"^[0-9a-f]+ [0-9a-f]+ py::[^\n]+\n\Z")

PY_NAME_RE = re.compile(r"py::")

# How many times a scenario is run again when a process got the PID of an
# earlier process that left a perf map behind.
MAX_ATTEMPTS = 5


# Perf maps ----------------------------------------------------------------

def perf_map_path(pid):
    return f"/tmp/perf-{pid}.map"


def map_name(pid):
    return os.path.basename(perf_map_path(pid))


def existing_maps():
    """Names of the perf maps in /tmp."""
    try:
        names = os.listdir("/tmp")
    except OSError:
        return frozenset()
    return frozenset(name for name in names
                     if name.startswith("perf-") and name.endswith(".map"))


class StaleMapPath(Exception):
    """A process of the scenario found a stale perf map at its path."""


def remove_path(path):
    """Remove whatever lives at path (file, symlink, FIFO or directory)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        os_helper.rmtree(path)
    else:
        os_helper.unlink(path)


def parse_map(text):
    """Return [(address, size, symbol)] for the lines of a perf map."""
    entries = []
    # Lines end at "\n" only, as perf reads them; str.splitlines() would
    # also split names at U+0085, U+2028 and others.
    lines = text.split("\n")
    if lines[-1] == "":
        del lines[-1]
    for line in lines:
        addr, size, symbol = line.split(" ", 2)
        entries.append((int(addr, 16), int(size, 16), symbol))
    return entries


OBSTACLE_KINDS = ("symlink", "dangling_symlink", "directory", "fifo",
                  "foreign_owner")

# Creates something at the perf map path that must not be written to.
# Shared by the child scripts of the map failure tests.
OBSTACLE_HELPERS = r'''
import os

def make_obstacle(kind, path, target):
    if kind in ("symlink", "dangling_symlink"):
        os.symlink(target, path)
    elif kind == "directory":
        os.mkdir(path, 0o700)
    elif kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "foreign_owner":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"foreign\n")
        os.close(fd)
        os.chown(path, 65534, 65534)
    else:
        raise ValueError(kind)

def remove_obstacle(path):
    if os.path.isdir(path) and not os.path.islink(path):
        os.rmdir(path)
    else:
        os.unlink(path)
'''


# Jitdumps (perf_jit backend) ----------------------------------------------

JITDUMP_MAGIC = 0x4A695444
JIT_CODE_LOAD = 0
JIT_CODE_UNWINDING_INFO = 4
ELF_TEXT_OFFSET = 64     # where "perf inject --jit" puts the code


def jitdump_path(pid):
    return f"/tmp/jit-{pid}.dump"


def parse_jitdump(data):
    """Return (header dict, [(id, timestamp, fields dict)])."""
    (magic, version, total, mach, pad, pid, ts, flags) = struct.unpack_from(
        "<IIIIIIQQ", data, 0)
    header = dict(magic=magic, version=version, total_size=total,
                  elf_mach=mach, pid=pid, timestamp=ts, flags=flags)
    records = []
    pos = total
    while pos < len(data):
        rid, size, ts = struct.unpack_from("<IIQ", data, pos)
        if size < 16 or pos + size > len(data):
            raise ValueError(f"bad record at {pos}: id {rid} size {size}")
        body = data[pos + 16:pos + size]
        if rid == JIT_CODE_LOAD:
            pid, tid, vma, addr, csize, index = struct.unpack_from(
                "<IIQQQQ", body, 0)
            end = body.index(b"\0", 40)
            name = body[40:end].decode("utf-8")
            code = body[end + 1:end + 1 + csize]
            fields = dict(pid=pid, tid=tid, vma=vma, code_addr=addr,
                          code_size=csize, code_index=index, name=name,
                          code=code, extra=len(body) - (end + 1 + csize))
        elif rid == JIT_CODE_UNWINDING_INFO:
            usize, hsize, msize = struct.unpack_from("<QQQ", body, 0)
            fields = dict(unwinding_size=usize, eh_frame_hdr_size=hsize,
                          mapped_size=msize, data=body[24:24 + usize],
                          record_size=size)
        else:
            fields = {}
        records.append((rid, ts, fields))
        pos += size
    return header, records


def code_loads(records):
    """The fields of the JIT_CODE_LOAD records of a parsed jitdump."""
    return [fields for rid, _, fields in records if rid == JIT_CODE_LOAD]


def read_uleb(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7f) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def read_sleb(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7f) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


def decode_eh_frame(unwind, hdr_size, code_size):
    """Decode the .eh_frame + .eh_frame_hdr of one trampoline as laid out
    in the ELF file perf inject writes.  Return (cie, fde_start,
    fde_range, hdr_info, rows): rows maps a code offset to
    (cfa_reg, cfa_off, {reg: offset}) in effect from that offset on."""
    eh_frame = unwind[:len(unwind) - hdr_size]
    hdr = unwind[len(unwind) - hdr_size:]
    eh_addr = (ELF_TEXT_OFFSET + code_size + 7) // 8 * 8
    hdr_addr = eh_addr + len(eh_frame)

    # CIE
    length, cie_id = struct.unpack_from("<Ii", eh_frame, 0)
    assert cie_id == 0, cie_id
    version = eh_frame[8]
    aug_end = eh_frame.index(b"\0", 9)
    aug = eh_frame[9:aug_end]
    pos = aug_end + 1
    code_align, pos = read_uleb(eh_frame, pos)
    data_align, pos = read_sleb(eh_frame, pos)
    ra_reg, pos = read_uleb(eh_frame, pos)
    aug_len, pos = read_uleb(eh_frame, pos)
    fde_enc = eh_frame[pos]
    pos += aug_len
    cie_insns = eh_frame[pos:4 + length]
    cie = dict(version=version, augmentation=aug, code_align=code_align,
               data_align=data_align, ra=ra_reg, fde_encoding=fde_enc)

    # FDE
    fde = 4 + length
    flength, cie_ptr = struct.unpack_from("<II", eh_frame, fde)
    assert fde + 4 - cie_ptr == 0, "CIE pointer"
    (pc_rel,) = struct.unpack_from("<i", eh_frame, fde + 8)
    pc_begin = eh_addr + fde + 8 + pc_rel
    (pc_range,) = struct.unpack_from("<I", eh_frame, fde + 12)
    pos = fde + 16
    aug_len, pos = read_uleb(eh_frame, pos)
    pos += aug_len
    fde_insns = eh_frame[pos:fde + 4 + flength]
    terminator = eh_frame[fde + 4 + flength:]
    assert terminator == b"\0\0\0\0", terminator

    # .eh_frame_hdr
    version, ptr_enc, count_enc, table_enc = hdr[:4]
    assert (version, ptr_enc, count_enc, table_enc) == (1, 0x1b, 0x03, 0x3b)
    eh_ptr, count, loc, fde_ptr = struct.unpack_from("<iIii", hdr, 4)
    hdr_info = dict(eh_frame=hdr_addr + 4 + eh_ptr - eh_addr, count=count,
                    initial_loc=hdr_addr + loc, fde=hdr_addr + fde_ptr
                    - eh_addr)

    # Run the CFA programs.
    state = {"cfa": None, "regs": {}}
    rows = {}
    loc = 0

    def run(insns):
        nonlocal loc
        pos = 0
        while pos < len(insns):
            op = insns[pos]
            pos += 1
            high, low = op & 0xc0, op & 0x3f
            if high == 0x40:        # advance_loc
                rows[loc] = (state["cfa"], dict(state["regs"]))
                loc += low * code_align
            elif high == 0x80:      # offset
                off, pos = read_uleb(insns, pos)
                state["regs"][low] = off * data_align
            elif high == 0xc0:      # restore
                if low in initial_regs:
                    state["regs"][low] = initial_regs[low]
                else:
                    state["regs"].pop(low, None)
            elif op == 0x0c:        # def_cfa
                reg, pos = read_uleb(insns, pos)
                off, pos = read_uleb(insns, pos)
                state["cfa"] = (reg, off)
            elif op == 0x0d:        # def_cfa_register
                reg, pos = read_uleb(insns, pos)
                state["cfa"] = (reg, state["cfa"][1])
            elif op == 0x0e:        # def_cfa_offset
                off, pos = read_uleb(insns, pos)
                state["cfa"] = (state["cfa"][0], off)
            elif op == 0x2d:        # AARCH64_negate_ra_state
                state["regs"]["ra_signed"] = not state["regs"].get(
                    "ra_signed", False)
            elif op == 0x00:        # nop
                pass
            else:
                raise ValueError(f"unexpected CFA opcode {op:#x}")

    initial_regs = {}
    run(cie_insns)
    initial_regs = dict(state["regs"])
    run(fde_insns)
    rows[loc] = (state["cfa"], dict(state["regs"]))
    return cie, pc_begin, pc_range, hdr_info, rows


# Interpreters ---------------------------------------------------------------

def frame_pointers_enabled():
    """Whether this interpreter was built with -fno-omit-frame-pointer."""
    for var in ("PY_CFLAGS", "CFLAGS", "CONFIGURE_CFLAGS",
                "PY_CFLAGS_NODIST"):
        value = sysconfig.get_config_var(var) or ""
        if "-fno-omit-frame-pointer" in value:
            return True
    return False


def nofp_python():
    """An interpreter built without frame pointers for the perf_jit
    backend's real-perf tests: PYTHON_NOFP_INTERPRETER (make test builds
    one), or this one if it lacks frame pointers.  None if there is none."""
    path = os.environ.get("PYTHON_NOFP_INTERPRETER")
    if path:
        return path
    if not frame_pointers_enabled():
        return sys.executable
    return None


# Child interpreters ---------------------------------------------------------

class PerfTestCase(unittest.TestCase):
    """Helpers to run child interpreters and inspect their perf maps and
    jitdumps.

    Every scenario runs in a fresh child interpreter, whose map is
    /tmp/perf-PID.map of its own (see run_python()), so the functions of
    a scenario can have plain names.  The files that the children create
    are removed when the test ends."""

    def make_env(self, **overrides):
        """A copy of the environment without PYTHONPERFSUPPORT, updated
        with overrides (None removes a variable)."""
        env = dict(os.environ)
        env.pop("PYTHONPERFSUPPORT", None)
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def forget_map(self, pid):
        self.addCleanup(remove_path, perf_map_path(pid))

    def forget_dump(self, pid):
        self.addCleanup(remove_path, jitdump_path(pid))

    def forget_files(self, pid):
        """Remove both description files of pid when the test ends:
        a child run with -X perf_jit leaves a jitdump."""
        self.forget_map(pid)
        self.forget_dump(pid)

    def run_python(self, *args, env=None, expect_rc=0, timeout=None,
                   input=None, executable=None, cwd=None):
        """Run executable (default: sys.executable) with args, in cwd, and
        return (pid, returncode, stdout, stderr).  The perf map and the
        jitdump of the child are removed when the test ends.

        /tmp is shared and PIDs get reused: if a stale map of an earlier
        process happens to exist at the path of the child, the child
        appends to it and the result would be unreliable, so the child is
        run again (it gets another PID)."""
        if env is None:
            env = self.make_env()
        if executable is None:
            executable = sys.executable
        for attempt in range(MAX_ATTEMPTS):
            existing = existing_maps()
            proc = subprocess.Popen(
                [executable, *args],
                stdin=(subprocess.PIPE if input is not None
                       else subprocess.DEVNULL),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                cwd=cwd)
            with proc:
                try:
                    out, err = proc.communicate(
                        input, timeout=timeout or support.SHORT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    self.forget_files(proc.pid)
                    self.fail(f"child {args!r} timed out\n"
                              f"stdout:\n{out!r}\nstderr:\n{err!r}")
            if map_name(proc.pid) not in existing:
                break
        else:
            self.skipTest("stale perf maps kept colliding with the PIDs "
                          "of child processes")
        # Maps of the children of the child existed before if their names
        # are in this set: see check_fresh().
        self.existing_maps = existing
        self.forget_files(proc.pid)
        out = out.decode("utf-8", "backslashreplace")
        err = err.decode("utf-8", "backslashreplace")
        if expect_rc is not None and proc.returncode != expect_rc:
            self.fail(f"child {args!r} exited with {proc.returncode}, "
                      f"expected {expect_rc}\n"
                      f"stdout:\n{out}\nstderr:\n{err}")
        return proc.pid, proc.returncode, out, err

    def check_fresh(self, *pids):
        """Raise StaleMapPath if the map of one of the pids (processes
        started by the last child) existed before that child started."""
        stale = [pid for pid in pids if map_name(pid) in self.existing_maps]
        for pid in pids:
            if pid not in stale:
                self.forget_files(pid)
        if stale:
            raise StaleMapPath(stale)

    def retrying(self, func):
        """Call func() again while it raises StaleMapPath."""
        for attempt in range(MAX_ATTEMPTS):
            try:
                return func()
            except StaleMapPath:
                pass
        self.skipTest("stale perf maps kept colliding with the PIDs of "
                      "child processes")

    def write_script(self, source, name="perf_script.py"):
        """Write source, dedented, to a file in a new temporary directory
        and return its path."""
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(os_helper.rmtree, tmpdir)
        return script_helper.make_script(tmpdir, name[:-3],
                                         textwrap.dedent(source))

    def run_script(self, source, *script_args, flags=(), env=None,
                   expect_rc=0):
        """Write source to a file and run it.  Return (pid, rc, stdout,
        stderr, script path)."""
        script = self.write_script(source)
        pid, rc, out, err = self.run_python(*flags, script, *script_args,
                                            env=env, expect_rc=expect_rc)
        return pid, rc, out, err, script

    def last_json(self, out):
        lines = out.strip().splitlines()
        self.assertTrue(lines, "the child printed nothing")
        return json.loads(lines[-1])

    def read_map(self, pid):
        """The text of the perf map of pid, or None if there is none."""
        path = perf_map_path(pid)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        # The map must be valid UTF-8, whatever the names hold.
        return data.decode("utf-8")

    def assert_map_file(self, pid):
        """Check the file properties and the format of the map of pid and
        return its text."""
        path = perf_map_path(pid)
        text = self.read_map(pid)
        self.assertIsNotNone(text, f"{path} was not created")
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode), path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, path)
        self.assertEqual(st.st_uid, os.geteuid(), path)
        self.assert_map_format(text)
        return text

    def assert_map_format(self, text):
        self.assertTrue(text.endswith("\n"), "last line not terminated")
        # Lines end at "\n" only (see parse_map()).
        lines = [line + "\n" for line in text.split("\n")[:-1]]
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, LOOSE_MAP_LINE_RE)
            addr, size, _ = line.split(" ", 2)
            self.assertFalse(addr.startswith("0x"), line)
            self.assertFalse(size.startswith("0x"), line)
            self.assertGreater(int(size, 16), 0, line)
            if len(line) < 900:
                # Not one of the over-long names of test_names_and_format.
                self.assertRegex(line, MAP_LINE_RE)

    def assert_no_overlap(self, entries):
        """Address ranges of different entries never overlap and an
        address is never reused."""
        addrs = [addr for addr, _, _ in entries]
        self.assertEqual(len(addrs), len(set(addrs)),
                         "an address was described twice")
        ordered = sorted(entries)
        for (a1, s1, n1), (a2, s2, n2) in zip(ordered, ordered[1:]):
            self.assertLessEqual(
                a1 + s1, a2,
                f"{a1:x}+{s1:x} ({n1}) overlaps {a2:x} ({n2})")

    def symbols(self, text):
        return [symbol for _, _, symbol in parse_map(text)]

    def assert_symbol_count(self, text, symbol, count, msg=None):
        found = self.symbols(text).count(symbol)
        self.assertEqual(found, count,
                         msg or f"{symbol!r} appears {found} times, "
                                f"expected {count}")

    def assert_not_described(self, text, qualname):
        """No line of the map text names a function whose qualified name
        is qualname, whatever its file name."""
        self.assertNotIn(f"py::{qualname}:", text)

    def read_dump(self, pid):
        """Check the file properties of the jitdump of pid and return it,
        parsed: (header, records)."""
        path = jitdump_path(pid)
        st = os.lstat(path)
        self.assertTrue(stat.S_ISREG(st.st_mode), path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600, path)
        with open(path, "rb") as f:
            return parse_jitdump(f.read())

    def described_entries(self, pid, backend):
        """[(address, size, name)] that the file of backend ("perf" or
        "perf_jit") of pid describes."""
        if backend == "perf":
            return parse_map(self.assert_map_file(pid))
        self.forget_dump(pid)
        _, records = self.read_dump(pid)
        return [(load["code_addr"], load["code_size"], load["name"])
                for load in code_loads(records)]

    def trampoline_ranges(self, pid, backend):
        """{qualified name: (address, size)} of the trampolines that the
        file of backend of pid describes."""
        return {symbol[4:].split(":")[0]: (addr, size)
                for addr, size, symbol in self.described_entries(pid, backend)
                if symbol.startswith("py::")}

    def named_addresses(self, addrs, ranges):
        """The names of the trampolines that addrs fall in, in order."""
        return [name for addr in addrs
                for name, (start, size) in ranges.items()
                if start <= addr < start + size]


# Linux perf -----------------------------------------------------------------

# A frame of a call chain in the output of "perf script":
# "    ADDR SYMBOL (DSO)".
PERF_FRAME_RE = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)$")


def parse_perf_script(text):
    """Return the call chains of the samples in the output of
    "perf script": [[symbol, ...] innermost first, per sample]."""
    samples = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.strip("\n").splitlines()
        if not lines:
            continue
        frames = []
        for line in lines[1:]:
            match = PERF_FRAME_RE.match(line)
            if match:
                frames.append(match.group(1))
        samples.append(frames)
    return samples


def _tail(data, size=300):
    return data.decode(errors="replace").strip()[-size:]


def run_perf(cmd, what, *, env=None, check=True):
    """Run a perf command and return its CompletedProcess.  Skip the
    running test if it times out, or if it fails and check is true."""
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                              capture_output=True, env=env,
                              timeout=support.LONG_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise unittest.SkipTest(f"{what} timed out")
    if check and proc.returncode != 0:
        raise unittest.SkipTest(f"{what} failed: {_tail(proc.stderr)}")
    return proc


def check_perf_record(perf, python, options=()):
    """Raise SkipTest unless "perf record" with options can record
    python."""
    with tempfile.TemporaryDirectory() as tmpdir:
        data = os.path.join(tmpdir, "probe.data")
        cmd = [*perf_command(perf, tmpdir), "record", *options, "-o", data,
               "-e", "cpu-clock", "--", python, "-c", "pass"]
        env = dict(os.environ)
        env.pop("PYTHONPERFSUPPORT", None)   # no map to clean up
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                                  capture_output=True, env=env,
                                  timeout=support.SHORT_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise unittest.SkipTest(f"perf record cannot run: {exc}")
        if proc.returncode != 0:
            raise unittest.SkipTest("perf record cannot record: "
                                    + _tail(proc.stderr))


def perf_command(perf, tmpdir):
    """The start of the command lines that run perf: perf keeps a copy of
    every binary it meets (among them the ELF files "perf inject --jit"
    makes) in a build-id cache; use one in tmpdir, which goes away with
    the test, instead of ~/.debug."""
    return [perf, "--buildid-dir", os.path.join(tmpdir, "buildid-cache")]


def perf_samples(perf_cmd, data):
    """The call chains of the samples in the perf data file data;
    perf_cmd comes from perf_command()."""
    proc = run_perf([*perf_cmd, "script", "-i", data], "perf script")
    return parse_perf_script(proc.stdout.decode("utf-8", "replace"))


def perf_samples_by_pid(perf_cmd, data):
    """[(pid, [symbol, ...] innermost first)] for the samples in the perf
    data file data; perf_cmd comes from perf_command()."""
    proc = run_perf([*perf_cmd, "script", "-F", "pid,ip,sym,dso", "-i", data],
                    "perf script")
    samples = []
    for block in re.split(r"\n\s*\n", proc.stdout.decode("utf-8",
                                                           "replace")):
        lines = block.strip("\n").splitlines()
        if not lines or not lines[0].strip().isdigit():
            continue
        frames = [m.group(1) for m in map(PERF_FRAME_RE.match, lines[1:])
                  if m]
        samples.append((int(lines[0]), frames))
    return samples


def remove_jitted_objects(pid):
    """Remove the ELF files "perf inject --jit" made for the jitdump of
    pid."""
    for name in os.listdir("/tmp"):
        if name.startswith(f"jitted-{pid}-") and name.endswith(".so"):
            os_helper.unlink(os.path.join("/tmp", name))

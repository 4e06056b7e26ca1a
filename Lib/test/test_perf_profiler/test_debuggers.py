"""Debuggers and unwinders see through trampolines, and name them.

Trampolines are described to debuggers through the GDB JIT interface (an
in-memory ELF image per batch of trampolines, linked into
__jit_debug_descriptor), never to libgcc's unwinder.  The first tests
check those descriptions from inside the process; the others run gdb,
lldb, eu-stack (elfutils), bpftrace and glibc's backtrace() on
trampolined stacks.
"""

import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (MUSL, PerfTestCase, code_loads,
                                          jitdump_path, parse_jitdump,
                                          parse_map, perf_map_path,
                                          remove_path,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


# A program that stops three trampolined Python calls deep, with SIGTRAP
# (a debugger stops there; the program is not meant to run without one).
STOP_THREE_DEEP = """
    import os, signal
    print("PID", os.getpid(), flush=True)

    def inner():
        os.kill(os.getpid(), signal.SIGTRAP)

    def middle():
        inner()

    def outer():
        middle()

    outer()
"""

# The frames gdb and lldb show for the trampolines of STOP_THREE_DEEP,
# innermost first.
THREE_NAMES = ("py::inner ({script})", "py::middle ({script})",
               "py::outer ({script})")

# Where a complete native backtrace of the main thread ends up.
MAIN_FRAMES = ("Py_BytesMain", "__libc_start_main", "main")


def debugger_env():
    """The environment for a debugger: none of the variables that would
    change the interpreter it embeds, or make gdb look for debug info on
    the network."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("PYTHON") and key != "DEBUGINFOD_URLS"}
    env["LC_ALL"] = "C"
    return env


_gdb_usable = None


def gdb_usable():
    """None if gdb can run and trace a process here, else why not."""
    global _gdb_usable
    if _gdb_usable is None:
        if shutil.which("gdb") is None:
            _gdb_usable = "gdb is not installed"
        else:
            proc = subprocess.run(
                ["gdb", "-nx", "-batch", "-ex", "run",
                 "--args", sys.executable, "-S", "-c", "pass"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=debugger_env(),
                timeout=support.SHORT_TIMEOUT)
            out = proc.stdout.decode("utf-8", "replace")
            if "exited normally" not in out:
                _gdb_usable = f"gdb cannot run a process here: {out[-500:]}"
            else:
                _gdb_usable = ""
    return _gdb_usable or None


skip_core_files_under_asan = unittest.skipIf(
    support.check_sanitizer(address=True),
    "a core file would hold AddressSanitizer's shadow memory")


def requires_gdb(test):
    def wrapper(self, *args, **kwargs):
        reason = gdb_usable()
        if reason:
            self.skipTest(reason)
        return test(self, *args, **kwargs)
    wrapper.__name__ = test.__name__
    wrapper.__doc__ = test.__doc__
    return wrapper


def trampoline_frames(bt):
    """The names of the py:: frames of a gdb or lldb backtrace, in
    order."""
    return re.findall(r"(py::[^\n]*?\))(?: \(\))?(?: \+ \d+)?$", bt,
                      re.MULTILINE)


# Reads the debugger descriptions of the calling process.  Defines
# images(path): [(text address, text size, [(name, address, size)], [FDE
# pc ranges])] for every image in __jit_debug_descriptor's list, and the
# size the description file at path had then.
READ_IMAGES = r'''
import ctypes, os, struct

class JitCodeEntry(ctypes.Structure):
    pass

JitCodeEntry._fields_ = [("next", ctypes.POINTER(JitCodeEntry)),
                         ("prev", ctypes.POINTER(JitCodeEntry)),
                         ("symfile_addr", ctypes.c_void_p),
                         ("symfile_size", ctypes.c_uint64)]

class JitDescriptor(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32),
                ("action_flag", ctypes.c_uint32),
                ("relevant_entry", ctypes.POINTER(JitCodeEntry)),
                ("first_entry", ctypes.POINTER(JitCodeEntry))]

def sections(elf):
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", elf, 0x3c)
    result = []
    for i in range(shnum):
        (name, type_, flags, addr, offset, size, link, info, align,
         entsize) = struct.unpack_from("<IIQQQQIIQQ", elf, shoff + 64 * i)
        result.append(dict(name=name, type=type_, addr=addr, offset=offset,
                           size=size, link=link, info=info))
    names = result[shstrndx]
    for s in result:
        start = names["offset"] + s["name"]
        s["name"] = elf[start:elf.index(b"\0", start)].decode()
    return {s["name"]: s for s in result}

def fde_ranges(data):
    """(pc_begin, pc_range) of the FDEs of an .eh_frame with 8-byte
    absolute pointers."""
    ranges = []
    pos = 0
    while True:
        length, = struct.unpack_from("<I", data, pos)
        if length == 0:
            return ranges
        cie_id, = struct.unpack_from("<I", data, pos + 4)
        if cie_id != 0:
            ranges.append(struct.unpack_from("<QQ", data, pos + 8))
        pos += 4 + length

def snapshot(path):
    """Copies of the images, and the size of the description file at
    path, taken with no Python code running in between that could make a
    trampoline (and change an image)."""
    desc = JitDescriptor.in_dll(ctypes.CDLL(None), "__jit_debug_descriptor")
    assert desc.version == 1, desc.version
    assert desc.action_flag == 0, desc.action_flag
    copies = []
    entry = desc.first_entry
    while entry:
        e = entry.contents
        copies.append(ctypes.string_at(e.symfile_addr, e.symfile_size))
        entry = e.next
    return copies, os.stat(path).st_size

def images(path):
    snapshot(path)      # makes the trampolines that snapshot() needs
    result = []
    copies, described = snapshot(path)
    for elf in copies:
        assert elf[:4] == b"\x7fELF", elf[:4]
        s = sections(elf)
        text = s[".text"]
        symtab, strtab = s[".symtab"], s[".strtab"]
        syms = []
        for i in range(1, symtab["size"] // 24):
            name, info, other, shndx, value, size = struct.unpack_from(
                "<IBBHQQ", elf, symtab["offset"] + 24 * i)
            start = strtab["offset"] + name
            syms.append((elf[start:elf.index(b"\0", start)].decode(),
                         text["addr"] + value, size))
        eh = s[".eh_frame"]
        fdes = fde_ranges(elf[eh["offset"]:eh["offset"] + eh["size"]])
        # No room is left after the FDEs: .symtab follows them.
        gap = symtab["offset"] - (eh["offset"] + eh["size"])
        assert 0 <= gap < 8, gap
        # Whatever memory an image reuses, what it does not set is zero:
        # the header's unused fields, the null section and symbol, the
        # links of sections other than .symtab and the padding.
        shoff, = struct.unpack_from("<Q", elf, 0x28)
        assert elf[:0x40] == copies[0][:0x40], "ELF headers differ"
        assert elf[9:16] + elf[0x18:0x28] + elf[0x36:0x3a] == bytes(27)
        assert elf[shoff:shoff + 64] == bytes(64)
        assert elf[symtab["offset"]:symtab["offset"] + 24] == bytes(24)
        names = s[".shstrtab"]
        assert elf[names["offset"] + names["size"]:eh["offset"]].count(0) \
            == eh["offset"] - (names["offset"] + names["size"])
        assert elf[eh["offset"] + eh["size"]:symtab["offset"]] == bytes(gap)
        assert all(sec["link"] == sec["info"] == 0
                   for name, sec in s.items() if name != ".symtab")
        result.append((text["addr"], text["size"], syms, fdes))
    return result, described
'''


class TestImages(PerfTestCase):
    """The images described to debuggers, read from inside the process."""

    def check_images(self, backend):
        pid, rc, out, err, script = self.run_script(READ_IMAGES + """
import json, os, sys

def make_many(n):
    ns = {}
    exec("\\n".join(f"def fn{i}(): return {i}" for i in range(n)), ns)
    for i in range(n):
        ns[f"fn{i}"]()

make_many(1000)
found, described = images(f"/tmp/{sys.argv[1]}-{os.getpid()}.{sys.argv[2]}")
print(json.dumps([os.getpid(), found, described]))
""", *(("perf", "map") if backend == "perf" else ("jit", "dump")),
            flags=("-X", backend))
        self.assertEqual(err, "")
        pid, images, described = self.last_json(out)
        if backend == "perf":
            text = self.assert_map_file(pid)
            entries = parse_map(text.encode()[:described].decode())
        else:
            self.forget_dump(pid)
            with open(jitdump_path(pid), "rb") as f:
                _, records = parse_jitdump(f.read(described))
            entries = [(load["code_addr"], load["code_size"], load["name"])
                       for load in code_loads(records)]
        self.assertGreater(len(entries), 1000)

        symbols = {}
        for text, text_size, syms, fdes in images:
            self.assertTrue(syms, "an image without symbols")
            # Every slot of the image has unwind information from the
            # start, and the FDEs cover exactly its .text.
            self.assertEqual(fdes[0][0], text)
            stride = (text_size // len(fdes))
            self.assertEqual([begin for begin, _ in fdes],
                             [text + i * stride for i in range(len(fdes))])
            for name, addr, size in syms:
                self.assertGreaterEqual(addr, text)
                self.assertLessEqual(addr + size, text + text_size)
                self.assertNotIn(addr, symbols)
                symbols[addr] = (name, size)
            self.assertTrue(all(r == syms[0][2] for _, r in fdes))
        # Batched: a new image per 256 trampolines at most, not one per
        # trampoline.
        self.assertLessEqual(len(images), len(entries) // 256 + 4)
        # Every trampoline described to profilers so far is named the
        # same way for debuggers, with the same code size.
        for addr, size, name in entries:
            qualname, _, filename = name[4:].partition(":")
            self.assertEqual(symbols.get(addr),
                             (f"py::{qualname} ({filename})", size),
                             hex(addr))

    def test_perf_backend(self):
        self.check_images("perf")

    def test_perf_jit_backend(self):
        self.check_images("perf_jit")

    def test_long_name_is_cut_at_a_character_boundary(self):
        pid, rc, out, err, script = self.run_script(READ_IMAGES + """
import json, os, sys
ns = {}
exec("def f(): pass", ns)
f = ns["f"]
f.__code__ = f.__code__.replace(co_qualname="\u00e9" * 3000)
f()
found, _ = images(f"/tmp/perf-{os.getpid()}.map")
print(json.dumps([os.getpid(), [name for _, _, syms, _ in found
                                for name, _, _ in syms]]))
""", flags=("-X", "perf"))
        pid, names = self.last_json(out)
        self.forget_map(pid)
        long = [name for name in names if "\u00e9" in name]
        self.assertEqual(len(long), 1, long)
        # A prefix of the name, under the limit of 512 bytes with its NUL
        # (json.loads() would have failed on a cut character).
        self.assertEqual(long[0], "py::" + "\u00e9" * 253)

    def test_no_images_when_inactive(self):
        pid, rc, out, err, script = self.run_script(READ_IMAGES + """
print(len(snapshot(__file__)[0]))
""")
        self.assertEqual(out.strip(), "0")


class TestBacktrace(PerfTestCase):
    """glibc's backtrace() (libgcc's unwinder) walks through every
    trampoline: the dynamic loader knows each arena as an object with
    unwind information (Python/perf_loader.c); nothing is registered with
    libgcc, whose registry is not safe to use from signal handlers."""

    SCRIPT = """
        import json, os
        from _testinternalcapi import native_backtrace

        def inner():
            frames = native_backtrace()
            return [a for a, _ in frames], [n for _, n in frames]

        def middle():
            return inner()

        def outer():
            return middle()

        addrs, names = outer()
        print(json.dumps([os.getpid(), addrs, names]))
    """

    def test_backtrace_walks_through_trampolines(self):
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        if not hasattr(_testinternalcapi, "native_backtrace"):
            self.skipTest("needs _testinternalcapi.native_backtrace()")
        # Without trampolines, all the way out.
        _, _, out, _, _ = self.run_script(self.SCRIPT)
        _, addrs, names = self.last_json(out)
        self.assertTrue(any("Py_BytesMain" in name for name in names),
                        "\n".join(names))

        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                pid, rc, out, err, script = self.run_script(
                    self.SCRIPT, flags=("-X", backend))
                pid, addrs, names = self.last_json(out)
                ranges = self.trampoline_ranges(pid, backend)
                # A return address into each function's trampoline, from
                # the innermost out, then the rest of the way out.
                self.assertEqual(self.named_addresses(addrs, ranges)[:3],
                                 ["inner", "middle", "outer"], names)
                self.assertTrue(any("Py_BytesMain" in name
                                    for name in names), "\n".join(names))


# A second JIT compiler's registrar in the process, as LLVM's GDB listener,
# LuaJIT and V8 have: its own __jit_debug_descriptor and
# __jit_debug_register_code, and one function of x86-64 machine code it
# made (second_compile()), described in an ELF image of its own until
# second_release().  second_call(f) calls f from that function.
SECOND_REGISTRAR = r"""
#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

struct jit_code_entry {
    struct jit_code_entry *next_entry, *prev_entry;
    const char *symfile_addr;
    uint64_t symfile_size;
};
struct jit_descriptor {
    uint32_t version, action_flag;
    struct jit_code_entry *relevant_entry, *first_entry;
};
struct jit_descriptor __jit_debug_descriptor = {1, 0, 0, 0};

__attribute__((noinline)) void
__jit_debug_register_code(void)
{
    __asm__ __volatile__("" ::: "memory");
}

/* push %rbp; mov %rsp, %rbp; call *%rdi; pop %rbp; ret */
static const unsigned char body[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd7,
                                     0x5d, 0xc3};
static unsigned char *code;
static struct jit_code_entry entry;
static struct {
    Elf64_Ehdr ehdr;
    Elf64_Shdr shdr[5];
    Elf64_Sym sym[2];
    char strtab[24];
    char shstrtab[40];
} image;

int
second_compile(void)
{
    static const char shstr[] = "\0.text\0.symtab\0.strtab\0.shstrtab";
    code = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED) {
        return -1;
    }
    memcpy(code, body, sizeof(body));
    if (mprotect(code, 4096, PROT_READ | PROT_EXEC) < 0) {
        return -1;
    }
    memcpy(image.strtab, "\0second_jit_function", 21);
    memcpy(image.shstrtab, shstr, sizeof(shstr));
    Elf64_Ehdr *e = &image.ehdr;
    memcpy(e->e_ident, ELFMAG, SELFMAG);
    e->e_ident[EI_CLASS] = ELFCLASS64;
    e->e_ident[EI_DATA] = ELFDATA2LSB;
    e->e_ident[EI_VERSION] = EV_CURRENT;
    e->e_type = ET_REL;
    e->e_machine = EM_X86_64;
    e->e_version = EV_CURRENT;
    e->e_shoff = offsetof(__typeof__(image), shdr);
    e->e_ehsize = sizeof(Elf64_Ehdr);
    e->e_shentsize = sizeof(Elf64_Shdr);
    e->e_shnum = 5;
    e->e_shstrndx = 4;
    Elf64_Shdr *s = image.shdr;
    s[1].sh_name = 1;
    s[1].sh_type = SHT_NOBITS;
    s[1].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
    s[1].sh_addr = (uintptr_t)code;
    s[1].sh_size = sizeof(body);
    s[1].sh_addralign = 16;
    s[2].sh_name = 7;
    s[2].sh_type = SHT_SYMTAB;
    s[2].sh_offset = offsetof(__typeof__(image), sym);
    s[2].sh_size = sizeof(image.sym);
    s[2].sh_link = 3;
    s[2].sh_info = 1;
    s[2].sh_addralign = 8;
    s[2].sh_entsize = sizeof(Elf64_Sym);
    s[3].sh_name = 15;
    s[3].sh_type = SHT_STRTAB;
    s[3].sh_offset = offsetof(__typeof__(image), strtab);
    s[3].sh_size = sizeof(image.strtab);
    s[3].sh_addralign = 1;
    s[4].sh_name = 23;
    s[4].sh_type = SHT_STRTAB;
    s[4].sh_offset = offsetof(__typeof__(image), shstrtab);
    s[4].sh_size = sizeof(shstr);
    s[4].sh_addralign = 1;
    image.sym[1].st_name = 1;
    image.sym[1].st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    image.sym[1].st_shndx = 1;
    image.sym[1].st_size = sizeof(body);
    entry.symfile_addr = (const char *)&image;
    entry.symfile_size = sizeof(image);
    entry.next_entry = __jit_debug_descriptor.first_entry;
    if (entry.next_entry != NULL) {
        entry.next_entry->prev_entry = &entry;
    }
    __jit_debug_descriptor.first_entry = &entry;
    __jit_debug_descriptor.relevant_entry = &entry;
    __jit_debug_descriptor.action_flag = 1;     /* JIT_REGISTER_FN */
    __jit_debug_register_code();
    __jit_debug_descriptor.action_flag = 0;
    return 0;
}

void
second_release(void)
{
    if (entry.prev_entry != NULL) {
        entry.prev_entry->next_entry = entry.next_entry;
    }
    else {
        __jit_debug_descriptor.first_entry = entry.next_entry;
    }
    if (entry.next_entry != NULL) {
        entry.next_entry->prev_entry = entry.prev_entry;
    }
    __jit_debug_descriptor.relevant_entry = &entry;
    __jit_debug_descriptor.action_flag = 2;     /* JIT_UNREGISTER_FN */
    __jit_debug_register_code();
    __jit_debug_descriptor.action_flag = 0;
}

void
second_call(void (*f)(void))
{
    ((void (*)(void (*)(void)))code)(f);
}

/* The descriptor that this library's code edits. */
void *
second_descriptor(void)
{
    return &__jit_debug_descriptor;
}
"""

# Its two builds: plain, and with a version script that gives every symbol
# a default version (Debian's libLLVM-14.so exports the two names as
# __jit_debug_descriptor@@LLVM_14).
SECOND_REGISTRAR_BUILDS = {"plain": None,
                           "versioned": "SECOND_1 { global: *; };\n"}


def build_second_registrar(testcase, build):
    """The path of the second registrar built as build, in a temporary
    directory removed at cleanup; the test is skipped if it cannot be
    built."""
    # The compiler of the interpreter's own build: a cross build's under
    # qemu.
    cc = (sysconfig.get_config_var("CC") or "").split()[:1]
    cc = shutil.which(cc[0]) if cc else shutil.which("gcc")
    if cc is None:
        testcase.skipTest("needs a C compiler")
    tmp = tempfile.mkdtemp()
    testcase.addCleanup(shutil.rmtree, tmp)
    source = os.path.join(tmp, "second.c")
    with open(source, "w") as f:
        f.write(SECOND_REGISTRAR)
    lib = os.path.join(tmp, f"libsecond_{build}.so")
    args = [cc, "-shared", "-fPIC", "-O2", "-o", lib, source]
    script = SECOND_REGISTRAR_BUILDS[build]
    if script is not None:
        version_map = os.path.join(tmp, "second.map")
        with open(version_map, "w") as f:
            f.write(script)
        args.append(f"-Wl,--version-script={version_map}")
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        testcase.skipTest(f"cannot build the second registrar: "
                          f"{proc.stderr[-500:]}")
    return lib


def shared_libpython():
    return bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))


class TestSecondRegistrar(PerfTestCase):
    """Another JIT compiler's registrar for debuggers beside ours.  The
    interpreter exports the GDB interface's names (a debugger finds them
    in a stripped interpreter only so), and the other registrar's code
    binds to them, as the executable's come first: there is one list,
    which both edit.  (With a list of its own, gdb 13 would not see the
    other's: it reads the executable's __jit_debug_descriptor for every
    object that defines one, taking it for a copy relocation.)  Each
    adds and removes only its own entries, so the list stays whole while
    they take turns; two threads that edit it at the same moment, each
    under a lock of its own, could lose an entry (see the howto)."""

    def test_one_list(self):
        for build in SECOND_REGISTRAR_BUILDS:
            with self.subTest(build=build):
                lib = build_second_registrar(self, build)
                pid, rc, out, err, script = self.run_script(
                    READ_IMAGES + textwrap.dedent(f"""
                    import json, sys
                    second = ctypes.CDLL({lib!r})
                    second.second_descriptor.restype = ctypes.c_void_p
                    path = f"/tmp/perf-{{os.getpid()}}.map"
                    ours = ctypes.addressof(JitDescriptor.in_dll(
                        ctypes.CDLL(None), "__jit_debug_descriptor"))

                    def entries():
                        n = 0
                        entry = JitDescriptor.from_address(ours).first_entry
                        while entry:
                            n += 1
                            entry = entry.contents.next
                        return n

                    def names():
                        return [name for _, _, syms, _ in images(path)[0]
                                for name, _, _ in syms]

                    def before():
                        return 1
                    before()
                    images(path)
                    alone = entries()
                    assert second.second_compile() == 0
                    with_theirs = entries()

                    def between():
                        return 2
                    between()
                    second.second_release()

                    def after():
                        return 3
                    after()
                    result = names()
                    print(json.dumps(dict(
                        shared=second.second_descriptor() == ours,
                        added=with_theirs - alone,
                        left=entries() - alone,
                        named=[any(n.startswith(f"py::{{f}} (")
                                   for n in result)
                               for f in ("before", "between", "after")])))
                """), flags=("-X", "perf"))
                self.assertEqual(self.last_json(out),
                                 dict(shared=True, added=1, left=0,
                                      named=[True, True, True]))


def unnamed_frames(bt):
    """The frames of gdb's backtrace bt that it cannot name.  On musl,
    whose C library has no unwind information here (Debian's), not those
    of the C library nor the one that gdb makes up above one of them: the
    same as without trampolines."""
    unnamed = []
    after_libc = False
    for line in re.findall(r"^#\d+ .*$", bt, re.M):
        in_libc = MUSL and " from /lib/ld-musl-" in line
        if re.match(r"#\d+ +0x[0-9a-f]+ in \?\? \(\)", line) and not (
                in_libc or after_libc):
            unnamed.append(line)
        after_libc = in_libc
    return unnamed


class DebuggerTestCase(PerfTestCase):

    def run_debugger(self, args, timeout=None):
        proc = subprocess.run(args, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env=debugger_env(),
                              timeout=timeout or support.SHORT_TIMEOUT)
        out = proc.stdout.decode("utf-8", "replace")
        # The program's output can share a line with the debugger's.
        for m in re.finditer(r"\bPID (\d+)\b", out):
            self.forget_map(int(m.group(1)))
            self.forget_dump(int(m.group(1)))
        return out

    def assert_complete_bt(self, bt, script, names=THREE_NAMES):
        frames = trampoline_frames(bt)
        expected = [name.format(script=script) for name in names]
        self.assertEqual(frames[:len(expected)], expected, bt)
        self.assertNotIn("Backtrace stopped", bt)
        self.assertEqual(unnamed_frames(bt), [], bt)
        self.assertTrue(any(frame in bt for frame in MAIN_FRAMES), bt)

    def gdb_run(self, script, *commands, flags=("-X", "perf"),
                executable=None):
        args = ["gdb", "-nx", "-batch",
                "-iex", f"add-auto-load-safe-path "
                        f"{os.path.dirname(sys.executable)}",
                "-ex", "run"]
        for command in commands:
            args += ["-ex", command]
        args += ["--args", executable or sys.executable, *flags, script]
        return self.run_debugger(args)

    def start_perf_script(self, script, flags=("-X", "perf")):
        """Start script with flags and support.LONG_TIMEOUT as its
        argument (how long it may sleep), its stdout a pipe; it is killed
        and its files are removed at cleanup."""
        proc = subprocess.Popen(
            [sys.executable, *flags, script, str(support.LONG_TIMEOUT)],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=self.make_env())
        self.forget_files(proc.pid)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc


def kill_if_alive(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class TestGdb(DebuggerTestCase):

    def gdb_bt_in_child(self, script):
        """gdb's bt where the forked child of script stops."""
        return self.run_debugger(
            ["gdb", "-nx", "-batch",
             "-ex", "set follow-fork-mode child",
             "-ex", "set detach-on-fork on",
             "-ex", "run", "-ex", "bt",
             "--args", sys.executable, "-X", "perf", script])

    @requires_gdb
    def test_bt_live(self):
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                script = self.write_script(STOP_THREE_DEEP)
                out = self.gdb_run(script, "bt", flags=("-X", backend))
                self.assertIn("SIGTRAP", out)
                self.assert_complete_bt(out, script)

    @requires_gdb
    @unittest.skipUnless(platform.machine() == "x86_64",
                         "the second registrar's code is x86-64")
    def test_second_registrar(self):
        # Another JIT compiler's registrar beside ours: gdb names the
        # frames of both (a Python function called back from the other
        # compiler's code, called from a Python function).
        for build in SECOND_REGISTRAR_BUILDS:
            with self.subTest(build=build):
                lib = build_second_registrar(self, build)
                script = self.write_script(f"""
                    import ctypes, os, signal
                    print("PID", os.getpid(), flush=True)
                    second = ctypes.CDLL({lib!r})
                    assert second.second_compile() == 0

                    def inner():
                        os.kill(os.getpid(), signal.SIGTRAP)

                    callback = ctypes.CFUNCTYPE(None)(inner)

                    def outer():
                        second.second_call(callback)

                    outer()
                """)
                out = self.gdb_run(script, "bt")
                self.assertIn("SIGTRAP", out)
                frames = trampoline_frames(out)
                self.assertEqual(frames[0], f"py::inner ({script})", out)
                self.assertIn(f"py::outer ({script})", frames)
                self.assertRegex(out, r"in second_jit_function \(\)")
                self.assertLess(out.index("second_jit_function"),
                                out.index(f"py::outer ({script})"))
                self.assertNotIn("Backtrace stopped", out)
                self.assertTrue(any(frame in out for frame in MAIN_FRAMES),
                                out)

    @requires_gdb
    def test_bt_environment_variable(self):
        script = self.write_script(STOP_THREE_DEEP)
        out = self.run_debugger(
            ["gdb", "-nx", "-batch",
             "-ex", "set environment PYTHONPERFSUPPORT=1",
             "-ex", "run", "-ex", "bt",
             "--args", sys.executable, script])
        self.assert_complete_bt(out, script)

    @requires_gdb
    def test_py_bt(self):
        hooks = os.path.join(os.path.dirname(sys.executable),
                             "python-gdb.py")
        if not os.path.exists(hooks):
            self.skipTest(f"{hooks} does not exist")
        script = self.write_script(STOP_THREE_DEEP)
        out = self.gdb_run(script, f"source {hooks}", "py-bt", "echo --\n",
                           "py-up", "py-up", "py-list")
        bt, _, up_list = out.partition("--\n")
        self.assertRegex(
            bt, r"(?s)in inner\n.*in middle\n.*in outer\n.*in <module>")
        # Two Python frames up from os.kill() is middle(), at its call.
        self.assertRegex(up_list, r"line \d+, in inner \(\)")
        self.assertRegex(up_list, r"line \d+, in middle \(\)")
        self.assertRegex(up_list, r">\s*\d+\s+inner\(\)")

    @requires_gdb
    def test_forked_child(self):
        # The child's bt goes through a trampoline it inherited (outer) and
        # one it made after the fork (in_child), from an image of its own.
        script = self.write_script("""
            import os, signal
            print("PID", os.getpid(), flush=True)

            def in_child():
                os.kill(os.getpid(), signal.SIGTRAP)

            def outer():
                pid = os.fork()
                if pid == 0:
                    print("PID", os.getpid(), flush=True)
                    in_child()
                    os._exit(0)
                os.waitpid(pid, 0)

            outer()
        """)
        out = self.gdb_bt_in_child(script)
        self.assert_complete_bt(out, script,
                                names=("py::in_child ({script})",
                                       "py::outer ({script})"))

    @requires_gdb
    def test_forked_child_attached_later(self):
        # The parent goes on adding symbols to the image that was growing
        # at the fork; the child's copy of that image is its own (copy on
        # write), and gdb attached to the child later finds it whole.
        script = self.write_script("""
            import os, sys, time

            def in_child(r):
                os.read(r, 1)
                print(os.getpid(), flush=True)
                if sys.implementation._multiarch.endswith("-musl"):
                    # Python code until killed: gdb cannot walk out of
                    # musl's functions, where the child would sleep.
                    while True:
                        pass
                time.sleep(float(sys.argv[1]))

            def outer():
                r, w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    in_child(r)
                    os._exit(0)
                for i in range(50):
                    exec(f"def after_fork_{i}(): pass\\nafter_fork_{i}()")
                os.write(w, b"x")
                os.waitpid(pid, 0)

            outer()
        """)
        proc = self.start_perf_script(script)
        child = int(proc.stdout.readline())
        self.forget_files(child)
        # Killed before the parent, which waits for it.
        self.addCleanup(kill_if_alive, child)
        out = self.run_debugger(
            ["gdb", "-nx", "-batch", "-p", str(child), "-ex", "bt"])
        self.assert_complete_bt(out, script,
                                names=("py::in_child ({script})",
                                       "py::outer ({script})"))

    @requires_gdb
    def test_slow_debugger(self):
        # A debugger that takes 0.2 s to answer each notification (as gdb
        # does on a loaded machine, only more so) is still told every new
        # name: the budget counts the program's CPU time, not the
        # debugger's.
        script = self.write_script("""
            import os, signal
            print("PID", os.getpid(), flush=True)

            def inner():
                os.kill(os.getpid(), signal.SIGTRAP)
        """ + "".join(f"""
            def level{i}():
                {"inner" if i == 0 else f"level{i - 1}"}()
        """ for i in range(8)) + """
            level7()
        """)
        commands = os.path.join(os.path.dirname(script), "slow.gdb")
        with open(commands, "w") as f:
            f.write("break __jit_debug_register_code\n"
                    "commands\nsilent\nshell sleep 0.2\ncontinue\nend\n")
        out = self.run_debugger(
            ["gdb", "-nx", "-batch", "-x", commands, "-ex", "run",
             "-ex", "bt",
             "--args", sys.executable, "-X", "perf", script])
        self.assert_complete_bt(
            out, script,
            names=("py::inner ({script})",
                   *(f"py::level{i} ({{script}})" for i in range(8))))

    @requires_gdb
    def test_forked_child_of_a_busy_parent(self):
        # The child's CPU time starts again from zero, below the parent's
        # last reading: the child's names are still told (second_new is
        # in the image that first_new's started, told within the budget).
        script = self.write_script("""
            import os, signal, time
            print("PID", os.getpid(), flush=True)

            def spin():
                end = time.process_time() + 0.3
                while time.process_time() < end:
                    pass

            def after_spin():
                pass

            def second_new():
                os.kill(os.getpid(), signal.SIGTRAP)

            def first_new():
                second_new()

            def outer():
                spin()
                after_spin()
                pid = os.fork()
                if pid == 0:
                    print("PID", os.getpid(), flush=True)
                    first_new()
                    os._exit(0)
                os.waitpid(pid, 0)

            outer()
        """)
        out = self.gdb_bt_in_child(script)
        self.assert_complete_bt(out, script,
                                names=("py::second_new ({script})",
                                       "py::first_new ({script})",
                                       "py::outer ({script})"))

    @requires_gdb
    @skip_core_files_under_asan
    @unittest.skipIf(MUSL, "gdb attached to a process asleep in musl's C "
                     "library cannot walk out of it (no unwind information "
                     "in Debian's musl), without trampolines too")
    def test_attach_and_core(self):
        script = self.write_script("""
            import os, sys, time
            def inner():
                print("ready", flush=True)
                time.sleep(support_timeout)
            def middle():
                inner()
            def outer():
                middle()
            support_timeout = float(sys.argv[1])
            outer()
        """)
        proc = self.start_perf_script(script)
        self.assertEqual(proc.stdout.readline(), b"ready\n")
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmpdir)
        core = os.path.join(tmpdir, "core")
        out = self.run_debugger(
            ["gdb", "-nx", "-batch", "-p", str(proc.pid),
             "-ex", "bt", "-ex", f"gcore {core}"])
        self.assert_complete_bt(out, script)
        self.assertTrue(os.path.exists(core), out)
        proc.kill()
        out = self.run_debugger(
            ["gdb", "-nx", "-batch", "-ex", "bt", sys.executable, core])
        self.assert_complete_bt(out, script)

    @requires_gdb
    @skip_core_files_under_asan
    def test_no_new_warnings(self):
        # The arenas' object of the dynamic loader is opened while gdb
        # runs the program (Python/perf_loader.c): gdb reads its path
        # then, and a core file lists it.  gdb says nothing about
        # them that it does not say about the same program without
        # trampolines, but for the arenas' shared memory in a core file.
        script = self.write_script("""
            import os, signal
            print("PID", os.getpid(), flush=True)
            ns = {}
            exec("\\n".join(f"def fn{i}(): return {i}"
                            for i in range(30000)), ns)
            for i in range(30000):
                ns[f"fn{i}"]()
            os.kill(os.getpid(), signal.SIGTRAP)
        """)
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmpdir)

        def warnings(flags):
            core = os.path.join(tmpdir, "core")
            out = self.gdb_run(script, "bt 1", f"gcore {core}", "kill",
                               flags=flags)
            self.assertTrue(os.path.exists(core), out)
            out += self.run_debugger(
                ["gdb", "-nx", "-batch", "-ex", "bt 1", sys.executable,
                 core])
            os.unlink(core)
            # Without the numbers that differ between processes.
            return {re.sub(r"\d+", "N", line)
                    for line in out.splitlines() if "warning" in line}

        plain = warnings(())
        shared_memory = ("warning: Can't open file /dev/zero (deleted) "
                         "during file-backed mapping note processing")
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                self.assertEqual(warnings(("-X", backend)) - plain,
                                 {shared_memory})

    @requires_gdb
    def test_cost_with_gdb_attached(self):
        # 20,000 new functions, as fast as they can be made: with gdb
        # attached from the start, this takes about 5 times as long here
        # (each notification stops the process twice; see
        # Python/perf_debugger.c); one image per function would take
        # minutes.  Only the program's own time is compared.
        script = self.write_script("""
            import os, time
            start = time.perf_counter()
            print("PID", os.getpid(), flush=True)
            ns = {}
            exec("\\n".join(f"def fn{i}(): return {i}"
                            for i in range(20000)), ns)
            for i in range(20000):
                ns[f"fn{i}"]()
            print("ELAPSED", time.perf_counter() - start, flush=True)
        """)

        def elapsed(out):
            m = re.search(r"^ELAPSED (\S+)$", out, re.MULTILINE)
            self.assertIsNotNone(m, out)
            return float(m.group(1))

        pid, rc, out, err = self.run_python("-X", "perf", script)
        alone = elapsed(out)
        traced = elapsed(self.gdb_run(script))
        self.assertLess(traced, 20 * alone + 1.0,
                        f"{traced:.3f} s with gdb, {alone:.3f} s without")


class TestLldb(DebuggerTestCase):

    def test_bt(self):
        if shutil.which("lldb") is None:
            self.skipTest("lldb is not installed")
        script = self.write_script(STOP_THREE_DEEP)
        out = self.run_debugger(
            ["lldb", "--no-lldbinit", "--batch",
             "-o", "run", "-o", "bt",
             "--", sys.executable, "-X", "perf", script])
        if "stop reason" not in out:
            self.skipTest(f"lldb cannot run a process here: {out[-500:]}")
        frames = trampoline_frames(out)
        expected = [name.format(script=script) for name in THREE_NAMES]
        self.assertEqual(frames[:3], expected, out)
        self.assertIn("Py_BytesMain", out)


# The programs of the eu-stack and bpftrace tests.  They make 30,000
# functions first, whose trampolines fill several arenas in the text of an
# object of the dynamic loader (Python/perf_loader.c), and count the objects
# without a name in the loader's list (the main program's, and the
# arenas').  Then they print "PID N OBJECTS M" three trampolined calls
# deep.
MANY_ARENAS = """
    import ctypes, os, sys, time

    class PhdrInfo(ctypes.Structure):
        _fields_ = [("dlpi_addr", ctypes.c_void_p),
                    ("dlpi_name", ctypes.c_char_p)]

    VISIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(PhdrInfo),
                             ctypes.c_size_t, ctypes.c_void_p)

    def unnamed_objects():
        names = []
        def visit(info, size, data):
            names.append(info.contents.dlpi_name)
            return 0
        ctypes.PyDLL(None).dl_iterate_phdr(VISIT(visit), None)
        return sum(1 for name in names if not name)

    ns = {}
    exec("\\n".join(f"def fn{i}(): return {i}" for i in range(30000)), ns)
    for i in range(30000):
        ns[f"fn{i}"]()
    objects = unnamed_objects()

    def middle():
        inner()

    def outer():
        middle()
"""

# Sleeps for sys.argv[1] seconds in one call of time.sleep().
SLEEP_THREE_DEEP = MANY_ARENAS + """
    def inner():
        print("PID", os.getpid(), "OBJECTS", objects, flush=True)
        time.sleep(float(sys.argv[1]))

    outer()
"""

# Calls time.sleep() again and again for sys.argv[1] seconds: each call
# reaches _PyTime_FromSecondsObject(), which bpftrace probes.
SLEEP_LOOP_THREE_DEEP = MANY_ARENAS + """
    def inner():
        print("PID", os.getpid(), "OBJECTS", objects, flush=True)
        end = time.monotonic() + float(sys.argv[1])
        while time.monotonic() < end:
            time.sleep(0.05)

    outer()
"""

# The Python functions on the stacks of both programs, innermost first.
SLEEPING_FUNCTIONS = ("inner", "middle", "outer", "<module>")


def wait_until_asleep(pid):
    """Wait until the process pid sleeps (state S), for at most
    support.LONG_TIMEOUT seconds.  Return whether it does."""
    deadline = time.monotonic() + support.LONG_TIMEOUT
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
        if state == "S":
            return True
        time.sleep(0.01)
    return False


class ToolTestCase(DebuggerTestCase):
    """Runs a tool on the same program without trampolines and with each
    backend, and compares what the tool says."""

    # Only measured on x86-64: elsewhere, the tests compare what the tools
    # say, but not how far they walk.
    WALKS_MEASURED = platform.machine() == "x86_64"

    def setUp(self):
        super().setUp()
        # The programs count the loader's objects with ctypes.
        import_helper.import_module("ctypes")

    def start_program(self, script, backend):
        """Start script, without trampolines if backend is None; return
        its Popen once it sleeps three calls deep, and the number of
        objects without a name in its loader's list."""
        flags = () if backend is None else ("-X", backend)
        proc = self.start_perf_script(script, flags)
        line = proc.stdout.readline().decode("utf-8", "replace")
        m = re.fullmatch(r"PID (\d+) OBJECTS (\d+)\n", line)
        self.assertIsNotNone(m, f"the program printed {line!r}")
        self.assertEqual(int(m.group(1)), proc.pid)
        self.assertTrue(wait_until_asleep(proc.pid),
                        f"{proc.pid} did not go to sleep")
        return proc, int(m.group(2))

    def run_tool(self, args, timeout=support.LONG_TIMEOUT):
        """Run args; return (returncode, stdout, stderr)."""
        proc = subprocess.run(args, stdin=subprocess.DEVNULL,
                              capture_output=True, env=debugger_env(),
                              timeout=timeout)
        return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"))

    def complaints(self, out, err, frame_re):
        """The lines of err and the lines of out that are not frames
        (matched by frame_re), without the numbers that differ between
        processes (PIDs, addresses)."""
        lines = err.splitlines() + [line for line in out.splitlines()
                                    if not frame_re.match(line)]
        return {re.sub(r"\b0x[0-9a-fA-F]+\b|\d+", "N", line)
                for line in lines if line.strip()}

    def check_frames(self, frames, plain, pid, backend, script):
        """frames [(address, name or None)], innermost first, go through
        the trampolines of SLEEPING_FUNCTIONS, in order, with one frame of
        the evaluation loop between two of them, and the other frames are
        those of the program without trampolines (plain: names, innermost
        first).  Return the frames in trampolines: [(the name the tool
        gave, the trampoline's name in the description file)].  Skip where
        the walks cannot be compared."""
        if not self.WALKS_MEASURED:
            self.skipTest("how far the tools walk was measured on x86-64 "
                          "only")
        if "Py_BytesMain" not in plain:
            self.skipTest("without trampolines, the walk does not reach "
                          "Py_BytesMain (no frame pointers?)")
        entries = self.described_entries(pid, backend)
        inside, positions = [], []
        for i, (addr, name) in enumerate(frames):
            # A return address may be the end of its trampoline.
            pc = addr if i == 0 else addr - 1
            for start, size, entry_name in entries:
                if start <= pc < start + size:
                    inside.append((name, entry_name))
                    positions.append(i)
                    break
        report = "\n".join(f"{addr:#x} {name}" for addr, name in frames)
        self.assertEqual([entry_name for _, entry_name in inside],
                         [f"py::{name}:{script}"
                          for name in SLEEPING_FUNCTIONS], report)
        first = positions[0]
        self.assertEqual(positions,
                         list(range(first, first + 2 * len(positions), 2)),
                         report)
        # The evaluation loop called the innermost trampoline, and was
        # called by every trampoline but the outermost.
        loop = {frames[i][1] for i in range(first - 1, positions[-1], 2)}
        self.assertEqual(len(loop), 1, report)
        self.assertEqual([name for i, (_, name) in enumerate(frames)
                          if not first <= i <= positions[-1]],
                         plain, report)
        return inside


# One frame of eu-stack's output: "#N  0xADDRESS NAME"; the name is missing
# where eu-stack has none.
EU_STACK_FRAME_RE = re.compile(r"^#\d+\s+0x([0-9a-f]+)(?:\s+(\S.*))?$")


class TestEuStack(ToolTestCase):
    """eu-stack (elfutils) on a live process and on a core file.  elfutils
    finds the arenas in /proc/PID/maps and in a core file as mappings of
    "/dev/zero (deleted)", modules without an ELF file, and says nothing
    about them.  It walks through the trampolines (finding no unwind
    information for them, elfutils falls back on the frame pointer, which
    each trampoline keeps; measured also with an interpreter built without
    frame pointers), but reads neither perf maps nor the GDB JIT
    interface, so it gives the trampolines' frames no name."""

    def setUp(self):
        if shutil.which("eu-stack") is None:
            self.skipTest("eu-stack (elfutils) is not installed")
        super().setUp()

    def eu_stack(self, args):
        """Run eu-stack with args; return (returncode, complaints,
        [(address, name or None)] of the first thread, innermost
        first)."""
        rc, out, err = self.run_tool(["eu-stack", *args])
        frames = []
        for line in out.splitlines():
            if line.startswith("TID ") and frames:
                break
            m = EU_STACK_FRAME_RE.match(line)
            if m:
                frames.append((int(m.group(1), 16), m.group(2)))
        return rc, self.complaints(out, err, EU_STACK_FRAME_RE), frames

    def check(self, stack_of):
        """Compare stack_of(pid) (an eu-stack result) for the program
        without trampolines and with each backend."""
        script = self.write_script(SLEEP_THREE_DEEP)
        results = {}
        for backend in (None, "perf", "perf_jit"):
            proc, objects = self.start_program(script, backend)
            results[backend] = (proc.pid, objects, *stack_of(proc.pid))
            proc.kill()
            proc.wait()
        _, plain_objects, plain_rc, plain_complaints, plain_frames = (
            results[None])
        plain_names = [name for _, name in plain_frames]
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                pid, objects, rc, complaints, frames = results[backend]
                # The arenas were in an object of the loader.
                self.assertEqual(objects, plain_objects + 1)
                self.assertEqual(rc, plain_rc)
                self.assertEqual(complaints, plain_complaints)
                self.check_frames(frames, plain_names, pid, backend, script)

    def test_live(self):
        self.check(lambda pid: self.eu_stack(["-p", str(pid)]))

    @requires_gdb
    @skip_core_files_under_asan
    def test_core(self):
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmpdir)

        def stack_of(pid):
            core = os.path.join(tmpdir, f"core.{pid}")
            out = self.run_debugger(
                ["gdb", "-nx", "-batch", "-p", str(pid),
                 "-ex", f"gcore {core}"], timeout=support.LONG_TIMEOUT)
            self.assertTrue(os.path.exists(core), out)
            result = self.eu_stack([f"--core={core}",
                                    f"--executable={sys.executable}"])
            os.unlink(core)
            return result

        self.check(stack_of)


_bpftrace_usable = None


def bpftrace_usable():
    """None if bpftrace can load a program here and sees the PIDs of
    this PID namespace, else why not."""
    global _bpftrace_usable
    if _bpftrace_usable is None:
        _bpftrace_usable = ""
        if shutil.which("bpftrace") is None:
            _bpftrace_usable = "bpftrace is not installed"
            return _bpftrace_usable
        proc = subprocess.Popen(
            ["bpftrace", "-e", 'BEGIN { printf("PID %d\\n", pid); exit(); }'],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=debugger_env())
        with proc:
            try:
                out, err = proc.communicate(timeout=support.LONG_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                _bpftrace_usable = "bpftrace timed out loading a program"
                return _bpftrace_usable
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
        if proc.returncode != 0:
            _bpftrace_usable = (f"bpftrace cannot load a program here: "
                                f"{err[-500:]}")
        elif f"PID {proc.pid}\n" not in out:
            # Its programs see the PIDs of another PID namespace: a
            # predicate on the PID of a process would never hold.
            _bpftrace_usable = (f"bpftrace sees PIDs of another PID "
                                f"namespace: {out[-200:]!r} for {proc.pid}")
    return _bpftrace_usable or None


def interpreter_binary(pid):
    """The file of the process pid that holds the interpreter's code."""
    if shared_libpython():
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                fields = line.split(maxsplit=5)
                if (len(fields) == 6 and
                        os.path.basename(fields[5]).startswith("libpython")):
                    return fields[5].rstrip("\n")
    return os.path.realpath(sys.executable)


# One frame of ustack(perf): "\tADDRESS SYMBOL+OFFSET (MODULE)", or
# "\tADDRESS 0xADDRESS ([unknown])" where bpftrace has no name.
BPFTRACE_FRAME_RE = re.compile(r"^\t([0-9a-f]+) (.+?)(?:\+\d+)? \((.*)\)$")


class TestBpftrace(ToolTestCase):
    """bpftrace prints the user stack of a uprobe (the kernel walks it by
    frame pointers).  It names the trampolines of the perf backend from
    /tmp/perf-PID.map (bcc's symbolizer, for addresses outside the ELF
    files of the process); the perf_jit backend writes no perf map, and
    bpftrace reads no jitdump, so it gives those frames no name.  With
    either backend, it says nothing more than without trampolines."""

    def setUp(self):
        # The kernel's uprobes never see the code that qemu-user runs
        # (Tools/perf/cross/test-cross.sh sets these).
        if {"QEMU_CPU", "QEMU_LD_PREFIX"} & os.environ.keys():
            self.skipTest("the program runs under qemu-user")
        reason = bpftrace_usable()
        if reason:
            self.skipTest(reason)
        super().setUp()

    def bpftrace(self, pid):
        """The user stack of the first call of _PyTime_FromSecondsObject()
        in pid that bpftrace sees: (returncode, complaints,
        [(address, name or None)], [module]), innermost first."""
        # bpftrace 0.17 probes every process that runs the binary (-p
        # does not restrict a uprobe), some of which may be other tests':
        # the predicate keeps pid's calls only.
        # The program calls the function every 50 ms: a minute without a
        # call means that bpftrace sees none.
        program = (f"uprobe:{interpreter_binary(pid)}:"
                   f"_PyTime_FromSecondsObject /pid == {pid}/ "
                   '{ printf("%s\\n", ustack(perf)); exit(); } '
                   "interval:s:60 { exit(); }")
        rc, out, err = self.run_tool(["bpftrace", "-p", str(pid),
                                      "-e", program])
        frames, modules = [], []
        for line in out.splitlines():
            m = BPFTRACE_FRAME_RE.match(line)
            if m:
                addr, name, module = m.groups()
                frames.append((int(addr, 16),
                               None if name == f"0x{addr}" else name))
                modules.append(module)
        return (rc, self.complaints(out, err, BPFTRACE_FRAME_RE), frames,
                modules, out + err)

    def test_ustack(self):
        script = self.write_script(SLEEP_LOOP_THREE_DEEP)
        results = {}
        for backend in (None, "perf", "perf_jit"):
            proc, objects = self.start_program(script, backend)
            result = self.bpftrace(proc.pid)
            proc.kill()
            proc.wait()
            _, _, frames, _, output = result
            if backend is None and not frames:
                self.skipTest(f"bpftrace cannot trace the interpreter "
                              f"here: {output[-500:]}")
            results[backend] = (proc.pid, objects, *result)
        _, plain_objects, plain_rc, plain_complaints, plain_frames, _, _ = (
            results[None])
        plain_names = [name for _, name in plain_frames]
        for backend in ("perf", "perf_jit"):
            with self.subTest(backend=backend):
                pid, objects, rc, complaints, frames, modules, output = (
                    results[backend])
                self.assertEqual(objects, plain_objects + 1)
                self.assertEqual(rc, plain_rc, output)
                self.assertEqual(complaints, plain_complaints)
                inside = self.check_frames(frames, plain_names, pid,
                                           backend, script)
                if backend == "perf":
                    self.assertEqual([name for name, _ in inside],
                                     [described
                                      for _, described in inside])
                    self.assertIn(perf_map_path(pid), modules)


# One frame of lldb's bt: "  frame #N: 0xADDRESS MODULE`NAME ...", the
# selected one marked with "*".
LLDB_FRAME_RE = re.compile(r"^\s*\*?\s*frame #\d+: ")


class TestLldbAttachedAndCore(ToolTestCase):
    """lldb attached to a running program, and reading a core file of it,
    names the trampolines' frames and says nothing about the program that
    it does not say without trampolines."""

    def setUp(self):
        if shutil.which("lldb") is None:
            self.skipTest("lldb is not installed")
        super().setUp()

    def lldb_bt(self, *args):
        """Run lldb with args and "bt"; return (returncode, complaints,
        output)."""
        rc, out, err = self.run_tool(["lldb", "--no-lldbinit", "--batch",
                                      *args, "-o", "bt"])
        return rc, self.complaints(out, err, LLDB_FRAME_RE), out + err

    @requires_gdb
    @skip_core_files_under_asan
    def test_no_new_messages(self):
        script = self.write_script(SLEEP_THREE_DEEP)
        tmpdir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmpdir)
        results = {}
        for backend in (None, "perf", "perf_jit"):
            proc, objects = self.start_program(script, backend)
            attached = self.lldb_bt("-p", str(proc.pid))
            # lldb 14 cannot write a core file of a Linux process.
            core = os.path.join(tmpdir, f"core.{proc.pid}")
            out = self.run_debugger(
                ["gdb", "-nx", "-batch", "-p", str(proc.pid),
                 "-ex", f"gcore {core}"], timeout=support.LONG_TIMEOUT)
            self.assertTrue(os.path.exists(core), out)
            from_core = self.lldb_bt("-c", core, sys.executable)
            os.unlink(core)
            proc.kill()
            proc.wait()
            results[backend] = (objects, {"attached": attached,
                                          "core": from_core})
        plain_objects, plain = results[None]
        if "stop reason" not in plain["attached"][2]:
            self.skipTest(f"lldb cannot attach here: "
                          f"{plain['attached'][2][-500:]}")
        for backend in ("perf", "perf_jit"):
            objects, places = results[backend]
            self.assertEqual(objects, plain_objects + 1)
            for place, (rc, complaints, out) in places.items():
                with self.subTest(backend=backend, place=place):
                    self.assertEqual(rc, plain[place][0], out)
                    self.assertEqual(complaints, plain[place][1])
                    self.assertIn("Py_BytesMain", plain[place][2])
                    names = re.findall(r"`py::(\S+) \(", out)
                    self.assertEqual(names[:len(SLEEPING_FUNCTIONS)],
                                     list(SLEEPING_FUNCTIONS), out)
                    self.assertIn("Py_BytesMain", out)


if __name__ == "__main__":
    unittest.main()

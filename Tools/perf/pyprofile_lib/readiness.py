"""Whether everything is ready to record: perf, the permission to sample,
the interpreter (a command's is run; a process's is only read), the
process, /tmp, a sample of a probe program, the renderer."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

from .common import BACKENDS, FP_CFLAGS, RecordError, printable, read_text
from .folding import INTERPRETER_DSO_RE
from .procroot import (
    description_file, in_root_exists, list_in_root, mapped_files,
    namespaced_pid, process_environment, read_in_root)
from .recording import record
from .remote import Control
from .rendering import D3_VERSION, template_path


# A program whose samples must show py::foo <- py::bar <- py::baz.
PROBE = textwrap.dedent("""
    import time

    def foo():
        x = 0
        deadline = time.perf_counter() + 0.4
        while time.perf_counter() < deadline:
            for i in range(1000):
                x += i
        return x

    def bar():
        return foo()

    def baz():
        return bar()

    baz()
""")


class Check:
    """A check's result; "warn" is a check that could not be made, which
    does not stop the recording."""

    def __init__(self, name, ok, detail, fix=None, warn=False):
        self.name, self.ok, self.detail, self.fix = name, ok, detail, fix
        self.warn = warn

    def __str__(self):
        state = "warn" if self.warn else "ok  " if self.ok else "FAIL"
        text = f"{state} {self.name}: {self.detail}"
        if not self.ok and self.fix:
            text += f"\n     fix: {self.fix}"
        return text


def effective_caps():
    status = read_text("/proc/self/status") or ""
    match = re.search(r"^CapEff:\s*([0-9a-f]+)", status, re.M)
    return int(match.group(1), 16) if match else 0


def check_permission():
    paranoid = (read_text("/proc/sys/kernel/perf_event_paranoid")
                or "").strip()
    caps = effective_caps()
    cap_perfmon, cap_sys_admin = 1 << 38, 1 << 21
    if os.geteuid() == 0 or caps & (cap_perfmon | cap_sys_admin):
        return Check("permission", True, "privileged (root, CAP_PERFMON or "
                     f"CAP_SYS_ADMIN); perf_event_paranoid={paranoid}")
    if paranoid.lstrip("-").isdigit() and int(paranoid) <= 2:
        return Check("permission", True,
                     f"perf_event_paranoid={paranoid} lets users sample "
                     "their own processes")
    return Check("permission", False,
                 f"perf_event_paranoid={paranoid or '?'} forbids users "
                 "to sample",
                 "sudo sysctl kernel.perf_event_paranoid=2 (or run as root)")


def mount_options(path):
    """Mount options of the file system holding path (from mountinfo)."""
    best, options = "", set()
    for line in (read_text("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        point = fields[4].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, options = point, set(fields[5].split(","))
    return best, options


def check_tmp(backend):
    if backend != "perf_jit":
        return None
    point, options = mount_options("/tmp")
    if "noexec" in options:
        return Check("/tmp", False,
                     f"mounted noexec (on {point}): the jitdump cannot be "
                     "mapped executable, which is how perf finds it",
                     "sudo mount -o remount,exec " + point)
    return Check("/tmp", True, f"executable mappings allowed (on {point})")


def interpreter_facts(python):
    """What python, the interpreter of a command, says of itself: the
    caller runs it to record anyway."""
    code = ("import json, sys, sysconfig; print(json.dumps({"
            "'version': sys.version.split()[0], "
            "'trampoline': sysconfig.get_config_var('PY_HAVE_PERF_TRAMPOLINE'), "
            "'api': hasattr(sys, 'activate_stack_trampoline'), "
            "'cflags': ' '.join(str(sysconfig.get_config_var(v) or '') for v in "
            "('CFLAGS', 'PY_CFLAGS', 'CONFIGURE_CFLAGS', 'PY_CFLAGS_NODIST'))}))")
    try:
        proc = subprocess.run([python, "-E", "-c", code], capture_output=True,
                              text=True, timeout=60)
        return json.loads(proc.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


# A process's interpreter is never run: as root, that would run another
# user's (or a container's) program with the caller's credentials.  Its
# build configuration is read instead, from the _sysconfigdata module next
# to its standard library, through the process's root directory.

CONFIG_VARS = ("CFLAGS", "PY_CFLAGS", "CONFIGURE_CFLAGS", "PY_CFLAGS_NODIST")
MAX_SYSCONFIGDATA = 4 << 20


def sysconfig_directories(pid, exe):
    """Where the _sysconfigdata module of process pid's interpreter, exe,
    may be: in a build tree (pybuilddir.txt), where its extension modules
    are, and in PREFIX/lib/pythonX.Y."""
    directories = []
    exe_dir = os.path.dirname(exe)
    builddir = read_in_root(pid, os.path.join(exe_dir, "pybuilddir.txt"),
                            4096)
    if builddir and builddir.strip():
        directories.append(os.path.join(exe_dir, os.fsdecode(
            builddir.strip())))
    versions = re.findall(r"python(3\.\d+)", os.path.basename(exe))
    for path in mapped_files(pid):
        match = re.search(r"^(.*)/[^/]*\.cpython-3(\d+)[^/]*\.so$", path)
        if match:
            directory = match.group(1)
            if os.path.basename(directory) == "lib-dynload":
                directory = os.path.dirname(directory)
            directories.append(directory)
            versions.append(f"3.{match.group(2)}")
        versions += re.findall(r"/libpython(3\.\d+)[^/]*$", path)
    prefixes = [os.path.dirname(exe_dir)]
    home = (process_environment(pid) or {}).get("PYTHONHOME")
    if home:
        prefixes.insert(0, home.split(":")[0])
    for prefix in prefixes:
        names = ([f"python{v}" for v in dict.fromkeys(versions)] or
                 sorted(name for name in list_in_root(pid, f"{prefix}/lib")
                        if re.fullmatch(r"python3\.\d+", name)))
        directories += [f"{prefix}/lib/{name}" for name in names]
    return [os.path.normpath(d) for d in dict.fromkeys(directories)]


def parse_sysconfigdata(data):
    """The build_time_vars of a _sysconfigdata module's text, read as a
    literal (never run), or None."""
    try:
        for node in ast.parse(data).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and getattr(node.targets[0], "id", None)
                    == "build_time_vars"):
                variables = ast.literal_eval(node.value)
                return variables if isinstance(variables, dict) else None
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        pass
    return None


def process_interpreter_facts(pid, exe):
    """What the build configuration of process pid's interpreter (exe, as
    the process names it) says, as interpreter_facts() gives it, or
    None."""
    for directory in sysconfig_directories(pid, exe):
        names = sorted(name for name in list_in_root(pid, directory)
                       if name.startswith("_sysconfigdata_")
                       and name.endswith(".py"))
        for name in names:
            data = read_in_root(pid, f"{directory}/{name}", MAX_SYSCONFIGDATA)
            variables = data and parse_sysconfigdata(data)
            if variables:
                trampoline = variables.get("PY_HAVE_PERF_TRAMPOLINE")
                return {
                    "version": str(variables.get("VERSION", "?")),
                    "trampoline": trampoline,
                    # The run-time API comes with the build option.
                    "api": trampoline == 1,
                    "cflags": " ".join(str(variables.get(v) or "")
                                       for v in CONFIG_VARS),
                    "source": f"{directory}/{name}",
                }
    return None


def check_interpreter(python, backend, pid=None, writes_file=False):
    """The checks of python: a command's interpreter, which is run, or the
    interpreter of process pid, whose build configuration is read."""
    if pid is None:
        facts = interpreter_facts(python)
    else:
        facts = process_interpreter_facts(pid, python)
    if facts is None and writes_file:
        # The process's file says that its interpreter has the support;
        # only how it was built is unknown.
        return [Check("interpreter", True,
                      f"no build configuration (_sysconfigdata) of {python} "
                      f"found; it writes its {backend} file, so it has the "
                      "support, but whether it was built with frame "
                      "pointers is unknown", warn=True)]
    if facts is None and pid is not None:
        return [Check("interpreter", False,
                      f"no build configuration (_sysconfigdata) of {python} "
                      "found: is it Python?",
                      "give the PID of a Python process")]
    if facts is None:
        return [Check("interpreter", False, f"cannot run {python}",
                      "give the path of a Python interpreter")]
    checks = []
    if facts["trampoline"] == 1 and facts["api"]:
        checks.append(Check("interpreter", True,
                            f"{python} (Python {facts['version']}) has perf "
                            "trampolines (PY_HAVE_PERF_TRAMPOLINE)"))
    else:
        checks.append(Check(
            "interpreter", False,
            f"{python} (Python {facts['version']}) has no perf trampoline "
            "support",
            "use an interpreter built with the perf trampoline patch "
            "(make, in its repository)"))
        return checks
    has_fp = "-fno-omit-frame-pointer" in facts["cflags"]
    if backend == "perf":
        checks.append(Check(
            "frame pointers", has_fp,
            "built with -fno-omit-frame-pointer" if has_fp else
            "not built with frame pointers, so perf cannot walk its stacks",
            f"use --backend perf_jit, or rebuild with CFLAGS='{FP_CFLAGS}'"))
    else:
        checks.append(Check(
            "frame pointers", True,
            ("built with" if has_fp else "built without")
            + " frame pointers (perf_jit unwinds with DWARF either way)"))
    return checks


def check_process(pid, backend):
    if not os.path.exists(f"/proc/{pid}"):
        return Check("process", False, f"no process {pid}",
                     "give the PID of a running Python process")
    path = description_file(pid, backend)
    if in_root_exists(pid, backend):
        nspid = namespaced_pid(pid)
        where = (f" (PID {nspid} in its container)" if path.startswith("/proc")
                 else "")
        return Check("process", True, f"{pid}{where} writes {path}")
    env = BACKENDS[backend]["env"]
    try:
        with Control(pid) as control:
            refused = control.read()["refused"]
    except RecordError as err:
        return Check("process", False,
                     f"{pid} has no {path}: its {backend} support is not "
                     f"active, and {err}",
                     f"start it with {env}=1, or call "
                     f"sys.activate_stack_trampoline({backend!r}) in it")
    if refused:
        return Check("process", False,
                     f"{pid} runs without the {backend} support and refuses "
                     "to be turned on from outside (-X perf=0 or "
                     "PYTHONPERFSUPPORT=0)",
                     f"start it with {env}=1")
    return Check("process", True,
                 f"{pid} runs without the {backend} support: it is turned "
                 "on for the recording, and off after it")


def check_perf():
    perf = shutil.which("perf")
    if perf is None:
        return Check("perf", False, "not installed",
                     "sudo apt-get install linux-perf")
    proc = subprocess.run([perf, "version"], capture_output=True, text=True)
    return Check("perf", proc.returncode == 0,
                 proc.stdout.strip() or proc.stderr.strip(),
                 "reinstall perf for this kernel (apt-get install linux-perf)")


def check_self_sample(python, backend):
    """Record PROBE and check that its samples carry the whole chain."""
    with tempfile.TemporaryDirectory(prefix="pyprofile-check-") as tmp:
        script = os.path.join(tmp, "probe.py")
        with open(script, "w") as f:
            f.write(PROBE)
        try:
            recording = record([python, script], backend, tmp,
                               frequency=499, native=True)
        except RecordError as err:
            return Check("self-sample", False, str(err),
                         "see perf's message above")
    if recording.stopped_by is not None:
        raise KeyboardInterrupt
    tree = recording.tree
    total = hits = 0
    for stack, count in tree.stacks():
        names = [name for name in stack if name.startswith("py::")]
        if any(name.startswith("py::foo:") for name in names):
            total += count
            if [n.split(":")[2] for n in names[-3:]] == ["baz", "bar", "foo"]:
                hits += count
    if total == 0:
        return Check("self-sample", False,
                     "perf recorded no sample in the probe's py::foo",
                     "run pyprofile --check as a user allowed to sample")
    ok = hits >= 0.5 * total
    return Check("self-sample", ok,
                 f"{hits} of {total} samples in py::foo carry "
                 "py::baz <- py::bar <- py::foo",
                 f"use --backend perf_jit, or rebuild with "
                 f"CFLAGS='{FP_CFLAGS}'" if backend == "perf" else
                 "make sure perf inject --jit works (perf 5.x or later)")


def readiness(backend, python=None, pid=None, renderer=True):
    checks = [check_perf(), check_permission()]
    writes_file = False
    if pid is not None:
        checks.append(check_process(pid, backend))
        writes_file = checks[-1].ok
        # The path as the process sees it: the kernel gives it relative to
        # the process's root when that is not ours.
        python = os.readlink(f"/proc/{pid}/exe")
    checks.extend(check_interpreter(python, backend, pid, writes_file))
    tmp = check_tmp(backend)
    if tmp is not None:
        checks.append(tmp)
    if pid is not None:
        # The probe would run the process's interpreter, as the caller.
        checks.append(Check(
            "self-sample", True,
            "not run for a process: pyprofile never runs its interpreter"))
    elif all(c.ok for c in checks):
        checks.append(check_self_sample(python, backend))
    if renderer:
        # Collapsed stacks need none (production hosts often have no npm).
        path = template_path()
        checks.append(Check("renderer", path is not None,
                            f"d3-flame-graph {D3_VERSION}: {path}"
                            if path else
                            f"d3-flame-graph {D3_VERSION} is not installed",
                            f"{sys.argv[0]} --setup"))
    return checks


PF_KTHREAD = 0x00200000


def process_problem(pid):
    """Why process pid cannot be profiled at all, in one line, or None."""
    stat_line = read_text(f"/proc/{pid}/stat")
    if stat_line is None:
        return f"no process {pid}"
    comm = printable(stat_line[stat_line.find("(") + 1:stat_line.rfind(")")])
    fields = stat_line[stat_line.rfind(")") + 2:].split()
    if len(fields) > 6 and fields[0] in ("Z", "X"):
        return f"process {pid} ({comm}) has ended"
    if len(fields) > 6 and int(fields[6]) & PF_KTHREAD:
        return f"process {pid} ({comm}) is a kernel thread, not a program"
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except PermissionError:
        return (f"cannot inspect process {pid} ({comm}): permission denied "
                "(run pyprofile as its user, or as root)")
    except OSError as err:
        return f"cannot inspect process {pid} ({comm}): {err.strerror}"
    # An interpreter, a program that embeds libpython, or one that writes
    # a map or jitdump.
    if not (any(INTERPRETER_DSO_RE.search(path) or ".cpython-" in path
                for path in [exe, *mapped_files(pid)])
            or any(in_root_exists(pid, backend) for backend in BACKENDS)):
        return (f"process {pid} ({comm}) does not run Python "
                f"({printable(exe)})")
    return None

"""Running perf: perf record (passing SIGINT and SIGTERM on), perf inject
--jit, and perf script, whose output is folded as it comes."""

import contextlib
import os
import signal
import subprocess
import sys

from .common import BACKENDS, RecordError, Stop
from .containers import (
    Copier, OUTSIDE_CONTAINERS, cache_container_objects, inject_container)
from .perfscript import perf_script
from .procroot import description_file, ended, in_root_exists
from .remote import Session


def run_perf(args, what):
    proc = subprocess.run(args, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          errors="backslashreplace")
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        raise RecordError(f"{what} failed (exit status {proc.returncode})")
    return proc.stdout


# What a recording stops on.  perf record stops on either, writes what it
# has and ends the command it started (with SIGTERM).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def perf_attached(proc):
    """Whether perf (proc) has opened its events: it enables them as soon
    as it has opened them all."""
    try:
        names = os.listdir(f"/proc/{proc.pid}/fd")
    except OSError:
        return False
    for name in names:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{proc.pid}/fd/{name}") == \
                    "anon_inode:[perf_event]":
                return True
    return False


def run_recording(args, env, session=None):
    """Run perf record; return its exit status and the signal (SIGINT or
    SIGTERM) that stopped it, or None.  The signal, sent to pyprofile
    alone (by kill or timeout) or to its process group (by the terminal),
    is passed on to perf, and pyprofile waits for perf to end.  A session
    (remote.Session) turns the process's support on once perf records,
    keeps it on while it does, and off when it ends."""
    received = []
    proc = None

    def forward(signum, frame):
        received.append(signum)
        if proc is not None:
            proc.send_signal(signum)

    old = {signum: signal.signal(signum, forward) for signum in STOP_SIGNALS}
    try:
        proc = subprocess.Popen(args, env=env)
        if received:
            proc.send_signal(received[0])
        if session is None:
            status = proc.wait()
        else:
            status = run_session(proc, session)
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
    return status, (received[0] if received else None)


def run_session(proc, session):
    """Wait for perf (proc) while session keeps the support on; perf's
    exit status."""
    # A jitdump is found by perf through the process's mmap() of it when
    # it opens it, which perf records only once its events are enabled.
    while proc.poll() is None and not perf_attached(proc):
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.01)
    started = False
    try:
        if proc.poll() is None:
            session.start()
            started = True
        while True:
            try:
                return proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                session.poll()
    finally:
        if started:
            session.stop()
        else:
            session.control.close()


class Recording:
    """What record() gives: the tree of samples, the PIDs sampled, the
    exit status to pass on (the command's, as a shell gives it) and the
    signal that stopped the recording, if one did."""

    def __init__(self, tree, pids, status, stopped_by):
        self.tree, self.pids = tree, pids
        self.status, self.stopped_by = status, stopped_by


def record(command, backend, tmp, frequency=999, pid=None, duration=None,
           native=False):
    """Record command (or pid for duration seconds) with the options of
    backend; return a Recording, its tree in the Python view unless native
    is set.  SIGTERM ends perf and the command and raises Stop; SIGINT
    ends them too, and what was recorded is kept."""
    spec = BACKENDS[backend]
    data = os.path.join(tmp, "perf.data")
    # perf's cache of the objects it saw, kept out of ~/.debug.
    perf = ["perf", "--buildid-dir", os.path.join(tmp, "buildid")]
    args = [*perf, "record", "-q", "-F", str(frequency), "-e", "cpu-clock",
            *spec["record"], "-o", data]
    env = dict(os.environ)
    if pid is None:
        env[spec["env"]] = "1"
        args += ["--", *command]
    else:
        args += ["-p", str(pid), "--", "sleep", str(duration)]
    copier = None
    session = None
    if pid is not None:
        # On for the recording only, unless the program turned it on
        # itself (its interpreters then stay as they are).  A process
        # that cannot be asked is recorded as it is if it writes its file.
        try:
            session = Session(pid, backend)
        except RecordError:
            if not in_root_exists(pid, backend):
                raise
    try:
        if (pid is not None and description_file(pid, backend)
                != spec["file"].format(pid=pid)):
            # A container's map goes where perf looks for it on the host;
            # its jitdump goes here, as the jitdump that the recording
            # names is renamed before perf inject reads it (see
            # inject_container()).
            copier = Copier(pid, backend,
                            f"/tmp/perf-{pid}.map" if backend == "perf"
                            else os.path.join(tmp, f"jit-{pid}.dump"))
            # Its objects by build-id, which the kernel gives in the
            # recording.
            os.makedirs(os.path.join(tmp, "buildid"), exist_ok=True)
            cache_container_objects(perf, pid, tmp)
            args.insert(args.index("record") + 1, "--buildid-mmap")
        try:
            # The command's output and errors go where pyprofile's go.
            status, stopped_by = run_recording(args, env, session)
        finally:
            if copier is not None:
                copier.stop()
        if stopped_by == signal.SIGTERM:
            raise Stop(stopped_by)
        if not os.path.exists(data) or os.path.getsize(data) == 0:
            raise RecordError(f"perf record failed (exit status {status})")
        tree, pids = report(perf, data, spec, pid, native, copier)
    finally:
        # The host's copy of a container's map goes whatever happened
        # (SIGTERM, which raises Stop, included).
        if copier is not None:
            copier.remove()
    if pid is not None:
        status = 0
    elif status < 0:
        # perf ends itself with the signal that ended the command.
        status = 128 - status
    if stopped_by is not None:
        status = 128 + stopped_by
    return Recording(tree, pids, status, stopped_by)


def report(perf, data, spec, pid, native, copier=None):
    """The tree of samples of the recording in data, and the PIDs
    sampled."""
    tmp = os.path.dirname(data)
    script = perf
    if spec["inject"]:
        injected = os.path.join(tmp, "perf.jit.data")
        if copier is not None:
            inject_container(perf, data, injected, copier)
            # The ELF files perf inject made are next to the copy.
            script = [*OUTSIDE_CONTAINERS, *perf]
        else:
            run_perf([*perf, "inject", "--jit", "-i", data, "-o", injected],
                     "perf inject --jit")
        data = injected
    tree, pids = perf_script([*script, "script", "-i", data,
                              "-F", "comm,pid,ip,sym,dso"], native, tmp)
    if pid is None:
        # What the processes we started left in /tmp, once they have
        # ended: one that outlives the command (a helper, a daemon) still
        # needs its file, for a later profile.
        for p in pids:
            if not ended(p):
                continue
            for path in (f"/tmp/perf-{p}.map", f"/tmp/jit-{p}.dump"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
    for p in pids:
        # perf inject --jit writes one ELF file per function next to the
        # jitdump, for perf script only.
        prefix = f"jitted-{p}-"
        for name in os.listdir("/tmp"):
            if name.startswith(prefix) and name.endswith(".so"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join("/tmp", name))
    return tree, pids

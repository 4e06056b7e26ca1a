"""What every stage of pyprofile shares: the backends, its errors, and
reading the files of /proc."""


FP_CFLAGS = "-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"

BACKENDS = {
    # Environment variable that turns the backend on, the file it writes,
    # how perf record unwinds, and whether perf inject --jit is needed.
    "perf": dict(env="PYTHONPERFSUPPORT", file="/tmp/perf-{pid}.map",
                 record=["-g", "--call-graph", "fp"], inject=False),
    "perf_jit": dict(env="PYTHON_PERF_JIT_SUPPORT", file="/tmp/jit-{pid}.dump",
                     record=["-k", "1", "--call-graph", "dwarf"],
                     inject=True),
}


def read_text(path):
    """The contents of a file such as /proc/sys/kernel/perf_event_paranoid,
    or None (a separate function so that tests can replace it)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def printable(text):
    """text, which a process chose (its name), safe to print to a
    terminal: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class RecordError(Exception):
    pass


class Stop(Exception):
    """A signal that ends pyprofile (SIGTERM, or SIGINT outside a
    recording), after its children and temporary files."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum

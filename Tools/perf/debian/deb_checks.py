"""The checks "make deb-check" runs (Tools/perf/debian/deb-check.sh).

    python3 deb_checks.py inside     in the Debian root, with its python3
    python3 deb_checks.py workload   foo <- bar <- baz, for perf record -g
    python3 deb_checks.py chains     reads perf script output on stdin

Each prints what it checked and exits non-zero at the first failure.
"""

import os
import re
import subprocess
import sys
import time

MAP_LINE = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) (.+)$")
# At least this share of foo's samples must carry foo <- bar <- baz.
MIN_WHOLE_CHAINS = 0.95


def fail(message):
    print(f"FAIL {message}", flush=True)
    sys.exit(1)


def ok(message):
    print(f"ok   {message}", flush=True)


def run_python(args, code, env=None):
    """Run python3 ARGS -c CODE; return (pid, stdout) of a clean exit."""
    proc = subprocess.run([*args, "-c", code], capture_output=True,
                          text=True, env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        fail(f"{' '.join(args)} exited with {proc.returncode}:\n"
             f"{proc.stdout}{proc.stderr}")
    lines = proc.stdout.splitlines()
    pid = int(lines[-1])
    return pid, "\n".join(lines[:-1])


def read_map(pid):
    """The entries of /tmp/perf-PID.map, checked for format and overlap."""
    path = f"/tmp/perf-{pid}.map"
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        fail(f"no perf map: {exc}")
    entries = []
    for line in lines:
        m = MAP_LINE.match(line)
        if m is None or not m.group(3).startswith("py::"):
            fail(f"{path}: malformed line {line!r}")
        entries.append((int(m.group(1), 16), int(m.group(2), 16),
                        m.group(3)))
    spans = sorted((start, start + size) for start, size, _ in entries)
    for (_, end), (start, _) in zip(spans, spans[1:]):
        if start < end:
            fail(f"{path}: overlapping entries")
    os.unlink(path)
    return [name for _, _, name in entries]


def check_map_has(pid, names, what):
    described = set(read_map(pid))
    missing = [name for name in names if name not in described]
    if missing:
        fail(f"{what}: the perf map does not name {missing}")
    ok(f"{what}: the perf map names {', '.join(names)}")


PROBE = """
import os, sys
{activate}
def probe():
    return sys.is_stack_trampoline_active()
assert probe(), "trampolines are not active"
print(os.getpid())
"""


def check_enabling():
    for what, args, env, activate in (
            ("python3 -X perf", ["python3", "-X", "perf"], None, ""),
            ("PYTHONPERFSUPPORT=1", ["python3"],
             {"PYTHONPERFSUPPORT": "1"}, ""),
            ("sys.activate_stack_trampoline('perf')", ["python3"], None,
             "sys.activate_stack_trampoline('perf')"),
            ("python3.11-dbg -X perf", ["python3.11-dbg", "-X", "perf"],
             None, "")):
        pid, _ = run_python(args, PROBE.format(activate=activate), env)
        check_map_has(pid, ["py::probe:<string>"], what)


EXTENSIONS = """
import os
import yaml, numpy, lxml.etree
# yaml's C parser and emitter (libyaml)
assert yaml.__with_libyaml__
doc = {"a": [1, 2.5, "x"], "b": {"c": None}}
text = yaml.dump(doc, Dumper=yaml.CSafeDumper)
assert yaml.load(text, Loader=yaml.CSafeLoader) == doc
# numpy's C loops, BLAS and FFT
m = numpy.arange(10000.0).reshape(100, 100)
assert numpy.allclose(numpy.linalg.inv(m @ m.T + numpy.eye(100)).shape,
                      (100, 100))
assert abs(numpy.fft.ifft(numpy.fft.fft(m[0])).real - m[0]).max() < 1e-6
assert numpy.sort(m[::-1, 0])[0] == 0
# lxml's C parser, XPath and XSLT
root = lxml.etree.fromstring("<r><i n='1'/><i n='2'/></r>")
assert root.xpath("sum(//i/@n)") == 3
xslt = lxml.etree.XSLT(lxml.etree.fromstring(
    '<xsl:stylesheet version="1.0" '
    'xmlns:xsl="http://www.w3.org/1999/XSL/Transform">'
    '<xsl:template match="/"><n><xsl:value-of select="count(//i)"/></n>'
    '</xsl:template></xsl:stylesheet>'))
assert str(xslt(root)).strip().endswith("<n>2</n>")
def used_them():
    pass
used_them()
print(os.getpid())
"""

# A few of numpy's own test modules, as Debian ships them.
NUMPY_TESTS = ("numpy.core.tests.test_numeric",
               "numpy.core.tests.test_ufunc",
               "numpy.linalg.tests.test_linalg")


def check_extensions():
    pid, _ = run_python(["python3", "-X", "perf"], EXTENSIONS)
    check_map_has(pid, ["py::used_them:<string>"],
                  "python3-yaml, python3-numpy and python3-lxml with -X perf")
    args = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--pyargs", *NUMPY_TESTS]
    proc = subprocess.run(args, capture_output=True, text=True, cwd="/tmp",
                          env={**os.environ, "PYTHONPERFSUPPORT": "1"})
    summary = proc.stdout.strip().splitlines()[-1:] or [""]
    if proc.returncode != 0:
        fail(f"numpy's tests with PYTHONPERFSUPPORT=1:\n"
             f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    ok(f"numpy's tests with PYTHONPERFSUPPORT=1: {summary[0]}")
    for path in os.listdir("/tmp"):
        if path.startswith("perf-") and path.endswith(".map"):
            os.unlink(os.path.join("/tmp", path))


STOP = """
import os, signal
def stop_here():
    os.kill(os.getpid(), signal.SIGTRAP)
stop_here()
"""


def check_gdb():
    proc = subprocess.run(
        ["gdb", "-nx", "-batch", "-iex", "set auto-load safe-path /",
         "-ex", "run", "-ex", "bt", "-ex", "py-bt",
         "--args", "python3.11-dbg", "-X", "perf", "-c", STOP],
        capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    if "py::stop_here (<string>)" not in out:
        fail(f"gdb bt does not name the trampoline of stop_here:\n{out}")
    if not re.search(r'File "<string>", line \d+, in stop_here', out):
        fail(f"py-bt (python3.11-dbg's gdb helpers) does not show "
             f"stop_here:\n{out}")
    ok("python3.11-dbg under gdb: bt names the trampolines, py-bt works")


def foo():
    # Most of the time in C functions called from foo, as in real
    # programs: that is where a build without frame pointers loses the
    # chain (the evaluator keeps its frame pointer either way).
    data = [(i * 7919 % 1000, str(i)) for i in range(2000)]
    text = ",".join(s for _, s in data)
    end = time.perf_counter() + 2.0
    n = 0
    while time.perf_counter() < end:
        n += len(sorted(data)) + len(text.split(",")) + len(repr(data))
    return n


def bar():
    return foo()


def baz():
    return bar()


def chains():
    """Count, in perf script output, foo's samples with the whole chain."""
    samples, frames = [], None
    for line in [*sys.stdin, ""]:
        parts = line.split()
        if not parts:
            if frames is not None:
                samples.append(frames)
            frames = None
        elif frames is None:
            frames = []             # the comm line that starts a sample
        elif len(parts) >= 2 and parts[1].startswith("py::"):
            # py::QUALNAME:FILENAME, innermost first
            frames.append(parts[1].split(":")[2])
    with_foo = [s for s in samples if "foo" in s]
    whole = [s for s in with_foo
             if [f for f in s if f in ("foo", "bar", "baz")]
             == ["foo", "bar", "baz"]]
    # foo runs for nearly all of the recording: a chain that stops short
    # of foo's frame (no frame pointers) leaves its sample out of with_foo.
    if len(with_foo) < max(100, len(samples) // 2):
        fail(f"only {len(with_foo)} of {len(samples)} samples reach foo's "
             f"frame")
    share = len(whole) / len(with_foo)
    if share < MIN_WHOLE_CHAINS:
        fail(f"only {share:.1%} of foo's {len(with_foo)} samples carry "
             f"foo <- bar <- baz")
    ok(f"perf record -g: {share:.1%} of foo's {len(with_foo)} samples "
       f"carry foo <- bar <- baz")


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "inside":
        check_enabling()
        check_extensions()
        check_gdb()
    elif mode == "workload":
        baz()
    elif mode == "chains":
        chains()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()

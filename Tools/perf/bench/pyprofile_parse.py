"""How long pyprofile takes to read "perf script"'s output, against perf
script itself (issue 50 item 14: at most half of perf script's time, memory
in the number of distinct stacks).

    build/python Tools/perf/bench/pyprofile_parse.py [--samples N]
        [--depth D] [--data perf.data] [--compare OLD_PYPROFILE]

Records a program whose stacks are about D frames deep (Python frames through
the perf trampolines) until perf has about N samples, unless --data names a
recording made with "perf record -g"; then times "perf script" alone (its
output thrown away), and "perf script" piped into pyprofile's reader, in a
process of its own whose CPU time and peak memory are pyprofile's own.
--compare times another pyprofile's parse_perf_script() on the whole text,
as pyprofile read it before it streamed.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYPROFILE = os.path.join(os.path.dirname(HERE), "pyprofile")
FIELDS = ["-F", "comm,pid,ip,sym,dso"]

# Stacks of DEPTH Python functions, each chain ending in one of 8 leaves:
# many samples, few distinct stacks, as a real service has.
WORKLOAD = textwrap.dedent("""
    import sys, time

    def down(n, leaf):
        if n:
            return down(n - 1, leaf)
        return LEAVES[leaf]()

    def make(i):
        def leaf():
            x = 0
            for j in range(2000):
                x += j * i
            return x
        leaf.__qualname__ = f"leaf{i}"
        return leaf

    LEAVES = [make(i) for i in range(8)]
    deadline = time.perf_counter() + float(sys.argv[2])
    i = 0
    while time.perf_counter() < deadline:
        down(int(sys.argv[1]), i % 8)
        i += 1
""")


def record(tmp, samples, depth):
    program = os.path.join(tmp, "workload.py")
    with open(program, "w") as f:
        f.write(WORKLOAD)
    data = os.path.join(tmp, "perf.data")
    frequency = 4999
    # Each Python function is about 3 native frames under -X perf.
    proc = subprocess.run(
        ["perf", "record", "-q", "-F", str(frequency), "-e", "cpu-clock",
         "-g", "-o", data, "--", sys.executable, "-X", "perf", program,
         str(max(1, depth // 3)), str(samples / frequency)])
    # The workload's map, which names its (unique) path.
    for name in os.listdir("/tmp"):
        path = os.path.join("/tmp", name)
        if name.startswith("perf-") and name.endswith(".map"):
            try:
                with open(path, "rb") as f:
                    if os.fsencode(program) in f.read():
                        os.unlink(path)
            except OSError:
                pass
    if proc.returncode != 0:
        sys.exit(f"perf record failed (exit status {proc.returncode})")
    return data


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def perf_script_alone(data):
    cpu, wall = children_cpu(), time.perf_counter()
    with open(os.devnull, "wb") as null:
        subprocess.run(["perf", "script", "-i", data, *FIELDS], stdout=null,
                       check=True)
    return time.perf_counter() - wall, children_cpu() - cpu


# Run in a process of its own: its CPU time and peak memory are the
# reader's (perf script is its child, counted apart).
READER = textwrap.dedent("""
    import importlib.machinery, importlib.util, os, resource, subprocess
    import sys, time
    path, data, mode = sys.argv[1:4]
    loader = importlib.machinery.SourceFileLoader("p", path)
    spec = importlib.util.spec_from_loader("p", loader)
    p = importlib.util.module_from_spec(spec)
    loader.exec_module(p)
    if not hasattr(p, "parse_perf_script"):
        # Split by stage: its reader is pyprofile_lib.perfscript.
        from pyprofile_lib import perfscript as p
    wall = time.perf_counter()
    args = ["perf", "script", "-i", data, "-F", "comm,pid,ip,sym,dso"]
    if mode == "stream":
        # As pyprofile runs it.
        tmp = os.path.dirname(data)
        tree, pids = p.perf_script(args, False, tmp)
    else:
        text = subprocess.run(args, stdout=subprocess.PIPE, text=True,
                              errors="backslashreplace").stdout
        tree = p.parse_perf_script(text)
    wall = time.perf_counter() - wall
    me = resource.getrusage(resource.RUSAGE_SELF)
    samples = sum(count for _, count in tree.stacks())
    stacks = sum(1 for _ in tree.stacks())
    print(wall, me.ru_utime + me.ru_stime, me.ru_maxrss, samples, stacks)
""")


def reader(path, data, mode):
    out = subprocess.run([sys.executable, "-c", READER, path, data, mode],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    wall, cpu, rss, samples, stacks = out.split()
    return (float(wall), float(cpu), int(rss) / 1024, int(samples),
            int(stacks))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=115000)
    parser.add_argument("--depth", type=int, default=60)
    parser.add_argument("--data")
    parser.add_argument("--compare", metavar="OLD_PYPROFILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pyprofile-bench-") as tmp:
        data = args.data or record(tmp, args.samples, args.depth)
        wall, cpu = perf_script_alone(data)
        print(f"perf script alone:            {wall:6.2f} s "
              f"({cpu:.2f} s CPU)")
        rows = [("pyprofile (streaming)", PYPROFILE, "stream")]
        if args.compare:
            rows.append(("--compare (whole text)", args.compare, "text"))
        status = 0
        for name, path, mode in rows:
            r_wall, r_cpu, rss, samples, stacks = reader(path, data, mode)
            print(f"perf script | {name + ':':24s} {r_wall:6.2f} s; "
                  f"pyprofile's own CPU {r_cpu:.2f} s "
                  f"({r_cpu / cpu:.0%} of perf script's), "
                  f"peak {rss:.0f} MB; {samples} samples, {stacks} stacks")
            if mode == "stream" and r_cpu > 0.5 * cpu:
                status = 1
        if status:
            print("pyprofile's own time is over half of perf script's")
        return status


if __name__ == "__main__":
    sys.exit(main())

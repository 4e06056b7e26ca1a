"""Compare interpreter configurations on Tools/perf/bench/workloads.py.

Configurations run side by side, interleaved (A B C A B C ...), for several
rounds; each result is the median over the rounds, and configurations are
compared as ratios of medians: the second configuration with the first,
each later one with the second.  Timings are CPU seconds of the workload
inside the child process (startup: wall time of whole processes).

With --metric instructions, each workload instead runs once, with a tenth of
its loops, under valgrind's callgrind, and the result is the number of
instructions executed: that of the process running the workload minus that
of the same process running it zero times (startup: instructions of a whole
"python -c pass").  The counts barely move from run to run, so they show
differences far below the timing noise of a shared machine; they do not
weigh cache misses or branch mispredictions.

    python run.py --config NAME=PYTHON[,ARG...] ... [--rounds N]
                  [--metric time|instructions] [--json F]
"""

import argparse
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

from descfiles import remove_files

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads.py")
STARTUP_RUNS = 10


def child_env():
    env = dict(os.environ)
    for var in ("PYTHONPERFSUPPORT", "PYTHONUNBUFFERED",
                "PYTHONDONTWRITEBYTECODE"):
        env.pop(var, None)
    # The same string hashes, so the same work, in every process.
    env["PYTHONHASHSEED"] = "0"
    return env


def run_workload(cmd, name):
    proc = subprocess.Popen(cmd + [WORKLOADS, name], stdout=subprocess.PIPE,
                            env=child_env())
    out, _ = proc.communicate()
    remove_files(proc.pid)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} {name} failed ({proc.returncode})")
    return json.loads(out)


def count_instructions(cmd):
    """Instructions executed by cmd, counted by callgrind."""
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=child_env())
    out, err = proc.communicate()
    remove_files(proc.pid)
    match = re.search(rb"Collected : (\d+)", err)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"valgrind {cmd} failed ({proc.returncode}):\n"
                         + err.decode(errors="replace")[-2000:])
    return int(match.group(1)), out


def workload_instructions(cmd, name):
    from workloads import WORKLOADS as ALL
    loops = max(1, ALL[name][1] // 10)
    full, out = count_instructions(cmd + [WORKLOADS, name, str(loops)])
    empty, _ = count_instructions(cmd + [WORKLOADS, name, "0"])
    result = json.loads(out)
    result["instructions"] = full - empty
    return result


def run_startup(cmd):
    start = time.perf_counter()
    for _ in range(STARTUP_RUNS):
        proc = subprocess.Popen(cmd + ["-c", "pass"], env=child_env())
        proc.wait()
        remove_files(proc.pid)
    return {"seconds": (time.perf_counter() - start) / STARTUP_RUNS}


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True,
                        help="NAME=PYTHON[,ARG...]; the second is compared "
                             "with the first, later ones with the second")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--metric", choices=("time", "instructions"),
                        default="time")
    parser.add_argument("--only", help="comma-separated workload names")
    parser.add_argument("--json", help="write all measurements here")
    args = parser.parse_args()

    configs = []
    for spec in args.config:
        name, _, rest = spec.partition("=")
        configs.append((name, rest.split(",")))
    sys.path.insert(0, HERE)
    from workloads import WORKLOADS as ALL
    names = list(ALL) if not args.only else args.only.split(",")
    names.append("startup")

    samples = {(w, c): [] for w in names for c, _ in configs}
    extra = {}
    measured = "instructions" if args.metric == "instructions" else "seconds"
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for w in names:
            for cname, cmd in configs:
                if args.metric == "instructions":
                    if w == "startup":
                        count, _ = count_instructions(cmd + ["-c", "pass"])
                        res = {"instructions": count}
                    else:
                        res = workload_instructions(cmd, w)
                elif w == "startup":
                    res = run_startup(cmd)
                else:
                    res = run_workload(cmd, w)
                samples[w, cname].append(res[measured])
                extra.setdefault((w, cname), []).append(res)

    med = {key: statistics.median(v) for key, v in samples.items()}
    if args.metric == "instructions":
        def fmt(v):
            return f"{v / 1e6:>11.1f}M"
    else:
        def fmt(v):
            return f"{v * 1e3:>10.1f}ms"
    cnames = [c for c, _ in configs]
    pairs = [(cnames[1], cnames[0])] + [(c, cnames[1]) for c in cnames[2:]]
    head = f"{'workload':<18}" + "".join(f"{c:>12}" for c in cnames) \
        + "".join(f"{a + '/' + b:>22}" for a, b in pairs)
    print(head)
    print("-" * len(head))
    ratios = {pair: [] for pair in pairs}
    for w in names:
        row = f"{w:<18}" + "".join(fmt(med[w, c]) for c in cnames)
        for a, b in pairs:
            r = med[w, a] / med[w, b]
            if w != "startup":
                ratios[a, b].append(r)
            row += f"{r:>21.3f}x"
        print(row)
    print("-" * len(head))
    row = f"{'geometric mean':<18}" + " " * 12 * len(cnames)
    for pair in pairs:
        row += f"{geomean(ratios[pair]):>21.3f}x"
    print(row + "   (workloads, startup excluded)")
    if "startup" in names:
        for a, b in pairs:
            delta = med["startup", a] - med["startup", b]
            delta = (f"{delta / 1e6:+.2f}M instructions"
                     if args.metric == "instructions"
                     else f"{delta * 1e3:+.1f} ms")
            print(f"startup: {a} {delta} against {b} "
                  f"({med['startup', a] / med['startup', b]:.3f}x)")

    # Memory and trampoline counters of the last configuration that has them.
    for cname in cnames:
        rss = max(r["maxrss_kib"] for (w, c), rs in extra.items()
                  if c == cname and w != "startup" for r in rs)
        line = f"{cname}: peak RSS {rss / 1024:.1f} MiB"
        if args.metric == "instructions":
            line = f"{cname}: (peak RSS not meaningful under valgrind)"
        stats = [r.get("trampoline_stats") for (w, c), rs in extra.items()
                 if c == cname and w != "startup" for r in rs]
        stats = [s for s in stats if s and s["trampolines"]]
        if stats:
            tr = sum(s["trampolines"] for s in stats)
            ab = sum(s["arena_bytes"] for s in stats)
            wb = sum(s["written_bytes"] for s in stats)
            line += (f"; {tr / len(stats):.0f} trampolines per process, "
                     f"{ab / tr:.1f} arena bytes and {wb / tr:.1f} bytes written "
                     f"(map or dump) per trampolined code object")
        print(line)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"configs": dict(configs),
                       "samples": {f"{w}/{c}": v
                                   for (w, c), v in samples.items()},
                       "median": {f"{w}/{c}": v for (w, c), v in med.items()}},
                      f, indent=1)


if __name__ == "__main__":
    main()

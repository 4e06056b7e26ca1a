"""Compare interpreter configurations on Tools/perf/bench/workloads.py.

Configurations run side by side, interleaved (A B C A B C ...), for several
rounds; each result is the median over the rounds, and configurations are
compared as ratios of medians.  Timings are CPU seconds of the workload
inside the child process (startup: wall time of whole processes).

    python run.py --config NAME=PYTHON[,ARG...] ... [--rounds N] [--json F]
"""

import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOADS = os.path.join(HERE, "workloads.py")
STARTUP_RUNS = 10


def child_env():
    env = dict(os.environ)
    for var in ("PYTHONPERFSUPPORT", "PYTHONUNBUFFERED",
                "PYTHONDONTWRITEBYTECODE"):
        env.pop(var, None)
    return env


def remove_map(pid):
    try:
        os.unlink(f"/tmp/perf-{pid}.map")
    except FileNotFoundError:
        pass


def run_workload(cmd, name):
    proc = subprocess.Popen(cmd + [WORKLOADS, name], stdout=subprocess.PIPE,
                            env=child_env())
    out, _ = proc.communicate()
    remove_map(proc.pid)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} {name} failed ({proc.returncode})")
    return json.loads(out)


def run_startup(cmd):
    start = time.perf_counter()
    for _ in range(STARTUP_RUNS):
        proc = subprocess.Popen(cmd + ["-c", "pass"], env=child_env())
        proc.wait()
        remove_map(proc.pid)
    return {"seconds": (time.perf_counter() - start) / STARTUP_RUNS}


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True,
                        help="NAME=PYTHON[,ARG...]; the first is the base")
    parser.add_argument("--rounds", type=int, default=5)
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
    for rnd in range(args.rounds):
        print(f"round {rnd + 1}/{args.rounds}", file=sys.stderr, flush=True)
        for w in names:
            for cname, cmd in configs:
                if w == "startup":
                    res = run_startup(cmd)
                else:
                    res = run_workload(cmd, w)
                samples[w, cname].append(res["seconds"])
                extra.setdefault((w, cname), []).append(res)

    med = {key: statistics.median(v) for key, v in samples.items()}
    cnames = [c for c, _ in configs]
    pairs = [(cnames[i], cnames[i - 1]) for i in range(1, len(cnames))]
    if len(cnames) > 2:
        pairs.append((cnames[-1], cnames[0]))
    head = f"{'workload':<18}" + "".join(f"{c:>12}" for c in cnames) \
        + "".join(f"{a + '/' + b:>22}" for a, b in pairs)
    print(head)
    print("-" * len(head))
    ratios = {pair: [] for pair in pairs}
    for w in names:
        row = f"{w:<18}" + "".join(f"{med[w, c] * 1e3:>10.1f}ms"
                                   for c in cnames)
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

    # Memory and trampoline counters of the last configuration that has them.
    for cname in cnames:
        rss = max(r["maxrss_kib"] for (w, c), rs in extra.items()
                  if c == cname and w != "startup" for r in rs)
        line = f"{cname}: peak RSS {rss / 1024:.1f} MiB"
        stats = [r.get("trampoline_stats") for (w, c), rs in extra.items()
                 if c == cname and w != "startup" for r in rs]
        stats = [s for s in stats if s and s["trampolines"]]
        if stats:
            tr = sum(s["trampolines"] for s in stats)
            ab = sum(s["arena_bytes"] for s in stats)
            wb = sum(s["written_bytes"] for s in stats)
            line += (f"; {tr / len(stats):.0f} trampolines per process, "
                     f"{ab / tr:.1f} arena bytes and {wb / tr:.1f} map bytes "
                     f"per trampolined code object")
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

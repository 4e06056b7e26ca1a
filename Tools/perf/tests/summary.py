"""The closing lines of a regrtest run ("python -m test"), from its log.

    python summary.py [--junit-xml FILE] LOG STATUS

LOG is what regrtest printed (stdout and stderr), STATUS its exit status.
Prints the test cases that failed in the first run and in the rerun of
-w apart (a failed subtest counts as one), those that failed and then
passed on the rerun (flaky) by name, and a closing line "test cases: ...".
A non-zero STATUS never comes with "0 failed": if the log shows no failed
test case, the line says so and gives regrtest's verdict.

Failures are read from the log, not from the JUnit XML: 3.11's XML leaves
a test whose subtests failed unmarked, and a non-verbose run prints no
test names.  What the log has, from regrtest of 3.11.0 to 3.11.6 and of
3.11.7 and later (rewritten) alike:

- after the first run, "== Tests result: ... ==" and "N tests failed:"
  followed by the failed test modules, indented;
- the progress text "test_x failed (1 error, 2 failures)" of each;
- for -w, "Re-running failed tests in verbose mode" (3.11.7: "Re-running
  N failed tests ..."), then per module "Re-running test_x in verbose
  mode (matching: test_a, test_b)", naming the failed tests of the first
  run, and unittest's verbose output: "FAIL: test_a (mod.Class.test_a)
  (i=1)" per failed test or subtest;
- "N tests failed again:" and the modules, if any failed again, and
  the closing "== Tests result: ... ==".

Of lines that a test's own output could also hold, the last is taken.

The XML, if given, adds the passed and skipped test cases, which a
non-verbose log does not have: a test's first element is from the first
run, later ones from the rerun (regrtest appends the rerun's).
"""

import argparse
import re
import xml.etree.ElementTree as ET

# regrtest's log() prefix: "0:01:05 load avg: 1.80 ".
LOG = r"^(?:\d+:\d\d:\d\d (?:load avg: [\d.]+ )?)?"
RERUN_START = re.compile(
    LOG + r"Re-running (?:\d+ )?failed tests in verbose mode")
RERUN_MODULE = re.compile(
    LOG + r"Re-running (\S+) in verbose mode(?: \(matching: (.*)\))?$")
RESULT = re.compile(r"^== Tests result: (.*) ==$")
FAILED_LIST = re.compile(r"^\d+ tests? failed:$")
FAILED_AGAIN_LIST = re.compile(r"^\d+ tests? failed again:$")
# unittest's "FAIL: test_a (mod.Class.test_a)", with " (i=1)" or
# " [msg]" for a subtest; "ERROR: setUpClass (mod.Class)".
CASE_FAILURE = re.compile(r"^(?:FAIL|ERROR): (\S+) \(([\w.]+)\)(.*)$")
# The start of a test in unittest's verbose output.
CASE_START = re.compile(r"^\s*(\w+) \(([\w.]+)\)")


def listed(lines, title):
    """The test names listed under the last line matching title."""
    starts = [i for i, line in enumerate(lines) if title.match(line)]
    names = []
    for item in lines[starts[-1] + 1:] if starts else ():
        if not item.startswith("    "):
            break
        names.extend(item.split())
    return names


def failure_count(text, module):
    """The failed test cases of module in the first run: its progress
    text "failed (1 error, 2 failures)", or 1 (a crash, a timeout, a
    failure outside a test case)."""
    counts = [1]
    pattern = (r"(?<![\w.])" + re.escape(module) + r" failed \((\d+) "
               r"(?:errors?|failures?)(?:, (\d+) failures?)?\)")
    for m in re.finditer(pattern, text):
        counts.append(int(m.group(1)) + int(m.group(2) or 0))
    return max(counts)


def case_name(short, ident, rest=""):
    """mod.Class.test_a (i=1) from unittest's "test_a (mod.Class.test_a)"."""
    if ident.rsplit(".", 1)[-1] != short:
        ident = f"{ident}.{short}"      # setUpClass (mod.Class)
    return ident + rest


def parse_log(text):
    """What the log says: the failed test cases per module of the first
    run and of the rerun, the names of those that failed on the rerun and
    of the flaky ones, and regrtest's last verdict."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if RERUN_START.match(line)), len(lines))
    first, rerun = lines[:start], lines[start:]
    results = [i for i, line in enumerate(first) if RESULT.match(line)]
    first_failed = listed(first[results[-1]:], FAILED_LIST) if results else []
    first_text = "\n".join(first)
    states = [m.group(1) for m in map(RESULT.match, lines) if m]
    run = {
        "first": {m: failure_count(first_text, m) for m in first_failed},
        "rerun": None,
        "rerun_failures": [],
        "flaky": [],
        "state": states[-1] if states else None,
    }
    if not rerun:
        return run

    # The rerun, module by module: from its "Re-running test_x" line to
    # the next one, or to the closing result.
    results = [i for i, line in enumerate(rerun) if RESULT.match(line)]
    rerun = rerun[:results[-1]] if results else rerun
    failed_again = set(listed(rerun, FAILED_AGAIN_LIST))
    sections = {}
    for line in rerun:
        m = RERUN_MODULE.match(line)
        if m:
            matching = m.group(2).split(", ") if m.group(2) else []
            section = sections[m.group(1)] = {
                "matching": list(dict.fromkeys(matching)), "lines": []}
        elif sections:
            section["lines"].append(line)

    run["rerun"] = {}
    for module, section in sections.items():
        failures = [m.groups() for m in map(CASE_FAILURE.match,
                                             section["lines"]) if m]
        # regrtest's verdict on the module decides; the FAIL and ERROR
        # lines count and name its failures (none: it crashed).
        again = module in failed_again
        run["rerun"][module] = max(len(failures), 1) if again else 0
        if again:
            run["rerun_failures"].extend([case_name(*f) for f in failures]
                                         or [module])
        if module not in run["first"] or (again and not failures):
            continue
        # Flaky: failed in the first run, not on the rerun.
        if not section["matching"]:
            if not again:
                run["flaky"].append(module)
            continue
        failed_short = {short for short, *_ in failures} if again else set()
        for name in section["matching"]:
            if name in failed_short:
                continue
            idents = [case_name(*m.groups())
                      for m in map(CASE_START.match, section["lines"])
                      if m and m.group(1) == name]
            run["flaky"].extend(dict.fromkeys(idents)
                                or [f"{module}.{name}"])
    return run


def parse_xml(path):
    """Passed and skipped test cases, [passed, skipped], of the first run
    and of the rerun."""
    counts = {"first": [0, 0], "rerun": [0, 0]}
    seen = set()
    for case in ET.parse(path).iter("testcase"):
        name = case.get("name")
        if name is None:
            continue                    # one whose subtests failed
        which = "rerun" if name in seen else "first"
        seen.add(name)
        tags = {child.tag for child in case}
        if not tags & {"failure", "error"}:     # failures: from the log
            counts[which]["skipped" in tags] += 1
    return counts


def summarize(text, status, xml=None):
    """The lines to print for a log, an exit status and a JUnit XML file."""
    run = parse_log(text)
    try:
        counts = parse_xml(xml) if xml else None
    except (OSError, ET.ParseError):
        counts = None                   # regrtest was stopped writing it
    first = sum(run["first"].values())
    out = []
    if run["first"]:
        out.append("failed in the first run: " + ", ".join(
            f"{m} ({n})" for m, n in sorted(run["first"].items())))
    if run["rerun"] is None:
        final = first
    else:
        again = sum(run["rerun"].values())
        # A module that failed and was not rerun keeps its failures.
        final = again + sum(n for m, n in run["first"].items()
                            if m not in run["rerun"])
        if run["rerun_failures"]:
            out.append("failed on the rerun: "
                       + ", ".join(run["rerun_failures"]))
        if run["flaky"]:
            out.append("flaky (failed, then passed on the rerun): "
                       + ", ".join(run["flaky"]))

    def part(which, failed):
        # Never "0 failed" beside a failed run: see below why it failed.
        text = f"{failed} failed" if failed or not status else "none failed"
        if counts is None:
            return text
        passed, skipped = counts[which]
        return f"{passed} passed, {text}, {skipped} skipped"

    if run["rerun"] is None:
        line = f"test cases: {part('first', first)}"
    else:
        line = (f"test cases: first run {part('first', first)}; "
                f"rerun {part('rerun', again)}; {len(run['flaky'])} flaky")
    line += f"; exit status {status}"
    # Where the log and the exit status disagree, regrtest's verdict.
    if bool(status) != bool(final):
        verdict = (f"regrtest's result: {run['state']}" if run["state"]
                   else "regrtest printed no result")
        line += f" all the same ({verdict})"
    out.append(line)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--junit-xml", metavar="FILE",
                        help="regrtest's --junit-xml file")
    parser.add_argument("log", help="regrtest's output")
    parser.add_argument("status", type=int, help="regrtest's exit status")
    args = parser.parse_args()
    with open(args.log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    xml = args.junit_xml
    for line in summarize(text, args.status, xml):
        print(line)


if __name__ == "__main__":
    main()

#!/bin/bash
# Profile Tools/perf/demo/demo.py with perf and print where the time went, by
# Python function name.  BACKEND=perf (default) uses frame-pointer
# unwinding and /tmp/perf-PID.map.  BACKEND=perf_jit profiles an
# interpreter built without frame pointers (build/nofp-obj) with DWARF
# unwinding, the jitdump and "perf inject --jit".
set -euo pipefail
. "$(dirname "$0")/../config.sh"

BACKEND=${BACKEND:-perf}
PY=$BUILD/python
out=$BUILD/demo
mkdir -p "$out"
command -v perf >/dev/null || die "perf is not installed (apt-get install linux-perf)"
if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -gt 1 ]; then
    echo "hint: as non-root, perf may need: sudo sysctl kernel.perf_event_paranoid=1" >&2
fi

case "$BACKEND" in
perf)
    note "perf record -g $PY -X perf Tools/perf/demo/demo.py"
    perf record -q -F 999 -g --call-graph=fp -e cpu-clock -o "$out/perf.data" \
        "$PY" -X perf "$TOP/Tools/perf/demo/demo.py"
    ;;
perf_jit)
    "$TOP/Tools/perf/source/build-nofp.sh"
    PY=$BUILD/nofp-obj/python
    note "perf record -k 1 --call-graph dwarf $PY -X perf_jit Tools/perf/demo/demo.py"
    perf record -q -k 1 -F 499 -g --call-graph dwarf -e cpu-clock \
        -o "$out/perf.raw.data" "$PY" -X perf_jit "$TOP/Tools/perf/demo/demo.py"
    note "perf inject --jit"
    perf inject --jit -i "$out/perf.raw.data" -o "$out/perf.data"
    ;;
*)
    die "unknown BACKEND=$BACKEND (known: perf, perf_jit)"
    ;;
esac

echo
note "perf report: Python functions (py::) by time including callees"
perf report -i "$out/perf.data" --stdio --children --sort symbol -g none \
    2>/dev/null | grep -E '^ +[0-9].*py::' | sed 's/ *- *- *$//' | head -12 || true

echo
note "one sampled call chain (innermost first): every Python frame by name"
perf script -i "$out/perf.data" -F comm,ip,sym 2>/dev/null \
    | awk 'BEGIN { RS = "" } /py::tokenize/ && /py::word_frequencies/ && /py::main/ { print; exit }' \
    | sed -e 's/^[[:space:]]*[0-9a-f]* //' | grep -v '^python *$' | head -25 || true

echo
total=$(perf script -i "$out/perf.data" -F ip,sym 2>/dev/null | awk 'BEGIN { RS = "" } { n++ } /py::/ { p++ } END { printf "%d of %d", p, n }')
note "samples with Python functions in their call chain: $total"

echo
note "the same in one command: Tools/perf/pyprofile --backend $BACKEND -- python demo.py"
"$TOP/Tools/perf/pyprofile" --backend "$BACKEND" -o "$out/flamegraph.html" \
    -- "$PY" "$TOP/Tools/perf/demo/demo.py" >"$out/pyprofile.log" \
    || { cat "$out/pyprofile.log"; die "pyprofile failed"; }
note "flame graph (Python functions in green): $out/flamegraph.html"

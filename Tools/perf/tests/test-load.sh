#!/bin/bash
# "make test-load": the debugger tests, ROUNDS times in a row (20 unless
# set), each while two CPU-bound processes and another gdb session (gdb
# running CPython's test_gdb scenario: a Python program under a debugger)
# run beside them.  Debuggers must name every frame whatever the load.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

rounds=${ROUNDS:-20}
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

for _ in 1 2; do
    "$OBJ/python" -S -c 'while True: pass' &
    pids+=($!)
done
# Another gdb session, over and over: gdb running Python to a breakpoint
# and printing a backtrace.
(while true; do
    gdb -nx -batch -ex "break builtin_id" -ex run -ex bt -ex kill \
        --args "$OBJ/python" -S -c 'id(42)' >/dev/null 2>&1 || true
done) &
pids+=($!)

note "running test_perf_profiler.test_debuggers $rounds times under load"
for i in $(seq 1 "$rounds"); do
    if ! "$OBJ/python" -m test -q test_perf_profiler.test_debuggers \
            >"$BUILD/test-load.log" 2>&1; then
        cat "$BUILD/test-load.log" >&2
        die "round $i of $rounds failed under load (log above)"
    fi
    echo "    round $i: passed"
done
note "the debugger tests passed $rounds times in a row under load"

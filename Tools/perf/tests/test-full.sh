#!/bin/bash
# "make test-full": CPython's whole regression suite on the patched build,
# once as it is and once with PYTHONPERFSUPPORT=1, so that every Python
# frame of every test (subprocesses included) runs through a trampoline.
# Tests known to fail on pristine 3.11.2 here (known-failures.txt) are left
# out; any other failure fails the target.
#
# TEST_FULL_MODES selects the runs ("plain perf" by default).
set -euo pipefail
. "$(dirname "$0")/../config.sh"

MODES=${TEST_FULL_MODES:-plain perf}
args=()
excludes=()
while read -r kind what _; do
    case "$kind" in
        ignore) args+=(-i "$what") ;;
        exclude) excludes+=("$what") ;;
    esac
done < <(grep -v '^#' "$TOP/Tools/perf/tests/known-failures.txt" | grep -v '^\s*$')
if [ ${#excludes[@]} -gt 0 ]; then
    args+=(-x "${excludes[@]}")
fi

# Perf maps that our runs create: new files in /tmp whose entries name our
# interpreter's standard library, or a copy of it that a test made in a
# temporary directory; and new empty ones (of processes that ended before
# writing, whoever they were).  Others' maps are left alone.
before=$(mktemp)
trap 'rm -f "$before"' EXIT
copied_stdlib=' py::<module>:/tmp/tmp[^/]*/.*/encodings/__init__\.py$'
cleanup_maps() {
    local n=0 f
    for f in /tmp/perf-*.map; do
        [ -f "$f" ] || continue
        grep -qxF "$f" "$before" && continue
        if [ ! -s "$f" ] || grep -qF "$SRC/Lib/" "$f" 2>/dev/null \
            || grep -qE "$copied_stdlib" "$f" 2>/dev/null
        then
            rm -f "$f"
            n=$((n + 1))
        fi
    done
    note "removed $n perf map files created by this run"
}

status=0
for mode in $MODES; do
    ls -1 /tmp/perf-*.map 2>/dev/null >"$before" || true
    case "$mode" in
        plain) envset=(env -u PYTHONPERFSUPPORT) ;;
        perf) envset=(env -u PYTHONPERFSUPPORT PYTHONPERFSUPPORT=1) ;;
        *) die "unknown mode $mode (plain, perf)" ;;
    esac
    note "full test suite ($mode): python -m test -j0 -w --timeout 900 ${args[*]}"
    set +e
    env -u PYTHONUNBUFFERED -u PYTHONDONTWRITEBYTECODE "${envset[@]}" \
        "$OBJ/python" -m test -j0 -w --timeout 900 "${args[@]}" \
        >"$BUILD/test-full-$mode.log" 2>&1
    rc=$?
    set -e
    sed -n '/^== Tests result/,$p' "$BUILD/test-full-$mode.log"
    # Both runs' failures (subtests included) and the flaky tests by name.
    "$OBJ/python" "$TOP/Tools/perf/tests/summary.py" \
        "$BUILD/test-full-$mode.log" "$rc" || note "summary.py failed"
    cleanup_maps
    if [ $rc != 0 ]; then
        echo "full test suite ($mode) FAILED (exit $rc); log: $BUILD/test-full-$mode.log" >&2
        status=1
    fi
done
exit $status

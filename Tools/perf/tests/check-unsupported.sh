#!/bin/bash
# Compile the files that use perf trampolines as configure would on a
# platform without support (PY_HAVE_PERF_TRAMPOLINE undefined), with
# -Werror, so the fallback code paths keep building.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

[ -f "$OBJ/pyconfig.h" ] || die "build first (make)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed '/#define PY_HAVE_PERF_TRAMPOLINE/d' "$OBJ/pyconfig.h" >"$tmp/pyconfig.h"
fail=0
for f in $(cd "$SRC" && echo Python/perf_*.c) Python/ceval.c Python/sysmodule.c \
         Python/pystate.c Python/pylifecycle.c Python/import.c; do
    if gcc -c -std=c11 -O1 -Wall -Werror -Wno-unused-function -DPy_BUILD_CORE \
           -I"$tmp" -I"$SRC/Include/internal" -I"$SRC/Include" -I"$OBJ" \
           -o "$tmp/out.o" "$SRC/$f"; then
        echo "ok   without PY_HAVE_PERF_TRAMPOLINE: $f"
    else
        echo "FAIL without PY_HAVE_PERF_TRAMPOLINE: $f"
        fail=1
    fi
done
exit $fail

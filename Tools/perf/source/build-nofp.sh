#!/bin/bash
# Build the patched tree a second time, without frame pointers (as most
# distributions build Python), in build/nofp-obj: the interpreter the
# perf_jit test profiles with --call-graph dwarf.  Only the interpreter
# itself is built.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

NOFP=$BUILD/nofp-obj
mkdir -p "$NOFP"
if [ ! -f "$NOFP/config.status" ] || [ "$SRC/configure" -nt "$NOFP/config.status" ]; then
    note "configuring without frame pointers in $NOFP"
    (cd "$NOFP" && "$SRC/configure" -q CFLAGS="-fomit-frame-pointer") \
        || die "configure failed ($NOFP/config.log)"
fi
note "building $NOFP/python"
make -C "$NOFP" -j"$(nproc)" python pybuilddir.txt >"$NOFP/make.log" 2>&1 \
    || { tail -30 "$NOFP/make.log" >&2; die "build without frame pointers failed"; }

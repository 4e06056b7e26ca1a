#!/bin/bash
# "make bench": pristine 3.11.2 (built once under build/pristine-obj with the
# same flags), the patched interpreter with the feature inactive, with
# -X perf and with -X perf_jit, compared side by side; then new functions
# with arenas the loader knows against anonymous ones, and costs of fork,
# unwinds, prefork workers and debuggers; last, pyprofile's reading of
# perf script against perf script (its status is make bench's: pyprofile's
# own time must be at most half of perf script's).  ROUNDS=N (default 9),
# BENCH_JSON=file; METRIC=instructions counts instructions with callgrind
# instead of timing (one round is enough: the counts are stable);
# PYPROFILE_SAMPLES=N sizes pyprofile's profile (default 115000, the size
# of issue 50's measurement: about 40 s here).  BENCH_BASE=REV first
# compares the inactive interpreter with the patch at git revision REV of
# this repository (built once in build/bench-base/REV), to show what a
# change costs a process that never turns the support on.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

POBJ=$BUILD/pristine-obj
mkdir -p "$POBJ"
if [ ! -x "$POBJ/python" ]; then
    note "building pristine $PY_VERSION in $POBJ (once)"
    (cd "$POBJ" && "$PRISTINE/configure" -q CFLAGS="$OPT_CFLAGS") \
        || die "configure of pristine failed"
    make -C "$POBJ" -j"$(nproc)" >"$POBJ/make.log" 2>&1 \
        || { tail -30 "$POBJ/make.log" >&2; die "build of pristine failed"; }
fi
# The patched tree built without memfd_create(), so that every arena stays
# anonymous memory, as before Python/perf_loader.c (built once under
# build/anon-obj): what the loader costs a new function.
AOBJ=$BUILD/anon-obj
mkdir -p "$AOBJ"
if [ ! -f "$AOBJ/Makefile" ]; then
    (cd "$AOBJ" && "$SRC/configure" -q CFLAGS="$OPT_CFLAGS" \
        ac_cv_func_memfd_create=no) \
        || die "configure with anonymous arenas failed"
fi
note "building $PY_VERSION with anonymous arenas in $AOBJ"
make -C "$AOBJ" -j"$(nproc)" >"$AOBJ/make.log" 2>&1 \
    || { tail -30 "$AOBJ/make.log" >&2; die "build with anonymous arenas failed"; }
METRIC=${METRIC:-time}
if [ "$METRIC" = instructions ]; then
    "$TOP/Tools/perf/deps.sh" --bench
    ROUNDS=${ROUNDS:-1}
fi

if [ -n "${BENCH_BASE:-}" ]; then
    rev=$(git -C "$TOP" rev-parse --short --verify "$BENCH_BASE^{commit}") \
        || die "BENCH_BASE=$BENCH_BASE is not a revision of this repository"
    base=$BUILD/bench-base/$rev
    if [ ! -d "$base" ]; then
        rm -rf "$base.tmp" && mkdir -p "$base.tmp/build"
        git -C "$TOP" archive "$rev" | tar -x -C "$base.tmp"
        ln -s "$DOWNLOADS" "$base.tmp/build/downloads"
        mv "$base.tmp" "$base"
    fi
    note "building the patch at $rev in $base"
    make -C "$base" build >"$base/make.log" 2>&1 \
        || { tail -30 "$base/make.log" >&2; die "build of $rev failed"; }
    note "the inactive interpreter: the patch at $rev, then this one ($METRIC)"
    "$BUILD/python" "$TOP/Tools/perf/bench/run.py" --rounds "${ROUNDS:-9}" \
        --metric "$METRIC" \
        --config "base=$base/build/obj/python" \
        --config "inactive=$BUILD/python"
fi
note "benchmarking ($METRIC, rounds: ${ROUNDS:-9}); this takes a few minutes"
"$BUILD/python" "$TOP/Tools/perf/bench/run.py" --rounds "${ROUNDS:-9}" \
    --metric "$METRIC" \
    --config "pristine=$POBJ/python" \
    --config "inactive=$BUILD/python" \
    --config "perf=$BUILD/python,-X,perf" \
    --config "perf_jit=$BUILD/python,-X,perf_jit" \
    ${BENCH_JSON:+--json "$BENCH_JSON"} ${BENCH_ARGS:-}

# New functions with arenas the dynamic loader knows, against anonymous
# arenas (the first configuration of each pair).
for backend in perf perf_jit; do
    note "new functions, -X $backend: anonymous arenas, then arenas the loader knows"
    "$BUILD/python" "$TOP/Tools/perf/bench/run.py" --rounds "${ROUNDS:-9}" \
        --metric "$METRIC" --only new_functions,new_functions_later \
        --config "anonymous=$AOBJ/python,-X,$backend" \
        --config "loader=$BUILD/python,-X,$backend"
done

# Fork cost (time is measured even with METRIC=instructions: callgrind does
# not follow forked children).
note "fork: a parent with 100,000 functions forks 20 children, one at a time"
for flags in "" "-X perf" "-X perf_jit"; do
    # shellcheck disable=SC2086
    "$BUILD/python" $flags "$TOP/Tools/perf/bench/fork.py" 100000 20
done

# What in-process unwinds (C++ throws, backtrace()) cost beside many
# trampolines.
note "unwind: a C++-style throw, and backtrace() through trampolines, after 300,000 code objects"
"$BUILD/python" "$TOP/Tools/perf/bench/unwind.py" 300000 3

# What compiling trampolines before fork saves prefork workers.
note "prefork: 20,000 functions the parent never runs, 10 workers run them"
"$BUILD/python" -X perf "$TOP/Tools/perf/bench/prefork.py" 20000 10

# What gdb attached from the start costs (time, as for fork).
note "debugger: 20,000 new functions defined and called, alone and under gdb"
"$BUILD/python" "$TOP/Tools/perf/bench/debugger.py" 20000 5

# pyprofile's parsing, on a recording of about PYPROFILE_SAMPLES samples
# 60 frames deep.
note "pyprofile: reading perf script's output of about ${PYPROFILE_SAMPLES:-115000} samples, against perf script alone"
"$BUILD/python" "$TOP/Tools/perf/bench/pyprofile_parse.py" --samples "${PYPROFILE_SAMPLES:-115000}"

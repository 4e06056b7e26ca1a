#!/bin/bash
# Configure (once) and build the assembled tree out of tree in build/obj,
# with frame pointers; the interpreter is then build/python.  (LIBC=musl:
# Tools/perf/musl/build.sh.)  Its prefix
# (make install's) is PREFIX when given, else the one it had, else
# configure's /usr/local.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

[ "$PERF_LIBC" = glibc ] || exec "$TOP/Tools/perf/musl/build.sh"
"$TOP/Tools/perf/source/assemble.sh"

mkdir -p "$OBJ"
if [ ! -f "$OBJ/Makefile" ] || [ ! -f "$OBJ/config.status" ] \
   || [ "$SRC/configure" -nt "$OBJ/config.status" ]; then
    note "configuring in $OBJ"
    prefix=${PREFIX:-$(sed -n 's/^prefix=[[:space:]]*//p' "$OBJ/Makefile" 2>/dev/null || true)}
    (cd "$OBJ" && "$SRC/configure" -q CFLAGS="$OPT_CFLAGS" ${prefix:+--prefix="$prefix"} ${CONFIGURE_ARGS:-}) \
        || die "configure failed (see $OBJ/config.log)"
fi
note "building (make -j$(nproc))"
# CPython's make prints a lot; keep the log and show it only on failure.
if ! make -C "$OBJ" -j"$(nproc)" >"$BUILD/make.log" 2>&1; then
    tail -40 "$BUILD/make.log" >&2
    die "build failed (full log: $BUILD/make.log)"
fi
if grep -E '^[^ ]*(perf_[a-z_]+|asm_trampoline|sysmodule|ceval|pylifecycle|pystate|import|posixmodule)\.[cS]:[0-9]+:[0-9]+: warning' "$BUILD/make.log"; then
    echo "warning: the compiler warned about files this patch touches (see above)" >&2
fi
ln -sfn obj/python "$BUILD/python"
# test_gdb allows gdb to auto-load the python-gdb.py next to sys.executable.
ln -sfn obj/python-gdb.py "$BUILD/python-gdb.py"
note "built $BUILD/python: $("$BUILD/python" -c 'import sys; print(sys.version.split()[0])')"

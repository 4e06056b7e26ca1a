#!/bin/bash
# "make abi-check": prove binary compatibility with stock CPython $PY_VERSION
# (3.11.2 by default).
#
# 1. Build libpython3.11.so from pristine $PY_VERSION and from the patched tree
#    with the same flags (frame pointers, --enable-shared, debug info) and
#    compare them with abidiff: only added functions and variables are
#    acceptable; any removed or changed symbol or changed type fails.
# 2. Build an extension module against the pristine headers and use it
#    from the patched interpreter with -X perf.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

"$TOP/Tools/perf/source/assemble.sh"
ABI=$BUILD/abi
mkdir -p "$ABI"

build_lib() {   # build_lib NAME SRCDIR [TARGET...]
    local name=$1 dir=$ABI/$1 src=$2
    shift 2
    mkdir -p "$dir"
    if [ ! -f "$dir/config.status" ] || [ "$src/configure" -nt "$dir/config.status" ]; then
        note "configuring $name (--enable-shared)"
        (cd "$dir" && "$src/configure" -q --enable-shared CFLAGS="$OPT_CFLAGS -g") \
            || die "configure of $dir failed"
    fi
    note "building $name libpython3.11.so $*"
    make -C "$dir" -j"$(nproc)" libpython3.11.so "$@" >"$dir/make.log" 2>&1 \
        || { tail -30 "$dir/make.log" >&2; die "build of $dir failed"; }
}
build_lib pristine "$PRISTINE"
build_lib patched "$SRC" python

note "abidiff pristine/libpython3.11.so.1.0 patched/libpython3.11.so.1.0"
set +e
abidiff "$ABI/pristine/libpython3.11.so.1.0" "$ABI/patched/libpython3.11.so.1.0" \
    >"$ABI/abidiff.txt" 2>&1
rc=$?
set -e
cat "$ABI/abidiff.txt"
# abidiff's exit status is a bit mask: 1 error, 2 usage, 4 ABI change,
# 8 incompatible change.  Added symbols alone set 4; check the summaries.
if [ $((rc & 3)) != 0 ]; then
    die "abidiff failed to run (exit $rc)"
fi
if [ $((rc & 8)) != 0 ]; then
    die "abidiff reports an incompatible ABI change"
fi
bad=$(grep -E 'changes summary:|symbols not referenced' "$ABI/abidiff.txt" \
      | grep -vE ': 0 Removed(, 0 Changed( \([0-9]+ filtered out\))?)?, [0-9]+ Added' \
      | grep -vE 'symbols not referenced by debug info: 0 Removed, [0-9]+ Added' || true)
if [ -n "$bad" ]; then
    echo "$bad" >&2
    die "libpython changed beyond added functions and variables"
fi
note "ABI: only additions"

note "extension module built against pristine $PY_VERSION headers, used with -X perf"
ext=$ABI/ext
rm -rf "$ext"
mkdir -p "$ext"
gcc -shared -fPIC -O2 -Wall -Werror $OPT_CFLAGS \
    -I"$PRISTINE/Include" -I"$ABI/pristine" \
    -o "$ext/compat_ext$("$BUILD/python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" \
    "$TOP/Tools/perf/abi/compat_ext.c"
for py in "$BUILD/python" "$ABI/patched/python"; do
    [ -x "$py" ] || continue
    env -u PYTHONPERFSUPPORT LD_LIBRARY_PATH="$ABI/patched" PYTHONPATH="$ext" \
        "$py" -X perf "$TOP/Tools/perf/abi/check_compat_ext.py"
done

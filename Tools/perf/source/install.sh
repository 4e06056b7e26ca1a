#!/bin/bash
# "make install": the patched interpreter and pyprofile3.11 beside it.
#
# The interpreter is installed by CPython's own "make altinstall" in
# build/obj (python3.11, never python3, which on Debian would shadow the
# system's for every script).  PREFIX is the prefix build/obj was
# configured with (make passes PREFIX to configure when it first
# configures build/obj; /usr/local by default): a build configured for
# another prefix is refused rather than reconfigured, which would rebuild
# it.  DESTDIR stages the whole installation, as CPython's does.
#
# pyprofile3.11 (Tools/perf/pyprofile-install.sh) goes to PREFIX/bin, its
# library to PREFIX/lib/pyprofile3.11, with the flame graph renderer that
# "pyprofile --setup" installs (npm runs if it is not there yet); without
# npm, pyprofile3.11 is installed without it and the interpreter all the
# same.
#
#   --pyprofile   pyprofile3.11 only (no interpreter needed; the tests use it)
set -euo pipefail
. "$(dirname "$0")/../config.sh"

only_pyprofile=no
[ "${1:-}" = --pyprofile ] && only_pyprofile=yes
DESTDIR=${DESTDIR:-}
configured=""
if [ -f "$OBJ/Makefile" ]; then
    configured=$(sed -n 's/^prefix=[[:space:]]*//p' "$OBJ/Makefile")
fi
PREFIX=${PREFIX:-${configured:-/usr/local}}
case "$PREFIX" in
    /*) ;;
    *) die "PREFIX=$PREFIX: give an absolute path" ;;
esac

if [ $only_pyprofile = no ]; then
    [ -x "$OBJ/python" ] || die "no interpreter in $OBJ: run make first"
    [ "$PREFIX" = "$configured" ] \
        || die "$OBJ is configured for prefix $configured, not $PREFIX: to install under $PREFIX, rm -rf $OBJ and run make install PREFIX=$PREFIX (a full build)"
    note "installing python3.11 in $DESTDIR$PREFIX (CPython's make altinstall; log: $BUILD/install.log)"
    make -C "$OBJ" altinstall DESTDIR="$DESTDIR" >"$BUILD/install.log" 2>&1 \
        || { tail -20 "$BUILD/install.log" >&2; die "make altinstall failed (log: $BUILD/install.log)"; }
fi

# The renderer pyprofile would use from this checkout (--setup's copy).
template_of() {
    python3 - "$TOP/Tools/perf" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from pyprofile_lib import rendering
print(rendering.template_path() or "")
EOF
}
template=$(template_of)
if [ -z "$template" ] && command -v npm >/dev/null; then
    python3 "$TOP/Tools/perf/pyprofile" --setup >/dev/null || true
    template=$(template_of)
fi
if [ -z "$template" ]; then
    echo "note: no flame graph renderer to install (npm is not installed or failed): pyprofile3.11 writes collapsed stacks (-o OUT.txt) until pyprofile3.11 --setup, or make install again with npm" >&2
fi
note "installing pyprofile3.11 in $DESTDIR$PREFIX/bin, its library in $DESTDIR$PREFIX/lib/pyprofile3.11"
"$TOP/Tools/perf/pyprofile-install.sh" "$DESTDIR" "$PREFIX" "$PREFIX/bin/python3.11" "$template"

# Shared settings for the perf trampoline tooling (sourced, not executed).

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# The CPython release to patch: Debian 12's 3.11.2 by default, or any final
# 3.11 release (PY_VERSION=3.11.N).  Its base is python.org's tarball,
# checked against python.org's published sha256 (Tools/perf/source/releases.sha256);
# for 3.11.2 it is Debian's orig tarball, which is byte-identical to it.
DEFAULT_PY_VERSION=3.11.2
PY_VERSION=${PY_VERSION:-$DEFAULT_PY_VERSION}
[[ $PY_VERSION =~ ^3\.11\.(0|[1-9][0-9]*)$ ]] \
    || { echo "error: PY_VERSION=$PY_VERSION: give a CPython 3.11 release, such as 3.11.10" >&2; exit 1; }
PY_MICRO=${PY_VERSION##*.}
BASE_SHA256=$(awk -v f="Python-$PY_VERSION.tgz" '$2 == f { print $1 }' "$TOP/Tools/perf/source/releases.sha256")
[ -n "$BASE_SHA256" ] \
    || { echo "error: PY_VERSION=$PY_VERSION is not a release listed in Tools/perf/source/releases.sha256" >&2; exit 1; }
if [ "$PY_VERSION" = "$DEFAULT_PY_VERSION" ]; then
    BASE_TARBALL_NAME=python3.11_${PY_VERSION}.orig.tar.gz
else
    BASE_TARBALL_NAME=Python-$PY_VERSION.tgz
fi
# The Debian revision whose patch stack "make patch" checks against; its
# .dsc pins the packaging's tarballs.  "make deb" builds on the newest
# revision the archive serves the source of (Tools/perf/debian/deb-archive.sh).
DEBIAN_VERSION=3.11.2-6+deb12u8
DEBIAN_DSC_SHA256=197fa19ab45f41c820f40f6d9ead671c2ea29ddc53ba9424b36f1bf58458a10e

# The default release builds in build/, any other in build/3.11.N/, so that
# builds of different releases never overwrite each other; downloads are
# shared.
if [ "$PY_VERSION" = "$DEFAULT_PY_VERSION" ]; then
    BUILD=${BUILD:-$TOP/build}
else
    BUILD=${BUILD:-$TOP/build/$PY_VERSION}
fi
DOWNLOADS=$TOP/build/downloads
PRISTINE=$BUILD/pristine        # untouched CPython source, never built in
SRC=$BUILD/cpython              # pristine + our files + our patches
# LIBC=musl builds against musl libc (Tools/perf/musl/) in $BUILD/musl.
# CPython's configure and Makefile have a LIBC of their own (the C library
# to link with): it is kept out of their environment and of the MAKEFLAGS
# that make passes on, and the scripts call each other with PERF_LIBC.
export PERF_LIBC=${PERF_LIBC:-${LIBC:-glibc}}
unset LIBC
if [ -n "${MAKEFLAGS:-}" ]; then
    MAKEFLAGS=$(sed -E 's/(^| )LIBC=[^ ]*//g' <<<"$MAKEFLAGS")
fi
case "$PERF_LIBC" in
    glibc) OBJ=$BUILD/obj ;;    # out-of-tree build directory of $SRC
    musl) OBJ=$BUILD/musl ;;
    *) echo "error: LIBC=$PERF_LIBC: give glibc (the default) or musl" >&2; exit 1 ;;
esac
# What "make patch" writes: one patch against pristine $PY_VERSION.
COMBINED_PATCH=$TOP/build/cpython-$PY_VERSION-perf-trampoline.patch
OPT_CFLAGS="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"

# Directories of ours that hold files at their CPython paths.
CPYTHON_DIRS="Doc Include Lib Misc Modules Objects PC PCbuild Parser Programs Python
Tools/scripts"
# Top-level files of CPython that we patch.
CPYTHON_TOPFILES="configure.ac Makefile.pre.in"

# Files regenerated from patched sources (not kept in git).
GENERATED="configure pyconfig.h.in Python/clinic/sysmodule.c.h"

die() {
    echo "error: $*" >&2
    exit 1
}

note() {
    echo "==> $*"
}

# An edit of a CPython file is TARGET.patch.  Where a release changed the
# lines an edit needs, so that no one hunk fits every release, the edit for
# that release and later ones is kept beside it as TARGET.since-3.11.N.patch
# (its header says what changed).

# The file an edit of TARGET comes from for $PY_VERSION (it may not exist).
patch_for() {
    local best=$1.patch best_micro=-1 v m
    for v in "$TOP/$1".since-3.11.*.patch; do
        [ -f "$v" ] || continue
        m=${v##*.since-3.11.}
        m=${m%.patch}
        if [ "$m" -le "$PY_MICRO" ] && [ "$m" -gt "$best_micro" ]; then
            best=$1.since-3.11.$m.patch
            best_micro=$m
        fi
    done
    echo "$best"
}

# The CPython file a patch edits.
patch_target() {
    local t=${1%.patch}
    echo "${t%.since-3.11.*}"
}

# Print the paths (relative to $TOP) of our new CPython files and of the
# patches that apply to $PY_VERSION.
list_our_files() {
    (cd "$TOP" && for d in $CPYTHON_DIRS; do
        [ -d "$d" ] && find "$d" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' \
            ! -name '*.patch'
    done; for d in $CPYTHON_DIRS; do
        [ -d "$d" ] && find "$d" -type f -name '*.patch'
    done | while IFS= read -r p; do
        patch_target "$p"
    done | sort -u | while IFS= read -r t; do
        patch_for "$t"
    done; for f in $CPYTHON_TOPFILES; do
        [ -f "$f.patch" ] && patch_for "$f"
    done) | LC_ALL=C sort
}

# "URI SUITE" of each of apt's "deb" entries for Debian 12 main (a mirror
# or proxy included), so that nothing names an archive host itself.
debian_archives() {
    apt-get indextargets --format '$(TARGET_OF) $(REPO_URI) $(RELEASE) $(COMPONENT)' 2>/dev/null \
        | awk '$1 == "deb" && $4 == "main" && $3 ~ /^bookworm(-updates|-security)?$/ { print $2, $3 }' \
        | sort -u
}

sha256_ok() {
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$BASE_SHA256" ]
}

# Debian's packages are built on Debian's own release only.
require_default_version() {
    [ "$PY_VERSION" = "$DEFAULT_PY_VERSION" ] \
        || die "$1 is for Debian 12's CPython $DEFAULT_PY_VERSION only (PY_VERSION=$PY_VERSION)"
}

# Shared settings for the perf trampoline tooling (sourced, not executed).

PY_VERSION=3.11.2
# Debian's orig tarball of python3.11 is byte-identical to the upstream
# Python-3.11.2.tgz release.
BASE_SHA256=2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
BASE_TARBALL_NAME=python3.11_${PY_VERSION}.orig.tar.gz
# The Debian revision whose patch stack "make patch" checks against; its
# .dsc pins the packaging's tarballs.  "make deb" builds on the newest
# revision the archive serves the source of (Tools/perf/deb-archive.sh).
DEBIAN_VERSION=3.11.2-6+deb12u8
DEBIAN_DSC_SHA256=197fa19ab45f41c820f40f6d9ead671c2ea29ddc53ba9424b36f1bf58458a10e

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-$TOP/build}
DOWNLOADS=$BUILD/downloads
PRISTINE=$BUILD/pristine        # untouched 3.11.2 source, never built in
SRC=$BUILD/cpython              # pristine + our files + our patches
OBJ=$BUILD/obj                  # out-of-tree build directory of $SRC
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

# Print the paths (relative to $TOP) of our new CPython files and patches.
list_our_files() {
    (cd "$TOP" && for d in $CPYTHON_DIRS; do
        [ -d "$d" ] && find "$d" -type f ! -name '*.pyc' ! -path '*/__pycache__/*'
    done; for f in $CPYTHON_TOPFILES; do
        [ -f "$f.patch" ] && echo "$f.patch"
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

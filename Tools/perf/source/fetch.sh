#!/bin/bash
# Fetch the base source of CPython $PY_VERSION and check its sha256.
#
#   fetch.sh            the release tarball (or $PYTHON_TARBALL, if set)
#   fetch.sh --debian   also Debian's packaging of $DEBIAN_VERSION
#   fetch.sh --deb-src  only make sure apt has deb-src entries (for the
#                       libraries built from Debian's sources)
#
# The default release, 3.11.2, comes from Debian's archive (its orig
# tarball is python.org's); any other from python.org.  PYTHON_TARBALL may
# point at an already downloaded Python-$PY_VERSION.tgz, for machines
# without either; it is checked against the same hash.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

mkdir -p "$DOWNLOADS"
tarball=$DOWNLOADS/$BASE_TARBALL_NAME

ensure_deb_src() {
    local versions
    versions=$(apt-cache showsrc python3.11 2>/dev/null || true)
    if grep -q "^Version: 3.11.2-" <<<"$versions"; then
        return
    fi
    if [ "$(id -u)" != 0 ]; then
        die "no deb-src entry for Debian's archive; add one (as root) or set PYTHON_TARBALL=/path/to/Python-3.11.2.tgz"
    fi
    # The same archives as the machine's own "deb" entries for Debian 12
    # (a mirror or proxy included), as deb-src.
    local entries
    entries=$(debian_archives)
    [ -n "$entries" ] || die "apt has no deb entry for Debian 12 (bookworm) main to derive a deb-src entry from; add a deb-src entry or set PYTHON_TARBALL=/path/to/Python-3.11.2.tgz"
    note "adding deb-src entries for the Debian archives apt uses"
    awk '{ suites[$1] = suites[$1] (suites[$1] == "" ? "" : " ") $2 }
         END { for (uri in suites) {
                   printf "Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n", uri, suites[uri]
                   printf "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n" } }' \
        <<<"$entries" >/etc/apt/sources.list.d/cpython-perf-trampoline-src.sources
    apt-get update -q >/dev/null
}

apt_source() {
    # apt-get source [args] python3.11=$DEBIAN_VERSION, falling back to the
    # archive's current 3.11.2 revision if that one is gone.
    (cd "$DOWNLOADS" && { apt-get source -q "$@" "python3.11=$DEBIAN_VERSION" \
        || apt-get source -q "$@" python3.11; }) >"$DOWNLOADS/apt-source.log" 2>&1 \
        || { cat "$DOWNLOADS/apt-source.log" >&2; die "apt-get source python3.11 failed"; }
}

if [ "${1:-}" = "--deb-src" ]; then
    ensure_deb_src
    exit 0
fi
if [ -n "${PYTHON_TARBALL:-}" ]; then
    [ -f "$PYTHON_TARBALL" ] || die "PYTHON_TARBALL=$PYTHON_TARBALL does not exist"
    sha256_ok "$PYTHON_TARBALL" || die "sha256 mismatch: $PYTHON_TARBALL is not CPython $PY_VERSION (expected $BASE_SHA256)"
    if ! cmp -s "$PYTHON_TARBALL" "$tarball"; then
        cp "$PYTHON_TARBALL" "$tarball"
    fi
elif [ ! -f "$tarball" ] && [ "$PY_VERSION" = "$DEFAULT_PY_VERSION" ]; then
    command -v apt-get >/dev/null || die "apt-get not available: set PYTHON_TARBALL=/path/to/Python-3.11.2.tgz"
    ensure_deb_src
    note "downloading Debian's python3.11 orig tarball"
    apt_source --tar-only --download-only
elif [ ! -f "$tarball" ]; then
    url=https://www.python.org/ftp/python/$PY_VERSION/Python-$PY_VERSION.tgz
    note "downloading $url"
    if command -v curl >/dev/null; then
        curl -fsSL --retry 2 -o "$tarball.part" "$url" || rm -f "$tarball.part"
    else
        wget -q -O "$tarball.part" "$url" || rm -f "$tarball.part"
    fi
    [ -f "$tarball.part" ] \
        || die "cannot download $url; set PYTHON_TARBALL=/path/to/Python-$PY_VERSION.tgz"
    mv "$tarball.part" "$tarball"
fi
if ! sha256_ok "$tarball"; then
    mv "$tarball" "$tarball.bad"
    die "sha256 mismatch for $BASE_TARBALL_NAME (moved to $tarball.bad): it is not python.org's $PY_VERSION (expected $BASE_SHA256)"
fi

[ "${1:-}" != "--debian" ] || require_default_version "Debian's packaging"
if [ "${1:-}" = "--debian" ] && ! ls "$DOWNLOADS"/python3.11_3.11.2-*.debian.tar.xz >/dev/null 2>&1; then
    command -v apt-get >/dev/null || die "apt-get not available: cannot fetch Debian's packaging"
    ensure_deb_src
    note "downloading Debian's python3.11 packaging"
    apt_source --download-only
    sha256_ok "$tarball" || die "sha256 mismatch for $BASE_TARBALL_NAME after apt-get source"
fi
exit 0

#!/bin/bash
# What Debian's archive (as this machine's apt sees it) has of python3.11,
# against the packages of "make deb".
#
#   deb-archive.sh --base       download the newest 3.11.2 revision of
#                               python3.11 whose source the archive serves
#                               into build/downloads and print its version
#   deb-archive.sh --check VER  warn if the archive has a newer binary
#                               revision of python3.11 than VER (the
#                               Debian revision our packages are built on)
#
# Both say plainly when the archive has a newer revision than the one the
# packages are (or will be) built on: machines that follow Debian's
# security updates would otherwise be given packages without its fixes.
# Warnings go to stderr; neither mode fails because the archive is ahead.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

# Debian's revisions of python3.11 3.11.2 in apt's "Sources" (or
# "Packages") indexes, newest first; our own +perf builds left out.
revisions() {
    apt-cache madison python3.11 \
        | awk -F'|' -v kind="$1" '$3 ~ kind { gsub(/ /, "", $2); print $2 }' \
        | grep "^$PY_VERSION-" | grep -v '+perf[0-9]*$' | sort -u \
        | sort -r -V
}

newest_binary() {
    revisions Packages | head -1
}

warn_if_ahead() {
    local built=$1 newest
    newest=$(newest_binary)
    if [ -n "$newest" ] && dpkg --compare-versions "$newest" gt "$built"; then
        echo "warning: Debian's archive has python3.11 $newest, newer than $built," \
            "which these packages are built on: they lack its fixes, and machines" \
            "that pin them keep them over it (see Tools/perf/README.rst," \
            "\"When Debian is ahead\")" >&2
    fi
}

case "${1:-}" in
    --base)
        "$TOP/Tools/perf/source/fetch.sh" --debian >&2   # the deb-src entry, the tarball
        mkdir -p "$DOWNLOADS"
        base=""
        for version in $(revisions Sources); do
            log=$DOWNLOADS/apt-source-$version.log
            if (cd "$DOWNLOADS" && apt-get source -q --download-only \
                    "python3.11=$version") >"$log" 2>&1; then
                base=$version
                break
            fi
            # apt checked nothing it could not fetch; a partial download
            # (the tarball came, the packaging did not) stays out of the way.
            rm -f "$DOWNLOADS/python3.11_$version.dsc" \
                "$DOWNLOADS/python3.11_$version.debian.tar.xz"
            echo "warning: Debian's archive lists python3.11 $version, but does not" \
                "serve all of its source package (apt-get source failed: $log)" >&2
        done
        [ -n "$base" ] || die "the archive serves no python3.11 $PY_VERSION source package (deb-src entry?)"
        # apt checked the files against the archive's signed Sources index;
        # the revision the project is tested on is also pinned here.
        if [ "$base" = "$DEBIAN_VERSION" ] \
            && [ "$(sha256sum "$DOWNLOADS/python3.11_$base.dsc" | cut -d' ' -f1)" != "$DEBIAN_DSC_SHA256" ]; then
            die "sha256 mismatch: python3.11_$base.dsc is not the pinned one"
        fi
        warn_if_ahead "$base"
        echo "$base" ;;
    --check)
        [ -n "${2:-}" ] || die "usage: deb-archive.sh --check DEBIAN_REVISION"
        warn_if_ahead "$2" ;;
    *)
        die "usage: deb-archive.sh --base | --check DEBIAN_REVISION" ;;
esac

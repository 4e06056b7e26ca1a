#!/bin/bash
# "make deb-source" and "make deb": Debian 12's own python3.11 packages,
# with perf trampolines.
#
# Debian's source package (the newest revision whose source the archive
# serves, checked by apt against the archive's signed index; the revision
# "make patch" checks against is also sha256-pinned) gets the combined
# patch as the last of its quilt series,
# the changes of Tools/perf/debian/rules.patch (frame pointers; the PGO
# training task) and a changelog entry for a version that sorts above
# Debian's.  "make deb-source" stops at the source package; "make deb"
# installs the build dependencies and builds the binary packages with
# dpkg-buildpackage.  Everything lands in build/deb/.
set -euo pipefail
. "$(dirname "$0")/../config.sh"
require_default_version "make deb"

mode=${1:---binary}
DEB=$BUILD/deb
PATCH=$COMBINED_PATCH
# Debian's options for a faster build that gives users the same packages:
# no test suite run, no benchmark run.
BUILD_OPTIONS="nocheck nobench parallel=$(nproc)"

[ -f "$PATCH" ] || die "no $PATCH: run make patch first"
# The newest revision whose source the archive serves, so that the
# packages carry Debian's latest fixes (it warns when the archive has a
# newer binary revision whose source it does not serve).
DEBIAN_BASE=$("$TOP/Tools/perf/debian/deb-archive.sh" --base)
PKG_VERSION=$DEBIAN_BASE+perf1
SRCDIR=$DEB/python3.11-$PY_VERSION
dsc=$DOWNLOADS/python3.11_$DEBIAN_BASE.dsc
[ -f "$dsc" ] || die "Debian's python3.11 $DEBIAN_BASE source package is not in $DOWNLOADS"
[ "$DEBIAN_BASE" = "$DEBIAN_VERSION" ] \
    || note "building on python3.11 $DEBIAN_BASE, newer than $DEBIAN_VERSION, which the project is tested on"

rm -rf "$DEB"
mkdir -p "$DEB"
note "unpacking Debian's python3.11 $DEBIAN_BASE (its own patches applied)"
# dpkg-source checks the tarballs against the checksums in the .dsc.
dpkg-source -q -x "$dsc" "$SRCDIR" >"$DEB/unpack.log" 2>&1 \
    || { cat "$DEB/unpack.log" >&2; die "dpkg-source -x failed"; }

cd "$SRCDIR"
cp "$PATCH" debian/patches/perf-trampolines.diff
echo perf-trampolines.diff >>debian/patches/series
QUILT_PATCHES=debian/patches quilt push -q --fuzz=0 >"$DEB/quilt.log" 2>&1 \
    || { cat "$DEB/quilt.log" >&2; die "the combined patch does not apply after Debian's series"; }
patch -s -p1 --fuzz=0 <"$TOP/Tools/perf/debian/rules.patch" \
    || die "Tools/perf/debian/rules.patch does not apply to Debian's debian/rules"

# The entry is dated like the commit it is built from, so that two builds
# of one commit make the same packages.
maintainer=$(git -C "$TOP" log -1 --format='%an <%ae>' 2>/dev/null || echo "perf trampolines <root@localhost>")
when=$(date -R -u -d "@$(git -C "$TOP" log -1 --format=%ct 2>/dev/null || date +%s)")
{
    cat <<EOF
python3.11 ($PKG_VERSION) bookworm; urgency=medium

  * Perf trampolines (debian/patches/perf-trampolines.diff): python3.11
    -X perf, PYTHONPERFSUPPORT=1 and sys.activate_stack_trampoline("perf")
    let Linux perf show Python functions by name in native profiles.
  * Build with frame pointers, so that perf record -g sees whole call
    chains; train PGO with CPython's --pgo task.

 -- $maintainer  $when

EOF
    cat debian/changelog
} >debian/changelog.new
mv debian/changelog.new debian/changelog

note "building the source package"
ln -sf "$DOWNLOADS/python3.11_$PY_VERSION.orig.tar.gz" "$DEB/"
(cd "$DEB" && dpkg-source -q -b "$(basename "$SRCDIR")") >"$DEB/source.log" 2>&1 \
    || { cat "$DEB/source.log" >&2; die "dpkg-source -b failed"; }
note "wrote $DEB/python3.11_$PKG_VERSION.dsc"
[ "$mode" = --source ] && exit 0

note "installing the build dependencies (apt-get build-dep --arch-only)"
DEBIAN_FRONTEND=noninteractive apt-get build-dep -q -y --arch-only "$SRCDIR" \
    >"$DEB/build-dep.log" 2>&1 \
    || { tail -30 "$DEB/build-dep.log" >&2; die "apt-get build-dep failed (needs root)"; }

note "building the binary packages: DEB_BUILD_OPTIONS=\"$BUILD_OPTIONS\" dpkg-buildpackage -B (log: $DEB/build.log)"
start=$(date +%s)
DEB_BUILD_OPTIONS=$BUILD_OPTIONS dpkg-buildpackage -B -us -uc >"$DEB/build.log" 2>&1 \
    || { tail -40 "$DEB/build.log" >&2; die "dpkg-buildpackage failed (log: $DEB/build.log)"; }
note "built in $(( ($(date +%s) - start) / 60 )) minutes:"
ls "$DEB"/*.deb | sed 's|^|    |'
"$TOP/Tools/perf/debian/deb-archive.sh" --check "$DEBIAN_BASE"

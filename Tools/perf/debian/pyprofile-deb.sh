#!/bin/bash
# "make deb-source" and "make deb" (after deb.sh): python3.11-pyprofile,
# pyprofile3.11 with its flame graph renderer, as a Debian 12 package of
# its own (Debian's python3.11 source package stays as deb.sh builds it).
#
# A small source package, format 3.0 (quilt), built from this checkout:
#   python3.11-pyprofile_V.orig.tar.xz
#       Tools/perf/pyprofile, pyprofile_lib/ and pyprofile-install.sh
#   python3.11-pyprofile_V.orig-d3-flame-graph.tar.gz
#       d3-flame-graph's npm tarball ("npm pack", sha256-pinned below and
#       kept in build/downloads, so that npm is needed once)
#   debian/ from Tools/perf/debian/pyprofile/, with a changelog entry
# V is 1.0+git followed by the time and hash of the checkout's commit.
# dpkg-buildpackage builds the source and the binary package (seconds)
# into build/deb; then the binary package is checked: extracted with
# dpkg-deb -x, its pyprofile3.11 runs --help and --check, and records a
# flame graph of build/python where perf can record here.
set -euo pipefail
. "$(dirname "$0")/../config.sh"
require_default_version "python3.11-pyprofile"

DEB=$BUILD/deb
PKG=python3.11-pyprofile
D3_VERSION=$(sed -n 's/^D3_VERSION = "\(.*\)"$/\1/p' "$TOP/Tools/perf/pyprofile_lib/rendering.py")
D3_TGZ=$DOWNLOADS/d3-flame-graph-$D3_VERSION.tgz
# sha256 of "npm pack d3-flame-graph@4.1.3" (the registry's tarball).
D3_TGZ_SHA256=5b9fd58798daad7515db6e1a2224c1d939c11584f79da108706dbde3942363c4
[ "$D3_VERSION" = 4.1.3 ] || die "D3_VERSION is $D3_VERSION in rendering.py: pin its npm tarball's sha256 here"

tgz_ok() {
    [ "$(sha256sum "$D3_TGZ" | cut -d' ' -f1)" = "$D3_TGZ_SHA256" ]
}
if [ ! -f "$D3_TGZ" ] || ! tgz_ok; then
    command -v npm >/dev/null || die "npm is not installed: it fetches d3-flame-graph (apt-get install npm)"
    note "fetching d3-flame-graph $D3_VERSION (npm pack)"
    mkdir -p "$DOWNLOADS"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --prefer-offline --silent "d3-flame-graph@$D3_VERSION" >/dev/null) \
        || { rm -rf "$tmp"; die "npm pack d3-flame-graph@$D3_VERSION failed"; }
    mv "$tmp/d3-flame-graph-$D3_VERSION.tgz" "$D3_TGZ.new"
    rm -rf "$tmp"
    mv "$D3_TGZ.new" "$D3_TGZ"
    tgz_ok || { rm -f "$D3_TGZ"; die "npm's d3-flame-graph-$D3_VERSION.tgz does not match its pinned sha256"; }
fi

# The version and the changelog's date come from the commit, so that one
# commit gives the same package.
ct=$(git -C "$TOP" log -1 --format=%ct 2>/dev/null || date +%s)
hash=$(git -C "$TOP" log -1 --format=%h 2>/dev/null || echo local)
UPSTREAM=1.0+git$(date -u -d "@$ct" +%Y%m%d.%H%M%S).$hash
VERSION=$UPSTREAM-1
maintainer=$(git -C "$TOP" log -1 --format='%an <%ae>' 2>/dev/null || echo "perf trampolines <root@localhost>")
SRCDIR=$DEB/$PKG-$UPSTREAM

mkdir -p "$DEB"
rm -rf "$DEB/$PKG"-* "$DEB/$PKG"_* "$DEB/$PKG.log"
note "building $PKG $VERSION (log: $DEB/$PKG.log)"
orig=$DEB/${PKG}_$UPSTREAM.orig.tar.xz
tar --sort=name --mtime="@$ct" --owner=0 --group=0 --numeric-owner \
    --mode=u+w,go-w,a+rX --transform="s|^|$PKG-$UPSTREAM/|" \
    -C "$TOP/Tools/perf" -cf - pyprofile pyprofile-install.sh \
    $(cd "$TOP/Tools/perf" && echo pyprofile_lib/*.py) \
    | xz -6 >"$orig"
cp "$D3_TGZ" "$DEB/${PKG}_$UPSTREAM.orig-d3-flame-graph.tar.gz"

# The tree dpkg-source -b compares with its tarballs.
tar -C "$DEB" -xf "$orig"
mkdir "$SRCDIR/d3-flame-graph"
tar -C "$SRCDIR/d3-flame-graph" --strip-components=1 -xzf "$D3_TGZ"
cp -r "$TOP/Tools/perf/debian/pyprofile" "$SRCDIR/debian"
python3 - "$SRCDIR/debian/control" "$maintainer" "$DEBIAN_VERSION+perf1" <<'EOF'
import sys
path, maintainer, python = sys.argv[1:]
with open(path) as f:
    text = f.read()
with open(path, "w") as f:
    f.write(text.replace("@MAINTAINER@", maintainer)
            .replace("@PYTHON_VERSION@", python))
EOF
cat >"$SRCDIR/debian/changelog" <<EOF
$PKG ($VERSION) bookworm; urgency=medium

  * pyprofile3.11 of commit $hash, with d3-flame-graph $D3_VERSION.

 -- $maintainer  $(date -R -u -d "@$ct")
EOF

(cd "$SRCDIR" && dpkg-buildpackage -us -uc) >"$DEB/$PKG.log" 2>&1 \
    || { tail -30 "$DEB/$PKG.log" >&2; die "dpkg-buildpackage of $PKG failed (log: $DEB/$PKG.log)"; }
rm -rf "$SRCDIR"
deb=$DEB/${PKG}_${VERSION}_all.deb
[ -f "$deb" ] || die "no $deb"
note "wrote $DEB/${PKG}_$VERSION.dsc and $deb"

# The check: the package as a host would unpack it (no npm, no checkout).
check=$(mktemp -d)
trap 'rm -rf "$check"' EXIT
dpkg-deb -x "$deb" "$check"
pyprofile=$check/usr/bin/pyprofile3.11
for f in usr/bin/pyprofile3.11 usr/lib/pyprofile3.11/pyprofile_lib/readiness.py \
    "usr/lib/pyprofile3.11/d3-flame-graph-$D3_VERSION/d3-flamegraph-base.html" \
    usr/share/doc/$PKG/copyright; do
    [ -f "$check/$f" ] || die "$deb has no /$f"
done
[ "$(head -1 "$pyprofile")" = "#!/usr/bin/python3" ] || die "pyprofile3.11's first line is not #!/usr/bin/python3"
python3 "$pyprofile" --help >/dev/null || die "pyprofile3.11 --help failed"
echo "ok   pyprofile3.11 --help"
# --check's verdict on perf and permissions is this machine's; the
# renderer must be the package's own, whatever the cache holds.
status=0
XDG_CACHE_HOME=$check/cache python3 "$pyprofile" --check --python "$BUILD/python" \
    >"$check/check.txt" 2>&1 || status=$?
cat "$check/check.txt" >>"$DEB/$PKG.log"
[ $status -le 1 ] || { cat "$check/check.txt" >&2; die "pyprofile3.11 --check failed with status $status"; }
grep -q "^ok   renderer: .*$check/usr/lib/pyprofile3.11/" "$check/check.txt" \
    || { cat "$check/check.txt" >&2; die "pyprofile3.11 does not find the renderer it ships"; }
echo "ok   pyprofile3.11 --check runs and finds its renderer"
if [ $status = 0 ]; then
    XDG_CACHE_HOME=$check/cache python3 "$pyprofile" -o "$check/flamegraph.html" \
        -- "$BUILD/python" "$TOP/Tools/perf/debian/pyprofile_check.py" >>"$DEB/$PKG.log" 2>&1 \
        || { tail -20 "$DEB/$PKG.log" >&2; die "pyprofile3.11 failed to record"; }
    grep -q "pyprofile_check_function (pyprofile_check.py)" "$check/flamegraph.html" \
        || die "pyprofile3.11's flame graph does not name pyprofile_check_function"
    echo "ok   pyprofile3.11 writes a flame graph naming the program's function"
else
    echo "skip recording a flame graph: not ready to record here (--check above, in $DEB/$PKG.log)"
fi

#!/bin/bash
# "make apt-repo-check": the repository of "make apt-repo", tried as a
# fleet machine would use it, in a clean debootstrapped Debian 12 root
# that follows Debian's archive (security updates included), with the
# repository served over HTTP on 127.0.0.1 only:
#  - Debian's python3.11 is installed first, as on a machine in service;
#  - a copy of the repository with a tampered Release file is refused;
#  - with the two files installed, "apt-get install --allow-downgrades
#    python3.11" replaces
#    Debian's packages with these, and python3.11 -X perf writes a map;
#  - python3.11-pyprofile installs, and its pyprofile3.11 profiles a
#    python3.11 -X perf program into a flame graph that names its function;
#  - "apt-get upgrade" keeps them;
#  - without the two files, "apt-get update" and the revert script that
#    the repository publishes (Tools/perf/debian/deb-revert.sh) bring Debian's
#    packages back.
set -euo pipefail
. "$(dirname "$0")/../config.sh"
require_default_version "make apt-repo-check"
. "$(dirname "$0")/deb-root.sh"

REPO=$BUILD/apt-repo
WORK=$BUILD/apt-repo-check
LOG=$BUILD/apt-repo-check.log
[ -f "$REPO/python3.11-perf.sources" ] || die "no repository in $REPO: run make apt-repo first"

server=""
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; fi
    umount_root
}
trap cleanup EXIT

# What is served: the repository, and a copy of it whose Release files say
# other than what was signed (one checksum changed).
rm -rf "$WORK"
mkdir -p "$WORK/served"
cp -a "$REPO" "$WORK/served/good"
cp -a "$REPO" "$WORK/served/tampered"
python3 - "$WORK"/served/tampered/dists/*/InRelease "$WORK"/served/tampered/dists/*/Release <<'EOF'
import re, sys
for path in sys.argv[1:]:
    with open(path) as f:
        text = f.read()
    # The first SHA256 checksum's first digit, changed: the Release file
    # now vouches for other index files than the ones that were signed.
    m = re.search(r"^SHA256:\n ([0-9a-f])", text, re.M)
    if m is None:
        sys.exit(f"no SHA256 checksum in {path}")
    digit = "0" if m.group(1) != "0" else "1"
    with open(path, "w") as f:
        f.write(text[:m.start(1)] + digit + text[m.end(1):])
EOF

# A static server on 127.0.0.1, on a port the kernel chooses; it writes the
# port when it listens and stops by itself after an hour at the latest.
note "serving $WORK/served on 127.0.0.1"
timeout 3600 python3 - "$WORK/served" "$WORK/port" >"$WORK/http.log" 2>&1 <<'EOF' &
import functools, http.server, os, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
    with open(sys.argv[2] + ".new", "w") as f:
        f.write(str(httpd.server_address[1]))
    os.rename(sys.argv[2] + ".new", sys.argv[2])
    httpd.serve_forever()
EOF
server=$!
for _ in $(seq 600); do
    [ -s "$WORK/port" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$WORK/http.log" >&2; die "the HTTP server did not start"; }
    sleep 0.1
done
[ -s "$WORK/port" ] || die "the HTTP server did not listen within a minute"
base=http://127.0.0.1:$(cat "$WORK/port")

make_root "$BUILD/apt-repo-root" "$LOG"
# The packages built from python3.11's source (python3.11-pyprofile is a
# source package of its own, with versions of its own).
perf_versions() {
    in_root dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' \
        'python3.11*' 'libpython3.11*' \
        | awk '$1 == "ii" && $2 != "python3.11-pyprofile" { print $2, $3 }'
}
use_repo() {   # use_repo good|tampered: install the two files, pointed at it
    sed "s|^URIs: .*|URIs: $base/$1|" "$REPO/python3.11-perf.sources" \
        >"$ROOT/etc/apt/sources.list.d/python3.11-perf.sources"
    cp "$REPO/python3.11-perf.pref" "$ROOT/etc/apt/preferences.d/"
}
fail() {
    tail -30 "$LOG" >&2
    die "$* (log: $LOG)"
}

note "installing Debian's python3.11, as on a machine in service"
in_root apt-get update -q >>"$LOG" 2>&1 || fail "apt-get update failed"
in_root apt-get install -y -q python3.11 >>"$LOG" 2>&1 || fail "installing Debian's python3.11 failed"
debian=$(perf_versions)
grep -q '+perf' <<<"$debian" && fail "Debian's archive gave +perf packages"
echo "ok   Debian's python3.11 $(awk '$1 == "python3.11" { print $2 }' <<<"$debian") installed"

use_repo tampered
if in_root apt-get update -q >"$WORK/tampered.log" 2>&1; then
    cat "$WORK/tampered.log" >>"$LOG"
    fail "apt-get update accepted a tampered Release file"
fi
cat "$WORK/tampered.log" >>"$LOG"
grep -q "127.0.0.1.*InRelease" "$WORK/tampered.log" \
    && grep -qi "signature" "$WORK/tampered.log" \
    || fail "apt-get update failed, but not on the tampered repository's signature"
policy=$(in_root apt-cache policy python3.11)
grep -q '+perf' <<<"$policy" && fail "the tampered repository's packages are candidates"
echo "ok   a tampered Release file is refused"

use_repo good
in_root apt-get update -q >>"$LOG" 2>&1 || fail "apt-get update failed with the repository"
# Debian's newer revision is installed: going to these is a downgrade,
# which apt-get -y makes only when told to.
in_root apt-get install -y -q --allow-downgrades python3.11 >>"$LOG" 2>&1 \
    || fail "apt-get install --allow-downgrades python3.11 failed"
installed=$(perf_versions)
grep -v '+perf' <<<"$installed" && fail "apt-get install python3.11 left Debian's packages (above)"
echo "ok   apt-get install --allow-downgrades python3.11 installs:"
sed 's/^/         /' <<<"$installed"

# The map of a process of the root is in the root's /tmp.
rm -f "$ROOT"/tmp/perf-*.map
pid=$(in_root python3.11 -X perf -c '
import os
def perf_check_function(): pass
perf_check_function()
print(os.getpid())') || fail "python3.11 -X perf failed"
grep -q "py::perf_check_function:<string>" "$ROOT/tmp/perf-$pid.map" \
    || fail "python3.11 -X perf wrote no map naming its function"
echo "ok   python3.11 -X perf writes a perf map"

in_root apt-get install -y -q python3.11-pyprofile >>"$LOG" 2>&1 \
    || fail "apt-get install python3.11-pyprofile failed"
check_pyprofile python3.11 "$LOG" \
    || fail "pyprofile3.11 wrote no flame graph naming the program's function"
echo "ok   pyprofile3.11 (python3.11-pyprofile) profiles python3.11 -X perf into a flame graph"
# It brings linux-perf, which links libpython3.11: the repository's too.
installed=$(perf_versions)
grep -v '+perf' <<<"$installed" \
    && fail "apt-get install python3.11-pyprofile brought Debian's packages (above)"

in_root apt-get upgrade -y -q >>"$LOG" 2>&1 || fail "apt-get upgrade failed"
[ "$(perf_versions)" = "$installed" ] || fail "apt-get upgrade changed the packages: $(perf_versions)"
echo "ok   apt-get upgrade keeps them"

note "removing the two files, and going back to Debian's packages"
rm "$ROOT/etc/apt/sources.list.d/python3.11-perf.sources" \
    "$ROOT/etc/apt/preferences.d/python3.11-perf.pref"
in_root apt-get update -q >>"$LOG" 2>&1 || fail "apt-get update failed"
cp "$REPO/python3.11-perf-revert.sh" "$ROOT/tmp/"
in_root sh /tmp/python3.11-perf-revert.sh >>"$LOG" 2>&1 || fail "python3.11-perf-revert.sh failed"
back=$(perf_versions)
grep '+perf' <<<"$back" && fail "+perf packages are still installed (above)"
# Every package of before at its version of before; linux-perf, which
# python3.11-pyprofile brought, keeps libpython3.11 (Debian's, as above).
missing=$(comm -23 <(sort <<<"$debian") <(sort <<<"$back"))
[ -z "$missing" ] || fail "Debian's packages of before did not all come back: $missing (now: $back)"
echo "ok   Debian's packages are back"
note "the repository works on a fleet machine"

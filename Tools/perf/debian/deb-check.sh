#!/bin/bash
# "make deb-check": install the packages of "make deb" with apt into a
# clean Debian 12 root made by debootstrap from the archives this machine's
# apt uses, and check inside it what a Debian user gets:
#  - python3 -X perf, PYTHONPERFSUPPORT=1 and
#    sys.activate_stack_trampoline("perf") write correct perf maps;
#  - perf record -g (this machine's perf) names foo <- bar <- baz, with the
#    whole chain in at least 95% of foo's samples (frame pointers);
#  - compiled extensions from Debian's archive, built against the stock
#    3.11 headers, import and run unchanged with -X perf, and some of
#    numpy's own tests pass;
#  - python3.11-dbg and its gdb helpers (py-bt) still work;
#  - Tools/perf/debian/deb-revert.sh brings Debian's own packages back.
set -euo pipefail
. "$(dirname "$0")/../config.sh"
require_default_version "make deb-check"
. "$(dirname "$0")/deb-root.sh"

DEB=$BUILD/deb
LOG=$BUILD/deb-check.log
# make deb-source makes python3.11-pyprofile only.
ls "$DEB"/python3.11_*.deb >/dev/null 2>&1 || die "no packages in $DEB: run make deb first"

trap umount_root EXIT
make_root "$BUILD/deb-root" "$LOG"

note "installing the packages with apt, and archive packages with compiled extensions"
rm -rf "$ROOT/tmp/debs"
mkdir -p "$ROOT/tmp/debs"
in_root apt-get update -q >>"$LOG" 2>&1
# python3.11-full depends on Debian's libpython3.11-testsuite, which
# requires a python3.11 at least as new as itself: when the archive has a
# newer revision than the one built, apt cannot install python3.11-full.
built=$(dpkg-deb -f "$(ls "$DEB"/python3.11_*.deb)" Version)
archive=$(in_root apt-cache madison libpython3.11-testsuite | awk '{ print $3; exit }')
skip_full=no
if [ -n "$archive" ] && dpkg --compare-versions "$archive" gt "${built%+perf*}"; then
    skip_full=yes
    note "not installing python3.11-full: the archive's libpython3.11-testsuite $archive needs python3.11 >= $archive, newer than $built"
fi
for f in "$DEB"/*.deb; do
    case "$f" in
        */python3.11-full_*) [ $skip_full = yes ] || cp "$f" "$ROOT/tmp/debs/" ;;
        *) cp "$f" "$ROOT/tmp/debs/" ;;
    esac
done
debs=$(cd "$ROOT/tmp/debs" && ls -- *.deb | sed 's|^|/tmp/debs/|')
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    $debs python3 python3-yaml python3-numpy python3-lxml \
    python3-pytest python3-hypothesis python3-dbg gdb >>"$LOG" 2>&1 \
    || { tail -30 "$LOG" >&2; die "apt-get install failed in the root (log: $LOG)"; }
in_root dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' \
    'python3.11*' 'libpython3.11*' | awk '$1 == "ii" { print "   ", $2, $3 }'

cp "$TOP/Tools/perf/debian/deb_checks.py" "$ROOT/tmp/deb_checks.py"
note "checking inside the root"
in_root python3 /tmp/deb_checks.py inside

# perf from this machine records the root's python3; perf reads the map
# from this machine's /tmp, where it is copied once python3 has exited.
note "perf record -g of foo <- bar <- baz"
rm -f "$ROOT"/tmp/perf-*.map
perf_data=$BUILD/deb-check-perf.data
perf record -q -e cpu-clock -F 999 -g -o "$perf_data" -- \
    chroot "$ROOT" env -i PATH=/usr/bin:/bin python3 -X perf /tmp/deb_checks.py workload \
    >>"$LOG" 2>&1 || die "perf record failed (log: $LOG)"
copied=""
for map in "$ROOT"/tmp/perf-*.map; do
    cp "$map" /tmp/ && copied="$copied /tmp/$(basename "$map")"
done
[ -n "$copied" ] || die "python3 -X perf wrote no perf map"
perf script -i "$perf_data" -F comm,ip,sym 2>>"$LOG" | python3 "$TOP/Tools/perf/debian/deb_checks.py" chains
rm -f $copied "$perf_data" "$perf_data.old"

note "going back to Debian's packages (Tools/perf/debian/deb-revert.sh)"
cp "$TOP/Tools/perf/debian/deb-revert.sh" "$ROOT/tmp/"
in_root sh /tmp/deb-revert.sh >>"$LOG" 2>&1 \
    || { tail -20 "$LOG" >&2; die "deb-revert.sh failed (log: $LOG)"; }
if in_root dpkg-query -W -f '${Version}\n' | grep -q '+perf'; then
    die "packages of make deb are still installed after deb-revert.sh"
fi
in_root python3 -c 'import sys; assert not hasattr(sys, "activate_stack_trampoline")' \
    || die "python3 still has perf trampolines after deb-revert.sh"
echo "ok   deb-revert.sh: Debian's python3.11 is back"
note "the packages work in a clean Debian 12 root"

# A clean Debian 12 root made by debootstrap, for "make deb-check" and
# "make apt-repo-check" (sourced after config.sh, not executed).
#
#   make_root ROOT LOG   a new minbase root whose apt uses the archives this
#                        machine's apt uses, with /proc and /dev/pts mounted
#   in_root CMD...       run CMD in it, with a clean environment
#   umount_root          unmount what make_root mounted (call it at exit)
#   check_pyprofile PYTHON LOG
#                        pyprofile3.11 (python3.11-pyprofile, installed in
#                        the root) profiles a small PYTHON -X perf program
#                        there; its flame graph must name the program's
#                        function

make_root() {
    ROOT=$1
    local log=$2 entries mirror
    [ "$(id -u)" = 0 ] || die "a debootstrapped root needs root (debootstrap, chroot)"
    entries=$(debian_archives)
    mirror=$(awk '$2 == "bookworm" { print $1; exit }' <<<"$entries")
    [ -n "$mirror" ] || die "apt has no deb entry for Debian 12 (bookworm) main"
    # A new root each time: what the last run installed must not count.
    umount_root
    rm -rf "$ROOT"
    note "making a clean Debian 12 root in $ROOT (debootstrap)"
    debootstrap --variant=minbase bookworm "$ROOT" "$mirror" >"$log" 2>&1 \
        || { tail -20 "$log" >&2; die "debootstrap failed (log: $log)"; }
    awk '{ print "deb", $1, $2, "main" }' <<<"$entries" >"$ROOT/etc/apt/sources.list"
    mount -t proc proc "$ROOT/proc"
    mount -t devpts devpts "$ROOT/dev/pts"
}

umount_root() {
    [ -n "${ROOT:-}" ] || return 0
    for m in proc dev/pts; do
        if mountpoint -q "$ROOT/$m"; then umount -l "$ROOT/$m"; fi
    done
}

in_root() {
    chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

check_pyprofile() {
    local python=$1 log=$2
    cp "$TOP/Tools/perf/debian/pyprofile_check.py" "$ROOT/tmp/"
    rm -f "$ROOT/tmp/pyprofile-check.html"
    in_root pyprofile3.11 --help >>"$log" 2>&1 || return 1
    # No npm and no cache in the root: the renderer is the package's.
    in_root pyprofile3.11 --check --python "$python" >>"$log" 2>&1 || return 1
    in_root pyprofile3.11 -o /tmp/pyprofile-check.html -- "$python" /tmp/pyprofile_check.py \
        >>"$log" 2>&1 || return 1
    grep -q "pyprofile_check_function (pyprofile_check.py)" "$ROOT/tmp/pyprofile-check.html"
}

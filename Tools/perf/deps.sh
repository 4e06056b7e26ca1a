#!/bin/bash
# Install what building, testing and profiling need (Debian 12 / Ubuntu).
# As root (or with password-less sudo) the missing packages are installed;
# otherwise the exact command is printed and the script fails.
set -euo pipefail
. "$(dirname "$0")/config.sh"

PACKAGES="build-essential pkg-config patch xz-utils python3
zlib1g-dev libffi-dev libssl-dev libbz2-dev liblzma-dev libsqlite3-dev
libreadline-dev libncurses-dev uuid-dev libexpat1-dev libgdbm-dev
libgdbm-compat-dev autoconf2.69 autoconf-archive quilt linux-perf gdb"
flamegraph=no
foreign=""
for arg in "$@"; do
    case "$arg" in
        # "make test" also checks that the template assembles for aarch64
        # and riscv64, opens pyprofile's flame graphs in a browser, traces
        # the system calls of a forked child, unwinds with libunwind and
        # walks trampolined stacks with eu-stack and bpftrace.
        --test) PACKAGES="$PACKAGES gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu
gcc-riscv64-linux-gnu binutils-riscv64-linux-gnu chromium lldb strace
libunwind8 elfutils bpftrace valgrind"
                flamegraph=yes ;;
        # Tools/perf/pyprofile renders with d3-flame-graph from npm.
        --flamegraph) flamegraph=yes ;;
        --abi) PACKAGES="$PACKAGES abigail-tools" ;;
        --bench) PACKAGES="$PACKAGES valgrind" ;;
        # "make deb": Debian's packaging tools, and npm for the renderer
        # python3.11-pyprofile ships; "make deb-check": a clean Debian 12
        # root to install the packages into (also for "make apt-repo-check").
        --deb) PACKAGES="$PACKAGES dpkg-dev quilt"
               command -v npm >/dev/null || PACKAGES="$PACKAGES npm" ;;
        # "make LIBC=musl": musl and its gcc wrapper (Linux's headers come
        # from linux-libc-dev, which build-essential brings).
        --musl) PACKAGES="$PACKAGES musl-tools musl-dev" ;;
        --deb-check) PACKAGES="$PACKAGES debootstrap" ;;
        # "make apt-repo": Debian's index maker and GnuPG to sign.
        --apt-repo) PACKAGES="$PACKAGES apt-utils gnupg" ;;
        # "make test-cross": a cross compiler, the target's C library and
        # the libraries of the modules the tests need, and qemu to run it.
        --cross=aarch64)
            foreign=arm64
            PACKAGES="$PACKAGES qemu-user-static binfmt-support
gcc-aarch64-linux-gnu libc6-dev:arm64 libffi-dev:arm64 zlib1g-dev:arm64" ;;
        --cross=riscv64)
            PACKAGES="$PACKAGES qemu-user-static binfmt-support
gcc-riscv64-linux-gnu" ;;
        *) die "unknown option $arg" ;;
    esac
done

if [ $flamegraph = yes ] && ! command -v npm >/dev/null; then
    PACKAGES="$PACKAGES npm"
fi

setup_flamegraph() {
    if [ $flamegraph = yes ]; then
        python3 "$TOP/Tools/perf/pyprofile" --setup >/dev/null \
            || die "Tools/perf/pyprofile --setup failed"
    fi
}

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
if [ -z "$missing" ]; then
    setup_flamegraph
    exit 0
fi

if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO="sudo"
else
    echo "Missing packages:$missing" >&2
    echo "Install them with:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y --no-upgrade$missing" >&2
    exit 1
fi
note "installing:$missing"
if [ -n "$foreign" ] && ! dpkg --print-foreign-architectures | grep -qx "$foreign"; then
    $SUDO dpkg --add-architecture "$foreign"
fi
$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-upgrade $missing >/dev/null
setup_flamegraph

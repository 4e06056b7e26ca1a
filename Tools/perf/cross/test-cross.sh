#!/bin/bash
# "make test-cross ARCH=aarch64" (or riscv64): cross-build the patched
# interpreter for ARCH under build/cross-ARCH (frame pointers; on aarch64
# branch protection too: BTI landing pads and return address signing), run
# it under qemu through binfmt_misc, so that it and every process it starts
# run transparently, and run the tests that need neither perf nor a
# debugger (neither can follow emulated code).  aarch64 runs with QEMU_CPU=max:
# pointer authentication and BTI are emulated.
#
# Debian 12 has arm64 libraries but none for riscv64: there the C library
# is the cross toolchain's (qemu finds it through QEMU_LD_PREFIX), libffi
# is cross-built from Debian's source package so that ctypes exists, and
# the modules that need other libraries are left out (listed below).
set -euo pipefail
. "$(dirname "$0")/../config.sh"

ARCH=${ARCH:-aarch64}
XOBJ=$BUILD/cross-$ARCH
LIBFFI=$BUILD/cross-$ARCH-libffi      # out of $XOBJ: make clean removes *.a
case "$ARCH" in
    aarch64)
        triplet=aarch64-linux-gnu
        qemu=qemu-aarch64
        cflags="$OPT_CFLAGS -mbranch-protection=standard"
        pkgconfig=/usr/lib/$triplet/pkgconfig:/usr/share/pkgconfig
        ldflags=""
        # Pointer authentication and BTI emulated; qemu's own signing
        # algorithm instead of the architecture's QARMA, which makes the
        # tests take six times as long.
        export QEMU_CPU=max,pauth-impdef=on ;;
    riscv64)
        triplet=riscv64-linux-gnu
        qemu=qemu-riscv64
        # GCC 12 has no -mno-omit-leaf-frame-pointer for riscv64; its
        # -fno-omit-frame-pointer keeps the frame pointer in leaves too.
        # Unlike on x86-64 and aarch64, it makes no unwind tables by
        # default, and backtrace() and debuggers need them.
        cflags="-fno-omit-frame-pointer -fasynchronous-unwind-tables"
        pkgconfig=$LIBFFI/lib/pkgconfig
        ldflags="-L$LIBFFI/lib"         # where setup.py looks for libffi
        export QEMU_LD_PREFIX=/usr/$triplet ;;
    *) die "ARCH must be aarch64 or riscv64" ;;
esac
# The modules of test_perf_profiler one by one, so that they run in
# parallel: emulated, the package is slow in one process.
TESTS=${TESTS:-"$(cd "$SRC/Lib/test" && ls test_perf_profiler/test_*.py \
    | sed 's|/|.|; s|\.py$||' | tr '\n' ' ')
test_capi test_sys test_threading test_multiprocessing_fork test_fork1
test_generators test_traceback"}

"$TOP/Tools/perf/deps.sh" "--cross=$ARCH"
[ -x "$OBJ/python" ] || die "build first (make): the build uses build/python"

# Run ARCH's executables through qemu.
if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
        || die "cannot mount binfmt_misc (needs root)"
fi
if [ ! -e "/proc/sys/fs/binfmt_misc/$qemu" ]; then
    update-binfmts --enable "$qemu" || die "cannot register $qemu with binfmt_misc"
fi

mkdir -p "$XOBJ"
if [ "$ARCH" = riscv64 ] && [ ! -f "$LIBFFI/lib/libffi.a" ]; then
    note "cross-building libffi for $ARCH from Debian's source package"
    rm -rf "$LIBFFI" && mkdir -p "$LIBFFI/src"
    (cd "$LIBFFI/src" && apt-get source -q --download-only libffi \
        && tar --strip-components=1 -xf libffi_*.orig.tar.* \
        && ./configure -q --host="$triplet" --prefix="$LIBFFI" \
            --disable-shared --with-pic --disable-docs \
        && make -j"$(nproc)" install) >"$LIBFFI/build.log" 2>&1 \
        || { tail -30 "$LIBFFI/build.log" >&2; die "libffi failed (full log: $LIBFFI/build.log)"; }
fi
if [ ! -f "$XOBJ/Makefile" ]; then
    note "configuring for $triplet in $XOBJ"
    (cd "$XOBJ" && "$SRC/configure" -q --host="$triplet" \
        --build="$(gcc -dumpmachine)" --with-build-python="$OBJ/python" \
        CC="$triplet-gcc" CFLAGS="$cflags" LDFLAGS="$ldflags" \
        PKG_CONFIG_LIBDIR="$pkgconfig" \
        ac_cv_file__dev_ptmx=yes ac_cv_file__dev_ptc=no \
        ac_cv_buggy_getaddrinfo=no) \
        || die "configure failed (see $XOBJ/config.log)"
fi
note "building for $ARCH"
make -C "$XOBJ" -j"$(nproc)" >"$XOBJ/make.log" 2>&1 \
    || { tail -30 "$XOBJ/make.log" >&2; die "build failed (full log: $XOBJ/make.log)"; }
# What the build went without, and why: no $ARCH libraries for them here.
sed -n '/necessary bits to build these optional modules/,/^$/p' "$XOBJ/make.log"
grep -q '^#define PY_HAVE_PERF_TRAMPOLINE 1' "$XOBJ/pyconfig.h" \
    || die "configure did not enable perf trampolines for $ARCH"
"$XOBJ/python" -c 'import platform, sys; print("==> running", platform.machine(), sys.version.split()[0], "under qemu")'

note "running under qemu: python -m test $(echo $TESTS)"
set +e
env -u PYTHONUNBUFFERED -u PYTHONDONTWRITEBYTECODE \
    "$XOBJ/python" -m test -j"$(nproc)" --timeout 1800 --slowest \
    -i '*test_real_perf*' -i '*TestGdb*' -i '*TestLldb*' \
    ${TESTARGS:-} $TESTS

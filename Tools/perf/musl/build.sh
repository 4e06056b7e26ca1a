#!/bin/bash
# "make LIBC=musl": build the patched interpreter against musl libc with
# Debian's musl-gcc, out of tree in $BUILD/musl (the interpreter is
# $BUILD/musl/python), with frame pointers, as Alpine's python:3.11-alpine
# images build CPython from source.
#
# Debian has no libraries built for musl, so the ones the modules our
# tests need are built here from Debian's source packages, static and
# position independent, into build/musl-deps/prefix (shared by every
# release): zlib and libffi (ctypes).  The modules that need others (ssl
# and hashlib's OpenSSL digests, bz2, lzma, sqlite3, readline, curses,
# dbm, tkinter, uuid's libuuid) are left out: the build lists them.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

"$TOP/Tools/perf/deps.sh" --musl
"$TOP/Tools/perf/source/assemble.sh"

triplet=$(uname -m)-linux-musl
DEPS=$TOP/build/musl-deps
mkdir -p "$DEPS/bin" "$DEPS/kernel" "$DEPS/src"

# musl-gcc wraps the system gcc with musl's headers only; Linux's own
# headers (which musl does not ship) come from linux-libc-dev through a
# directory of links, so that glibc's headers stay out.  configure and
# setup.py ask the compiler for the multiarch triplet, which gcc answers
# for glibc; they must get musl's, or setup.py adds glibc's directories.
# musl-gcc's link specification also drops gcc's --eh-frame-hdr, without
# which an object has no PT_GNU_EH_FRAME and unwinders in the process
# find nothing in it (Alpine's gcc passes it, as gcc does elsewhere).
for d in linux asm-generic; do
    ln -sfn "/usr/include/$d" "$DEPS/kernel/$d"
done
ln -sfn "/usr/include/$(gcc -print-multiarch)/asm" "$DEPS/kernel/asm"
cc=$DEPS/bin/$triplet-cc
cat >"$cc.tmp" <<EOF
#!/bin/sh
# Written by Tools/perf/musl/build.sh: musl-gcc with Linux's headers.
case "\$*" in
    -print-multiarch|--print-multiarch) echo $triplet; exit 0 ;;
esac
exec musl-gcc -isystem "$DEPS/kernel" -Wl,--eh-frame-hdr "\$@"
EOF
chmod +x "$cc.tmp"
mv "$cc.tmp" "$cc"

# Download and unpack Debian's source package $1 (with Debian's patches)
# into ./src: the newest version whose files an archive serves (an
# archive may list a version it does not serve; apt then needs the suite).
apt_source() {
    local s
    for s in "" /bookworm-security /bookworm-updates /bookworm; do
        rm -rf -- ./*
        apt-get source -q "$1$s" && mv "$(find . -mindepth 1 -maxdepth 1 -type d)" src && return
    done
    return 1
}

# Build Debian's source package $1 into $DEPS/prefix (once) with the
# configure arguments that follow.
build_dep() {
    local pkg=$1
    shift
    [ -f "$DEPS/$pkg.done" ] && return
    note "building $pkg for musl from Debian's source package"
    rm -rf "$DEPS/src/$pkg" && mkdir -p "$DEPS/src/$pkg"
    (cd "$DEPS/src/$pkg" && apt_source "$pkg" && cd src \
        && CC=$cc CFLAGS="-O2 -fPIC $OPT_CFLAGS" ./configure --prefix="$DEPS/prefix" "$@" \
        && make -j"$(nproc)" && make install) >"$DEPS/$pkg.log" 2>&1 \
        || { tail -30 "$DEPS/$pkg.log" >&2; die "$pkg failed (full log: $DEPS/$pkg.log)"; }
    touch "$DEPS/$pkg.done"
}
"$TOP/Tools/perf/source/fetch.sh" --deb-src
build_dep zlib --static
build_dep libffi --disable-shared --with-pic --disable-docs

# gcc's unwinder as Alpine's libgcc has it (dl_find_object.c says why).
dlfo=$DEPS/dl_find_object.o
if [ ! -f "$dlfo" ] || [ "$TOP/Tools/perf/musl/dl_find_object.c" -nt "$dlfo" ]; then
    "$cc" -c -O2 -fPIC $OPT_CFLAGS -Wall -Werror \
        -o "$dlfo" "$TOP/Tools/perf/musl/dl_find_object.c" \
        || die "cannot compile Tools/perf/musl/dl_find_object.c"
    rm -f "$OBJ/python"             # linked with it
fi

mkdir -p "$OBJ"
if [ ! -f "$OBJ/Makefile" ] || [ "$SRC/configure" -nt "$OBJ/config.status" ] \
   || ! grep -q "THREAD_STACK_SIZE" "$OBJ/Makefile"; then
    note "configuring for $triplet in $OBJ"
    # New flags: build everything again.
    [ ! -f "$OBJ/Makefile" ] || make -C "$OBJ" clean >/dev/null
    # Threads get 1 MiB of stack, as in the python:3.11-alpine images
    # (musl's default is 128 KiB).
    (cd "$OBJ" && "$SRC/configure" -q CC="$cc" \
        CFLAGS="$OPT_CFLAGS -DTHREAD_STACK_SIZE=0x100000" \
        CPPFLAGS="-I$DEPS/prefix/include" LDFLAGS="-L$DEPS/prefix/lib" \
        LIBS="$dlfo" PKG_CONFIG_LIBDIR="$DEPS/prefix/lib/pkgconfig") \
        || die "configure failed (see $OBJ/config.log)"
fi
note "building against musl (make -j$(nproc))"
make -C "$OBJ" -j"$(nproc)" >"$OBJ/make.log" 2>&1 \
    || { tail -30 "$OBJ/make.log" >&2; die "build failed (full log: $OBJ/make.log)"; }
# What the build went without: no musl build of their libraries here.
sed -n '/necessary bits to build these optional modules/,/^$/p' "$OBJ/make.log"
failed='^(Failed to build these modules|Following modules built successfully but were removed)'
if grep -Eq "$failed" "$OBJ/make.log"; then
    sed -En "/$failed/,/^$/p" "$OBJ/make.log"
    die "modules failed to build against musl (full log: $OBJ/make.log)"
fi
grep -q '^#define PY_HAVE_PERF_TRAMPOLINE 1' "$OBJ/pyconfig.h" \
    || die "configure did not enable perf trampolines for $triplet"
note "built $OBJ/python: $("$OBJ/python" -c 'import sys; print(sys.version.split()[0])') against musl"

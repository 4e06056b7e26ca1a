#!/bin/bash
# "make test-asan": the patched tree built with AddressSanitizer and
# UndefinedBehaviorSanitizer (frame pointers kept) runs test_perf_profiler
# and the threading and fork tests.  Every process of the run writes its
# sanitizer reports to build/asan/reports; there must be none.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

"$TOP/Tools/perf/source/assemble.sh"
ASAN=$BUILD/asan
mkdir -p "$ASAN/obj"
if [ ! -f "$ASAN/obj/config.status" ] || [ "$SRC/configure" -nt "$ASAN/obj/config.status" ]; then
    note "configuring the sanitizer build"
    (cd "$ASAN/obj" && "$SRC/configure" -q --with-address-sanitizer \
        --with-undefined-behavior-sanitizer CFLAGS="$OPT_CFLAGS") \
        || die "configure failed ($ASAN/obj/config.log)"
fi
note "building with -fsanitize=address,undefined"
# Leak reports at exit are expected from CPython 3.11 itself.
export ASAN_OPTIONS=detect_leaks=0
make -C "$ASAN/obj" -j"$(nproc)" >"$ASAN/make.log" 2>&1 \
    || { tail -30 "$ASAN/make.log" >&2; die "sanitizer build failed"; }

reports=$ASAN/reports
rm -rf "$reports"
mkdir -p "$reports"
TESTS=${ASAN_TESTS:-"test_perf_profiler test_threading test_thread test_fork1
test_threading_local test_os test_subprocess"}
note "running $(echo $TESTS) under the sanitizers"
set +e
env -u PYTHONUNBUFFERED -u PYTHONDONTWRITEBYTECODE -u PYTHONPERFSUPPORT \
    ASAN_OPTIONS="detect_leaks=0:log_path=$reports/asan" \
    UBSAN_OPTIONS="print_stacktrace=1:log_path=$reports/ubsan" \
    "$ASAN/obj/python" -m test -j"$(nproc)" --timeout 1800 $TESTS
rc=$?
set -e
if compgen -G "$reports/*" >/dev/null; then
    for f in "$reports"/*; do
        echo "---- $f"
        head -40 "$f"
    done
    die "sanitizer reports (see above and $reports)"
fi
note "no sanitizer reports"
exit $rc

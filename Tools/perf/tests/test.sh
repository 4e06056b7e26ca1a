#!/bin/bash
# "make test": check the assembly template, then run our tests and the
# CPython test modules this patch touches with the built interpreter.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

# The modules of test_perf_profiler one by one, so that both cores run
# them (the package takes minutes in one process).
TESTS=${TESTS:-"$(cd "$SRC/Lib/test" && ls test_perf_profiler/test_*.py \
    | sed 's|/|.|; s|\.py$||' | tr '\n' ' ')
test_sys test_embed test_cmd_line test_capi
test_sysconfig test_posix test_threading test_gdb test_generators test_coroutines
test_sys_settrace test_sys_setprofile test_traceback test_exceptions
test_multiprocessing_fork"}

note "checking the trampoline template"
"$TOP/Tools/perf/tests/check-asm.sh"
"$TOP/Tools/perf/tests/check-unsupported.sh"

# The perf_jit test profiles an interpreter without frame pointers.
# TEST_NOFP=0 skips that build (and those tests), TEST_TOOLS=0 the tests
# of Tools/perf, which do not depend on the release: CI runs both with
# the default release only.  LIBC=musl runs neither: both are glibc's.
if [ "$PERF_LIBC" = musl ]; then
    TEST_NOFP=0
    TEST_TOOLS=0
fi
if [ "${TEST_NOFP:-1}" != 0 ]; then
    "$TOP/Tools/perf/source/build-nofp.sh"
    export PYTHON_NOFP_INTERPRETER=$BUILD/nofp-obj/python
fi

results=$BUILD/test-results.xml
log=$BUILD/test.log
rm -f "$results"
note "running: python -m test $(echo $TESTS)"
# Some environments set these; several CPython tests fail with them set.  The
# tests run build/obj/python itself (not the build/python symlink): venvs
# made from a symlink into a build tree do not find the standard library.
# -w runs a failed test module again, as CPython's own "make test" does
# (Tools/scripts/run_tests.py): test_multiprocessing_fork's test_terminate
# hangs now and then in stock 3.11 too (CPython issues #73945, #78178).
set +e
env -u PYTHONUNBUFFERED -u PYTHONDONTWRITEBYTECODE \
    "$OBJ/python" -m test -j"$(nproc)" -w --timeout 900 --junit-xml "$results" \
    ${TESTARGS:-} $TESTS 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
# Both runs' failures (subtests included) and the flaky tests, from the log:
# the XML leaves a test whose subtests failed unmarked (summary.py).
xml=()
[ -f "$results" ] && xml=(--junit-xml "$results")
"$OBJ/python" "$TOP/Tools/perf/tests/summary.py" "${xml[@]}" "$log" "$rc" \
    || note "summary.py failed (log: $log)"

rc2=0
if [ "$PERF_LIBC" = musl ]; then
    # pyprofile, run by the host's Python (glibc), on a process of this
    # interpreter in a container of its own.
    note "running: Tools/perf/tests: pyprofile on the musl interpreter in a container"
    set +e
    (cd "$TOP/Tools/perf/tests" && env -u PYTHONPERFSUPPORT \
        PYTHON_MUSL_INTERPRETER="$OBJ/python" \
        python3 -m unittest -v test_pyprofile.TestMuslContainer)
    rc2=$?
    set -e
fi
if [ "${TEST_TOOLS:-1}" != 0 ]; then
    note "running: Tools/perf/tests (pyprofile)"
    set +e
    (cd "$TOP/Tools/perf/tests" && env -u PYTHONPERFSUPPORT \
        "$OBJ/python" -m unittest discover -s . -v)
    rc2=$?
    set -e
fi
# Which part failed, in one line (a long log may be shown in part).
echo "==> exit status: python -m test $rc, Tools/perf/tests $rc2"
[ $rc = 0 ] && rc=$rc2
exit $rc

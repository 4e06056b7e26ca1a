"""A process that never turns the feature on runs as stock 3.11 does.

The checks that cost nothing in such a process (one load and branch per
call) are measured by "make bench"; these tests cover what a benchmark
cannot see: locks, signal handlers, the eval breaker.
"""

import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")


class TestInactive(PerfTestCase):

    def test_imports_take_no_lock(self):
        # The end of every import writes what the imports held, for a
        # process that uses the feature.  Without anything held it takes
        # no lock: here the lock of the description files is held by the
        # importing thread itself, which a lock taken at the end of an
        # import would deadlock (faulthandler then ends the process).
        _testinternalcapi = import_helper.import_module("_testinternalcapi")
        if not hasattr(_testinternalcapi, "perf_files_lock"):
            self.skipTest("needs _testinternalcapi.perf_files_lock()")
        pid, rc, out, err, script = self.run_script("""
            import faulthandler, sys
            import _testinternalcapi
            faulthandler.dump_traceback_later(60, exit=True)
            _testinternalcapi.perf_files_lock(1)
            import json, email.parser, http.client
            _testinternalcapi.perf_files_lock(0)
            print("imported", "json" in sys.modules)
        """)
        self.assertEqual(out.split(), ["imported", "True"])

    def test_co_extra_indexes_left_to_others(self):
        # The first co_extra index handed out is 0, as in stock 3.11: the
        # trampolines take theirs when the feature is first used.
        import_helper.import_module("ctypes")
        pid, rc, out, err, script = self.run_script("""
            import ctypes, sys
            request = ctypes.pythonapi._PyEval_RequestCodeExtraIndex
            request.argtypes = (ctypes.c_void_p,)
            request.restype = ctypes.c_ssize_t
            first = request(None)
            sys.activate_stack_trampoline("perf")
            print(first, request(None))
            sys.deactivate_stack_trampoline()
        """)
        self.assertEqual(out.split(), ["0", "3"])

    def test_signal_handler_reads_no_thread_local_storage(self):
        # A C signal handler sets the eval breaker through
        # _PyEval_SignalReceived().  What the trampolines add to it reads
        # a global variable: thread-local storage in a shared libpython
        # goes through __tls_get_addr(), which is not async-signal-safe.
        # Stock 3.11 calls nothing but PyThread_get_thread_ident() there.
        if platform.machine() != "x86_64":
            self.skipTest("reads x86-64 machine code")
        objdump = shutil.which("objdump")
        if objdump is None:
            self.skipTest("needs objdump")
        binary = sys.executable
        if sysconfig.get_config_var("Py_ENABLE_SHARED"):
            libdir = sysconfig.get_config_var("LIBDIR")
            if sysconfig.is_python_build():
                libdir = sysconfig.get_config_var("abs_builddir")
            binary = f"{libdir}/{sysconfig.get_config_var('INSTSONAME')}"
        out = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn",
             "--disassemble=_PyEval_SignalReceived", binary],
            capture_output=True, text=True, check=True).stdout
        body = out[out.find("<_PyEval_SignalReceived>:"):]
        self.assertIn("ret", body, "no disassembly found")
        called = {line.split("<", 1)[1].split(">", 1)[0].split("@")[0]
                  for line in body.splitlines()
                  if "\tcall" in line and "<" in line}
        # A build with sanitizers checks memory accesses with calls of its
        # own, and keeps their state in thread-local storage.
        sanitized = "-fsanitize" in (sysconfig.get_config_var("CFLAGS")
                                     or "")
        called = {name for name in called
                  if not name.startswith(("__asan_", "__ubsan_"))}
        self.assertLessEqual(called, {"PyThread_get_thread_ident"}, body)
        if not sanitized:
            self.assertNotIn("%fs:", body)

    @unittest.skipUnless(sysconfig.is_python_build(),
                         "needs the build tree")
    def test_shared_library_needs_no_static_tls(self):
        # A shared libpython (--enable-shared) that needs static TLS
        # (DF_STATIC_TLS) may fail to load with dlopen() ("cannot allocate
        # memory in static TLS block"), which stock 3.11 never does.  The
        # trampolines' file is compiled here as a shared libpython's is.
        readelf = shutil.which("readelf")
        cc = (sysconfig.get_config_var("CC") or "").split()
        if readelf is None or not cc or shutil.which(cc[0]) is None:
            self.skipTest("needs the C compiler and readelf")
        builddir = sysconfig.get_config_var("abs_builddir")
        srcdir = sysconfig.get_config_var("abs_srcdir")
        flags = sysconfig.get_config_var("PY_CORE_CFLAGS").split()
        with tempfile.TemporaryDirectory() as tmp:
            obj = os.path.join(tmp, "perf_trampoline.o")
            lib = os.path.join(tmp, "libperf.so")
            subprocess.run(
                [*cc, *flags, "-fPIC", "-DPy_ENABLE_SHARED=1", "-c",
                 os.path.join(srcdir, "Python", "perf_trampoline.c"),
                 "-o", obj],
                cwd=builddir, check=True, capture_output=True)
            subprocess.run([*cc, "-shared", "-o", lib, obj], check=True,
                           capture_output=True)
            dynamic = subprocess.run([readelf, "-d", lib], check=True,
                                     capture_output=True, text=True).stdout
        self.assertIn("(NEEDED)", dynamic)
        self.assertNotIn("STATIC_TLS", dynamic)


if __name__ == "__main__":
    unittest.main()

"""In-process checks of the sys functions and of their arguments.

These never activate a backend, and run on builds without perf
trampolines too, where they check that the functions exist and refuse to
activate anything.
"""

import sys
import sysconfig
import unittest

from test import support
from test.support import script_helper
from test.test_perf_profiler.util import (HAVE_PERF_TRAMPOLINE,
                                          PLATFORM_SUPPORTED)


class TestSupportAndArguments(unittest.TestCase):
    """In-process checks that never activate a backend."""

    def test_config_var_on_supported_platform(self):
        if not PLATFORM_SUPPORTED:
            self.skipTest("perf trampolines exist only on Linux "
                          "x86-64, aarch64 and riscv64")
        self.assertEqual(
            sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE"), 1)

    def test_sys_functions_exist(self):
        for name in ("activate_stack_trampoline",
                     "deactivate_stack_trampoline",
                     "is_stack_trampoline_active"):
            with self.subTest(name=name):
                self.assertTrue(callable(getattr(sys, name)))
        self.assertIsInstance(sys.is_stack_trampoline_active(), bool)

    def test_activate_argument_type(self):
        active = sys.is_stack_trampoline_active()
        for bad in (None, 1, 1.5, b"perf", bytearray(b"perf"), ["perf"],
                    object()):
            with self.subTest(backend=bad):
                with self.assertRaises(TypeError):
                    sys.activate_stack_trampoline(bad)
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline()
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline("perf", "perf")
        with self.assertRaises(TypeError):
            sys.activate_stack_trampoline(backend="perf")
        with self.assertRaises(TypeError):
            sys.deactivate_stack_trampoline("perf")
        with self.assertRaises(TypeError):
            sys.is_stack_trampoline_active(1)
        self.assertIs(sys.is_stack_trampoline_active(), active)

    def test_activate_unknown_backend(self):
        active = sys.is_stack_trampoline_active()
        for name in ("perff", "PERF", "Perf", "", "perf ", " perf",
                     "no-such-backend", "p\xe9rf", "perf\u20ac"):
            with self.subTest(backend=name):
                with self.assertRaises(ValueError) as cm:
                    sys.activate_stack_trampoline(name)
                if name:
                    self.assertIn(name, str(cm.exception))
        # An embedded NUL cannot name any backend either.
        with self.assertRaises(ValueError):
            sys.activate_stack_trampoline("perf\0")
        self.assertIs(sys.is_stack_trampoline_active(), active)

    @unittest.skipIf(HAVE_PERF_TRAMPOLINE,
                     "perf trampolines are supported by this build")
    def test_activate_unsupported_build(self):
        with self.assertRaises(ValueError) as cm:
            sys.activate_stack_trampoline("perf")
        self.assertIn("perf", str(cm.exception))
        self.assertFalse(sys.is_stack_trampoline_active())
        sys.deactivate_stack_trampoline()
        self.assertFalse(sys.is_stack_trampoline_active())

    @unittest.skipIf(HAVE_PERF_TRAMPOLINE,
                     "perf trampolines are supported by this build")
    @support.requires_subprocess()
    def test_startup_options_unsupported_build(self):
        # -X perf and PYTHONPERFSUPPORT are accepted and do nothing.
        code = "import sys; print(sys.is_stack_trampoline_active())"
        res = script_helper.assert_python_ok("-X", "perf", "-c", code)
        self.assertEqual(res.out.strip(), b"False")
        res = script_helper.assert_python_ok("-c", code,
                                             PYTHONPERFSUPPORT="1")
        self.assertEqual(res.out.strip(), b"False")


if __name__ == "__main__":
    unittest.main()

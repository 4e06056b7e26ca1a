"""Sub-interpreters: each interpreter controls its own trampolines.

The sys functions act on the calling interpreter only; -X perf, -X
perf_jit and the environment variables activate every interpreter,
including sub-interpreters created later."""

import json
import unittest

from test import support
from test.support import import_helper
from test.test_perf_profiler.util import (PerfTestCase, code_loads,
                                          jitdump_path, parse_jitdump,
                                          parse_map,
                                          requires_perf_trampoline)


requires_perf_trampoline(module=True)
if not support.has_subprocess_support:
    raise unittest.SkipTest("test module requires subprocess")
import_helper.import_module("_xxsubinterpreters")


# Runs CODE in a new sub-interpreter and prints, as JSON, what the main
# interpreter sees before and after, and what the sub-interpreter
# reported through a pipe.
SCENARIO = """
import json, os, sys
import _xxsubinterpreters as interpreters

def main_before():
    return 1
main_before()
before = sys.is_stack_trampoline_active()

r, w = os.pipe()
sub = interpreters.create()
interpreters.run_string(sub, '''if 1:
    import json, os, sys
    report = {}
    def sub_first():
        return 2
    sub_first()
    report["sub_at_start"] = sys.is_stack_trampoline_active()
SUB_CODE
    os.write(%d, json.dumps(report).encode())
''' % w)
sub_report = json.loads(os.read(r, 65536))

def main_after():
    return 3
main_after()
after = sys.is_stack_trampoline_active()
interpreters.destroy(sub)
def main_last():
    return 4
main_last()
print(json.dumps({"pid": os.getpid(), "before": before, "after": after,
                  "last": sys.is_stack_trampoline_active(),
                  "sub": sub_report}))
"""


class TestSubinterpreters(PerfTestCase):

    def map_names(self, pid):
        """The qualified names in pid's map (none if it has no map)."""
        text = self.read_map(pid)
        if text is None:
            return set()
        self.assert_map_format(text)
        return {symbol.split(":")[2] for _, _, symbol in parse_map(text)}

    def run_scenario(self, sub_code, *flags):
        source = SCENARIO.replace("SUB_CODE", sub_code)
        pid, rc, out, err, script = self.run_script(source, flags=flags)
        self.assertEqual(err, "")
        return self.last_json(out), self.map_names(pid)

    def test_created_after_startup_gets_trampolines(self):
        res, names = self.run_scenario("", "-X", "perf")
        self.assertEqual(res["sub"], {"sub_at_start": True})
        self.assertTrue(res["before"] and res["after"] and res["last"])
        self.assertLessEqual({"main_before", "sub_first", "main_after",
                              "main_last"}, names)

    def test_environment_variable_covers_subinterpreters(self):
        source = SCENARIO.replace("SUB_CODE", "")
        pid, rc, out, err, script = self.run_script(
            source, env=self.make_env(PYTHONPERFSUPPORT="1"))
        res = self.last_json(out)
        self.assertTrue(res["sub"]["sub_at_start"])
        self.assertIn("sub_first", self.map_names(pid))

    def test_deactivate_in_subinterpreter(self):
        res, names = self.run_scenario("""
    sys.deactivate_stack_trampoline()
    report["sub_after"] = sys.is_stack_trampoline_active()
    def sub_untrampolined():
        return 5
    sub_untrampolined()
""", "-X", "perf")
        self.assertEqual(res["sub"],
                         {"sub_at_start": True, "sub_after": False})
        # The main interpreter stays active, and keeps describing.
        self.assertTrue(res["after"] and res["last"])
        self.assertIn("main_after", names)
        self.assertIn("main_last", names)
        self.assertNotIn("sub_untrampolined", names)

    def test_other_backend_in_subinterpreter(self):
        res, names = self.run_scenario("""
    sys.activate_stack_trampoline("perf_jit")
    report["sub_after"] = sys.is_stack_trampoline_active()
    def sub_in_dump():
        return 6
    sub_in_dump()
""", "-X", "perf")
        pid = res["pid"]
        self.forget_dump(pid)
        self.assertEqual(res["sub"],
                         {"sub_at_start": True, "sub_after": True})
        self.assertTrue(res["after"] and res["last"])
        # Each backend describes its own interpreter's code, correctly.
        self.assertIn("main_after", names)
        self.assertIn("main_last", names)
        self.assertNotIn("sub_in_dump", names)
        with open(jitdump_path(pid), "rb") as f:
            header, records = parse_jitdump(f.read())
        dumped = {load["name"].split(":")[2] for load in code_loads(records)}
        self.assertIn("sub_in_dump", dumped)
        self.assertNotIn("main_after", dumped)

    def test_activate_in_subinterpreter_only(self):
        res, names = self.run_scenario("""
    sys.activate_stack_trampoline("perf")
    report["sub_after"] = sys.is_stack_trampoline_active()
    def sub_active():
        return 7
    sub_active()
""")
        self.assertEqual(res["sub"],
                         {"sub_at_start": False, "sub_after": True})
        self.assertFalse(res["before"] or res["after"] or res["last"])
        self.assertIn("sub_active", names)
        self.assertNotIn("main_after", names)
        self.assertNotIn("main_last", names)

    def test_main_deactivates_subinterpreter_still_starts_active(self):
        # -X perf covers interpreters created later, even after the main
        # interpreter turned its own trampolines off.
        source = SCENARIO.replace("SUB_CODE", "").replace(
            "before = sys.is_stack_trampoline_active()",
            "sys.deactivate_stack_trampoline()\n"
            "before = sys.is_stack_trampoline_active()")
        pid, rc, out, err, script = self.run_script(source,
                                                    flags=("-X", "perf"))
        res = self.last_json(out)
        self.assertFalse(res["before"])
        self.assertTrue(res["sub"]["sub_at_start"])
        names = self.map_names(pid)
        self.assertIn("sub_first", names)
        self.assertNotIn("main_after", names)


if __name__ == "__main__":
    unittest.main()

"""Tests for Tools/perf/tests/summary.py, the closing lines of "make test"
and "make test-full": regrtest runs, with -w, a throwaway test directory
where a subtest fails and a test fails once and passes on the rerun, and
the summary of its log must count both runs' failures, name the flaky
test and agree with regrtest's exit status.

Run by "make test" with the built interpreter:

    build/python -m unittest discover -s Tools/perf/tests
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SUMMARY = os.path.join(HERE, "summary.py")

# Two of its four subtests fail, on every run.
TEST_SUBTESTS = """
    import unittest

    class Sub(unittest.TestCase):
        def test_subtests(self):
            for i in range(4):
                with self.subTest(i=i):
                    self.assertEqual(i % 2, 0)

        def test_ok(self):
            pass

        @unittest.skip("never run")
        def test_skipped(self):
            pass
"""

# test_flaky fails the first time, then passes: the marker file flips it.
# (No module is named after a test: -w reruns the tests that match the
# failed tests' names, and a module's name matches all of its tests.)
TEST_FLIP = """
    import os
    import unittest

    MARKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "failed-once")

    class Flip(unittest.TestCase):
        def test_flaky(self):
            if not os.path.exists(MARKER):
                open(MARKER, "w").close()
                self.fail("fails the first time only")

        def test_steady(self):
            pass
"""

TEST_GOOD = """
    import unittest

    class Good(unittest.TestCase):
        def test_good(self):
            pass
"""


@unittest.skipIf(importlib.util.find_spec("test.libregrtest") is None,
                 "needs CPython's test package (regrtest)")
class TestSummary(unittest.TestCase):

    def regrtest(self, tests, *options):
        """Run regrtest -w on tests (names of the modules above) in a new
        directory; return (its output, its exit status, the XML path)."""
        testdir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, testdir)
        sources = {"test_sub": TEST_SUBTESTS, "test_flip": TEST_FLIP,
                   "test_good": TEST_GOOD}
        for name in tests:
            with open(os.path.join(testdir, name + ".py"), "w") as f:
                f.write(textwrap.dedent(sources[name]))
        xml = os.path.join(testdir, "results.xml")
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE")}
        proc = subprocess.run(
            [sys.executable, "-m", "test", "--testdir", testdir, "-w",
             "--junit-xml", xml, *options, *tests],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, timeout=300)
        return proc.stdout.decode("utf-8", "replace"), proc.returncode, xml

    def summarize(self, log, status, xml=None):
        """summary.py's lines for a log and an exit status."""
        with tempfile.NamedTemporaryFile("w", suffix=".log",
                                         delete=False) as f:
            f.write(log)
        self.addCleanup(os.unlink, f.name)
        args = ["--junit-xml", xml] if xml else []
        proc = subprocess.run(
            [sys.executable, SUMMARY, *args, f.name, str(status)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        out = proc.stdout.decode()
        self.assertEqual(proc.returncode, 0, out)
        return out.splitlines()

    def check_flaky_and_subtests(self, *options):
        log, status, xml = self.regrtest(
            ["test_sub", "test_flip", "test_good"], *options)
        # test_sub fails again.
        self.assertEqual(status, 2, log)
        lines = self.summarize(log, status, xml)
        self.assertIn("failed in the first run: test_flip (1), "
                      "test_sub (2)", lines, log)
        self.assertIn("failed on the rerun: "
                      "test_sub.Sub.test_subtests (i=1), "
                      "test_sub.Sub.test_subtests (i=3)", lines, log)
        self.assertIn("flaky (failed, then passed on the rerun): "
                      "test_flip.Flip.test_flaky", lines, log)
        # First run: test_ok, test_steady and test_good passed; the
        # rerun runs the failed ones again: test_subtests and test_flaky.
        self.assertEqual(lines[-1],
                         "test cases: first run 3 passed, 3 failed, "
                         "1 skipped; rerun 1 passed, 2 failed, 0 skipped; "
                         "1 flaky; exit status 2", log)
        # Without the XML: the failures alone.
        lines = self.summarize(log, status)
        self.assertEqual(lines[-1],
                         "test cases: first run 3 failed; rerun 2 failed; "
                         "1 flaky; exit status 2", log)

    def test_parallel(self):
        # As make test runs regrtest: in worker processes.
        self.check_flaky_and_subtests("-j2")

    def test_sequential(self):
        self.check_flaky_and_subtests()

    def test_only_subtests_fail(self):
        # Where an XML count said "0 failed" beside exit status 2.
        log, status, xml = self.regrtest(["test_sub"], "-j1")
        self.assertEqual(status, 2, log)
        lines = self.summarize(log, status, xml)
        self.assertNotRegex(lines[-1], r"\b0 failed", log)
        self.assertEqual(lines[-1],
                         "test cases: first run 1 passed, 2 failed, "
                         "1 skipped; rerun 0 passed, 2 failed, 0 skipped; "
                         "0 flaky; exit status 2", log)

    def test_flaky_run_succeeds(self):
        # Failed, then passed on the rerun: regrtest (without
        # --fail-rerun) exits 0, and nothing failed in the end.
        log, status, xml = self.regrtest(["test_flip", "test_good"], "-j1")
        self.assertEqual(status, 0, log)
        lines = self.summarize(log, status, xml)
        self.assertIn("flaky (failed, then passed on the rerun): "
                      "test_flip.Flip.test_flaky", lines, log)
        self.assertEqual(lines[-1],
                         "test cases: first run 2 passed, 1 failed, "
                         "0 skipped; rerun 1 passed, 0 failed, 0 skipped; "
                         "1 flaky; exit status 0", log)

    def test_failed_run_without_failed_test(self):
        # A run that failed with no failed test case in its log (regrtest
        # crashed, or was killed): never "0 failed".
        log = "0:00:00 load avg: 0.10 Run tests sequentially\nKilled\n"
        lines = self.summarize(log, 137)
        self.assertNotIn("0 failed", "\n".join(lines))
        self.assertEqual(lines[-1],
                         "test cases: none failed; exit status 137 all the "
                         "same (regrtest printed no result)")


if __name__ == "__main__":
    unittest.main()

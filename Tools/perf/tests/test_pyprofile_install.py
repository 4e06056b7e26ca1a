"""Tests of pyprofile as it is shipped (issue 50): make install's layout
(Tools/perf/source/install.sh --pyprofile, the part of make install that
needs no interpreter, into a DESTDIR), the renderer's look-up order, and
the python3.11-pyprofile package (Tools/perf/debian/pyprofile-deb.sh,
built into a temporary BUILD and extracted).

    build/python -m unittest test_pyprofile_install   (in Tools/perf/tests)
"""

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PERF = os.path.dirname(HERE)
TOP = os.path.dirname(os.path.dirname(PERF))
sys.path.insert(0, PERF)
from pyprofile_lib import rendering

LIB_MODULES = sorted(name for name in os.listdir(
    os.path.join(PERF, "pyprofile_lib")) if name.endswith(".py"))
TEMPLATE_DIR = f"d3-flame-graph-{rendering.D3_VERSION}"
TEMPLATE_NAME = "d3-flamegraph-base.html"
D3_TGZ = os.path.join(TOP, "build", "downloads",
                      f"d3-flame-graph-{rendering.D3_VERSION}.tgz")


def genuine_template():
    """A copy of the pinned template at hand (--setup's), or None."""
    return rendering.template_path()


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=300,
                          **kwargs)


def renderer_line(output):
    return next((line for line in output.splitlines()
                 if " renderer: " in line), "")


class TestPython39(unittest.TestCase):
    """pyprofile runs with any python3 >= 3.9 (the Debian package's is
    /usr/bin/python3): no newer syntax."""

    def test_syntax(self):
        paths = [os.path.join(PERF, "pyprofile")] + [
            os.path.join(PERF, "pyprofile_lib", name) for name in LIB_MODULES]
        for path in paths:
            with self.subTest(path=os.path.relpath(path, PERF)):
                with open(path, encoding="utf-8") as f:
                    ast.parse(f.read(), path, feature_version=(3, 9))


class TestInstall(unittest.TestCase):
    """install.sh --pyprofile into a DESTDIR, with PREFIX /opt/py."""

    PREFIX = "/opt/py"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyprofile-install-")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.destdir = os.path.join(self.tmp, "root")
        self.cache = os.path.join(self.tmp, "cache")
        # npm that always fails: the install never reaches the network.
        fakebin = os.path.join(self.tmp, "bin")
        os.mkdir(fakebin)
        with open(os.path.join(fakebin, "npm"), "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        os.chmod(os.path.join(fakebin, "npm"), 0o755)
        self.env = dict(os.environ, DESTDIR=self.destdir, PREFIX=self.PREFIX,
                        XDG_CACHE_HOME=self.cache,
                        PATH=fakebin + os.pathsep + os.environ["PATH"])
        self.root = self.destdir + self.PREFIX
        self.script = os.path.join(self.root, "bin", "pyprofile3.11")
        self.libdir = os.path.join(self.root, "lib", "pyprofile3.11")

    def install(self):
        proc = run([os.path.join(PERF, "source", "install.sh"), "--pyprofile"],
                   env=self.env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc

    def put_in_cache(self):
        template = genuine_template()
        if template is None:
            self.skipTest("the flame graph renderer is not installed "
                          "(pyprofile --setup)")
        path = os.path.join(self.cache, "cpython-perf-trampoline",
                            TEMPLATE_DIR, rendering.D3_TEMPLATE)
        os.makedirs(os.path.dirname(path))
        shutil.copy(template, path)
        return path

    def pyprofile(self, *args, script=None):
        env = dict(self.env)
        del env["DESTDIR"], env["PREFIX"]
        return run([sys.executable, script or self.script, *args], env=env)

    def test_layout(self):
        self.put_in_cache()
        self.install()
        with open(self.script) as f:
            self.assertEqual(f.readline(), f"#!{self.PREFIX}/bin/python3.11\n")
        self.assertTrue(os.access(self.script, os.X_OK))
        self.assertEqual(
            sorted(os.listdir(os.path.join(self.libdir, "pyprofile_lib"))),
            LIB_MODULES)
        shipped = os.path.join(self.libdir, TEMPLATE_DIR, TEMPLATE_NAME)
        self.assertEqual(rendering.sha256(shipped),
                         rendering.D3_TEMPLATE_SHA256)

    def test_help_and_check(self):
        self.put_in_cache()
        self.install()
        proc = self.pyprofile("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("--setup", proc.stdout)
        self.assertIn("The flame graph is drawn by", proc.stdout)
        # Its verdict on perf is this machine's; the renderer is the
        # shipped copy, beside the installed library.
        proc = self.pyprofile("--check", "--python", sys.executable)
        self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
        self.assertTrue(renderer_line(proc.stdout).startswith(
            f"ok   renderer: d3-flame-graph {rendering.D3_VERSION}: "
            f"{self.libdir}/{TEMPLATE_DIR}/"), proc.stdout)
        # Run through a symbolic link (as from a bin directory in PATH).
        link = os.path.join(self.tmp, "pyprofile-link")
        os.symlink(self.script, link)
        proc = self.pyprofile("--help", script=link)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # Installed, it leaves no __pycache__ in its library.
        self.assertEqual([d for d, _, _ in os.walk(self.libdir)
                          if d.endswith("__pycache__")], [])

    def test_without_renderer(self):
        # No copy in the cache and npm failing: pyprofile3.11 is installed
        # all the same, said once.
        proc = self.install()
        self.assertEqual(proc.stderr.count("no flame graph renderer"), 1,
                         proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.libdir,
                                                     TEMPLATE_DIR)))
        proc = self.pyprofile("--check", "--python", sys.executable)
        self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
        self.assertTrue(renderer_line(proc.stdout).startswith(
            "FAIL renderer"), proc.stdout)

    def test_renderer_order(self):
        cached = self.put_in_cache()
        self.install()
        shipped = os.path.join(self.libdir, TEMPLATE_DIR, TEMPLATE_NAME)

        def found():
            code = ("import sys; sys.path.insert(0, sys.argv[1]); "
                    "from pyprofile_lib import rendering; "
                    "print(rendering.template_path())")
            proc = run([sys.executable, "-c", code, self.libdir],
                       env=dict(os.environ, XDG_CACHE_HOME=self.cache))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            return proc.stdout.strip()

        # The shipped copy first, then the cache's; a copy whose sha256 is
        # not the pinned one does not count.
        self.assertEqual(found(), shipped)
        with open(shipped, "a") as f:
            f.write("<!-- changed -->")
        self.assertEqual(found(), cached)
        os.unlink(shipped)
        self.assertEqual(found(), cached)
        with open(cached, "a") as f:
            f.write("<!-- changed -->")
        self.assertEqual(found(), "None")


@unittest.skipUnless(shutil.which("dpkg-deb") and
                     shutil.which("dpkg-buildpackage"),
                     "needs dpkg-deb and dpkg-buildpackage (dpkg-dev)")
@unittest.skipUnless(os.path.exists(D3_TGZ) or shutil.which("npm"),
                     "needs npm, or d3-flame-graph's tarball in build/downloads")
class TestDebianPackage(unittest.TestCase):
    """python3.11-pyprofile: built from this checkout (into a temporary
    BUILD, so that build/deb is left alone), then extracted."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pyprofile-deb-")
        proc = run([os.path.join(PERF, "debian", "pyprofile-deb.sh")],
                   env=dict(os.environ, BUILD=cls.tmp, PY_VERSION="3.11.2"))
        if proc.returncode != 0:
            shutil.rmtree(cls.tmp)
            raise AssertionError(proc.stdout + proc.stderr)
        cls.output = proc.stdout
        debdir = os.path.join(cls.tmp, "deb")
        cls.files = os.listdir(debdir)
        cls.deb = os.path.join(debdir, next(
            name for name in cls.files if name.endswith("_all.deb")))
        cls.root = os.path.join(cls.tmp, "extracted")
        subprocess.run(["dpkg-deb", "-x", cls.deb, cls.root], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_source_package(self):
        suffixes = sorted(name.split("_", 2)[-1].split(".", 3)[-1]
                          for name in self.files
                          if name.startswith("python3.11-pyprofile_"))
        for suffix in ("dsc", "debian.tar.xz", "orig.tar.xz",
                       "orig-d3-flame-graph.tar.gz"):
            self.assertTrue(any(s.endswith(suffix) for s in suffixes),
                            (suffix, self.files))

    def test_control(self):
        def field(name):
            return run(["dpkg-deb", "-f", self.deb, name]).stdout.strip()
        self.assertEqual(field("Package"), "python3.11-pyprofile")
        self.assertEqual(field("Architecture"), "all")
        self.assertIn("linux-perf", field("Depends"))
        self.assertIn("python3 ", field("Depends"))
        self.assertRegex(field("Recommends"), r"^python3\.11 \(>= .*\+perf1\)$")

    def test_contents(self):
        listing = run(["dpkg-deb", "-c", self.deb]).stdout
        paths = sorted(line.split()[-1].lstrip(".") for line in
                       listing.splitlines() if not line.startswith("d"))
        lib = "/usr/lib/pyprofile3.11"
        self.assertEqual(paths, sorted(
            ["/usr/bin/pyprofile3.11",
             f"{lib}/{TEMPLATE_DIR}/{TEMPLATE_NAME}",
             "/usr/share/doc/python3.11-pyprofile/copyright",
             "/usr/share/doc/python3.11-pyprofile/changelog.Debian.gz"]
            + [f"{lib}/pyprofile_lib/{name}" for name in LIB_MODULES]))
        with open(os.path.join(self.root, "usr/share/doc/python3.11-pyprofile/"
                               "copyright")) as f:
            copyright = f.read()
        for licence in ("License: Apache-2.0", "License: ISC",
                        "License: BSD-3-Clause", "License: PSF-2.0"):
            self.assertIn(licence, copyright)

    def test_runs(self):
        script = os.path.join(self.root, "usr/bin/pyprofile3.11")
        with open(script) as f:
            self.assertEqual(f.readline(), "#!/usr/bin/python3\n")
        # With this interpreter: the package's own is any python3 >= 3.9.
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(self.tmp, "c"))
        proc = run([sys.executable, script, "--help"], env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = run([sys.executable, script, "--check", "--python",
                    sys.executable], env=env)
        self.assertIn(proc.returncode, (0, 1), proc.stdout + proc.stderr)
        self.assertTrue(renderer_line(proc.stdout).startswith(
            f"ok   renderer: d3-flame-graph {rendering.D3_VERSION}: "
            f"{self.root}/usr/lib/pyprofile3.11/"), proc.stdout)
        # pyprofile-deb.sh's own check of the package passed.
        self.assertIn("ok   pyprofile3.11 --check runs and finds its renderer",
                      self.output)


if __name__ == "__main__":
    unittest.main()

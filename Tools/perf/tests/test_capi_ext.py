"""The perf map C API is public: an extension built out of tree, against
the headers as "make install" installs them, uses it.

Run by "make test" with the built interpreter (see test_pyprofile.py)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXT_SOURCE = os.path.join(os.path.dirname(HERE), "abi", "perfmap_ext.c")


def build_dir():
    """The build directory of the running interpreter, or None if it is
    not run from one."""
    if not sysconfig.is_python_build():
        return None
    return os.path.dirname(os.path.realpath(sys.executable))


@unittest.skipIf(build_dir() is None, "needs a build tree (make install)")
@unittest.skipIf(shutil.which("gcc") is None, "needs gcc")
class TestOutOfTreeExtension(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        dest = os.path.join(cls.tmp, "root")
        subprocess.run(["make", "-s", "-C", build_dir(), "inclinstall",
                        f"DESTDIR={dest}"], check=True,
                       stdout=subprocess.DEVNULL)
        include = (dest + sysconfig.get_config_var("INCLUDEPY"))
        cls.ext_dir = os.path.join(cls.tmp, "ext")
        os.mkdir(cls.ext_dir)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror",
                        f"-I{include}", "-o",
                        os.path.join(cls.ext_dir, "perfmap_ext" + suffix),
                        EXT_SOURCE], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_python(self, source, *flags):
        env = dict(os.environ, PYTHONPATH=self.ext_dir)
        env.pop("PYTHONPERFSUPPORT", None)
        proc = subprocess.run([sys.executable, *flags, "-c",
                               textwrap.dedent(source)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, check=True)
        pid, *result = json.loads(proc.stdout.decode().splitlines()[-1])
        path = f"/tmp/perf-{pid}.map"
        self.addCleanup(lambda: os.path.exists(path) and os.unlink(path))
        with open(path) as f:
            return result, f.read()

    def test_write_entry(self):
        (have, res), text = self.run_python("""
            import json, os, perfmap_ext
            print(json.dumps([os.getpid(), perfmap_ext.HAVE_PERF_MAP_API,
                              perfmap_ext.write_entry(0x1234, 16,
                                                      "ext:thing")]))
        """)
        self.assertEqual((have, res), (1, 0))
        self.assertEqual(text, "1234 10 ext:thing\n")

    def test_compile_code_and_copy(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("abcd 20 ext:copied\n")
        self.addCleanup(os.unlink, f.name)
        (persist, res), text = self.run_python(f"""
            import json, os, perfmap_ext
            def handler():
                pass
            persist = perfmap_ext.compile_code(handler.__code__)
            res = perfmap_ext.copy_map({f.name!r})
            print(json.dumps([os.getpid(), persist, res]))
        """, "-X", "perf")
        self.assertEqual((persist, res), (1, 0))
        self.assertIn("py::handler:<string>\n", text)
        self.assertIn("abcd 20 ext:copied\n", text)


if __name__ == "__main__":
    unittest.main()

# Perf trampolines for CPython 3.11: the front door.  See README.rst.
#
# PY_VERSION=3.11.N picks the release (default 3.11.2, Debian 12's); a
# release other than 3.11.2 builds in build/3.11.N/ (build/3.11.N/python).
# LIBC=musl builds (make) and tests (make test) against musl libc, as
# Alpine's images do, in build/musl/ (build/musl/python).
#
#   make          fetch, assemble and build; the interpreter is build/python
#   make demo     profile a small program with perf and show Python frames,
#                 then write its flame graph (Tools/perf/pyprofile)
#   make install  install python3.11 (CPython's make altinstall) and
#                 pyprofile3.11 beside it, under PREFIX (default /usr/local:
#                 the prefix build/obj is configured with) and DESTDIR
#   make test     run our tests and the CPython tests this patch touches
#   make patch    write build/cpython-$(PY_VERSION)-perf-trampoline.patch and
#                 check it (with pyenv's python-build, where it is installed)
#   make refresh  turn edits made in build/cpython back into our files
#   make check-releases
#                 check that every edit applies to every 3.11 release in
#                 RELEASES_BUNDLE (git tags v3.11.N; seconds, no build)
#
#   make test-full   CPython's whole test suite, plain and with PYTHONPERFSUPPORT=1
#   make abi-check   compare libpython with pristine 3.11.2 (abidiff)
#   make test-asan   our tests and the thread/fork tests under ASan and UBSan
#   make test-load   the debugger tests 20 times in a row beside CPU hogs and
#                    another gdb session
#   make test-cross ARCH=aarch64 (or riscv64)
#                    cross-build for ARCH and run the tests under qemu
#   make bench       pristine vs patched (inactive) vs -X perf vs -X perf_jit,
#                    side by side (METRIC=instructions: counted by callgrind),
#                    and pyprofile's parsing against perf script's
#   make deb-source  Debian 12's python3.11 source package with the patch, and
#                    the python3.11-pyprofile packages (built and checked)
#   make deb         ... and python3.11's binary packages, in build/deb
#   make deb-check   install them into a clean debootstrapped Debian 12
#                    and check them there
#   make apt-repo    a signed apt repository of them, in build/apt-repo
#                    (APT_REPO_KEY=KEYID, APT_REPO_URI=URI)
#   make apt-repo-check
#                    use it from a clean debootstrapped Debian 12 as a
#                    fleet machine would
#
# PYTHON_TARBALL=/path/to/Python-3.11.N.tgz uses a local copy of the base
# source instead of Debian's source package (3.11.2) or python.org's
# download (the others); it is checked against the same sha256.

# The scripts: Tools/perf/, one folder per concern (its README.rst maps them).
TOOLS = Tools/perf
export PY_VERSION LIBC RELEASES_BUNDLE PYTHON_TARBALL BACKEND TESTS TESTARGS CONFIGURE_ARGS TEST_FULL_MODES TEST_NOFP TEST_TOOLS ASAN_TESTS ARCH \
	ROUNDS BENCH_JSON BENCH_ARGS BENCH_BASE METRIC APT_REPO_KEY APT_REPO_URI PREFIX DESTDIR \
	PYPROFILE_SAMPLES

.PHONY: all build deps demo install test patch refresh check-releases test-full abi-check test-asan \
	test-load test-cross bench deb-source deb deb-check apt-repo apt-repo-check \
	clean distclean

all: build

deps:
	@$(TOOLS)/deps.sh

build: deps
	@$(TOOLS)/source/build.sh

demo: build
	@$(TOOLS)/deps.sh --flamegraph
	@$(TOOLS)/demo/demo.sh

install: build
	@$(TOOLS)/source/install.sh

test: build
	@$(TOOLS)/deps.sh --test
	@$(TOOLS)/tests/test.sh

patch: deps
	@$(TOOLS)/source/export-patch.sh

refresh:
	@$(TOOLS)/source/refresh.sh

check-releases: deps
	@$(TOOLS)/source/check-releases.sh

test-full: build
	@$(TOOLS)/tests/test-full.sh

abi-check: build
	@$(TOOLS)/deps.sh --abi
	@$(TOOLS)/abi/abi-check.sh

test-asan: deps
	@$(TOOLS)/tests/test-asan.sh

test-load: build
	@$(TOOLS)/deps.sh --test
	@$(TOOLS)/tests/test-load.sh

test-cross: build
	@$(TOOLS)/cross/test-cross.sh

bench: build
	@$(TOOLS)/bench/bench.sh

deb-source: patch
	@$(TOOLS)/deps.sh --deb
	@$(TOOLS)/debian/deb.sh --source
	@$(TOOLS)/debian/pyprofile-deb.sh

deb: patch
	@$(TOOLS)/deps.sh --deb
	@$(TOOLS)/debian/deb.sh
	@$(TOOLS)/debian/pyprofile-deb.sh

deb-check:
	@$(TOOLS)/deps.sh --deb-check
	@$(TOOLS)/debian/deb-check.sh

apt-repo:
	@$(TOOLS)/deps.sh --apt-repo
	@$(TOOLS)/debian/apt-repo.sh

apt-repo-check:
	@$(TOOLS)/deps.sh --deb-check
	@$(TOOLS)/debian/apt-repo-check.sh

# Keep the downloads and the pristine trees; rebuild everything else (of
# every release built, build/ and build/3.11.N/).
clean:
	for b in build build/3.11.*; do \
		[ -d "$$b" ] || continue; \
		(cd "$$b" && rm -rf obj cpython python python-gdb.py *.stamp \
			assembled-files.txt demo *.log *.patch abi asan cross-* \
			test-results.xml pristine-obj nofp-obj deb apt-repo \
			apt-repo-check releases.git musl musl-deps); \
	done

# build/deb-root and build/apt-repo-root are Debian roots; make sure
# nothing is mounted in them.  This also removes build/apt-repo-key, the
# signing key make apt-repo made.
distclean:
	-for r in build/deb-root build/apt-repo-root; do \
		umount -l $$r/proc $$r/dev/pts 2>/dev/null; done
	rm -rf build

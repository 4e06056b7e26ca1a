"""What pyprofile writes: the flame graph page (d3-flame-graph's
template, shipped beside the library or installed by --setup) and the
collapsed stacks, each written atomically through a temporary file of its
own."""

import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

from .common import RecordError, read_text


# The renderer: d3-flame-graph's self-contained page template.
D3_VERSION = "4.1.3"
D3_TEMPLATE = "node_modules/d3-flame-graph/dist/templates/d3-flamegraph-base.html"
D3_TEMPLATE_SHA256 = (
    "64aba4b35cfaba17b37d57a4036876f1999f3cfc4c8d4d3a0781d08a1ad97d5a")


def renderer_dir():
    """Where --setup installs the renderer with npm."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "cpython-perf-trampoline",
                        f"d3-flame-graph-{D3_VERSION}")


def shipped_template():
    """The copy that make install and the Debian package put beside the
    library (LIBDIR/d3-flame-graph-VERSION/), for hosts with no npm."""
    libdir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(libdir, f"d3-flame-graph-{D3_VERSION}",
                        os.path.basename(D3_TEMPLATE))


def cache_template():
    return os.path.join(renderer_dir(), D3_TEMPLATE)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def template_path():
    """The template pyprofile uses: the shipped copy, else --setup's; only
    a copy with the pinned sha256 counts.  None if there is none."""
    for path in (shipped_template(), cache_template()):
        with contextlib.suppress(OSError):
            if sha256(path) == D3_TEMPLATE_SHA256:
                return path
    return None


def setup():
    """Install the pinned d3-flame-graph with npm; return an exit status."""
    path = template_path()
    if path is not None:
        print(f"d3-flame-graph {D3_VERSION} is installed: {path}")
        return 0
    npm = shutil.which("npm")
    if npm is None:
        print("error: npm is not installed (fix: sudo apt-get install npm)",
              file=sys.stderr)
        return 1
    os.makedirs(renderer_dir(), exist_ok=True)
    proc = subprocess.run(
        [npm, "install", "--prefix", renderer_dir(), "--no-save",
         "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error",
         f"d3-flame-graph@{D3_VERSION}"])
    if proc.returncode != 0:
        print("error: npm install d3-flame-graph failed", file=sys.stderr)
        return 1
    if template_path() != cache_template():
        print(f"error: {cache_template()} is not the expected d3-flame-graph "
              f"{D3_VERSION} template (sha256 mismatch)", file=sys.stderr)
        return 1
    print(f"installed d3-flame-graph {D3_VERSION} in {renderer_dir()}")
    return 0


def output_problem(path):
    """Why path cannot be written, in one line, or None: found before
    recording, not after it, which would lose the recording."""
    if os.path.isdir(path):
        return f"cannot write {path}: it is a directory"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"cannot write {path}: no directory {directory}"
    # It is replaced by a new file: never a device node or a FIFO, nor a
    # symbolic link, which would be replaced rather than followed (to
    # follow one that another user planted in /tmp would be worse).
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISLNK(mode):
        return (f"cannot write {path}: it is a symbolic link (give the "
                "file it names)")
    if mode is not None and not stat.S_ISREG(mode):
        return f"cannot write {path}: not a regular file"
    # Make a file where the output will be made, which access() cannot
    # say for root (a read-only file system, an immutable directory).
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".pyprofile.",
                                   suffix=".tmp")
    except OSError as err:
        return f"cannot write {path}: {err.strerror}"
    os.close(fd)
    os.unlink(tmp)
    return None


def umask():
    status = read_text("/proc/self/status") or ""
    match = re.search(r"^Umask:\s*([0-7]+)", status, re.M)
    if match:
        return int(match.group(1), 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_output(path, write):
    """Write the file at path with write(f), atomically and safely: a
    temporary file that mkstemp() makes in the same directory (O_EXCL:
    never through a symbolic link that another user planted, nor into
    their file) is renamed over path once complete."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        # mkstemp() makes it 0600: give it the mode open() would.
        os.fchmod(fd, 0o666 & ~umask())
        with open(fd, "w", encoding="utf-8") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_collapsed(tree, output):
    """The collapsed stacks: "frame;frame;... count" per stack."""
    def write(f):
        for names, count in tree.stacks():
            f.write(";".join(name.replace(";", ":") for name in names)
                    + f" {count}\n")
    write_output(output, write)


# The hover text of a box, in the pinned template: the node's "t" where
# it has one (the Python view's full path), its name otherwise.
TEMPLATE_TITLE = 'let T=function(t){return x(t)+" ("'
OUR_TITLE = 'let T=function(t){return(t.data.t||x(t))+" ("'


def script_json(value):
    """value as JSON that is safe inside a <script> element: no "</script>"
    or "<!--" in the program's text (its function and file names, its
    command line) can end the element or change how it is parsed, and
    U+2028 and U+2029 are not line ends in older JavaScript."""
    text = json.dumps(value)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"),
                         ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


TEMPLATE_PAGE_TITLE = "<title>Flame Graph</title>"


def render(tree, output, title):
    path = template_path()
    if path is None:
        raise RecordError(f"d3-flame-graph {D3_VERSION} is not installed "
                          "(pyprofile --setup)")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    if TEMPLATE_TITLE not in page or TEMPLATE_PAGE_TITLE not in page:
        raise RecordError(f"unexpected renderer template {path}")
    options = {"colorscheme": "orange", "context": title}
    values = {"/** @options_json **/": script_json(options),
              "/** @flamegraph_json **/": script_json(tree.to_json())}
    page = page.replace(TEMPLATE_TITLE, OUR_TITLE).replace(
        TEMPLATE_PAGE_TITLE,
        f"<title>{html.escape(title.splitlines()[0])}</title>")
    # In one pass: the text put in for one marker may hold the other.
    page = re.sub("|".join(re.escape(marker) for marker in values),
                  lambda match: values[match.group()], page)
    write_output(output, lambda f: f.write(page))

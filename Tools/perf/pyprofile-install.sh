#!/bin/sh
# Install pyprofile as pyprofile3.11, for "make install" and the Debian
# package python3.11-pyprofile alike (it stands alone: the package's source
# has no other file of Tools/perf):
#
#   pyprofile-install.sh DESTDIR PREFIX PYTHON [TEMPLATE]
#
#   DESTDIR/PREFIX/bin/pyprofile3.11        the script, run by PYTHON
#   DESTDIR/PREFIX/lib/pyprofile3.11/pyprofile_lib/
#                                           its stages
#   DESTDIR/PREFIX/lib/pyprofile3.11/d3-flame-graph-VERSION/d3-flamegraph-base.html
#                                           the flame graph renderer, when
#                                           TEMPLATE names a copy of it
#
# The script finds the library from its own path (../lib/pyprofile3.11),
# so DESTDIR may stay empty or be a staging directory.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 DESTDIR PREFIX PYTHON [TEMPLATE]" >&2; exit 2; }
here=$(dirname "$0")
destdir=$1 prefix=$2 python=$3 template=${4:-}
bin=$destdir$prefix/bin
lib=$destdir$prefix/lib/pyprofile3.11
# The renderer's version, from the one place that pins it.
d3_version=$(sed -n 's/^D3_VERSION = "\(.*\)"$/\1/p' "$here/pyprofile_lib/rendering.py")
[ -n "$d3_version" ] || { echo "error: no D3_VERSION in $here/pyprofile_lib/rendering.py" >&2; exit 1; }

install -d "$bin" "$lib"
# A new copy of the private directory: nothing of an older pyprofile stays.
rm -rf "$lib/pyprofile_lib" "$lib"/d3-flame-graph-*
install -d "$lib/pyprofile_lib"
install -m 644 "$here"/pyprofile_lib/*.py "$lib/pyprofile_lib/"
{
    echo "#!$python"
    tail -n +2 "$here/pyprofile"
} >"$bin/.pyprofile3.11.new"
chmod 755 "$bin/.pyprofile3.11.new"
mv -f "$bin/.pyprofile3.11.new" "$bin/pyprofile3.11"
if [ -n "$template" ]; then
    install -d "$lib/d3-flame-graph-$d3_version"
    install -m 644 "$template" "$lib/d3-flame-graph-$d3_version/d3-flamegraph-base.html"
fi

#!/bin/sh
# Go back from the packages of "make deb" to Debian's own: install, for
# every installed package whose version ends in +perfN, the newest version
# of it that apt's archives have.  Run as root.
set -eu
targets=""
for pkg in $(dpkg-query -W -f '${Package} ${Version}\n' | awk '$2 ~ /\+perf[0-9]+$/ { print $1 }'); do
    version=$(apt-cache madison "$pkg" | awk '$3 !~ /\+perf[0-9]+$/ { print $3; exit }')
    if [ -z "$version" ]; then
        echo "error: apt's archives have no version of $pkg (apt-get update?)" >&2
        exit 1
    fi
    targets="$targets $pkg=$version"
done
if [ -z "$targets" ]; then
    echo "no +perf package is installed"
    exit 0
fi
DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-noninteractive} apt-get install -y --allow-downgrades $targets

#!/bin/bash
# "make apt-repo": a signed apt repository of the packages of "make deb",
# in build/apt-repo, and the two files an administrator installs on each
# machine:
#
#   python3.11-perf.sources  the deb822 sources entry; its Signed-By holds
#                            the repository's public key
#   python3.11-perf.pref     the apt preferences: these packages are kept
#                            over Debian's (Tools/perf/README.rst says why)
#
# and python3.11-perf-revert.sh (Tools/perf/debian/deb-revert.sh), which brings
# Debian's packages back once the two files are removed.
#
# APT_REPO_KEY=KEYID signs with that key of the caller's GnuPG keyring
# (GNUPGHOME); without it, a signing key is made once in build/apt-repo-key
# and kept there.  APT_REPO_URI is where the machines will find the
# repository (default: the file: URI of build/apt-repo, for this machine).
#
# The indexes are made by Debian's apt-ftparchive.
set -euo pipefail
. "$(dirname "$0")/../config.sh"
require_default_version "make apt-repo"

DEB=$BUILD/deb
REPO=$BUILD/apt-repo
SUITE=bookworm-perf
ORIGIN=python3.11-perf
ARCH=$(dpkg --print-architecture)
URI=${APT_REPO_URI:-file:$REPO}

# make deb-source makes python3.11-pyprofile only.
ls "$DEB"/python3.11_*.deb >/dev/null 2>&1 || die "no packages in $DEB: run make deb first"
built=$(dpkg-deb -f "$(ls "$DEB"/python3.11_*.deb)" Version)
"$TOP/Tools/perf/debian/deb-archive.sh" --check "${built%+perf*}"

if [ -n "${APT_REPO_KEY:-}" ]; then
    key=$APT_REPO_KEY
    gpg --batch --list-secret-keys "$key" >/dev/null 2>&1 \
        || die "APT_REPO_KEY=$key: no such secret key in the GnuPG keyring${GNUPGHOME:+ $GNUPGHOME}"
else
    export GNUPGHOME=$BUILD/apt-repo-key
    if ! gpg --batch --list-secret-keys >/dev/null 2>&1 \
        || [ -z "$(gpg --batch --list-secret-keys 2>/dev/null)" ]; then
        note "making a signing key in $GNUPGHOME (keep it: machines trust it)"
        mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
        gpg --batch --quiet --passphrase '' --quick-gen-key \
            "python3.11 perf trampolines apt repository <root@$(hostname -f 2>/dev/null || hostname)>" \
            ed25519 sign never 2>"$GNUPGHOME/gen.log" \
            || { cat "$GNUPGHOME/gen.log" >&2; die "gpg could not make a key"; }
    fi
    key=$(gpg --batch --with-colons --list-secret-keys 2>/dev/null \
        | awk -F: '$1 == "fpr" { print $10; exit }')
fi

note "writing the repository in $REPO"
rm -rf "$REPO"
pool=pool/main/p/python3.11
dist=dists/$SUITE
mkdir -p "$REPO/$pool" "$REPO/$dist/main/binary-$ARCH"
cp "$DEB"/*.deb "$REPO/$pool/"
cd "$REPO"
apt-ftparchive packages pool >"$dist/main/binary-$ARCH/Packages"
gzip -9 -n -k "$dist/main/binary-$ARCH/Packages"
xz -k "$dist/main/binary-$ARCH/Packages"
apt-ftparchive \
    -o APT::FTPArchive::Release::Origin="$ORIGIN" \
    -o APT::FTPArchive::Release::Label="python3.11 with perf trampolines" \
    -o APT::FTPArchive::Release::Suite="$SUITE" \
    -o APT::FTPArchive::Release::Codename="$SUITE" \
    -o APT::FTPArchive::Release::Architectures="$ARCH" \
    -o APT::FTPArchive::Release::Components=main \
    -o APT::FTPArchive::Release::Description="Debian 12's python3.11 $built with perf trampolines" \
    release "$dist" >Release.new       # not in $dist, which it lists
mv Release.new "$dist/Release"
gpg --batch --quiet --yes --local-user "$key" --clearsign -o "$dist/InRelease" "$dist/Release"
gpg --batch --quiet --yes --local-user "$key" --armor --detach-sign -o "$dist/Release.gpg" "$dist/Release"

# The sources entry carries the public key itself (apt >= 2.3.10), so it
# is the only file apt needs to trust the repository: deb822 continues the
# field on indented lines, and an empty line of the key becomes " .".
{
    echo "# python3.11 with perf trampolines: Debian 12's python3.11 $built"
    echo "# with the perf trampoline patch (made by make apt-repo)."
    echo "Types: deb"
    echo "URIs: $URI"
    echo "Suites: $SUITE"
    echo "Components: main"
    echo "Architectures: $ARCH"
    echo "Signed-By:"
    gpg --batch --armor --export "$key" | sed 's/^$/./; s/^/ /'
} >python3.11-perf.sources
# The packages python3.11's source builds, from this repository only, are
# preferred over Debian's: kept on "apt upgrade" when Debian publishes a
# newer revision, and installed over Debian's (a downgrade) on machines
# that have it.
cat >python3.11-perf.pref <<EOF
Explanation: python3.11 with perf trampolines (make apt-repo): kept over
Explanation: Debian's packages, also when Debian's archive has a newer revision.
Explanation: See "When Debian is ahead" in the project's Tools/perf/README.rst.
Package: python3.11 python3.11-* libpython3.11 libpython3.11-*
Pin: release o=$ORIGIN
Pin-Priority: 1001
EOF
# Going back to Debian's packages, published beside them.
cp "$TOP/Tools/perf/debian/deb-revert.sh" python3.11-perf-revert.sh
if [ -z "${APT_REPO_KEY:-}" ]; then
    gpgconf --kill gpg-agent        # started for the key of build/apt-repo-key
fi
note "signed with $key; the repository (served as $URI) and the files to install:"
echo "    $REPO/python3.11-perf.sources  ->  /etc/apt/sources.list.d/"
echo "    $REPO/python3.11-perf.pref     ->  /etc/apt/preferences.d/"

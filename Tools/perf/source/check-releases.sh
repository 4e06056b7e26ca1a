#!/bin/bash
# "make check-releases": check that our edits apply to every CPython 3.11
# release at hand, in seconds and without building: for each release
# tagged v3.11.N in a git bundle of the release trees, each of our patches
# (the variant that release takes) must apply with no fuzz (offsets are
# fine, but not for the default release), and none of our new files may
# exist in it.
#
# RELEASES_BUNDLE is the bundle (default: the one beside this checkout,
# ../shared/cpython/cpython-3.11-releases.bundle); its commits' trees are
# the release tarballs' contents.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

bundle=${RELEASES_BUNDLE:-$TOP/../shared/cpython/cpython-3.11-releases.bundle}
[ -f "$bundle" ] || die "no bundle of release trees at $bundle (set RELEASES_BUNDLE)"

repo=$BUILD/releases.git
if [ ! -d "$repo" ]; then
    git init -q --bare "$repo"
fi
git -C "$repo" fetch -q "$(realpath "$bundle")" 'refs/tags/v3.11.*:refs/tags/v3.11.*' \
    || die "cannot read the tags of $bundle"
tags=$(git -C "$repo" tag -l 'v3.11.*' | sort -V)
[ -n "$tags" ] || die "$bundle has no v3.11.N tags"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for tag in $tags; do
    version=${tag#v}
    problems=$(
        PY_VERSION=$version
        PY_MICRO=${version##*.}
        while IFS= read -r f; do
            case "$f" in
            *.patch)
                target=$(patch_target "$f")
                if ! git -C "$repo" show "$tag:$target" >"$tmp/orig" 2>/dev/null; then
                    echo "$f: $target does not exist"
                    continue
                fi
                if ! out=$(patch --dry-run --fuzz=0 -f -o "$tmp/out" "$tmp/orig" \
                           "$TOP/$f" 2>&1) \
                   || grep -qiE 'fuzz|fail|reject' <<<"$out" \
                   || { [ "$version" = "$DEFAULT_PY_VERSION" ] && grep -qi offset <<<"$out"; }; then
                    echo "$f:"
                    grep -iE 'hunk|fuzz|offset' <<<"$out" | sed 's/^/    /'
                fi
                ;;
            *)
                if git -C "$repo" cat-file -e "$tag:$f" 2>/dev/null; then
                    echo "$f exists in this release"
                fi
                ;;
            esac
        done < <(list_our_files)
    )
    if [ -n "$problems" ]; then
        echo "FAIL $version"
        sed 's/^/    /' <<<"$problems"
        failed=1
    else
        variants=$(PY_VERSION=$version PY_MICRO=${version##*.}
                   list_our_files | grep '\.since-3\.11\.' | paste -sd' ' || true)
        echo "ok   $version${variants:+ (with $variants)}"
    fi
done
[ $failed = 0 ] || die "our edits do not apply to every release (see above)"
note "every edit applies to $(wc -w <<<"$tags") releases: $(echo $tags | sed 's/v//g')"

#!/bin/bash
# Assemble the patched source tree: pristine CPython $PY_VERSION plus our
# new files plus our patches, then regenerate what the patches require
# (configure, pyconfig.h.in, Argument Clinic output).
#
# Only files whose content changes are rewritten, so an incremental build
# of the assembled tree rebuilds only what an edit actually touched.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

"$TOP/Tools/perf/source/fetch.sh"

if [ ! -f "$PRISTINE/Include/patchlevel.h" ]; then
    note "extracting pristine $PY_VERSION into $PRISTINE"
    rm -rf "$PRISTINE"
    mkdir -p "$PRISTINE"
    tar --no-same-owner --strip-components=1 -xzf "$DOWNLOADS/$BASE_TARBALL_NAME" -C "$PRISTINE"
    chmod -R a-w "$PRISTINE"
fi
if [ ! -f "$SRC/Include/patchlevel.h" ]; then
    note "creating the assembled tree $SRC"
    rm -rf "$SRC"
    cp -a "$PRISTINE" "$SRC"
    chmod -R u+w "$SRC"
fi

manifest=$BUILD/assembled-files.txt
new_manifest=$(mktemp)
tmp=$(mktemp)
trap 'rm -f "$new_manifest" "$tmp" "$tmp.out"' EXIT

# Copy $1 to $2 only if the content differs (keeps timestamps otherwise).
update_file() {
    if ! cmp -s "$1" "$2"; then
        mkdir -p "$(dirname "$2")"
        cp "$1" "$2"
        chmod u+w "$2"
        echo "    updated ${2#$SRC/}"
    fi
}

while IFS= read -r f; do
    case "$f" in
    *.patch)
        target=$(patch_target "$f")
        [ -f "$PRISTINE/$target" ] || die "$f: $target does not exist in CPython $PY_VERSION"
        # The default release takes every hunk where the patch says; other
        # releases may move lines (offsets), never change them (fuzz).
        if ! patch --no-backup-if-mismatch --fuzz=0 -f -r - -o "$tmp" \
                "$PRISTINE/$target" "$TOP/$f" >"$tmp.out" 2>&1 \
           || grep -qiE 'fuzz|fail|reject' "$tmp.out" \
           || { [ "$PY_VERSION" = "$DEFAULT_PY_VERSION" ] && grep -qi offset "$tmp.out"; }; then
            cat "$tmp.out" >&2
            die "$f does not apply to CPython $PY_VERSION ($target changed in that release)"
        fi
        update_file "$tmp" "$SRC/$target"
        echo "$target" >>"$new_manifest"
        ;;
    *)
        if [ -f "$PRISTINE/$f" ]; then
            die "$f exists in CPython $PY_VERSION: keep an edit of it as $f.patch"
        fi
        update_file "$TOP/$f" "$SRC/$f"
        echo "$f" >>"$new_manifest"
        ;;
    esac
done < <(list_our_files)

# Undo files that an earlier assembly changed but that are no longer ours.
if [ -f "$manifest" ]; then
    while IFS= read -r f; do
        if [ -f "$PRISTINE/$f" ]; then
            update_file "$PRISTINE/$f" "$SRC/$f"
        else
            rm -f "$SRC/$f"
            echo "    removed $f"
        fi
    done < <(comm -23 <(sort "$manifest") <(sort "$new_manifest"))
fi
sort "$new_manifest" >"$manifest"

# configure and pyconfig.h.in, with the autoconf version 3.11 used.
stamp=$BUILD/configure.ac.stamp
if cmp -s "$SRC/configure.ac" "$PRISTINE/configure.ac"; then
    update_file "$PRISTINE/configure" "$SRC/configure"
    update_file "$PRISTINE/pyconfig.h.in" "$SRC/pyconfig.h.in"
    rm -f "$stamp"
elif ! cmp -s "$SRC/configure.ac" "$stamp"; then
    note "regenerating configure (autoconf 2.69)"
    command -v autoconf2.69 >/dev/null || die "autoconf2.69 is missing (apt-get install autoconf2.69 autoconf-archive)"
    (cd "$SRC" && autoconf2.69 -Werror && autoheader2.69 -Werror && rm -rf autom4te.cache pyconfig.h.in~) \
        || die "regenerating configure failed"
    cp "$SRC/configure.ac" "$stamp"
fi

# Argument Clinic output of the files we patch.
for f in Python/sysmodule.c; do
    stamp=$BUILD/clinic-$(echo "$f" | tr / _).stamp
    if ! cmp -s "$SRC/$f" "$stamp"; then
        note "running Argument Clinic on $f"
        (cd "$SRC" && PYTHONDONTWRITEBYTECODE=1 python3 Tools/clinic/clinic.py "$f") \
            || die "Argument Clinic failed on $f"
        cp "$SRC/$f" "$stamp"
    fi
done

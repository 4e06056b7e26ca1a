#!/bin/bash
# The reverse of assemble.sh: turn what was changed inside the assembled
# tree (build/cpython) back into our new files and .patch files.  The
# explanatory header of an existing patch (the text before its first
# "---" line) is kept; a new patch gets a placeholder to fill in.
set -euo pipefail
. "$(dirname "$0")/../config.sh"

[ -d "$SRC" ] && [ -d "$PRISTINE" ] || die "no assembled tree: run make first"

is_generated() {
    local g
    for g in $GENERATED; do
        [ "$1" = "$g" ] && return 0
    done
    case "$1" in
        */__pycache__/*|*.pyc|*~|autom4te.cache/*) return 0 ;;
    esac
    return 1
}

changed=0
while IFS= read -r f; do
    is_generated "$f" && continue
    if [ -f "$PRISTINE/$f" ]; then
        # The variant this release takes, if the edit has variants.
        out=$TOP/$(patch_for "$f")
        header=""
        if [ -f "$out" ]; then
            header=$(sed -n '/^--- /q;p' "$out")
        fi
        [ -n "$header" ] || header="$f: (say why this file changes)
"
        new=$(mktemp)
        printf '%s\n' "$header" | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' >"$new"
        echo >>"$new"
        (cd "$BUILD" && diff -u --label "a/$f" --label "b/$f" \
            "pristine/$f" "cpython/$f") >>"$new" || true
        if ! cmp -s "$new" "$out"; then
            mkdir -p "$(dirname "$out")"
            mv "$new" "$out"
            echo "    wrote ${out#$TOP/}"
            changed=1
        else
            rm -f "$new"
        fi
    else
        mkdir -p "$(dirname "$TOP/$f")"
        if ! cmp -s "$SRC/$f" "$TOP/$f"; then
            cp "$SRC/$f" "$TOP/$f"
            echo "    wrote $f"
            changed=1
        fi
    fi
done < <(cd "$BUILD" && diff -rq -x __pycache__ -x '*.pickle' pristine cpython 2>/dev/null \
    | sed -n -e 's|^Files pristine/\(.*\) and cpython/.* differ$|\1|p' \
             -e 's|^Only in cpython/\?\(.*\): \(.*\)$|\1/\2|p' \
    | sed 's|^/||' | while IFS= read -r p; do
        if [ -d "$SRC/$p" ]; then
            (cd "$SRC" && find "$p" -type f)
        else
            echo "$p"
        fi
    done | LC_ALL=C sort)

# Patches whose file is back to pristine are dropped.
while IFS= read -r f; do
    case "$f" in
    *.patch)
        t=$(patch_target "$f")
        if cmp -s "$PRISTINE/$t" "$SRC/$t"; then
            rm -f "$TOP/$f"
            echo "    removed $f (file is pristine again)"
        fi
        ;;
    esac
done < <(list_our_files)
[ $changed = 1 ] || note "nothing to refresh"

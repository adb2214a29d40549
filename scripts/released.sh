#!/usr/bin/env bash
# Refuses a change to a released step of the extension's SQL: for every
# release sql/releases.txt lists, its install script (magic_sync--V.sql)
# and the step up to it (magic_sync--*--V.sql) must be as the one commit
# that added them left them: never edited since, in a commit or in the
# working tree. The version being written (Cargo.toml's, not yet listed)
# may change as it likes.
set -euo pipefail
cd "$(dirname "$0")/.."
failed=0
while read -r version commit day; do
    case "$version" in '#'* | '') continue ;; esac
    shopt -s nullglob
    files=(sql/magic_sync--"$version".sql sql/magic_sync--*--"$version".sql)
    if [ ! -f "sql/magic_sync--$version.sql" ]; then
        echo "released.sh: $version is released ($day, $commit) but sql/magic_sync--$version.sql is missing" >&2
        failed=1
    fi
    for file in "${files[@]}"; do
        commits=$(git log --format=%h -- "$file" | wc -l)
        if [ "$commits" -gt 1 ]; then
            echo "released.sh: $file, of release $version, was changed after it was released:" >&2
            git log --format='  %h %s' -- "$file" >&2
            failed=1
        fi
        if ! git diff --quiet HEAD -- "$file"; then
            echo "released.sh: $file, of release $version, is changed in the working tree: a released step is never edited; write the change into the next version's step" >&2
            failed=1
        fi
    done
done < sql/releases.txt
exit "$failed"

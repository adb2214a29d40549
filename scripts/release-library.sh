#!/usr/bin/env bash
# Builds the library of a released version from the commit sql/releases.txt
# names, as its package was built, into target-releases/VERSION/magic_sync.so,
# beside its install script: what the upgrade test (tests/tests/upgrade.rs)
# installs as a server administrator of that release had it. Skips the
# build when it is there already. Prints the library's path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?usage: release-library.sh VERSION}
commit=$(awk -v v="$version" '$1 == v { print $2 }' sql/releases.txt)
if [ -z "$commit" ]; then
    echo "release-library.sh: $version is no release of sql/releases.txt" >&2
    exit 1
fi
out="$PWD/target-releases/$version"
if [ ! -f "$out/magic_sync.so" ]; then
    rm -rf "$out/src"
    mkdir -p "$out/src"
    # The release's sources, as they were: the history has them.
    git archive "$commit" | tar -x -C "$out/src"
    echo "release-library.sh: building magic_sync $version from $commit (a few minutes)" >&2
    (cd "$out/src" && CARGO_TARGET_DIR="$out/target" cargo build --quiet -p magic_sync --lib >&2)
    cp "$out/target/debug/libmagic_sync.so" "$out/magic_sync.so"
fi
echo "$out/magic_sync.so"

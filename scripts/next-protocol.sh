#!/usr/bin/env bash
# Builds both halves as a release that raises the protocol would
# (magic_sync_proto's feature next-protocol): the extension's library and
# the replica's command line, into target-releases/next-protocol/, for
# tests/tests/protocol_upgrade.rs, which runs them beside this build. They
# are built in the workspace's target directory (only the crates the
# feature changes are compiled again) and copied out, since the next plain
# build writes its own over them there.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
out="$PWD/target-releases/next-protocol"
mkdir -p "$out"
cargo build --quiet -p magic_sync --lib --features magic_sync_proto/next-protocol
cp "$target/debug/libmagic_sync.so" "$out/magic_sync.so.next"
mv "$out/magic_sync.so.next" "$out/magic_sync.so"
cargo build --quiet -p magic_sync_replica --bin magic-sync-replica \
    --features cli,pg-queue,nats,magic_sync_proto/next-protocol
cp "$target/debug/magic-sync-replica" "$out/magic-sync-replica.next"
mv "$out/magic-sync-replica.next" "$out/magic-sync-replica"
echo "$out"

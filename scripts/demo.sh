#!/usr/bin/env bash
# The shop, both ways: a head office on a throwaway PostgreSQL with the
# extension and its relay worker, and two registers on SQLite files running
# the device loop over the default transport (a queue inside PostgreSQL):
# the catalog goes down, receipts come up, one register sells offline and
# is filed once it is back. Installs what is missing first.
#
# The terminal shows a line per step of setup and build, with how long it
# took, then the demo's own lines; what the steps print (cargo's build
# output above all) goes to target/demo-build.log.
set -euo pipefail
cd "$(dirname "$0")/.."

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
log=target/demo-build.log
mkdir -p target
: > "$log"

# step LABEL COMMAND...: runs the command with its output in the log, and
# prints the label and how long it took; a step that fails shows the end
# of the log.
step() {
    local label=$1 began=$SECONDS
    shift
    printf '%-58s' "$label ..."
    echo "==> $label" >> "$log"
    if "$@" >> "$log" 2>&1; then
        local took=$((SECONDS - began))
        if [ "$took" -ge 60 ]; then
            printf ' %dm %02ds\n' $((took / 60)) $((took % 60))
        else
            printf ' %ds\n' "$took"
        fi
    else
        printf ' FAILED\n\n'
        tail -n 30 "$log"
        printf '\nThe whole of it: %s\n' "$log"
        exit 1
    fi
}

# Without root, the extension's files go into PostgreSQL's directories
# through sudo.
sudo_flag=()
[ "$(id -u)" = 0 ] || sudo_flag=(--sudo)

echo "magic_sync's demo: setup and build (cargo's output in $log)"
step "setup: what this machine lacks (scripts/setup.sh)" bash scripts/setup.sh
step "the extension: built and installed into PostgreSQL 15" \
    cargo pgrx install -p magic_sync --pg-config "$PG_CONFIG" "${sudo_flag[@]}"
step "the shop's console demo: built" cargo build -p magic_sync_shop --bin shop-console
echo
cargo run --quiet -p magic_sync_shop --bin shop-console -- "$@"

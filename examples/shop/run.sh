#!/usr/bin/env bash
# The shop with its pages: a head office (its own PostgreSQL with the
# extension, the gateway mounted in it) and two registers, each on a
# SQLite file of its own, every one with a page in the browser. Builds
# what it needs first (installing what the machine lacks, as
# scripts/demo.sh does), keeps everything under target/shop/ (the head
# office's cluster, the registers' files: started again, it is the same
# shop), prints the three addresses to open, and runs until Ctrl-C, which
# stops all three losing nothing.
#
#   bash examples/shop/run.sh [--bind IP] [--transport ws|nats]
#
# --bind: 127.0.0.1 unless told. --transport nats: the registers reach the
# head office over NATS JetStream (a nats-server the head office starts
# itself) rather than its WebSocket gateway.
set -euo pipefail
cd "$(dirname "$0")/../.."

bind=127.0.0.1
transport=ws
while [ $# -gt 0 ]; do
    case $1 in
        --bind) bind=${2:?--bind takes an address}; shift 2 ;;
        --transport) transport=${2:?--transport takes ws or nats}; shift 2 ;;
        *) echo "$1? usage: bash examples/shop/run.sh [--bind IP] [--transport ws|nats]" >&2; exit 2 ;;
    esac
done

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
log=target/shop-build.log
mkdir -p target/shop
: > "$log"

step() {
    local label=$1 began=$SECONDS
    shift
    printf '%-58s' "$label ..."
    echo "==> $label" >> "$log"
    if "$@" >> "$log" 2>&1; then
        printf ' %ds\n' $((SECONDS - began))
    else
        printf ' FAILED\n\n'
        tail -n 30 "$log"
        printf '\nThe whole of it: %s\n' "$log"
        exit 1
    fi
}

sudo_flag=()
[ "$(id -u)" = 0 ] || sudo_flag=(--sudo)

echo "magic_sync's shop: setup and build (their output in $log)"
step "setup: what this machine lacks (scripts/setup.sh)" bash scripts/setup.sh
step "the extension: built and installed into PostgreSQL 15" \
    cargo pgrx install -p magic_sync --pg-config "$PG_CONFIG" "${sudo_flag[@]}"
step "the dashboard package: built" bash -c "cd dashboard && npm run build"
step "the shop's pages: built" bash -c "cd examples/shop/web && npm run build"
step "the head office and the register: built" \
    cargo build -p magic_sync_shop --bin head-office --bin register
echo

pids=()
stop() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop EXIT INT TERM

cd target/shop
../debug/head-office --bind "$bind:8080" --transport "$transport" \
    > head-office.out 2> head-office.log &
pids+=($!)
until grep -q http head-office.out 2>/dev/null; do
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
        cat head-office.log
        exit 1
    fi
    sleep 0.2
done
for n in 1 2; do
    ../debug/register --name "Register $n" --port 808$n --bind "$bind" \
        > register-$n.out 2> register-$n.log &
    pids+=($!)
done
for n in 1 2; do
    until grep -q http register-$n.out 2>/dev/null; do sleep 0.2; done
done
echo "The shop is open (Ctrl-C stops it; its logs are in target/shop/):"
cat head-office.out register-1.out register-2.out | sed 's/^/  /'
wait

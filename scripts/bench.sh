#!/usr/bin/env bash
# The benchmarks, on a release build of the extension. Each prints figures
# and ratios measured side by side in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
bash scripts/setup.sh
cargo pgrx install --release -p magic_sync --pg-config "$PG_CONFIG" >/dev/null
# `bash scripts/bench.sh [OPTIONS]` runs bench_relay; `bash scripts/bench.sh
# BENCH [OPTIONS]` another of tests/src/bin: bench_worker, bench_transports,
# bench_filing, bench_noting.
bench=bench_relay
if [[ "${1:-}" == bench_* ]]; then
    bench=$1
    shift
fi
cargo run --release --quiet -p magic_sync_tests --bin "$bench" -- "$@"

#!/usr/bin/env bash
# The shop: a head office on a throwaway PostgreSQL with the extension and
# its relay worker, and two registers on SQLite files running the device
# loop over the default transport (a queue inside PostgreSQL). Installs what
# is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
bash scripts/setup.sh
cargo pgrx install -p magic_sync --pg-config "$PG_CONFIG" >/dev/null
cargo run --quiet -p magic_sync_shop -- "$@"

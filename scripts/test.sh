#!/usr/bin/env bash
# Runs every check and test of every crate: formatting and clippy, proto and
# replica, the extension's #[pg_test]s, the pg_regress cases, and the
# end-to-end tests against a real PostgreSQL 15 with the extension
# installed. Exits non-zero when any fails.
set -euo pipefail
cd "$(dirname "$0")/.."

export PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
bash scripts/setup.sh

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

say "formatting and lints"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings

say "released steps of the extension's SQL, unchanged"
bash scripts/released.sh

say "every path the docs name, in the repository"
bash scripts/doc-paths.sh

say "installing the extension into PostgreSQL 15"
cargo pgrx install -p magic_sync --pg-config "$PG_CONFIG"

say "the previous release's library, for the upgrade test"
# Built from the commit sql/releases.txt names (once: it is kept under
# target-releases/), outside the tests' own cargo run.
bash scripts/release-library.sh 0.1.0 >/dev/null

say "both halves speaking the next protocol, for the protocol's upgrade test"
# tests/tests/protocol_upgrade.rs runs them beside this build.
bash scripts/next-protocol.sh >/dev/null

say "the dashboard: types, type check, build, vitest, the page in a browser"
# dashboard/ (issue 33): its types held to the engine's answers and the
# type check (npm run check), the package and the page built (npm run
# build), the unit and component tests (vitest), then the server's tests:
# the fixtures the types come from, and the page in headless Chromium over
# registers in each state (screenshots in target/dashboard-screenshots/).
# They need the page built and the extension installed, so they run here
# and not with the workspace's tests below.
(cd dashboard && npm run check && npm run build && npm test)
timeout --foreground 10m cargo test -p magic_sync_dashboard_server

say "the shop's pages in a browser: the head office, registers, the book's things to try"
# examples/shop (issue 35): its pages type-checked, built (over the
# dashboard package built above) and their sentences tested (vitest), then the head office (its own PostgreSQL, in a scratch
# directory) and two registers run as programs, walked in headless
# Chromium (screenshots in target/shop-screenshots/).
(cd examples/shop/web && npm run check && npm run build && npm test)
# Each walk is a test file of examples/shop/tests/ (help/ is what they
# share), one after the other: each starts a shop of its own.
timeout --foreground 10m cargo test -p magic_sync_shop --test in_a_browser --test lost_deleted_wished --test over_nats

say "proto, replica, end-to-end and pg_regress tests"
# A test that hangs fails the run here, with its name printed, rather than
# running into CI's own limit.
timeout --foreground 45m cargo test --no-fail-fast --workspace --exclude magic_sync --exclude magic_sync_dashboard_server --exclude magic_sync_shop

say "the extension's tests inside PostgreSQL"
# PostgreSQL will not run as root: the test cluster runs as postgres.
pgdata=$(mktemp -d /tmp/magic_sync-pgrx-XXXXXX)
trap 'rm -rf "$pgdata"' EXIT
if [ "$(id -u)" = 0 ]; then
    chown postgres "$pgdata"
    cargo pgrx test pg15 -p magic_sync --runas postgres --pgdata "$pgdata/data"
else
    cargo pgrx test pg15 -p magic_sync --pgdata "$pgdata/data"
fi

say "the Debian package: dpkg -i, CREATE EXTENSION, dpkg -r, the machine's files put back"
# Last, on its own: the package's files replace the extension's files on
# this machine (those the steps above installed) for the few seconds
# PostgreSQL reads them, and the test puts them back and holds them to be
# byte for byte what they were (tests/tests/package.rs). The package is
# made as a release's is, of a debug build, which reuses what the steps
# above compiled (a release build takes ten minutes more on 2 cores).
deb=$(bash scripts/package.sh --debug)
MAGIC_SYNC_PACKAGE="$deb" timeout --foreground 10m \
    cargo test -p magic_sync_tests --test package -- --ignored --test-threads=1

say "all tests passed"

#!/usr/bin/env bash
# Installs what magic_sync needs on a fresh Debian machine, and nothing it
# already has: PostgreSQL 15 with its headers, clang for bindgen, sudo (for
# `cargo pgrx test --runas`), nats-server, Chromium (the dashboard's browser
# test), sqlite3 (the quick start's shell blocks), promtool, cargo-pgrx 0.18.0 and its init, and the dashboard's Node
# packages.
# Safe to run again: each step checks first.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PACKAGES=(postgresql-15 postgresql-server-dev-15 clang libclang-dev sudo pkg-config nats-server chromium sqlite3)

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# promtool, which holds sync.metrics() to Prometheus's text format
# (tests/tests/status_reads.rs): Debian ships it in the server's package,
# taken without what it recommends.
if ! command -v promtool >/dev/null; then
    say "installing promtool (the package prometheus)"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi

if ! cargo pgrx --version 2>/dev/null | grep -q '0\.18\.0'; then
    say "installing cargo-pgrx 0.18.0 (a few minutes)"
    cargo install cargo-pgrx --version 0.18.0 --locked
fi

if ! grep -qs "pg15" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    say "pointing pgrx at PostgreSQL 15"
    cargo pgrx init --pg15 "$PG_CONFIG"
fi

# The dashboard's packages, from its lock (node_modules/.package-lock.json is
# what npm last installed): again only when the lock changed since.
dashboard="$(dirname "$0")/../dashboard"
if [ ! -f "$dashboard/node_modules/.package-lock.json" ] \
    || [ "$dashboard/package-lock.json" -nt "$dashboard/node_modules/.package-lock.json" ]; then
    say "installing the dashboard's Node packages (npm ci)"
    (cd "$dashboard" && npm ci --no-audit --no-fund)
fi

# The shop's pages (examples/shop/web), from their lock, likewise.
shop_pages="$(dirname "$0")/../examples/shop/web"
if [ ! -f "$shop_pages/node_modules/.package-lock.json" ] \
    || [ "$shop_pages/package-lock.json" -nt "$shop_pages/node_modules/.package-lock.json" ]; then
    say "installing the shop's pages' Node packages (npm ci)"
    (cd "$shop_pages" && npm ci --no-audit --no-fund)
fi

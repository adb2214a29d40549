#!/usr/bin/env bash
# Makes a copy of the machine's PostgreSQL under DIR, laid out as the
# machine's is (PostgreSQL finds its directories relative to its programs),
# and prints its pg_config. An extension installed into it
# (`cargo pgrx install --pg-config ...`), and tests run with PG_CONFIG set
# to it, leave the machine's PostgreSQL, which other builds and tests use
# at the same time, as it was. Safe to run again: an existing copy is kept.
set -euo pipefail
dir=${1:?usage: private-postgres.sh DIR}
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
bindir=$("$PG_CONFIG" --bindir)
sharedir=$("$PG_CONFIG" --sharedir)
lib=$(dirname "$bindir")
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ ! -x "$dir$bindir/pg_config" ]; then
    mkdir -p "$dir$(dirname "$lib")" "$dir$(dirname "$sharedir")"
    cp -a "$lib" "$dir$(dirname "$lib")/"
    cp -a "$sharedir" "$dir$(dirname "$sharedir")/"
    # The cluster's owner (postgres, when run as root) must reach it.
    chmod -R a+rX "$dir"
fi
echo "$dir$bindir/pg_config"

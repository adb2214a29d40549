#!/bin/sh
# Writes sync.metrics() where node_exporter's textfile collector reads it:
# run every 15 s or so (cron, or a systemd timer). The file is written
# whole, then renamed, so a scrape never reads half of it. It connects as
# a role given sync.allow_reading() and nothing else.
set -eu
dir=${TEXTFILE_DIR:-/var/lib/prometheus/node-exporter}
psql "${MAGIC_SYNC_METRICS_URL:-postgresql://metrics@localhost/shop}" \
    --no-psqlrc --tuples-only --no-align \
    --command "SELECT sync.metrics()" > "$dir/magic_sync.prom.$$"
mv "$dir/magic_sync.prom.$$" "$dir/magic_sync.prom"

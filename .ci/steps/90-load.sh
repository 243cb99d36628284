#!/usr/bin/env bash
# The load and fault suite, short: 16 clients for 10 s in
# each of three runs against built `acds serve` processes — SQLite with a
# kill -9 half-way, PostgreSQL through a link that is black-holed and then
# dropped, two replicas on PostgreSQL with one killed. Fails on any 5xx
# other than 503 with Retry-After and on any accepted request that did not
# end. The full run: ACDS_LOAD_DURATION=60s ACDS_LOAD_CLIENTS=64.
set -euo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! ACDS_LOAD_DURATION="${ACDS_LOAD_DURATION:-10s}" ACDS_LOAD_CLIENTS="${ACDS_LOAD_CLIENTS:-16}" \
  go test -tags load -count=1 -timeout 20m -v ./internal/testrig/loadtest/ >"$log" 2>&1; then
  cat "$log"
  exit 1
fi
grep -E '^(LOAD |--- )' "$log"

#!/usr/bin/env bash
# Conformance: the suite written from SPEC.md alone
# (internal/testrig/conformance) against a built `acds serve`, which fetches from a
# built `acds portal`, both on loopback. Run from the repo root on a fresh
# clone. Both processes are stopped however the step ends.
set -euo pipefail

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# show NAME: a process's output, when something went wrong.
show() {
  echo "-- $1 stdout:"; cat "$work/$1.out" || true
  echo "-- $1 stderr:"; tail -n 50 "$work/$1.err" || true
}

# ready NAME PID PATTERN: wait (up to 60 s) for the ready line of NAME,
# a line of its stdout matching the extended regexp PATTERN.
ready() {
  for _ in $(seq 600); do
    grep -qE "$3" "$work/$1.out" && return 0
    if ! kill -0 "$2" 2>/dev/null; then
      echo "$1 exited before its ready line" >&2; show "$1"; return 1
    fi
    sleep 0.1
  done
  echo "$1 printed no ready line in 60 s" >&2; show "$1"; return 1
}

echo "-- go build ./cmd/acds"
go build -o "$work/acds" ./cmd/acds

# Port 0: each listener takes a free port, and its ready line says which.
echo "-- acds portal"
"$work/acds" portal --addr 127.0.0.1:0 --ca-out "$work/portal-ca.pem" --patients 1 \
  >"$work/portal.out" 2>"$work/portal.err" &
pids+=("$!")
ready portal "$!" '^acds portal listening on '
# What the portal printed: its FHIR base URL, the demo credentials and the
# ids of the patients it generated for its seed.
portal_url="$(sed -n 's/^FHIR base URL: //p' "$work/portal.out")"
username="$(sed -n 's/^demo credentials: username "\([^"]*\)" password "\([^"]*\)".*/\1/p' "$work/portal.out")"
password="$(sed -n 's/^demo credentials: username "\([^"]*\)" password "\([^"]*\)".*/\2/p' "$work/portal.out")"
record="$(sed -n 's/^patient \([^ ]*\) .*/\1/p' "$work/portal.out" | head -n 1)"
if [ -z "$portal_url" ] || [ -z "$username" ] || [ -z "$password" ] || [ -z "$record" ]; then
  echo "could not read the portal's base URL, credentials and a patient id" >&2; show portal; exit 1
fi

echo "-- acds serve"
"$work/acds" serve --addr 127.0.0.1:0 --data-dir "$work/data" \
  --portal-ca "$work/portal-ca.pem" --allow-private-portals \
  >"$work/serve.out" 2>"$work/serve.err" &
pids+=("$!")
ready serve "$!" '^acds .* serving on http://'
# The ready line: "acds X.Y.Z serving on http://HOST:PORT (enclave …; measurement …)".
base="$(sed -n 's/^acds .* serving on \(http:\/\/[^ ]*\).*$/\1/p' "$work/serve.out" | head -n 1)"
if [ -z "$base" ]; then echo "no URL in the ready line of acds serve:" >&2; cat "$work/serve.out" >&2; exit 1; fi
echo "server $base, portal $portal_url, record $record"

echo "-- the conformance suite against acds serve"
if ! out="$(ACDS_CONFORMANCE_URL="$base" \
  ACDS_CONFORMANCE_SYSTEM_TYPE=fhir-basic \
  ACDS_CONFORMANCE_PORTAL_URL="$portal_url" \
  ACDS_CONFORMANCE_USERNAME="$username" \
  ACDS_CONFORMANCE_PASSWORD="$password" \
  ACDS_CONFORMANCE_RECORD_ID="$record" \
  go test -count=1 -v -run '^TestServe$' ./internal/testrig/conformance/ 2>&1)"; then
  echo "$out"; show serve; exit 1
fi
echo "$out" | grep -E '^(--- |ok|PASS|FAIL)|conformance: ' || true
if echo "$out" | grep -q -- '--- SKIP'; then
  echo "the suite skipped although ACDS_CONFORMANCE_URL was set" >&2; echo "$out"; exit 1
fi

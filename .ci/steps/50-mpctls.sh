#!/usr/bin/env bash
# mpctls: interop with a non-Go TLS server (openssl s_server), the race
# detector on the parallel presentation verifier, and short fuzz runs of
# every fuzz target. Run from the repo root on a fresh machine.
set -euo pipefail

if ! command -v openssl >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq openssl >/dev/null
  fi
fi
command -v openssl >/dev/null 2>&1 || { echo "openssl is required for the interop tests"; exit 1; }

echo "-- mpctls: tests with openssl present (interop must run, not skip)"
out="$(go test -count=1 -v -run 'TestOpenSSLInterop|TestGoTLS13ChaCha20' ./mpctls/)"
echo "$out" | grep -E '^(---|ok|FAIL|PASS)' || true
if echo "$out" | grep -q -- '--- SKIP'; then echo "interop tests skipped"; exit 1; fi

echo "-- mpctls: race detector"
go test -count=1 -race ./mpctls/

echo "-- mpctls: fuzz"
for target in FuzzRecordReader FuzzParseStatement FuzzPresentation FuzzVerifyHandshake; do
  bash .ci/fuzz.sh "$target" ./mpctls/ 15s
done

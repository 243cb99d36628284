#!/usr/bin/env bash
# Race detector on the concurrent parts: the server (workers, leases, rate
# limiters, session cache), the client (retries) and the store backends.
# PostgreSQL cases run when .ci/run exported ACDS_TEST_POSTGRES.
set -euo pipefail

# -race needs cgo and a C toolchain; install one on a fresh machine.
if ! command -v gcc >/dev/null 2>&1; then
  echo "race: installing gcc"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null
  else
    sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null
  fi
fi
export CGO_ENABLED=1
if [ -n "${ACDS_TEST_POSTGRES:-}" ]; then echo "race: with PostgreSQL"; else echo "race: without PostgreSQL (ACDS_TEST_POSTGRES unset)"; fi
go test -race -count=1 -timeout 6m ./server/... ./client/... ./store/... ./internal/stores/sqlstore/...

#!/usr/bin/env bash
# Real peers (issue 28): Medplum's FHIR engine and node-oidc-provider on
# loopback (internal/testrig/peers), installed from the committed lockfile,
# then every test that uses them (their names contain Peers) with the rig
# required: a missing node, a failed start or a skipped test fails the
# step. Runs from the repo root on a fresh clone.
set -euo pipefail
rig=internal/testrig/peers/testdata

# 1. Node and npm (Node 20.19 or later: @medplum/fhir-router's engines).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
fi
if ! node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=19)?0:1)'; then
  echo "peers: node $(node --version) is older than 20.19, which @medplum/fhir-router needs" >&2
  exit 1
fi
echo "node $(node --version), npm $(npm --version)"

# 2. The rig's packages, exactly as locked.
t0=$(date +%s)
(cd "$rig" && npm ci --no-audit --no-fund --loglevel=error)
echo "npm ci: $(( $(date +%s) - t0 )) s"

# 3. The packages whose tests use the rig, and the rig's own.
pkgs="$(go list -f '{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... |
  awk '{ for (i = 1; i <= NF; i++) if ($i ~ /\/internal\/testrig\/peers$/) { print $1; break } }')"
pkgs="$(printf '%s\n%s\n' github.com/acds-project/acds/internal/testrig/peers "$pkgs" | sort -u)"
echo "packages using the rig:"; echo "$pkgs" | sed 's/^/  /'

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
# shellcheck disable=SC2086
ACDS_PEERS_REQUIRED=1 go test -count=1 -v -run Peers $pkgs >"$out" 2>&1 || status=$?
grep -E '^\s*--- (PASS|FAIL|SKIP)|^(ok|FAIL|PASS)\b|rig ready in' "$out" || true
if [ "$status" -ne 0 ]; then
  cat "$out"; exit "$status"
fi
if grep -qE '^\s*--- SKIP' "$out"; then
  echo "peers: a test that uses the rig skipped:" >&2; grep -E -B5 '^\s*--- SKIP' "$out" >&2; exit 1
fi
if ! grep -qE '^--- PASS: TestPeers' "$out"; then
  echo "peers: the rig's own tests did not run" >&2; exit 1
fi

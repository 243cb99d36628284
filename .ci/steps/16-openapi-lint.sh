#!/usr/bin/env bash
# The OpenAPI document of the v1 contract (server/openapi.json, served at
# GET /v1/openapi.json) passes Redocly's recommended lint rules with no
# error and no warning: security on every operation (public ones say
# security: []), info.license, valid schemas. Redocly comes from the
# committed lockfile in .ci/openapi. Runs from the repo root.
set -euo pipefail

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  else
    sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
fi
(cd .ci/openapi && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
out="$(.ci/openapi/node_modules/.bin/redocly lint --format=stylish server/openapi.json 2>&1)" || { echo "$out"; exit 1; }
echo "$out" | tail -3
if echo "$out" | grep -qi 'warning'; then
  echo "openapi lint: warnings are not accepted" >&2
  exit 1
fi

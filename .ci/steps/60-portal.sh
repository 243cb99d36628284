#!/usr/bin/env bash
# Portals: the race detector over the connectors (portal), the demo portal
# (internal/demo/demoportal) and the notarized Fetcher (real notary and provers
# on loopback), the `acds portal` command tests, and short fuzz runs of
# the login-page reader, the numeric host parser of the SSRF guard, the
# connector's handling of arbitrary portal answers, its CapabilityStatement
# reader and compartment-reference walk, and the registrations file
# parser.
set -euo pipefail

if ! command -v gcc >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
fi

echo "-- race detector: portal, internal/demo/demoportal"
CGO_ENABLED=1 go test -count=1 -race ./portal/ ./internal/demo/demoportal/

echo "-- acds portal command"
go test -count=1 -run 'TestPortalCommand' ./cmd/acds/

echo "-- fuzz: login-page reader, numeric host forms, portal answers, CapabilityStatements, references, registrations files"
bash .ci/fuzz.sh FuzzParseHTML ./portal/ 15s
bash .ci/fuzz.sh FuzzParseHostAddr ./portal/ 15s
bash .ci/fuzz.sh FuzzConnectorPages ./portal/ 15s
bash .ci/fuzz.sh FuzzParseCapability ./portal/ 10s
bash .ci/fuzz.sh FuzzReferencesAt ./portal/ 10s
bash .ci/fuzz.sh FuzzParseRegistrations ./portal/ 15s

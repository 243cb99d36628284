#!/usr/bin/env bash
# The demo and the examples: every example builds and imports only public
# packages (no internal/), `go run ./cmd/acds demo` (the README's first
# command) exits 0, the demo, sealed-credential and end-to-end tests run
# under the race detector, and one short run of the fetch-and-attest
# benchmark prints its ratio.
set -euo pipefail

echo "-- examples build"
go build -o /dev/null ./examples/quickstart
go build -o /dev/null ./examples/embed
go build -o /dev/null ./examples/civerify

echo "-- examples import public packages only"
bad="$(go list -f '{{.ImportPath}}: {{join .Imports " "}} {{join .TestImports " "}}' ./examples/... | grep -E 'github.com/acds-project/acds/(.*/)?internal(/|$| )' || true)"
if [ -n "$bad" ]; then echo "an example imports an internal package:"; echo "$bad"; exit 1; fi

echo "-- go run ./cmd/acds demo"
out="$(go run ./cmd/acds demo)"
echo "$out"
grep -q '^result: everything verified$' <<<"$out"

if ! command -v gcc >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null
fi
echo "-- race detector: demo, sealed credentials, fetch-and-attest end to end"
CGO_ENABLED=1 go test -count=1 -race -run 'TestDemo|TestSealedCredentialsAtRest|TestFetchAndAttestEndToEnd' ./cmd/acds/

echo "-- benchmark: plain fetch vs fetch-and-attest of the ~1 MB patient"
go test -run '^$' -bench '^BenchmarkFetchAndAttest$' -benchtime 5x ./cmd/acds/

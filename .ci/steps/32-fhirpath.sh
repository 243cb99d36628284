#!/usr/bin/env bash
# FHIRPath: the official FHIRPath suite for R4 over the official
# R4 examples in JSON, with its score line and every failing or skipped
# test, and a short fuzz run of the parser. Runs from the repo root on a
# fresh clone (with ../shared beside it).
set -euo pipefail

# 1. The official R4 examples (npm package hl7.fhir.r4.examples@4.0.1).
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  else
    sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
fi
./scripts/fetch-fhir-defs.sh

# 2. The suite. go test ./... skips it where the data is missing; here it
# must run, so a missing score line fails the step.
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -run '^TestConformance$' -v ./fhir/fhirpath/ >"$out" 2>&1 || status=$?
grep -E '^\s+conformance_test.go:[0-9]+: (FAIL|SKIP) ' -A1 "$out" | grep -v '^--$' | tail -80 || true
grep -E 'failing by group:|fhirpath conformance:|^(ok|FAIL|---)' "$out" | tail -6
if ! grep -q 'fhirpath conformance:' "$out"; then
  echo "fhirpath: the conformance suite did not run (../shared/testdata/fhirpath or .fhir-defs missing)" >&2
  exit 1
fi
[ "$status" -eq 0 ] || exit "$status"

# 3. A short fuzz run of the parser and evaluator (the seed corpus already
# replays in go test).
bash .ci/fuzz.sh FuzzCompile ./fhir/fhirpath/ 20s

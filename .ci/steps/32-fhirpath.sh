#!/usr/bin/env bash
# FHIRPath: the official FHIRPath suite for R4 over the official
# R4 examples in JSON (both in fhir/fhirpath/testdata/r4suite), with its
# score line and every failing or skipped test, and a short fuzz run of the
# parser. Runs from the repo root on a fresh clone.
set -euo pipefail

# 1. The suite, with its score line; a missing score line fails the step.
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -run '^TestConformance$' -v ./fhir/fhirpath/ >"$out" 2>&1 || status=$?
grep -E '^\s+conformance_test.go:[0-9]+: (FAIL|SKIP) ' -A1 "$out" | grep -v '^--$' | tail -80 || true
grep -E 'failing by group:|fhirpath conformance:|^(ok|FAIL|---)' "$out" | tail -6
if ! grep -q 'fhirpath conformance:' "$out"; then
  echo "fhirpath: the conformance suite did not run" >&2
  exit 1
fi
[ "$status" -eq 0 ] || exit "$status"

# 2. A short fuzz run of the parser and evaluator (the seed corpus already
# replays in go test).
bash .ci/fuzz.sh FuzzCompile ./fhir/fhirpath/ 20s

#!/usr/bin/env bash
# FHIR checks: the generated fhir/spec tables are current, and the
# fhir package's fuzz targets survive a short run. Runs from the repo root.
set -euo pipefail

# 1. Regenerate fhir/spec from the official R4 definitions; fail on any diff.
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq npm >/dev/null
fi
./scripts/fetch-fhir-defs.sh
go run ./internal/gen/fhirgen/spec -defs .fhir-defs/package -out fhir/spec/tables.go
if ! git diff --exit-code --stat -- fhir/spec; then
  echo "fhir/spec is stale: run go generate ./fhir/spec and commit the result" >&2
  exit 1
fi

# 2. The tests that need the definitions (skipped by go test ./... before
#    they were fetched): every official example validates and normalises,
#    the generator reproduces the committed tables, de-identification
#    breaks no constraint the plain output meets, and the
#    verdicts agree with the HL7 validator's; their summaries are printed.
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
status=0
go test -count=1 -v -run 'TestOfficialExamples|TestDeterministicAndCurrent|TestDeidentifyKeepsConstraints|TestAgreementWithReferenceValidator|TestRulesCompileOnceConcurrently' \
  ./fhir/ ./internal/gen/fhirgen/spec/ >"$out" 2>&1 || status=$?
grep -E 'agreement with the HL7|^\s+[a-z0-9-]+: reference errors=|reason:|de-identified [0-9]+ inputs|constraints evaluated as FHIRPath|official examples have errors|^(--- FAIL|FAIL|ok)' "$out" || true
if [ "$status" -ne 0 ]; then
  tail -60 "$out"
  exit "$status"
fi
if ! grep -q 'de-identified [0-9]* inputs' "$out"; then
  echo "fhir: the de-identification constraint test did not run (.fhir-defs missing?)" >&2
  exit 1
fi

# 3. Short fuzz runs (the seed corpora already replay in go test).
bash .ci/fuzz.sh FuzzValidate ./fhir/ 45s
bash .ci/fuzz.sh FuzzProcess ./fhir/ 45s
# POST /v1/process leaves the syntax of the data to fhir.Check's strict
# decoder: the delimiting scan, and the answers it leads to, against the
# strict ones.
bash .ci/fuzz.sh FuzzDelimit ./internal/base/jsonscan/ 15s
bash .ci/fuzz.sh FuzzDelimitedData ./server/ 30s

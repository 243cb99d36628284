#!/usr/bin/env bash
# FHIR R4 model: the generated fhir/r4 code is current, every
# official R4 example round-trips losslessly, and the decoder survives a
# short fuzz run. Runs from the repo root on a fresh machine.
set -euo pipefail

# 1. The official definitions (npm package hl7.fhir.r4.examples@4.0.1).
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  else
    sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
fi
./scripts/fetch-fhir-defs.sh

# 2. Regenerate fhir/r4 and fail on any difference from what is committed.
go generate ./fhir/r4/...
if [ -n "$(git status --porcelain -- fhir/r4)" ]; then
  git status --porcelain -- fhir/r4 | head -20 >&2
  git diff --stat -- fhir/r4 | tail -5 >&2
  echo "fhir/r4 is stale: run go generate ./fhir/r4/... and commit the result" >&2
  exit 1
fi

# 3. The round trip over all official examples and the shared bundles (now
# that the definitions are present; go test ./... may have skipped it; -r4.all
# adds the large definition bundles), the Walk coverage test, the canonical
# encoder against its reference over the same documents, error-collecting
# Decode against Unmarshal, and the fuzz seed corpora.
go test -count=1 -run 'RoundTrip|Walk|Canonical|Decode|FuzzUnmarshal' ./fhir/r4/ -args -r4.all

# 4. The race detector over concurrent decode/walk/encode (needs cgo; the
# race step installs gcc on a fresh machine, so only run when it is there).
if command -v gcc >/dev/null 2>&1; then
  CGO_ENABLED=1 go test -race -count=1 -run 'Concurrent|DecodeErrors|Example' ./fhir/r4/
fi

# 5. Short fuzz runs of the decoder (strict and collecting) and the
# canonical encoder.
bash .ci/fuzz.sh FuzzUnmarshal ./fhir/r4/ 20s
bash .ci/fuzz.sh FuzzDecode ./fhir/r4/ 20s
bash .ci/fuzz.sh FuzzCanonical ./fhir/r4/ 20s

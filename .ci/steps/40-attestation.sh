#!/usr/bin/env bash
# Attestation and offline verification: race detector on the verifier and
# the enclave, short fuzz runs of every untrusted-input parser, and one
# benchmark pass (figures only; the goals are judged by people, not CI).
set -euo pipefail
cd "$(dirname "$0")/../.."

# The race detector needs cgo and a C toolchain.
if ! command -v gcc >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo_cmd=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq gcc libc6-dev >/dev/null
  fi
fi

pkgs="./verify/ ./attestation/ ./attestation/disclosure/ ./attestation/sevsnp/ ./attestation/sim/ ./attestation/manifest/"

if command -v gcc >/dev/null 2>&1; then
  echo "-- race: $pkgs"
  CGO_ENABLED=1 go test -race -count=1 $pkgs
else
  echo "-- race: skipped (no C compiler could be installed)"
fi

fuzz() { # fuzz TARGET PACKAGE
  echo "-- fuzz $1 in $2"
  bash .ci/fuzz.sh "$1" "$2" "${ACDS_FUZZTIME:-20s}"
}
fuzz FuzzVerify ./verify/
fuzz FuzzParseBundle ./attestation/
fuzz FuzzVerifyClaims ./attestation/
fuzz FuzzParseClaims ./attestation/
fuzz FuzzVerify ./attestation/sevsnp/
fuzz FuzzVerify ./attestation/manifest/
fuzz FuzzParse ./attestation/disclosure/
fuzz FuzzEntries ./attestation/disclosure/

echo "-- benchmark (b/a ratio, per-output signing, bundle size)"
go test -run '^$' -bench 'BenchmarkVerify$|BenchmarkAttest$' -benchtime 300x ./verify/
go test -run '^$' -bench 'BenchmarkVerifyRealMilan$' -benchtime 100x ./attestation/sevsnp/
echo "-- benchmark: entry commitment vs SHA-256 (goal ratio <= 1.5), three-entry disclosure vs full output (goal ratio <= 1.0)"
go test -run '^$' -bench 'BenchmarkCommit$' -benchtime 100x ./attestation/disclosure/
go test -run '^$' -bench 'BenchmarkVerifyDisclosure$' -benchtime 100x ./verify/

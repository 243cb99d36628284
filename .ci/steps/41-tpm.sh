#!/usr/bin/env bash
# TPM evidence: run the attestation/tpm tests against go-tpm-tools' TPM 2.0
# reference simulator (cgo, links OpenSSL's libcrypto), plus short fuzz runs
# of both evidence parsers. Run from the repository root.
set -euo pipefail

if ! dpkg -s libssl-dev >/dev/null 2>&1; then
  echo "installing libssl-dev for the TPM simulator"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libssl-dev gcc >/dev/null
fi
command -v gcc >/dev/null || { echo "gcc is required for the cgo simulator" >&2; exit 1; }

echo "-- attestation/tpm against the TPM simulator"
CGO_ENABLED=1 go test -count=1 -tags tpmsim ./attestation/tpm/...

echo "-- fuzz the TDX and TPM evidence parsers briefly"
bash .ci/fuzz.sh FuzzVerify ./attestation/tdx/ 20s
bash .ci/fuzz.sh FuzzVerify ./attestation/tpm/ 20s

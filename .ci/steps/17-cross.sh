#!/usr/bin/env bash
# The module builds for the other systems a user embeds it on: macOS and
# Windows. The TEE device packages serve Linux guests, but a library
# user's build must not fail on them (attestation/tpm/device did on
# Windows).
set -euo pipefail
cd "$(dirname "$0")/../.."
for target in darwin/arm64 windows/amd64; do
  echo "-- $target"
  GOOS="${target%/*}" GOARCH="${target#*/}" go build ./...
done

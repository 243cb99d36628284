#!/usr/bin/env bash
# Fetches the official FHIR R4 4.0.1 definitions and examples (npm package
# hl7.fhir.r4.examples@4.0.1, CC0) into .fhir-defs/ (git-ignored).
# Used by `go generate ./fhir/...` and by the round-trip tests; idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.fhir-defs"
if [ -f "$dest/package/Bundle-types.json" ]; then
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent hl7.fhir.r4.examples@4.0.1 >/dev/null)
mkdir -p "$dest"
tar -xzf "$tmp"/hl7.fhir.r4.examples-4.0.1.tgz -C "$dest"
echo "fetched FHIR R4 definitions into $dest/package"

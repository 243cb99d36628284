#!/usr/bin/env bash
# MPC-TLS notary and prover: interop against real nginx (OpenSSL) for
# TLS 1.3 and 1.2 with every AEAD suite, a real server KeyUpdate from
# `openssl s_server`, the race detector over the notary and prover, and
# short fuzz runs of the notary's hello policy and the prover's splitter.
set -euo pipefail

need=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin"

echo "-- nginx and openssl interop (must run, not skip)"
out="$(go test -count=1 -v -run 'TestInteropNginx|TestInteropKeyUpdate' ./mpctls/prover/ 2>&1)" || { echo "$out"; exit 1; }
echo "$out" | grep -E '^(--- |=== RUN|ok|PASS|FAIL)' | grep -v '=== RUN' || true
if echo "$out" | grep -q -- '--- SKIP'; then
  echo "interop tests skipped although nginx/openssl were installed"
  echo "$out"
  exit 1
fi

echo "-- race detector: notary and prover"
CGO_ENABLED=1 go test -count=1 -race ./mpctls/notary/... ./mpctls/prover/ 

echo "-- fuzz the notary's hello policy and the prover's record splitter"
bash .ci/fuzz.sh FuzzHelloWatch ./mpctls/notary/ 15s
bash .ci/fuzz.sh FuzzSplitter ./mpctls/prover/ 15s

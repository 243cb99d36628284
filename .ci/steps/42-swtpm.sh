#!/usr/bin/env bash
# TPM enclave end to end: `acds serve --enclave tpm` against
# swtpm (Debian's TPM 2.0 emulator, on its TCP command port), a process
# request through the API, and `acds verify` of its bundle under a policy
# naming that TPM's measurement and attestation key (passes) and under
# another measurement or another key (fails); then a restart on the same
# data directory (the PCR-sealed key unseals again) with attested TLS
# checked by `acds verify --server`. Finally the Go tests that drive
# go-tpm-tools' simulator through the device package and the service.
# Every process it starts is stopped however the step ends.
set -euo pipefail

need=()
command -v swtpm >/dev/null 2>&1 || need+=(swtpm swtpm-tools)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
dpkg -s libssl-dev >/dev/null 2>&1 || need+=(libssl-dev)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

show() {
  echo "-- $1 stdout:"; cat "$work/$1.out" || true
  echo "-- $1 stderr:"; tail -n 50 "$work/$1.err" || true
}

# ready NAME PID PATTERN: wait (up to 60 s) for a line of NAME's stdout
# matching the extended regexp PATTERN.
ready() {
  for _ in $(seq 600); do
    grep -qE "$3" "$work/$1.out" && return 0
    if ! kill -0 "$2" 2>/dev/null; then
      echo "$1 exited before its ready line" >&2; show "$1"; return 1
    fi
    sleep 0.1
  done
  echo "$1 printed no ready line in 60 s" >&2; show "$1"; return 1
}

free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

echo "-- swtpm"
mkdir -p "$work/tpm"
port=""
for _ in $(seq 20); do
  p=$((20000 + RANDOM % 20000))
  if free "$p" && free "$((p + 1))"; then port="$p"; break; fi
done
[ -n "$port" ] || { echo "no free port pair for swtpm" >&2; exit 1; }
swtpm socket --tpm2 --server "type=tcp,port=$port,bindaddr=127.0.0.1" --ctrl "type=tcp,port=$((port + 1)),bindaddr=127.0.0.1" \
  --flags not-need-init,startup-clear --tpmstate "dir=$work/tpm" >"$work/swtpm.out" 2>"$work/swtpm.err" &
pids+=("$!")
for _ in $(seq 100); do free "$port" || break; sleep 0.1; done
if free "$port"; then echo "swtpm does not listen on $port" >&2; show swtpm; exit 1; fi

echo "-- go build ./cmd/acds"
go build -o "$work/acds" ./cmd/acds

# serve NAME ARGS…: start acds serve on the swtpm, wait for its ready line.
serve() {
  local name="$1"; shift
  "$work/acds" serve --enclave tpm --tpm-device "mssim://127.0.0.1:$port" --addr 127.0.0.1:0 \
    --data-dir "$work/data" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=("$!")
  ready "$name" "$!" '^acds .* serving on https?://.*\(enclave tpm; measurement [0-9a-f]{64}\)'
}

echo "-- acds serve --enclave tpm"
serve serve1
url="$(sed -nE 's/^acds .* serving on (https?:\/\/[^ ]+) .*/\1/p' "$work/serve1.out")"
measurement="$(sed -nE 's/.*measurement ([0-9a-f]{64})\).*/\1/p' "$work/serve1.out")"
ak="$work/data/tpm-ak.pem"
[ -s "$ak" ] || { echo "acds serve wrote no $ak" >&2; show serve1; exit 1; }
health="$(curl -sf "$url/v1/health")"
[ "$(jq -r .enclave <<<"$health")" = tpm ] || { echo "health: $health" >&2; exit 1; }

echo "-- POST /v1/process, then the request record"
token="$(curl -sf -X POST "$url/v1/auth/anon" -H 'Content-Type: application/json' \
  -d '{"passphrase":"correct horse battery staple"}' | jq -r .token)"
id="$(curl -sf -X POST "$url/v1/process" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{
  "outputFormat": "fhir_r4",
  "data": {"resourceType": "Bundle", "type": "collection", "entry": [
    {"fullUrl": "urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5f",
     "resource": {"resourceType": "Patient", "id": "p1",
                  "name": [{"family": "Chalmers", "given": ["Peter"]}], "birthDate": "1974-12-25"}}]}}' | jq -r .requestId)"
curl -sf "$url/v1/requests/$id?wait=25" -H "Authorization: Bearer $token" >"$work/record.json"
[ "$(jq -r .status "$work/record.json")" = completed ] || { echo "request: $(cat "$work/record.json")" >&2; show serve1; exit 1; }
jq -r .result.attestationBundle "$work/record.json" >"$work/bundle.b64"
jq .result.output "$work/record.json" >"$work/output.json"

echo "-- acds verify: this TPM's measurement and AK"
"$work/acds" verify "$work/bundle.b64" --output "$work/output.json" --measurement "$measurement" --tpm-ak "$ak"

echo "-- acds verify: another measurement, another AK (both must fail)"
openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl ec -pubout -out "$work/other-ak.pem" 2>/dev/null
for args in "--measurement $(printf '0%.0s' $(seq 64)) --tpm-ak $ak" "--measurement $measurement --tpm-ak $work/other-ak.pem"; do
  set +e
  # shellcheck disable=SC2086
  "$work/acds" verify "$work/bundle.b64" $args >"$work/verify.out" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 1 ]; then echo "acds verify $args exited $rc, want 1 (invalid):" >&2; cat "$work/verify.out" >&2; exit 1; fi
done

echo "-- restart on the same data directory, with attested TLS"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
serve serve2 --tls
url2="$(sed -nE 's/^acds .* serving on (https:\/\/[^ ]+) .*/\1/p' "$work/serve2.out")"
grep -q "measurement $measurement" "$work/serve2.out" || { echo "the measurement changed across a restart" >&2; show serve2; exit 1; }
"$work/acds" verify --server "$url2" --measurement "$measurement" --tpm-ak "$ak"
set +e
"$work/acds" verify --server "$url2" --measurement "$measurement" --tpm-ak "$work/other-ak.pem" >"$work/verify.out" 2>&1
rc=$?
set -e
if [ "$rc" -eq 0 ]; then echo "acds verify --server accepted another AK" >&2; cat "$work/verify.out" >&2; exit 1; fi

echo "-- the device package over the same swtpm (mssim transport, sealing across opens)"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
ACDS_TEST_SWTPM="mssim://127.0.0.1:$port" go test -count=1 -run '^TestSWTPM$' ./attestation/tpm/device/

echo "-- Go tests on go-tpm-tools' TPM simulator (device package, service)"
CGO_ENABLED=1 go test -count=1 -tags tpmsim ./attestation/tpm/device/ ./service/ -run 'Simulator|Sealing|TPM'
echo "-- swtpm step passed"

#!/usr/bin/env bash
# The report page in a real browser: a built `acds serve`
# on loopback processes a FHIR Bundle; `acds verify --html` writes the
# offline report of its bundle; then headless Chromium (Debian's chromium:
# browsers cannot be downloaded here), driven by playwright-core from the
# committed lockfile in .ci/report-page, uploads the genuine bundle (VALID)
# and a tampered one (INVALID) on GET /verify, opens the offline report,
# and fails on any console error, CSP violation or request leaving the
# page. Screenshots stay in the directory the step prints (not committed).
# Run from the repo root; the server is stopped however the step ends.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
need=()
command -v npm >/dev/null 2>&1 || need+=(npm)
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ "${#need[@]}" -gt 0 ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
(cd .ci/report-page && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

work="$(mktemp -d)"
shots="${ACDS_REPORT_SHOTS:-$(mktemp -d /tmp/acds-report-page.XXXXXX)}"
mkdir -p "$shots"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "-- go build ./cmd/acds"
go build -o "$work/acds" ./cmd/acds

echo "-- acds serve"
"$work/acds" serve --addr 127.0.0.1:0 --data-dir "$work/data" >"$work/serve.out" 2>"$work/serve.err" &
pid="$!"
for _ in $(seq 600); do
  grep -qE '^acds .* serving on http://' "$work/serve.out" && break
  kill -0 "$pid" 2>/dev/null || { echo "acds serve exited:" >&2; cat "$work/serve.out" "$work/serve.err" >&2; exit 1; }
  sleep 0.1
done
# The ready line: "acds X.Y.Z serving on http://HOST:PORT (enclave …; measurement …)".
base="$(sed -n 's/^acds .* serving on \(http:\/\/[^ ]*\).*$/\1/p' "$work/serve.out" | head -n 1)"
if [ -z "$base" ]; then echo "no ready line from acds serve:" >&2; cat "$work/serve.out" "$work/serve.err" >&2; exit 1; fi
echo "server $base"

echo "-- a genuine bundle from the server"
node .ci/report-page/prepare.mjs "$base" "$shots"

echo "-- acds verify --html (offline, the same binary's code hash)"
"$work/acds" verify --allow-simulated --output "$shots/output.json" --html "$shots/offline.html" "$shots/bundle.b64" >"$work/verify.out" \
  || { cat "$work/verify.out"; exit 1; }
head -n 1 "$work/verify.out"
set +e
"$work/acds" verify --allow-simulated --html "$shots/offline-tampered.html" "$shots/tampered.b64" >/dev/null
code=$?
set -e
if [ "$code" -ne 1 ]; then echo "acds verify of the tampered bundle: exit $code, want 1" >&2; exit 1; fi

echo "-- headless Chromium on GET /verify"
node .ci/report-page/check.mjs "$base" "$shots" "$shots/offline.html"
echo "report page screenshots: $shots"

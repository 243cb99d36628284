#!/usr/bin/env bash
# The accept path of issue 15 item 9, measured with wrk in one run: durable
# POST /v1/process of a 20 KB FHIR R4 Bundle against a built `acds serve`
# (SQLite, rate limit off, no workers' output needed: the 202 is what is
# timed), and the floor — a net/http handler that only checks the body is
# JSON (internal/loadtest/cmd/jsonfloor) — with the same connections and
# duration, and a second floor: the least a correct acceptance must do
# (jsonfloor --fhir-check --durable: fhir.Check and a durable SQLite insert,
# no authentication, limits or metrics). Prints all three and the ratios.
# Needs wrk (apt-get install wrk).
#   scripts/accept-bench.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-15}"; conns="${2:-32}"
work="$(mktemp -d)"; pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 2; }
go build -o "$work/acds" ./cmd/acds
go build -o "$work/jsonfloor" ./internal/loadtest/cmd/jsonfloor
go run ./internal/loadtest/cmd/bundle20k > "$work/body.json"

wait_line() { # FILE PATTERN
  for _ in $(seq 600); do grep -qE "$2" "$1" && return 0; sleep 0.1; done
  echo "no ready line in $1" >&2; cat "$1" >&2; return 1
}
"$work/acds" serve --addr 127.0.0.1:0 --data-dir "$work/data" --rate-limit 0 --max-queue 0 --workers 1 >"$work/serve.out" 2>"$work/serve.err" & pids+=("$!")
wait_line "$work/serve.out" 'serving on http://'
acds_url="$(sed -n 's/.*serving on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/serve.out")"
"$work/jsonfloor" >"$work/floor.out" 2>&1 & pids+=("$!")
wait_line "$work/floor.out" 'listening on'
floor_url="$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/floor.out")"
# The second floor: the least a correct acceptance must do (fhir.Check of
# the data, a durable insert through the same SQLite store), with none of
# acds serve's authentication, limits or metrics.
"$work/jsonfloor" --fhir-check --durable "$work/cfloor" >"$work/cfloor.out" 2>&1 & pids+=("$!")
wait_line "$work/cfloor.out" 'listening on'
cfloor_url="$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/cfloor.out")"
token="$(curl -s -X POST "$acds_url/v1/auth/anon" -H 'Content-Type: application/json' -d '{}' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')"

cat >"$work/post.lua" <<LUA
local f = io.open("$work/body.json", "rb"); local body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.body = body
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.2f %.2f %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.status))
end
LUA
run() { wrk -t 2 -c "$conns" -d "${secs}s" -s "$work/post.lua" "$1" | sed -n 's/^RESULT //p'; }
read -r f_rps f_p50 f_p99 f_bad < <(run "$floor_url/v1/process")
read -r a_rps a_p50 a_p99 a_bad < <(run "$acds_url/v1/process")
read -r c_rps c_p50 c_p99 c_bad < <(run "$cfloor_url/v1/process")
echo "floor (JSON check only):               $f_rps req/s, p50 ${f_p50} ms, p99 ${f_p99} ms, non-2xx $f_bad"
echo "acds serve (durable):                  $a_rps req/s, p50 ${a_p50} ms, p99 ${a_p99} ms, non-2xx $a_bad"
echo "check floor (fhir.Check + SQLite insert): $c_rps req/s, p50 ${c_p50} ms, p99 ${c_p99} ms, non-2xx $c_bad"
awk -v a="$a_rps" -v f="$f_rps" -v ap="$a_p99" -v fp="$f_p99" 'BEGIN { printf "ratio %.3f (goal >= 0.5), p99 ratio %.2f (goal <= 2)\n", a/f, ap/fp }'
awk -v a="$a_rps" -v c="$c_rps" -v f="$f_rps" 'BEGIN { printf "acds serve / check floor %.3f; check floor / JSON floor %.3f\n", a/c, c/f }'

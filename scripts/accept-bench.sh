#!/usr/bin/env bash
# The accept path, measured with wrk in one run: durable
# POST /v1/process of a 20 KB FHIR R4 Bundle against a built `acds serve`
# (SQLite, rate limit off, no workers' output needed: the 202 is what is
# timed), and the floor — a net/http handler that only checks the body is
# JSON (internal/testrig/loadtest/cmd/jsonfloor) — with the same connections and
# duration, and a second floor: the least a correct acceptance must do
# (jsonfloor --fhir-check --durable: fhir.Check and a durable SQLite insert,
# no authentication, limits or metrics), and a third: the JSON check and
# the durable insert without the FHIR check (jsonfloor --durable): what
# storing every request before its 202 costs alone. Prints each and the
# ratios.
# Needs wrk (apt-get install wrk).
# ROUNDS (default 3) rounds run one after the other; the median ratios are
# printed last, since this machine's rates swing from run to run.
# BASELINE (a git revision, e.g. main or a commit) also builds acds serve
# at that revision and runs it in every round right after the current
# one, against the same JSON floor: the control that tells a change from
# the machine's drift (ratios have moved by a fifth between days with
# the code unchanged).
#   [ROUNDS=N] [BASELINE=REV] scripts/accept-bench.sh [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-15}"; conns="${2:-32}"
work="$(mktemp -d)"; pids=()
base="${BASELINE:-}"
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  if [ -n "$base" ]; then git worktree remove --force "$work/base" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
command -v wrk >/dev/null || { echo "wrk is not installed" >&2; exit 2; }
go build -o "$work/acds" ./cmd/acds
if [ -n "$base" ]; then
  git worktree add --detach "$work/base" "$base" >/dev/null
  (cd "$work/base" && go build -o "$work/acds-base" ./cmd/acds)
fi
go build -o "$work/jsonfloor" ./internal/testrig/loadtest/cmd/jsonfloor
go run ./internal/testrig/loadtest/cmd/bundle20k > "$work/body.json"

wait_line() { # FILE PATTERN
  for _ in $(seq 600); do grep -qE "$2" "$1" && return 0; sleep 0.1; done
  echo "no ready line in $1" >&2; cat "$1" >&2; return 1
}
# cpu_ticks PID: user+system clock ticks the process has used.
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
tick="$(getconf CLK_TCK)"

"$work/jsonfloor" >"$work/floor.out" 2>&1 & floor_pid=$!; pids+=("$floor_pid")
wait_line "$work/floor.out" 'listening on'
floor_url="$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/floor.out")"

cat >"$work/post.lua.in" <<LUA
local f = io.open("$work/body.json", "rb"); local body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.body = body
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer TOKEN"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.2f %.2f %d %d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.errors.status, summary.requests))
end
LUA
# run URL PID: wrk against URL; prints req/s, p50, p99 (ms), non-2xx, and
# the server's CPU µs per request (from /proc, user + system).
run() {
  local c0 c1 out
  c0="$(cpu_ticks "$2")"
  out="$(wrk -t 2 -c "$conns" -d "${secs}s" -s "$work/post.lua" "$1" | sed -n 's/^RESULT //p')"
  c1="$(cpu_ticks "$2")"
  awk -v o="$out" -v c0="$c0" -v c1="$c1" -v t="$tick" 'BEGIN { split(o, f, " "); printf "%s %s %s %s %.0f\n", f[1], f[2], f[3], f[4], (c1-c0)/t/f[5]*1e6 }'
}

# run_acds BIN DIR: starts acds serve BIN on a fresh data directory DIR
# with a session of its own, measures it with run, and stops it; prints
# what run prints.
run_acds() {
  local pid url token
  rm -rf "$2"
  "$1" serve --addr 127.0.0.1:0 --data-dir "$2" --rate-limit 0 --max-queue 0 --workers 1 >"$2.out" 2>"$2.err" & pid=$!
  wait_line "$2.out" 'serving on http://'
  url="$(sed -n 's/.*serving on \(http:\/\/[0-9.:]*\).*/\1/p' "$2.out")"
  token="$(curl -s -X POST "$url/v1/auth/anon" -H 'Content-Type: application/json' -d '{}' | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')"
  sed "s/TOKEN/$token/" "$work/post.lua.in" >"$work/post.lua"
  run "$url/v1/process" "$pid"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

# Each round measures the JSON floor, then a fresh acds serve, which is
# stopped before the check floor runs: its worker would otherwise go on
# processing the backlog the acds run left, on the cores the check floor
# is measured on.
rounds="${ROUNDS:-3}"
: >"$work/ratios"
for round in $(seq "$rounds"); do
  rm -rf "$work/cfloor" "$work/dfloor"
  # The JSON floor ignores the token.
  sed "s/TOKEN/none/" "$work/post.lua.in" >"$work/post.lua"
  read -r f_rps f_p50 f_p99 f_bad f_cpu < <(run "$floor_url/v1/process" "$floor_pid")
  read -r a_rps a_p50 a_p99 a_bad a_cpu < <(run_acds "$work/acds" "$work/data")
  b_rps=0
  if [ -n "$base" ]; then
    read -r b_rps b_p50 b_p99 b_bad b_cpu < <(run_acds "$work/acds-base" "$work/bdata")
  fi
  # The second floor: the least a correct acceptance must do (fhir.Check
  # of the data, a durable insert through the same SQLite store), with
  # none of acds serve's authentication, limits or metrics. It and the
  # durable floor run with the garbage collector set as acds serve sets
  # it for its live heap of a few MB (GOGC about 1600: heap goal live +
  # 64 MiB, cmd/acds tuneGC); the JSON floor keeps Go's default, as the
  # plain handler it stands for would.
  GOGC=1600 "$work/jsonfloor" --fhir-check --durable "$work/cfloor" >"$work/cfloor.out" 2>&1 & cfloor_pid=$!
  wait_line "$work/cfloor.out" 'listening on'
  cfloor_url="$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/cfloor.out")"
  read -r c_rps c_p50 c_p99 c_bad c_cpu < <(run "$cfloor_url/v1/process" "$cfloor_pid")
  kill "$cfloor_pid"; wait "$cfloor_pid" 2>/dev/null || true
  # The durable floor: the JSON check and the same durable insert, no
  # FHIR check: what storing before the 202 costs on its own.
  GOGC=1600 "$work/jsonfloor" --durable "$work/dfloor" >"$work/dfloor.out" 2>&1 & dfloor_pid=$!
  wait_line "$work/dfloor.out" 'listening on'
  dfloor_url="$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$work/dfloor.out")"
  read -r d_rps d_p50 d_p99 d_bad d_cpu < <(run "$dfloor_url/v1/process" "$dfloor_pid")
  kill "$dfloor_pid"; wait "$dfloor_pid" 2>/dev/null || true
  echo "round $round"
  echo "  floor (JSON check only):                 $f_rps req/s, p50 ${f_p50} ms, p99 ${f_p99} ms, non-2xx $f_bad, server CPU ${f_cpu} µs/req"
  echo "  acds serve (durable):                    $a_rps req/s, p50 ${a_p50} ms, p99 ${a_p99} ms, non-2xx $a_bad, server CPU ${a_cpu} µs/req"
  echo "  check floor (fhir.Check + SQLite insert): $c_rps req/s, p50 ${c_p50} ms, p99 ${c_p99} ms, non-2xx $c_bad, server CPU ${c_cpu} µs/req"
  echo "  durable floor (JSON check + SQLite insert): $d_rps req/s, p50 ${d_p50} ms, p99 ${d_p99} ms, non-2xx $d_bad, server CPU ${d_cpu} µs/req"
  if [ -n "$base" ]; then
    echo "  baseline acds serve ($base):            $b_rps req/s, p50 ${b_p50} ms, p99 ${b_p99} ms, non-2xx $b_bad, server CPU ${b_cpu} µs/req"
  fi
  awk -v a="$a_rps" -v f="$f_rps" -v c="$c_rps" -v d="$d_rps" -v ap="$a_p99" -v fp="$f_p99" -v b="$b_rps" -v base="$base" 'BEGIN {
    printf "  ratio %.3f (goal >= 0.5), p99 ratio %.2f (goal <= 2); acds / check floor %.3f; check floor / JSON floor %.3f; durable floor / JSON floor %.3f", a/f, ap/fp, a/c, c/f, d/f
    if (base != "") printf "; baseline ratio %.3f", b/f
    printf "\n"
    printf "%.3f %.2f %.3f %.3f %.3f %.3f\n", a/f, ap/fp, a/c, c/f, d/f, b/f >> "'"$work/ratios"'" }'
done
# med COLUMN: the median of a column of the rounds' figures.
med() { cut -d' ' -f"$1" "$work/ratios" | sort -n | awk '{ v[NR]=$1 } END { print v[int((NR+1)/2)] }'; }
echo "median of $rounds rounds: ratio $(med 1) (goal >= 0.5), p99 ratio $(med 2) (goal <= 2), acds / check floor $(med 3), check floor / JSON floor $(med 4), durable floor / JSON floor $(med 5)"
if [ -n "$base" ]; then
  echo "baseline ($base), same rounds: ratio $(med 6)"
fi

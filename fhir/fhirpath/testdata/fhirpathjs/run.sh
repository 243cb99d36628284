#!/usr/bin/env bash
# Compares the Go FHIRPath engine with fhirpath.js (npm "fhirpath", run by
# node) on the same expressions and the same Synthea bundle, in one run,
# and prints the speed ratio per expression. The two sides are
# interleaved: each of three rounds times node (one second per
# expression) and then the Go benchmarks (go test -count=1), so that load
# on a shared machine hits both sides alike; each side's fastest round
# counts. Needs node and npm (the bundle is the repository's own, in
# testdata/synthea). Run from the repo root:
#   bash fhir/fhirpath/testdata/fhirpathjs/run.sh
set -euo pipefail
here="fhir/fhirpath/testdata/fhirpathjs"
bundle="testdata/synthea/Mary_Lind_ab27d239-7c03-47f1-b3e7-7f16fa50e69a.json"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent fhirpath@5 >/dev/null)
cp "$here/bench.js" "$tmp/"
go test -count=1 -run '^TestBenchExpressionsJSON$' ./fhir/fhirpath/ -args -fhirpath.exprs "$tmp/exprs.json" >/dev/null
# Compile the benchmark binary once, so that every round measures the
# same code and spends no time building.
go test -c -o "$tmp/fhirpath.test" ./fhir/fhirpath/
: > "$tmp/js.txt"
: > "$tmp/go.txt"
for round in 1 2 3; do
  echo "round $round of 3..." >&2
  node "$tmp/bench.js" "$bundle" "$tmp/exprs.json" 1 >> "$tmp/js.txt"
  # The test binary runs in its package directory, as go test would.
  (cd fhir/fhirpath && "$tmp/fhirpath.test" -test.count=1 -test.run '^$' \
    -test.bench '^BenchmarkEvaluate$' -test.benchtime 1s) >> "$tmp/go.txt"
done
# floor ns/op is BenchmarkEvaluate/Floor/<name>, hand-written Go doing the
# least work any implementation must (see floors in floor_test.go), from
# the same rounds.
echo "expression        go ns/op   fhirpath.js ns/op   ratio   floor ns/op"
fastest() { awk -v n="$1" 'index($1, n) == 1 && (m == "" || $3 < m) {m = $3} END {print m}' "$tmp/go.txt"; }
# The names in node's order, once each; a name's node time is its fastest
# round, or "error" if fhirpath.js failed on it.
awk -F '\t' '!($1 in seen) {seen[$1]; print $1}' "$tmp/js.txt" | while read -r name; do
  jsns="$(awk -F '\t' -v n="$name" '$1 == n { if ($2 == "error") e = 1; else if (m == "" || $2 + 0 < m) m = $2 + 0 } END { print (e || m == "") ? "error" : m }' "$tmp/js.txt")"
  gons="$(fastest "BenchmarkEvaluate/$name-")"
  floor="$(fastest "BenchmarkEvaluate/Floor/$name-")"
  if [ "$jsns" = error ] || [ -z "$gons" ]; then
    printf '%-16s %10s %18s %8s %13s\n' "$name" "${gons:-?}" "$jsns" "-" "${floor:-?}"
  else
    awk -v n="$name" -v g="$gons" -v j="$jsns" -v f="${floor:-0}" 'BEGIN { printf "%-16s %10.0f %18.0f %7.1fx %13.0f\n", n, g, j, j / g, f }'
  fi
done

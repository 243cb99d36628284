#!/usr/bin/env bash
# Compares the Go FHIRPath engine with fhirpath.js (npm "fhirpath", run by
# node) on the same expressions and the same Synthea bundle, in one run,
# and prints the speed ratio per expression (each side's fastest of three
# runs, as the machine may be shared). Needs node and npm, and
# ../shared/testdata/synthea beside the repository. Run from the repo root:
#   bash fhir/fhirpath/testdata/fhirpathjs/run.sh
set -euo pipefail
here="fhir/fhirpath/testdata/fhirpathjs"
bundle="$(ls ../shared/testdata/synthea/Mary_Lind_*.json | head -1)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent fhirpath@5 >/dev/null)
cp "$here/bench.js" "$tmp/"
go test -count=1 -run '^TestBenchExpressionsJSON$' ./fhir/fhirpath/ -args -fhirpath.exprs "$tmp/exprs.json" >/dev/null
node "$tmp/bench.js" "$bundle" "$tmp/exprs.json" > "$tmp/js.txt"
go test -count=3 -run '^$' -bench '^BenchmarkEvaluate$' -benchtime 1s ./fhir/fhirpath/ > "$tmp/go.txt"
# floor ns/op is BenchmarkEvaluate/Floor/<name>, hand-written Go doing the
# least work any implementation must (see floor_test.go), from the same run.
echo "expression        go ns/op   fhirpath.js ns/op   ratio   floor ns/op"
fastest() { awk -v n="$1" 'index($1, n) == 1 && (m == "" || $3 < m) {m = $3} END {print m}' "$tmp/go.txt"; }
while IFS=$'\t' read -r name jsns _; do
  # The fastest of the three Go runs, as for node.
  gons="$(fastest "BenchmarkEvaluate/$name-")"
  floor="$(fastest "BenchmarkEvaluate/Floor/$name-")"
  if [ "$jsns" = error ] || [ -z "$gons" ]; then
    printf '%-16s %10s %18s %8s %13s\n' "$name" "${gons:-?}" "$jsns" "-" "${floor:-?}"
  else
    awk -v n="$name" -v g="$gons" -v j="$jsns" -v f="${floor:-0}" 'BEGIN { printf "%-16s %10.0f %18.0f %7.1fx %13.0f\n", n, g, j, j / g, f }'
  fi
done < "$tmp/js.txt"

// Times fhirpath.js (npm "fhirpath") on the expressions and bundle of
// BenchmarkEvaluate, for comparison with the Go engine (see run.sh).
// Usage: node bench.js BUNDLE.json EXPRESSIONS.json [ROUNDS]
// Prints one line per expression: name, ns/op (the fastest of ROUNDS
// rounds of at least a second each, default 3), and the result as JSON.
const fs = require('fs');
const fhirpath = require('fhirpath');
const r4 = require('fhirpath/fhir-context/r4');

const bundle = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const exprs = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const rounds = process.argv[4] ? Number(process.argv[4]) : 3;
for (const { name, expr } of exprs) {
  let fn;
  try {
    fn = fhirpath.compile(expr, r4);
  } catch (e) {
    console.log(`${name}\terror\t${JSON.stringify(String(e.message || e))}`);
    continue;
  }
  let result;
  try {
    result = fn(bundle);
  } catch (e) {
    console.log(`${name}\terror\t${JSON.stringify(String(e.message || e))}`);
    continue;
  }
  // Rounds of at least a second each; the fastest counts (the machine
  // may be shared).
  let best = Infinity;
  for (let round = 0; round < rounds; round++) {
    let n = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0n;
    while (elapsed < 1000000000n) {
      fn(bundle);
      n++;
      elapsed = process.hrtime.bigint() - start;
    }
    best = Math.min(best, Number(elapsed) / n);
  }
  console.log(`${name}\t${best}\t${JSON.stringify(result)}`);
}

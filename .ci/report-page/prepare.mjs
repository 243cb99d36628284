// Gets a genuine attestation bundle from a running `acds serve`: an
// anonymous session, one POST /v1/process of a small FHIR Bundle, a
// long-poll until it completes. Writes OUTDIR/bundle.b64, output.json and
// tampered.b64 (the same bundle with its last byte, in the claims
// signature, flipped).
//
//   node prepare.mjs BASE_URL OUTDIR
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [base, outdir] = process.argv.slice(2);
const timeout = () => AbortSignal.timeout(30_000);

async function call(method, path, body, token) {
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = 'Bearer ' + token;
  const r = await fetch(base + path, { method, headers, body: body && JSON.stringify(body), signal: timeout() });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

const entry = (n, resource) => ({ fullUrl: `urn:uuid:4b1c6a36-2f3c-4f59-9a3e-6c1d3f1a000${n}`, resource });
const glucose = (id, when, value) => ({
  resourceType: 'Observation', id, status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code: '15074-8', display: 'Glucose' }] },
  subject: { reference: 'Patient/p1' }, effectiveDateTime: when,
  valueQuantity: { value, unit: 'mmol/L' },
});
const data = {
  resourceType: 'Bundle', type: 'collection',
  entry: [
    entry(1, { resourceType: 'Patient', id: 'p1', name: [{ family: 'Doe', given: ['Jane'] }] }),
    entry(2, glucose('o1', '2024-01-01', 5.2)),
    entry(3, glucose('o2', '2024-03-01', 6.1)),
  ],
};

const { token } = await call('POST', '/v1/auth/anon', {});
const { requestId } = await call('POST', '/v1/process', { data, outputFormat: 'fhir_r4' }, token);
let rec;
for (let i = 0; i < 6; i++) {
  rec = await call('GET', `/v1/requests/${requestId}?wait=10`, undefined, token);
  if (rec.status !== 'processing') break;
}
if (rec.status !== 'completed') throw new Error(`request ${requestId} ended ${rec.status}: ${JSON.stringify(rec.error)}`);
const bundle = Buffer.from(rec.result.attestationBundle, 'base64');
const tampered = Buffer.from(bundle);
tampered[tampered.length - 1] ^= 1;
writeFileSync(join(outdir, 'bundle.b64'), rec.result.attestationBundle + '\n');
writeFileSync(join(outdir, 'output.json'), JSON.stringify(rec.result.output, null, 2) + '\n');
writeFileSync(join(outdir, 'tampered.b64'), tampered.toString('base64') + '\n');
console.log(`request ${requestId} completed; bundle ${bundle.length} bytes`);

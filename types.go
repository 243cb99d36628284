package acds

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// Request kinds.
const (
	KindFetchAndAttest = "fetch-and-attest"
	KindProcess        = "process"
)

// Request statuses. A request starts StatusProcessing and ends exactly once
// in StatusCompleted or StatusFailed.
const (
	StatusProcessing = "processing"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
)

// Output formats.
const (
	// OutputFHIRR4 is a validated, normalised FHIR R4 collection Bundle with
	// a Provenance resource, in canonical JSON.
	OutputFHIRR4 = "fhir_r4"
	// OutputFHIRR4Deidentified is OutputFHIRR4 de-identified under HIPAA
	// Safe Harbor.
	OutputFHIRR4Deidentified = "fhir_r4_deidentified"
	// OutputFHIRPath (extension, DESIGN §9) is the result of the request's
	// FHIRPath query over the normalised record: a FHIR Parameters
	// resource holding the expression and one result parameter per value.
	OutputFHIRPath = "fhirpath"
	// OutputFHIRR4IPS (extension, DESIGN §9) is an International Patient
	// Summary: a FHIR R4 document Bundle built from the normalised record.
	OutputFHIRR4IPS = "fhir_r4_ips"
)

// OutputFormats returns the output formats that transform a whole record
// into a Bundle of the same entries (fhir_r4, as SPEC shows it, and its
// de-identified form). A request may name more: see SupportedOutputFormats.
func OutputFormats() []string { return []string{OutputFHIRR4, OutputFHIRR4Deidentified} }

// SupportedOutputFormats returns every output format a request may name
// (the server refuses any other with unsupported-output-format):
// OutputFormats, OutputFHIRR4IPS and OutputFHIRPath.
func SupportedOutputFormats() []string {
	return append(OutputFormats(), OutputFHIRR4IPS, OutputFHIRPath)
}

// MaxQueryLen is the longest FHIRPath query a request may carry, in bytes.
const MaxQueryLen = 4096

// Portal system types (DESIGN §6).
const (
	SystemFHIRBasic     = "fhir-basic"     // FHIR server with HTTP Basic auth
	SystemSMARTPassword = "smart-password" // SMART discovery + OAuth2 password grant
	SystemSMARTForm     = "smart-form"     // SMART App Launch driven through the portal's HTML login form
	SystemDemo          = "demo"           // the bundled demo portal
)

// SystemTypes returns the supported portal system types.
func SystemTypes() []string {
	return []string{SystemFHIRBasic, SystemSMARTPassword, SystemSMARTForm, SystemDemo}
}

// Sources of an attested output, as reported by verification.
const (
	SourceMPCTLS = "mpc-tls" // fetched from a portal through a notarized TLS session
	SourceRaw    = "raw"     // submitted directly to POST /v1/process
)

// MinPassphraseLen is the minimum length, in characters, of a recovery passphrase.
const MinPassphraseLen = 12

// AnonRequest is the optional body of POST /v1/auth/anon. A non-empty
// Passphrase (at least MinPassphraseLen characters) enables
// POST /v1/auth/recover for the new pseudonym.
type AnonRequest struct {
	Passphrase string `json:"passphrase,omitempty"`
}

// RecoverRequest is the body of POST /v1/auth/recover.
type RecoverRequest struct {
	Pseudonym  string `json:"pseudonym"`
	Passphrase string `json:"passphrase"`
	// RevokeOthers (extension) revokes every other token of the pseudonym
	// once the new one is issued: the lost token may have been stolen.
	RevokeOthers bool `json:"revokeOthers,omitempty"`
}

// Session is the response of POST /v1/auth/anon (201) and
// POST /v1/auth/recover (200). Token is the bearer token: "acds_" followed
// by 43 base64url characters. It is shown once and never stored by the server.
type Session struct {
	Pseudonym string    `json:"pseudonym"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// FetchAndAttestRequest is the body of POST /v1/fetch-and-attest (SPEC
// §2.2): flat, every SPEC field a string and required. OutputFormat is an
// optional extension; empty means OutputFHIRR4.
//
// The password is redacted when the request is printed or logged (String,
// GoString, LogValue); it is encoded only by MarshalJSON, to send it.
type FetchAndAttestRequest struct {
	SystemType   string `json:"systemType"`             // one of SystemTypes
	PortalURL    string `json:"portalUrl"`              // https base URL of the portal
	Username     string `json:"username"`               // portal login name
	Password     string `json:"password"`               // portal password
	RecordID     string `json:"recordId"`               // the patient id at the portal
	OutputFormat string `json:"outputFormat,omitempty"` // extension: one of SupportedOutputFormats, default OutputFHIRR4
	Query        string `json:"query,omitempty"`        // extension: the FHIRPath query of OutputFHIRPath
	CallbackURL  string `json:"callbackUrl,omitempty"`  // extension: https URL the signed outcome is POSTed to (DESIGN §10)
}

// String describes the request without its credentials.
func (r FetchAndAttestRequest) String() string {
	return fmt.Sprintf("fetch-and-attest{systemType:%q portalUrl:%q recordId:%q outputFormat:%q credentials:[redacted]}",
		r.SystemType, r.PortalURL, r.RecordID, r.OutputFormat)
}

// GoString is String, so %#v does not print the credentials either.
func (r FetchAndAttestRequest) GoString() string { return r.String() }

// LogValue logs the request without its credentials.
func (r FetchAndAttestRequest) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("systemType", r.SystemType), slog.String("portalUrl", r.PortalURL),
		slog.String("recordId", r.RecordID), slog.String("outputFormat", r.OutputFormat),
		slog.String("credentials", "[redacted]"))
}

// ProcessRequest is the body of POST /v1/process (SPEC §2.3): Data is a
// FHIR R4 Bundle (or a single resource) as a JSON object, to process inside
// the enclave; OutputFormat is one of SupportedOutputFormats and required.
//
// Query (extension) is the FHIRPath expression of OutputFHIRPath (at most
// MaxQueryLen bytes), required with it and refused with other formats.
type ProcessRequest struct {
	Data         json.RawMessage `json:"data"`                  // a JSON object
	OutputFormat string          `json:"outputFormat"`          // one of SupportedOutputFormats
	Query        string          `json:"query,omitempty"`       // extension
	CallbackURL  string          `json:"callbackUrl,omitempty"` // extension: https URL the signed outcome is POSTed to (DESIGN §10)
}

// Accepted is the 202 response of POST /v1/fetch-and-attest and
// POST /v1/process. The Location header names the request.
type Accepted struct {
	RequestID string `json:"requestId"`
	Status    string `json:"status"` // always StatusProcessing
	Message   string `json:"message,omitempty"`
}

// Result is the outcome of a completed request.
type Result struct {
	OutputFormat string `json:"outputFormat"`
	// Output is the canonical JSON of the output Bundle, byte for byte as
	// digested: OutputDigest is "sha256:" + hex(SHA-256(Output)).
	Output       json.RawMessage `json:"output"`
	OutputDigest string          `json:"outputDigest"`
	// AttestationBundle is the attestation bundle (CBOR), base64 (std) encoded.
	AttestationBundle string `json:"attestationBundle"`
	// DisclosureKey (extension) is the secret, base64 (std), from which
	// the salts of the output's entry commitment derive: keep it to
	// disclose entries later (`acds disclose`). It is never in the
	// attestation bundle; anyone holding it and the output can disclose
	// any entry. Present for OutputFHIRR4, OutputFHIRR4Deidentified and
	// OutputFHIRR4IPS.
	DisclosureKey string `json:"disclosureKey,omitempty"`
	// Coverage (extension) is what a fetched record was assembled from,
	// as the attestation bundle's claims state it; absent for
	// POST /v1/process.
	Coverage *Coverage `json:"coverage,omitempty"`
}

// Request is the record of GET /v1/requests/{id}.
type Request struct {
	RequestID   string     `json:"requestId"`
	Kind        string     `json:"kind"`   // KindFetchAndAttest or KindProcess
	Status      string     `json:"status"` // StatusProcessing, StatusCompleted or StatusFailed
	CreatedAt   time.Time  `json:"createdAt"`
	UpdatedAt   time.Time  `json:"updatedAt"`
	CompletedAt *time.Time `json:"completedAt,omitempty"` // set once the request ended
	Result      *Result    `json:"result,omitempty"`      // set when completed, until erased
	Error       *Problem   `json:"error,omitempty"`       // set when failed
	// RetainedUntil (extension) is when the server will erase an ended
	// request's input, output and proofs under its retention time; absent
	// while processing, after erasure, and when the server keeps
	// everything.
	RetainedUntil *time.Time `json:"retainedUntil,omitempty"`
	// ErasedAt (extension) is when they were erased. The record stays:
	// kind, status, times, and a failed request's problem.
	ErasedAt *time.Time `json:"erasedAt,omitempty"`
}

// Done reports whether the request has ended (completed or failed).
func (r *Request) Done() bool { return r.Status == StatusCompleted || r.Status == StatusFailed }

// Err returns the problem a failed request ended with, as an error that
// errors.As reaches as *Problem and errors.Is matches against the problem
// classes (ErrPortalAuthFailed, …). It is nil unless Status is
// StatusFailed; a failed record without a stored problem reports
// ProblemInternal rather than nil, so a failure is never silent.
func (r *Request) Err() error {
	if r == nil || r.Status != StatusFailed {
		return nil
	}
	if r.Error == nil {
		return NewProblem(ProblemInternal, "the request failed without a recorded problem")
	}
	return r.Error
}

// RequestList is a page of GET /v1/requests, newest first. NextCursor is ""
// on the last page; otherwise pass it as the cursor query parameter.
type RequestList struct {
	Items      []Request `json:"items"`
	NextCursor string    `json:"nextCursor"`
}

// VerifyRequest is the body of POST /v1/verify (SPEC §2.5).
// AttestationBundle is the attestation bundle, base64 (std or url
// alphabet, padding optional). Output, when
// present, is the output JSON as in Result.Output, or a pretty-printed or
// re-escaped copy of it ([OutputBytes] recovers the digested bytes); the
// verifier then also checks that its digest matches the signed claims.
//
// Disclosure (extension), when present, is a disclosure as `acds
// disclose` writes it (DESIGN §9): the verifier then also checks that
// every entry it shows is under the signed commitment. Its bundle must be
// AttestationBundle.
type VerifyRequest struct {
	AttestationBundle string          `json:"attestationBundle"`
	Output            json.RawMessage `json:"output,omitempty"`     // extension
	Disclosure        json.RawMessage `json:"disclosure,omitempty"` // extension
}

// VerifyDetails are the details of a verification.
type VerifyDetails struct {
	// Each field below is omitted when verification did not establish it
	// (for example, the claims of a bundle whose signature failed).
	Profile      string    `json:"profile,omitempty"`
	Measurement  string    `json:"measurement,omitempty"`
	IssuedAt     time.Time `json:"issuedAt,omitzero"`
	RequestID    string    `json:"requestId,omitempty"`
	OutputDigest string    `json:"outputDigest,omitempty"`
	Source       string    `json:"source,omitempty"` // SourceMPCTLS or SourceRaw
	PortalHost   string    `json:"portalHost,omitempty"`
	// Coverage is what a fetched record was assembled from, as the signed
	// claims state it (DESIGN §4); absent for a raw submission and for a
	// bundle whose claims record none (made before coverage was signed).
	Coverage *Coverage `json:"coverage,omitempty"`
	// Reasons lists every check that failed and every relaxation that applied.
	Reasons []string `json:"reasons"`
	// BundleVersion (extension) is the bundle format version.
	BundleVersion int `json:"bundleVersion,omitempty"`
	// Entries (extension) is the signed commitment to the output's
	// entries, for selective disclosure (DESIGN §9).
	Entries *VerifyEntries `json:"entries,omitempty"`
	// Query (extension) is the attested FHIRPath query of an
	// OutputFHIRPath output.
	Query *VerifyQuery `json:"query,omitempty"`
	// Disclosed (extension) lists the entries a verified disclosure shows,
	// in output order; present only when a disclosure was checked.
	Disclosed []DisclosedEntry `json:"disclosed,omitempty"`
}

// VerifyEntries is the signed commitment to an output's entries.
type VerifyEntries struct {
	Count int    `json:"count"` // number of entries of the output
	Root  string `json:"root"`  // hex of the RFC 6962 tree head
}

// VerifyQuery is an attested query as the signed claims state it.
type VerifyQuery struct {
	Expression   string `json:"expression"`   // the FHIRPath expression
	RecordDigest string `json:"recordDigest"` // "sha256:<hex>" of the normalised record it ran on
}

// DisclosedEntry names one entry of a verified disclosure.
type DisclosedEntry struct {
	Index int    `json:"index"`         // position in the output Bundle
	Ref   string `json:"ref,omitempty"` // "ResourceType/id" of its resource
}

// VerifyResponse is the 200 response of POST /v1/verify. Valid is true only
// when every check that applies passed; for a raw submission MPCTLSVerified
// is false and does not apply.
type VerifyResponse struct {
	Valid            bool          `json:"valid"`
	EnclaveHashMatch bool          `json:"enclaveHashMatch"`
	MPCTLSVerified   bool          `json:"mpcTlsVerified"`
	TEEQuoteVerified bool          `json:"teeQuoteVerified"`
	Details          VerifyDetails `json:"details"`
}

// Health is the response of GET /v1/health.
type Health struct {
	Status  string `json:"status"`  // "healthy"
	Version string `json:"version"` // Version
	Enclave string `json:"enclave"` // the enclave profile, e.g. "sev-snp-sim", or "none"
	Uptime  string `json:"uptime"`  // "Hh MMm", e.g. "3h 07m"
}

// Attestation is the response of GET /v1/attestation: the enclave's boot
// evidence. Byte fields are base64 (std) in JSON.
type Attestation struct {
	Profile     string `json:"profile"`
	Measurement string `json:"measurement"` // hex
	// Evidence is the hardware quote or report whose report data binds the keys and nonce.
	Evidence []byte `json:"evidence"`
	// Certificates are DER certificates that endorse the evidence (e.g. VCEK, ASK, ARK).
	Certificates [][]byte `json:"certificates"`
	SigningKey   []byte   `json:"signingKey"`       // SPKI DER of the per-boot signing key
	TLSKey       []byte   `json:"tlsKey,omitempty"` // SPKI DER of the attested TLS key, when serving TLS
	BootNonce    []byte   `json:"bootNonce"`
	// Boot is the whole boot evidence in its canonical encoding (CBOR for
	// the built-in enclaves), exactly as every attestation bundle embeds it,
	// for offline verification of the server itself.
	Boot []byte `json:"boot,omitempty"`
	// TPMAKPublicKey is, for the tpm profile, the attestation key that
	// signed the evidence, as a PEM public key (DESIGN §3): what a verifier
	// pins with `acds verify --tpm-ak` after checking it out of band.
	TPMAKPublicKey string `json:"tpmAkPublicKey,omitempty"`
	// VerifyPolicy (extension) is what this server's POST /v1/verify
	// trusts, when the server says.
	VerifyPolicy *VerifyPolicy `json:"verifyPolicy,omitempty"`
}

// VerifyPolicy (extension) is the policy a server applies at POST
// /v1/verify: the measurements, roots and keys it trusts, by value or
// fingerprint, and the relaxations it applies.
type VerifyPolicy struct {
	// Measurements are the allowed measurements (hex) per profile.
	Measurements map[string][]string `json:"measurements"`
	// SimulatedRoots are the SHA-256 fingerprints (hex, of the DER) of
	// the trusted simulated roots (sev-snp-sim ARKs).
	SimulatedRoots []string `json:"simulatedRoots,omitempty"`
	// TPMAttestationKeys are the SHA-256 fingerprints (hex, of the PKIX
	// DER) of the pinned TPM attestation keys.
	TPMAttestationKeys []string `json:"tpmAttestationKeys,omitempty"`
	// NotaryKeys are the SHA-256 fingerprints (hex) of the trusted
	// MPC-TLS notary keys (Ed25519).
	NotaryKeys []string `json:"notaryKeys,omitempty"`
	// Replicas is how many replicas' trust anchors, read from the store
	// the replicas share, the policy includes (this server's among them);
	// 0 when it trusts only itself.
	Replicas int `json:"replicas"`
	// Relaxations lists every weakening the policy applies (simulation,
	// trust in what the store holds).
	Relaxations []string `json:"relaxations"`
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/acds-project/acds"
)

// The seams: the server reaches FHIR processing, the enclave, portal
// fetching and offline verification only through these small interfaces,
// so that it never depends on their implementations. Package service wires the
// real ones; server/servertest has fakes for tests.

// Pipeline turns FHIR input bytes into the output of a format inside the
// enclave.
type Pipeline interface {
	// Process validates and transforms input (a FHIR R4 Bundle or resource
	// as JSON) into opts.Format. Invalid FHIR is reported as an
	// *InvalidFHIRError; any other error fails the request as internal.
	Process(ctx context.Context, input []byte, opts ProcessOptions) (*Output, error)
}

// Checker is optionally implemented by a Pipeline to validate input when a
// request is accepted, so that POST /v1/process answers 422 invalid-fhir at
// once instead of accepting a request bound to fail. It should be cheap
// compared with Process.
type Checker interface {
	// Check returns an *InvalidFHIRError when input is not valid FHIR R4.
	Check(ctx context.Context, input []byte) error
}

// ProcessOptions tell a Pipeline what to produce.
type ProcessOptions struct {
	Format      string    // acds.OutputFHIRR4 or acds.OutputFHIRR4Deidentified
	Source      string    // the portal host, or acds.SourceRaw for a direct submission
	Measurement string    // the enclave measurement (hex), recorded in the Provenance
	Now         time.Time // the recorded time
}

// Output is the result of a Pipeline.
type Output struct {
	JSON   []byte // canonical JSON of the output Bundle
	Digest string // "sha256:" + hex(SHA-256(JSON))
}

// InvalidFHIRError reports FHIR input with errors. A Pipeline returns it
// (possibly wrapped); the server answers or fails the request with an
// invalid-fhir problem carrying the OperationOutcome.
type InvalidFHIRError struct {
	Detail           string          // one-line summary, e.g. "3 errors"
	OperationOutcome json.RawMessage // a FHIR OperationOutcome as JSON
}

func (e *InvalidFHIRError) Error() string {
	if e.Detail == "" {
		return "invalid fhir"
	}
	return "invalid fhir: " + e.Detail
}

// Claims are what the enclave signs for one output (DESIGN §4).
type Claims struct {
	RequestID    string
	OutputFormat string
	OutputDigest string // "sha256:<hex>"
	Source       string // acds.SourceRaw or acds.SourceMPCTLS
	IssuedAt     time.Time

	// InputDigest is "sha256:<hex>" of the submitted input (raw source).
	InputDigest string
	// NotaryStatements, RequestLine and Host describe the notarized
	// session(s) of an mpc-tls source.
	NotaryStatements [][]byte
	RequestLine      string
	Host             string
}

// Enclave is the trusted execution environment the server runs in: it
// attests outputs, seals credentials and publishes its boot evidence.
type Enclave interface {
	// Profile is the evidence profile: "sev-snp", "tdx", "tpm" or "sev-snp-sim".
	Profile() string
	// Measurement is the code hash (hex) that verifiers compare with the
	// published reference values.
	Measurement() string
	// Attest returns the attestation bundle (CBOR) for one output.
	Attest(ctx context.Context, c Claims) ([]byte, error)
	// Seal encrypts plaintext under the enclave sealing key, bound to ad.
	Seal(plaintext, ad []byte) ([]byte, error)
	// Unseal reverses Seal; it fails when sealed or ad were altered.
	Unseal(sealed, ad []byte) ([]byte, error)
	// BootEvidence is the evidence served at GET /v1/attestation.
	BootEvidence() acds.Attestation
}

// FetchRequest is what a Fetcher needs to fetch one patient record.
type FetchRequest struct {
	SystemType  string
	PortalURL   string
	RecordID    string
	Credentials acds.Credentials
}

// Fetched is a record fetched through a notarized TLS session.
type Fetched struct {
	FHIR             []byte   // the record as FHIR JSON (a Bundle)
	Host             string   // the portal host
	RequestLine      string   // e.g. "GET /fhir/Patient/123/$everything HTTP/1.1"
	NotaryStatements [][]byte // one signed notary statement per TLS session
}

// Fetcher logs in to a clinical portal and fetches a record through
// MPC-TLS. Errors must never contain the credentials; the server also
// redacts them defensively.
type Fetcher interface {
	// Admit decides, without network access and quickly, whether r could
	// be fetched at all, by the same rules Fetch applies before it
	// connects: the portal URL (scheme, literal addresses in every
	// notation, names such as localhost) and the recordId syntax. POST
	// /v1/fetch-and-attest calls it before accepting, so a request that
	// Fetch would refuse without asking the portal is answered at once
	// instead of being accepted and failed later. It returns nil to
	// admit; otherwise an error wrapping ErrForbiddenPortal (403
	// forbidden-portal, naming portalUrl) or a *FetchError whose Code is
	// the answer's problem code and whose Field, when set, is the request
	// field at fault (e.g. invalid-request on recordId). Any other error
	// is answered with 500 internal.
	Admit(r FetchRequest) error
	// Fetch logs in and fetches the record of r. It is called only for
	// requests Admit admitted.
	Fetch(ctx context.Context, r FetchRequest) (*Fetched, error)
}

// ErrForbiddenPortal is returned (wrapped) by a Fetcher that refuses the
// portal address, e.g. a private address: Admit's refusal is answered
// with 403 forbidden-portal, Fetch's fails the request with it.
var ErrForbiddenPortal = errors.New("forbidden portal")

// FetchError is a Fetcher failure with the problem code the request is
// answered or fails with (one of the acds.Problem* codes, e.g.
// acds.ProblemPortalAuthFailed). A Fetch error that is neither a
// FetchError nor ErrForbiddenPortal fails the request with
// portal-unavailable.
type FetchError struct {
	Code   string // an acds.Problem* code
	Field  string // the request field at fault, e.g. "recordId"; empty when none is
	Detail string // what happened, without credentials
}

func (e *FetchError) Error() string { return e.Code + ": " + e.Detail }

// ErrMalformedBundle is returned (wrapped) by a Verifier when the bytes are
// not an attestation bundle; POST /v1/verify answers 400.
var ErrMalformedBundle = errors.New("malformed attestation bundle")

// Verifier checks an attestation bundle offline for POST /v1/verify.
type Verifier interface {
	// Verify checks bundle and, when output is not nil, that the output's
	// digest is the one the bundle attests. A bundle that decodes but
	// fails checks is a response with Valid false, not an error.
	Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error)
}

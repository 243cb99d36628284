package server

import (
	"context"
	"errors"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/portal"
)

// The seams: the server reaches FHIR processing, the enclave, portal
// fetching and offline verification through these small interfaces, in
// the domain packages' own types (fhir.Options and fhir.Output,
// attestation.Claims, portal.Request and portal.Result), so that a test
// or an embedder can put its own implementation behind any of them.
// Adapters for the real implementations are in adapters.go;
// server/servertest has fakes for tests.

// Pipeline turns FHIR input bytes into the output of a format inside the
// enclave. FHIRPipeline is the one of package fhir.
type Pipeline interface {
	// Process validates and transforms input (a FHIR R4 Bundle or resource
	// as JSON) into opts.Format; the server sets Format, Source,
	// Measurement and Now. Invalid FHIR is reported as a *fhir.InvalidError
	// (possibly wrapped); any other error fails the request as internal.
	Process(ctx context.Context, input []byte, opts fhir.Options) (*fhir.Output, error)
}

// Checker is optionally implemented by a Pipeline to validate input when a
// request is accepted, for the output format asked, so that POST
// /v1/process answers 422 invalid-fhir at once instead of accepting a
// request bound to fail: input that is not valid FHIR R4, or that cannot
// give the format (an International Patient Summary of a record without a
// Patient). It should be cheap compared with Process.
type Checker interface {
	// Check returns a *fhir.InvalidError when input is not valid FHIR R4
	// or when Process would refuse it for format.
	Check(ctx context.Context, input []byte, format string) error
}

// syntaxChecker is a Checker whose Check refuses every input that is not
// well-formed JSON. Only the server's own pipeline is one (the method is
// unexported): POST /v1/process leaves the syntax of the data to it.
type syntaxChecker interface {
	Checker
	refusesMalformedJSON()
}

// Enclave is the trusted execution environment the server runs in: it
// attests outputs, seals credentials and publishes its boot evidence.
// AttestationEnclave is the one of an *attestation.Enclave.
type Enclave interface {
	// Profile is the evidence profile: "sev-snp", "tdx", "tpm" or "sev-snp-sim".
	Profile() string
	// Measurement is the code hash (hex) that verifiers compare with the
	// published reference values.
	Measurement() string
	// Attest returns the attestation bundle (CBOR) for one output:
	// claims, and for an mpc-tls source the notary statements of its
	// sessions, one per claims.Source.Sessions entry and in that order
	// (see attestation.Enclave.Attest).
	Attest(ctx context.Context, claims attestation.Claims, notaryStatements [][]byte) ([]byte, error)
	// Seal encrypts plaintext under the enclave sealing key, bound to ad.
	Seal(plaintext, ad []byte) ([]byte, error)
	// Unseal reverses Seal; it fails when sealed or ad were altered.
	Unseal(sealed, ad []byte) ([]byte, error)
	// BootEvidence is the evidence served at GET /v1/attestation.
	BootEvidence() acds.Attestation
}

// Fetcher logs in to a clinical portal and fetches a record through
// MPC-TLS. *portal.Fetcher is one. Its errors are those of package portal:
// they wrap one of portal's error classes, which portal.ProblemCode maps
// to the problem code a request is answered or fails with. An error of
// Admit that wraps none is internal; one of Fetch, portal-unavailable. Errors must never contain the credentials; the
// server also applies portal.Redact, the one redaction rule, to them.
type Fetcher interface {
	// Admit decides, without network access and quickly, whether r could
	// be fetched at all, by the same rules Fetch applies before it
	// connects (see portal.Fetcher.Admit). POST /v1/fetch-and-attest
	// calls it before accepting, so a request that Fetch would refuse
	// without asking the portal is answered at once instead of being
	// accepted and failed later. It returns nil to admit.
	Admit(r portal.Request) error
	// Fetch logs in and fetches the record of r. It is called only for
	// requests Admit admitted.
	Fetch(ctx context.Context, r portal.Request) (*portal.Result, error)
}

// ErrMalformedBundle is returned (wrapped) by a Verifier when the bytes are
// not an attestation bundle; POST /v1/verify answers 400.
var ErrMalformedBundle = errors.New("malformed attestation bundle")

// Verifier checks an attestation bundle offline for POST /v1/verify.
// Verify is the one of package verify.
type Verifier interface {
	// Verify checks bundle and, when output is not nil, that the output's
	// digest is the one the bundle attests. A bundle that decodes but
	// fails checks is a response with Valid false, not an error.
	Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error)
}

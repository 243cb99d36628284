package service

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/verify"
)

// The adapters that plug the real implementations into the server's seams
// (server.Pipeline, server.Enclave, server.Verifier, server.Fetcher).

// fhirPipeline is the server.Pipeline (and server.Checker) of package
// fhir. key is the installation's de-identification key.
type fhirPipeline struct{ key []byte }

func (p fhirPipeline) Check(ctx context.Context, input []byte) error {
	// fhir.Check accepts exactly what fhir.Process will, and flags
	// content of other FHIR versions as not R4.
	err := fhir.Check(input, fhir.Options{})
	var inv *fhir.InvalidError
	if errors.As(err, &inv) {
		return invalidFHIR(inv)
	}
	return err
}

func (p fhirPipeline) Process(ctx context.Context, input []byte, o server.ProcessOptions) (*server.Output, error) {
	out, err := fhir.Process(input, fhir.Options{Format: o.Format, Source: o.Source, Measurement: o.Measurement, Now: o.Now, DeidentKey: p.key})
	var inv *fhir.InvalidError
	if errors.As(err, &inv) {
		return nil, invalidFHIR(inv)
	}
	if err != nil {
		return nil, err
	}
	return &server.Output{JSON: out.JSON, Digest: out.Digest}, nil
}

// invalidFHIR is the server's invalid-fhir error for e, carrying its
// OperationOutcome.
func invalidFHIR(e *fhir.InvalidError) error {
	oo, err := e.Outcome.MarshalJSON()
	if err != nil {
		oo = nil
	}
	n := e.Outcome.ErrorCount()
	detail := fmt.Sprintf("%d errors", n)
	if n == 1 {
		detail = "1 error"
	}
	if e.NotR4 {
		detail += " (the content is not FHIR R4)"
	}
	return &server.InvalidFHIRError{Detail: detail, OperationOutcome: oo}
}

// enclaveSeam is the server.Enclave of an attestation.Enclave. notaryKey,
// when set, is the in-process notary's key, named in the claims of
// mpc-tls outputs (verifiers trust it only when their policy says so).
type enclaveSeam struct {
	e         *attestation.Enclave
	notaryKey ed25519.PublicKey
}

func (s enclaveSeam) Profile() string                     { return s.e.Profile() }
func (s enclaveSeam) Measurement() string                 { return hex.EncodeToString(s.e.Measurement()) }
func (s enclaveSeam) Seal(p, ad []byte) ([]byte, error)   { return s.e.Seal(p, ad) }
func (s enclaveSeam) Unseal(c, ad []byte) ([]byte, error) { return s.e.Open(c, ad) }

func (s enclaveSeam) Attest(ctx context.Context, c server.Claims) ([]byte, error) {
	claims := attestation.Claims{RequestID: c.RequestID, OutputFormat: c.OutputFormat, OutputDigest: c.OutputDigest,
		IssuedAt: c.IssuedAt, Source: attestation.Source{Kind: c.Source, InputDigest: c.InputDigest}}
	for range c.NotaryStatements {
		claims.Source.Sessions = append(claims.Source.Sessions, attestation.Session{RequestLine: c.RequestLine, Host: c.Host})
	}
	if c.Source == acds.SourceMPCTLS && len(s.notaryKey) != 0 {
		claims.NotaryKey = s.notaryKey
	}
	return s.e.Attest(ctx, claims, c.NotaryStatements)
}

func (s enclaveSeam) BootEvidence() acds.Attestation {
	b := s.e.BootEvidence()
	a := acds.Attestation{Profile: b.Profile, Measurement: hex.EncodeToString(s.e.Measurement()),
		Evidence: b.Evidence, Certificates: [][]byte{}, SigningKey: b.SigningKey, TLSKey: b.TLSKey, BootNonce: b.Nonce,
		Boot: s.e.MarshalBootEvidence()}
	if ev, err := sevsnp.ParseEvidence(b.Evidence); err == nil {
		for _, c := range [][]byte{ev.VCEK, ev.ASK, ev.ARK} {
			if len(c) > 0 {
				a.Certificates = append(a.Certificates, c)
			}
		}
	}
	return a
}

// verifierSeam is the server.Verifier of package verify, trusting this
// server's own enclave (its measurement and, for the simulated profile,
// its installation's root) and the notary keys the service trusts. For
// trust that does not depend on the server, verify offline.
type verifierSeam struct{ v *verify.Verifier }

// trustPolicy is the policy of POST /v1/verify: e's measurement (and, when
// simulated, its installation's root) and notaryKeys.
func trustPolicy(e *attestation.Enclave, notaryKeys []ed25519.PublicKey) (verify.Policy, error) {
	p, err := verify.TrustEnclave(verify.Policy{NotaryKeys: notaryKeys}, e.BootEvidence(), e.Measurement())
	if err != nil {
		return verify.Policy{}, fmt.Errorf("verifier policy: %w", err)
	}
	return p, nil
}

func (s verifierSeam) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	var (
		r   *verify.Result
		err error
	)
	if output != nil {
		r, err = s.v.VerifyOutput(bundle, output)
	} else {
		r, err = s.v.Verify(bundle)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", server.ErrMalformedBundle, err)
	}
	resp := r.Response()
	return &resp, nil
}

// fetcherSeam is the server.Fetcher of package portal.
type fetcherSeam struct{ f *portal.Fetcher }

func portalRequest(r server.FetchRequest) portal.Request {
	return portal.Request{SystemType: r.SystemType, PortalURL: r.PortalURL, RecordID: r.RecordID,
		Credentials: portal.Credentials{Username: r.Credentials.Username, Password: r.Credentials.Password}}
}

// Admit is the portal Fetcher's Admit, the rules its Fetch applies
// before connecting (the guard's URL check with the operator's
// AllowPrivatePortals, the recordId syntax), with its refusals in the
// server's terms: forbidden-portal on portalUrl, invalid-request on
// recordId, and the problem code of any other refusal.
func (s fetcherSeam) Admit(r server.FetchRequest) error {
	err := s.f.Admit(portalRequest(r))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, portal.ErrForbidden):
		return &server.FetchError{Code: portal.ProblemForbiddenPortal, Field: "portalUrl", Detail: err.Error()}
	case errors.Is(err, portal.ErrInvalidRecordID):
		return &server.FetchError{Code: portal.ProblemInvalidRequest, Field: "recordId", Detail: portal.ErrInvalidRecordID.Error()}
	case errors.Is(err, portal.ErrUnsupportedSystemType):
		return &server.FetchError{Code: portal.ProblemUnsupportedType, Field: "systemType", Detail: err.Error()}
	}
	return &server.FetchError{Code: portal.ProblemCode(err), Detail: err.Error()}
}

func (s fetcherSeam) Fetch(ctx context.Context, r server.FetchRequest) (*server.Fetched, error) {
	res, err := s.f.Fetch(ctx, portalRequest(r))
	if err != nil {
		// portal errors never contain the credentials; the server redacts again.
		return nil, &server.FetchError{Code: portal.ProblemCode(err), Detail: err.Error()}
	}
	return &server.Fetched{FHIR: res.FHIR, Host: res.Host, RequestLine: res.RequestLine, NotaryStatements: res.NotaryStatements}, nil
}

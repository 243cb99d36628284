package server

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/tpm"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/verify"
)

// The seams' real implementations: package fhir's pipeline, an
// *attestation.Enclave and package verify. (*portal.Fetcher is a Fetcher
// as it is.)

// FHIRPipeline is the Pipeline (and Checker) of package
// fhir. DeidentKey is the installation's de-identification key
// (fhir.Options.DeidentKey), required for the de-identified format.
type FHIRPipeline struct{ DeidentKey []byte }

// Check is fhir.Check for format: it accepts exactly what fhir.Process
// will for that format (an International Patient Summary also needs a
// Patient), and flags content of other FHIR versions as not R4.
func (p FHIRPipeline) Check(ctx context.Context, input []byte, format string) error {
	return fhir.Check(input, fhir.Options{Format: format})
}

// refusesMalformedJSON marks FHIRPipeline a syntaxChecker: fhir.Check
// decodes its input with package r4's strict decoder, which refuses all
// malformed JSON (FuzzDelimitedData checks it against jsonscan).
func (FHIRPipeline) refusesMalformedJSON() {}

// Process is fhir.Process with p's de-identification key.
func (p FHIRPipeline) Process(ctx context.Context, input []byte, o fhir.Options) (*fhir.Output, error) {
	o.DeidentKey = p.DeidentKey
	return fhir.Process(input, o)
}

// AttestationEnclave returns the Enclave of e. notaryKey, when set, is the
// in-process notary's key, named in the claims of mpc-tls outputs
// (verifiers trust it only when their policy says so).
func AttestationEnclave(e *attestation.Enclave, notaryKey ed25519.PublicKey) Enclave {
	return attestationEnclave{e: e, notaryKey: notaryKey}
}

type attestationEnclave struct {
	e         *attestation.Enclave
	notaryKey ed25519.PublicKey
}

func (s attestationEnclave) Profile() string                     { return s.e.Profile() }
func (s attestationEnclave) Measurement() string                 { return hex.EncodeToString(s.e.Measurement()) }
func (s attestationEnclave) Seal(p, ad []byte) ([]byte, error)   { return s.e.Seal(p, ad) }
func (s attestationEnclave) Unseal(c, ad []byte) ([]byte, error) { return s.e.Open(c, ad) }

// ClaimAffinity is the id of the enclave's sealing key (see affinity).
func (s attestationEnclave) ClaimAffinity() string {
	return "sealing-key:" + hex.EncodeToString(s.e.SealingKeyID())
}

// affinity is the claim affinity (store.Request.Affinity) of this server's
// requests with sealed credentials: what the Enclave's ClaimAffinity
// method returns when it has one (AttestationEnclave's: the id of its
// sealing key; package service names the replica instead), else "" (any
// worker). Replicas sharing a store thus claim only the fetches they
// sealed; a fetch whose replica is gone is freed when its credentials are
// erased (CredentialTTL) and then fails as unavailable.
func (s *Server) affinity() string {
	if a, ok := s.cfg.Enclave.(interface{ ClaimAffinity() string }); ok {
		return a.ClaimAffinity()
	}
	return ""
}

func (s attestationEnclave) Attest(ctx context.Context, c attestation.Claims, statements [][]byte) ([]byte, error) {
	if c.Source.Kind == acds.SourceMPCTLS && len(s.notaryKey) != 0 {
		c.NotaryKey = s.notaryKey
	}
	return s.e.Attest(ctx, c, statements)
}

func (s attestationEnclave) BootEvidence() acds.Attestation {
	b := s.e.BootEvidence()
	a := acds.Attestation{Profile: b.Profile, Measurement: hex.EncodeToString(s.e.Measurement()),
		Evidence: b.Evidence, Certificates: [][]byte{}, SigningKey: b.SigningKey, TLSKey: b.TLSKey, BootNonce: b.Nonce,
		Boot: s.e.MarshalBootEvidence()}
	switch b.Profile {
	case attestation.ProfileSEVSNP, attestation.ProfileSEVSNPSim:
		if ev, err := sevsnp.ParseEvidence(b.Evidence); err == nil {
			for _, c := range [][]byte{ev.VCEK, ev.ASK, ev.ARK} {
				if len(c) > 0 {
					a.Certificates = append(a.Certificates, c)
				}
			}
		}
	case attestation.ProfileTPM:
		if ak, cert, err := tpm.ParseAK(b.Evidence); err == nil {
			if der, err := x509.MarshalPKIXPublicKey(ak); err == nil {
				a.TPMAKPublicKey = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
			}
			if cert != nil {
				a.Certificates = append(a.Certificates, cert)
			}
		}
	}
	return a
}

// Verify returns the Verifier of v: POST /v1/verify checks bundles with
// v's policy.
func Verify(v *verify.Verifier) Verifier { return verifier{v} }

type verifier struct{ v *verify.Verifier }

func (s verifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
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
		return nil, fmt.Errorf("%w: %w", ErrMalformedBundle, err)
	}
	resp := r.Response()
	return &resp, nil
}

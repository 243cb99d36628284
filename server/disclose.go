package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/disclosure"
)

// commitEntries commits to the entries of a Bundle output for selective
// disclosure (DESIGN §9): a fresh random key, from which every entry's salt
// derives, and the RFC 6962 root over the salted entries. The key goes to
// the requester in the result (acds.Result.DisclosureKey), stored with the
// output and erased with it; the root goes into the signed claims. Formats
// whose output is not a Bundle of record entries, and a Bundle without
// entries, get no commitment. entries are the output's entries as the
// Pipeline's encoder reports them (fhir.Output.Entries), which spares
// scanning output for them; when nil, output is scanned.
func commitEntries(format string, output []byte, entries [][]byte) (*attestation.EntryCommitment, string, error) {
	if format != acds.OutputFHIRR4 && format != acds.OutputFHIRR4Deidentified && format != acds.OutputFHIRR4IPS {
		return nil, "", nil
	}
	key := make([]byte, disclosure.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, "", fmt.Errorf("disclosure key: %w", err)
	}
	var c disclosure.Commitment
	var err error
	if entries != nil {
		c, err = disclosure.CommitEntries(key, entries)
	} else {
		c, err = disclosure.Commit(key, output)
	}
	if errors.Is(err, disclosure.ErrNoEntries) {
		return nil, "", nil // nothing to disclose
	}
	if err != nil {
		return nil, "", err
	}
	return &attestation.EntryCommitment{Root: c.Root[:], Count: c.Count}, base64.StdEncoding.EncodeToString(key), nil
}

// DisclosureVerifier is implemented by a Verifier that also checks
// disclosures (DESIGN §9) for POST /v1/verify's extension field
// "disclosure"; Verify's is. A server whose Verifier lacks it answers such
// a request 503 unavailable rather than ignoring the field.
type DisclosureVerifier interface {
	// VerifyDisclosure checks a disclosure's JSON: its attestation bundle
	// as Verify does, and every disclosed entry against the signed
	// commitment. A disclosure that parses but fails checks is a response
	// with Valid false; bytes that are not a disclosure are an error
	// wrapping ErrMalformedBundle.
	VerifyDisclosure(ctx context.Context, disclosure []byte) (*acds.VerifyResponse, error)
}

// VerifyDisclosure implements DisclosureVerifier with package verify.
func (s verifier) VerifyDisclosure(ctx context.Context, data []byte) (*acds.VerifyResponse, error) {
	r, err := s.v.VerifyDisclosure(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedBundle, err)
	}
	resp := r.Response()
	return &resp, nil
}

// verifyDisclosure answers POST /v1/verify for a request with a
// disclosure: bundle is the decoded attestationBundle, which must be the
// bundle the disclosure carries.
func (s *Server) verifyDisclosure(w http.ResponseWriter, r *http.Request, bundle []byte, raw json.RawMessage, hasOutput bool) {
	if hasOutput {
		writeProblem(w, fieldProblem("disclosure", "give output or disclosure, not both: a disclosure stands for the output it does not show"))
		return
	}
	d, err := disclosure.Parse(raw)
	if err != nil {
		writeProblem(w, fieldProblem("disclosure", "not a disclosure: "+err.Error()))
		return
	}
	if carried, err := d.Bundle(); err != nil || !bytes.Equal(carried, bundle) {
		writeProblem(w, fieldProblem("disclosure", "its attestationBundle is not the request's attestationBundle"))
		return
	}
	dv, ok := s.cfg.Verifier.(DisclosureVerifier)
	if !ok {
		writeProblem(w, acds.NewProblem(acds.ProblemUnavailable, "this server's verifier does not check disclosures; use `acds verify --disclosure` offline"))
		return
	}
	res, err := dv.VerifyDisclosure(r.Context(), raw)
	if errors.Is(err, ErrMalformedBundle) {
		writeProblem(w, fieldProblem("disclosure", err.Error()))
		return
	}
	if err != nil {
		s.log.Error("disclosure verification failed", "err", err)
		writeProblem(w, acds.NewProblem(acds.ProblemInternal, "verification failed unexpectedly"))
		return
	}
	if res.Details.Reasons == nil {
		res.Details.Reasons = []string{}
	}
	writeJSON(w, http.StatusOK, res)
}

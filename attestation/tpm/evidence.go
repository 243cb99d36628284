package tpm

import (
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation"
)

// Verifier is the attestation.EvidenceVerifier of TPM attestations: Verify
// under the Options given to NewVerifier. It is safe for concurrent use.
type Verifier struct {
	opts Options
}

var _ attestation.EvidenceVerifier = (*Verifier)(nil)

// NewVerifier returns a verifier with opts' trust (pinned AKs or AK
// certificate roots) and PCR selection (see Options). opts.Now is not
// used: each verification gives its time.
func NewVerifier(opts Options) *Verifier {
	opts.Now = nil
	return &Verifier{opts: opts}
}

// VerifyEvidence checks an attestation with Verify at o.Now, with
// o.ReportData as the quote's nonce (required: a TPM quote binds its
// qualifying data, so there is nothing to return without it; a mismatch
// wraps attestation.ErrReportData). A TPM has no debug mode: o.AllowDebug
// does not apply. NotBefore and NotAfter are the AK chain's window, zero
// for a pinned AK.
func (v *Verifier) VerifyEvidence(att []byte, o attestation.EvidenceOptions) (*attestation.VerifiedEvidence, error) {
	if o.ReportData == nil {
		return nil, fmt.Errorf("tpm: %w: the report data to check the quote's nonce against is required", attestation.ErrReportData)
	}
	opts := v.opts
	if !o.Now.IsZero() {
		at := o.Now
		opts.Now = func() time.Time { return at }
	}
	ev, err := Verify(att, o.ReportData[:], opts)
	if errors.Is(err, ErrNonce) {
		return nil, fmt.Errorf("%w: %w", attestation.ErrReportData, err)
	}
	if err != nil {
		return nil, err
	}
	return &attestation.VerifiedEvidence{Measurement: ev.Measurement, ReportData: *o.ReportData,
		NotBefore: ev.NotBefore, NotAfter: ev.NotAfter}, nil
}

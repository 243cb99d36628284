package tdx

import (
	"bytes"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation"
)

// Verifier is the attestation.EvidenceVerifier of TDX quotes: Verify then
// Validate under the Options given to NewVerifier. It is safe for
// concurrent use.
type Verifier struct {
	opts Options
}

var _ attestation.EvidenceVerifier = (*Verifier)(nil)

// NewVerifier returns a verifier with opts' roots and collateral (see
// Options for their zero values). opts.Now is not used: each verification
// gives its time.
func NewVerifier(opts Options) *Verifier {
	opts.Now = nil
	return &Verifier{opts: opts}
}

// VerifyEvidence checks a raw quote with Verify at o.Now, then with
// Validate: the report data o.ReportData (a mismatch wraps
// attestation.ErrReportData), debug only with o.AllowDebug, and the TCB
// status when collateral let it be evaluated. A TCB not evaluated is a
// relaxation of the result. NotBefore and NotAfter are the PCK chain's
// window; collateral windows are not included.
func (v *Verifier) VerifyEvidence(quote []byte, o attestation.EvidenceOptions) (*attestation.VerifiedEvidence, error) {
	opts := v.opts
	if !o.Now.IsZero() {
		at := o.Now
		opts.Now = func() time.Time { return at }
	}
	ev, err := Verify(quote, opts)
	if err != nil {
		return nil, err
	}
	if o.ReportData != nil && !bytes.Equal(ev.ReportData[:], o.ReportData[:]) {
		return nil, fmt.Errorf("tdx: %w: REPORTDATA %x", attestation.ErrReportData, ev.ReportData)
	}
	if err := Validate(ev, Policy{AllowDebug: o.AllowDebug}); err != nil {
		return nil, err
	}
	out := &attestation.VerifiedEvidence{Measurement: ev.Measurement, ReportData: ev.ReportData, Debug: ev.Debug,
		NotBefore: ev.NotBefore, NotAfter: ev.NotAfter}
	if !ev.TCB.Evaluated {
		out.Relaxations = append(out.Relaxations, "TDX TCB not evaluated: the policy supplies no collateral")
	}
	return out, nil
}

package sevsnp

import (
	"fmt"

	"github.com/acds-project/acds/attestation"
	"github.com/google/go-sev-guest/abi"
)

// Evidence is the SEV-SNP evidence carried in a bundle.
type Evidence struct {
	// Report is the raw ATTESTATION_REPORT (abi.ReportSize bytes).
	Report []byte
	// VCEK is the DER certificate of the chip key that signed Report.
	VCEK []byte
	// ASK and ARK are the DER intermediate and root certificates. Hardware
	// evidence leaves them empty: verifiers use AMD's roots. The simulated
	// profile carries its per-installation chain here.
	ASK []byte
	ARK []byte
}

type wireEvidence struct {
	Report []byte `cbor:"1,keyasint"`
	VCEK   []byte `cbor:"2,keyasint"`
	ASK    []byte `cbor:"3,keyasint,omitempty"`
	ARK    []byte `cbor:"4,keyasint,omitempty"`
}

const (
	maxCertSize     = 8 << 10
	maxEvidenceSize = 32 << 10 // report + three certificates, with room
)

// Marshal returns the deterministic CBOR encoding of e.
func (e *Evidence) Marshal() ([]byte, error) {
	w := wireEvidence(*e)
	if err := w.check(); err != nil {
		return nil, err
	}
	return attestation.MarshalDeterministic(w)
}

// ParseEvidence decodes SEV-SNP evidence strictly. It checks sizes only.
func ParseEvidence(b []byte) (*Evidence, error) {
	var w wireEvidence
	if err := attestation.UnmarshalStrict(b, &w, maxEvidenceSize, "sev-snp evidence"); err != nil {
		return nil, err
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	e := Evidence(w)
	return &e, nil
}

func (w *wireEvidence) check() error {
	bad := func(field, reason string) error {
		return &attestation.FieldError{Struct: "sev-snp evidence", Field: field, Reason: reason, Err: attestation.ErrMalformed}
	}
	if len(w.Report) != abi.ReportSize {
		return bad("report", fmt.Sprintf("%d bytes, want %d", len(w.Report), abi.ReportSize))
	}
	if len(w.VCEK) == 0 || len(w.VCEK) > maxCertSize {
		return bad("vcek", "missing or too large")
	}
	if len(w.ASK) > maxCertSize || len(w.ARK) > maxCertSize {
		return bad("ask/ark", "too large")
	}
	if (len(w.ASK) == 0) != (len(w.ARK) == 0) {
		return bad("ask/ark", "either both or neither")
	}
	return nil
}

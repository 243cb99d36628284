package attestation

import (
	"crypto/x509"
	"errors"
	"time"
)

// ErrReportData marks evidence that verifies but does not carry the report
// data it was asked to carry (so it does not bind the boot keys and nonce).
// Every evidence kind's mismatch wraps it.
var ErrReportData = errors.New("attestation: evidence does not carry the expected report data")

// EvidenceVerifier is the one shape of the evidence kinds: packages
// sevsnp, tdx and tpm each have a Verifier, made with that kind's trust
// anchors and kind-specific policy, that implements it.
//
// VerifyEvidence checks the raw evidence of its kind (what
// BootEvidence.Evidence holds) offline: signatures up to the verifier's
// roots with certificates valid at o.Now, that the evidence carries
// o.ReportData, and o.AllowDebug; and returns what the evidence attests.
// It does not judge the measurement: comparing it with reference values is
// the caller's policy. An error means the evidence does not verify; it
// wraps ErrReportData when only the report data differs.
type EvidenceVerifier interface {
	VerifyEvidence(evidence []byte, o EvidenceOptions) (*VerifiedEvidence, error)
}

// EvidenceOptions are what one verification of evidence requires. The zero
// value checks signatures and certificates at time.Now(), does not check
// the report data (except where a kind needs it: tpm) and refuses
// debuggable guests.
type EvidenceOptions struct {
	// Now is the time at which certificates must be valid. Zero value:
	// time.Now().
	Now time.Time
	// ReportData, when not nil, is the exact report data the evidence must
	// carry (BootEvidence.ReportData). A TPM quote's qualifying data is
	// this value, so tpm needs it. Zero value: not checked.
	ReportData *[64]byte
	// AllowDebug accepts guests whose policy permits debugging (the host
	// can read their memory). Zero value: refused.
	AllowDebug bool
}

// VerifiedEvidence is what verified evidence attests.
type VerifiedEvidence struct {
	// Measurement is the code hash (MeasurementSize of the profile).
	Measurement []byte
	// ReportData is the report data the evidence carries.
	ReportData [64]byte
	// Debug reports a debuggable guest (accepted only with AllowDebug).
	Debug bool
	// NotBefore and NotAfter bound the times at which the certificates the
	// verification used are valid; a zero value leaves that side open (a
	// pinned TPM key has no certificate).
	NotBefore, NotAfter time.Time
	// Relaxations lists what the verifier accepted that weakens the result
	// (a simulated root the evidence carries, a TCB not evaluated), each a
	// sentence.
	Relaxations []string
}

// CertificatesWindow returns the times between which every one of certs is
// valid: the latest NotBefore and the earliest NotAfter (zero times for no
// certificates). Evidence kinds use it for VerifiedEvidence's window.
func CertificatesWindow(certs ...*x509.Certificate) (notBefore, notAfter time.Time) {
	for i, c := range certs {
		if i == 0 || c.NotBefore.After(notBefore) {
			notBefore = c.NotBefore
		}
		if i == 0 || c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	return notBefore, notAfter
}

// ValidAt reports whether t is inside [NotBefore, NotAfter].
func (e *VerifiedEvidence) ValidAt(t time.Time) bool {
	return (e.NotBefore.IsZero() || !t.Before(e.NotBefore)) && (e.NotAfter.IsZero() || !t.After(e.NotAfter))
}

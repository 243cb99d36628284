package sevsnp

// The verifier: parsing (evidence.go), then the cryptographic checks
// (crypto.go), then the policy (policy.go).

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

// Result describes verified evidence.
type Result struct {
	Measurement []byte
	ReportData  [64]byte
	ProductLine string
	ReportedTCB kds.TCBParts
	ChipID      []byte
	Policy      abi.SnpPolicy
	VMPL        uint32
	// NotBefore and NotAfter bound the time in which every certificate of
	// the verified chain is valid.
	NotBefore, NotAfter time.Time
	// SimulatedRoot is the ARK carried in the evidence, when the verifier
	// was told to trust the evidence's own chain (simulation only).
	SimulatedRoot *x509.Certificate
}

// ValidAt reports whether the verified chain is valid at t.
func (r *Result) ValidAt(t time.Time) bool {
	return !t.Before(r.NotBefore) && !t.After(r.NotAfter)
}

// Verifier checks SEV-SNP evidence offline. It holds its roots and the
// minimum TCB of VerifyEvidence, and nothing else (package verify caches
// verified evidence, once for every kind); it is safe for concurrent use.
type Verifier struct {
	roots  Roots
	minTCB kds.TCBParts
}

var _ attestation.EvidenceVerifier = (*Verifier)(nil)

// WithMinimumTCB returns a verifier with v's roots whose VerifyEvidence
// requires a reported TCB of at least t (component-wise). Zero value of a
// Verifier: any TCB.
func (v *Verifier) WithMinimumTCB(t kds.TCBParts) *Verifier {
	return &Verifier{roots: v.roots, minTCB: t}
}

// VerifyEvidence is the attestation.EvidenceVerifier shape of Verify: the
// chain and report signature at o.Now, the report data o.ReportData, debug
// only with o.AllowDebug, the verifier's minimum TCB. With
// Roots.UnsafeTrustEvidenceChain, the result names the carried root as a
// relaxation.
func (v *Verifier) VerifyEvidence(evidence []byte, o attestation.EvidenceOptions) (*attestation.VerifiedEvidence, error) {
	res, err := v.Verify(evidence, Check{Now: o.Now, ReportData: o.ReportData, AllowDebug: o.AllowDebug, MinimumTCB: v.minTCB})
	if err != nil {
		return nil, err
	}
	out := &attestation.VerifiedEvidence{Measurement: res.Measurement, ReportData: res.ReportData,
		Debug: res.Policy.Debug, NotBefore: res.NotBefore, NotAfter: res.NotAfter}
	if res.SimulatedRoot != nil && len(v.roots.PinnedSimulatedRoots) == 0 {
		fp := sha256.Sum256(res.SimulatedRoot.Raw)
		out.Relaxations = append(out.Relaxations, "trusted the simulated root the evidence carries (sha256 "+hex.EncodeToString(fp[:8])+
			"…): any simulated installation can make such evidence, for any measurement it claims; only a pinned root ties it to one")
	}
	return out, nil
}

// NewVerifier returns a verifier with the given trust anchors.
func NewVerifier(roots Roots) *Verifier {
	return &Verifier{roots: roots}
}

// Verify checks evidence: the VCEK chains to the verifier's roots at c.Now,
// the report is signed by the VCEK, and the report satisfies c (report data,
// measurement, debug policy, TCB). It does not check what the report data
// means; that is the caller's binding.
func (v *Verifier) Verify(evidence []byte, c Check) (*Result, error) {
	ev, err := ParseEvidence(evidence)
	if err != nil {
		return nil, err
	}
	return v.VerifyParsed(ev, c)
}

// VerifyParsed is Verify on parsed evidence.
func (v *Verifier) VerifyParsed(ev *Evidence, c Check) (*Result, error) {
	now := c.Now
	if now.IsZero() {
		now = time.Now()
	}
	report, err := abi.ReportToProto(ev.Report)
	if err != nil {
		return nil, fmt.Errorf("%w: report: %v", ErrReportSignature, err)
	}
	info, err := abi.ParseSignerInfo(report.GetSignerInfo())
	if err != nil || info.SigningKey != abi.VcekReportSigner {
		return nil, fmt.Errorf("%w: report is not signed by a VCEK", ErrChain)
	}
	att := &spb.Attestation{Report: report, CertificateChain: &spb.CertificateChain{VcekCert: ev.VCEK}}

	res := &Result{}
	entry, err := v.verifyChain(att, ev, now)
	if err != nil {
		return nil, err
	}
	res.NotBefore, res.NotAfter, res.SimulatedRoot, res.ProductLine = entry.notBefore, entry.notAfter, entry.simRoot, entry.productLine

	if err := checkPolicy(report, att, c); err != nil {
		return nil, err
	}
	res.Measurement = report.GetMeasurement()
	copy(res.ReportData[:], report.GetReportData())
	res.ReportedTCB = kds.DecomposeTCBVersion(kds.TCBVersion(report.GetReportedTcb()))
	res.ChipID = report.GetChipId()
	res.Policy, _ = abi.ParseSnpPolicy(report.GetPolicy())
	res.VMPL = report.GetVmpl()
	return res, nil
}

package sevsnp

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-sev-guest/validate"
	sevverify "github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// Error classes of [Verifier.Verify]; each failure wraps exactly one, plus
// attestation.ErrMalformed for unparseable evidence.
var (
	// ErrChain: the VCEK certificate does not chain to a trusted root at the
	// given time, or does not look like an AMD KDS certificate.
	ErrChain = errors.New("sev-snp: certificate chain not trusted")
	// ErrReportSignature: the report is not signed by the VCEK.
	ErrReportSignature = errors.New("sev-snp: report signature does not verify")
	// ErrReportData: the report data is not the expected value.
	ErrReportData = errors.New("sev-snp: report data mismatch")
	// ErrMeasurement: the measurement is not in the allow-list.
	ErrMeasurement = errors.New("sev-snp: measurement not allowed")
	// ErrPolicy: the report fails the policy (debug, TCB, versions, ...).
	ErrPolicy = errors.New("sev-snp: report violates policy")
)

// Check is what a report must satisfy besides a valid signature chain. The
// zero value checks signatures and internal consistency only.
type Check struct {
	// Now is the time at which certificates must be valid. Zero value:
	// time.Now().
	Now time.Time
	// ReportData, when non-nil, is the exact report data required.
	ReportData *[64]byte
	// Measurements, when non-empty, lists the allowed measurements.
	// Zero value: any measurement is accepted (the caller checks).
	Measurements [][]byte
	// AllowDebug accepts a guest policy that permits debugging (the
	// hypervisor can read guest memory). Zero value: rejected.
	AllowDebug bool
	// MinimumTCB is the lowest acceptable reported TCB, per component.
	// Zero value: any.
	MinimumTCB kds.TCBParts
}

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

// Roots selects the trust anchors of a [Verifier].
type Roots struct {
	// AMD maps product line ("Milan", "Genoa", "Turin") to trusted ARK/ASK
	// pairs. Zero value: the AMD roots embedded in go-sev-guest.
	AMD map[string][]*trust.AMDRootCerts
	// UnsafeTrustEvidenceChain makes the verifier trust the ASK and ARK that
	// each evidence carries. Only the simulated profile may use it: it
	// proves the code path, not hardware. Zero value: false.
	UnsafeTrustEvidenceChain bool
	// PinnedSimulatedRoots, with UnsafeTrustEvidenceChain, restricts the
	// carried ARK to these certificates (for example a server trusting its
	// own simulated root). Zero value: any carried ARK.
	PinnedSimulatedRoots []*x509.Certificate
}

// Verifier checks SEV-SNP evidence offline. It keeps no state besides its
// roots (package verify caches verified evidence, once for every kind) and
// is safe for concurrent use.
type Verifier struct {
	roots Roots
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
	return v.VerifyEvidence(ev, c)
}

// VerifyEvidence is Verify on parsed evidence.
func (v *Verifier) VerifyEvidence(ev *Evidence, c Check) (*Result, error) {
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

	// Report data and measurement first, for a precise error class; then
	// go-sev-guest's validate checks them again with the guest policy,
	// TCB consistency and minimum, firmware versions and chip ID.
	opts := &validate.Options{GuestPolicy: abi.SnpPolicy{SMT: true, Debug: c.AllowDebug}, MinimumTCB: c.MinimumTCB}
	if c.ReportData != nil {
		if !bytes.Equal(report.GetReportData(), c.ReportData[:]) {
			return nil, fmt.Errorf("%w: report data does not bind the expected keys and nonce", ErrReportData)
		}
		opts.ReportData = c.ReportData[:]
	}
	if len(c.Measurements) > 0 {
		var match []byte
		for _, m := range c.Measurements {
			if bytes.Equal(m, report.GetMeasurement()) {
				match = m
				break
			}
		}
		if match == nil {
			return nil, fmt.Errorf("%w: %x", ErrMeasurement, report.GetMeasurement())
		}
		opts.Measurement = match
	}
	if err := validate.SnpAttestation(att, opts); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPolicy, err)
	}
	res.Measurement = report.GetMeasurement()
	copy(res.ReportData[:], report.GetReportData())
	res.ReportedTCB = kds.DecomposeTCBVersion(kds.TCBVersion(report.GetReportedTcb()))
	res.ChipID = report.GetChipId()
	res.Policy, _ = abi.ParseSnpPolicy(report.GetPolicy())
	res.VMPL = report.GetVmpl()
	return res, nil
}

// noNetwork is the certificate getter handed to go-sev-guest: verification
// never fetches anything, and this makes sure of it.
type noNetwork struct{}

// ErrNetworkRefused is what the getter go-sev-guest receives returns.
var ErrNetworkRefused = errors.New("sev-snp: network access refused during verification")

func (noNetwork) Get(url string) ([]byte, error) {
	return nil, fmt.Errorf("%w: %s", ErrNetworkRefused, url)
}

func (v *Verifier) verifyChain(att *spb.Attestation, ev *Evidence, now time.Time) (*chainEntry, error) {
	opts := &sevverify.Options{DisableCertFetching: true, Getter: noNetwork{}, Now: now, TrustedRoots: v.roots.AMD}
	vcek, err := x509.ParseCertificate(ev.VCEK)
	if err != nil {
		return nil, fmt.Errorf("%w: VCEK: %v", ErrChain, err)
	}
	productLine, err := productLineOf(att.Report, vcek)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrChain, err)
	}
	entry := &chainEntry{vcek: vcek, productLine: productLine}
	certs := []*x509.Certificate{vcek}
	if v.roots.UnsafeTrustEvidenceChain {
		if len(ev.ARK) == 0 {
			return nil, fmt.Errorf("%w: evidence carries no simulated chain", ErrChain)
		}
		ask, err1 := x509.ParseCertificate(ev.ASK)
		ark, err2 := x509.ParseCertificate(ev.ARK)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%w: carried chain: %v", ErrChain, err)
		}
		if len(v.roots.PinnedSimulatedRoots) > 0 {
			pinned := false
			for _, p := range v.roots.PinnedSimulatedRoots {
				pinned = pinned || p.Equal(ark)
			}
			if !pinned {
				return nil, fmt.Errorf("%w: simulated root is not the pinned one", ErrChain)
			}
		}
		r := trust.AMDRootCertsProduct(productLine)
		r.ProductCerts = &trust.ProductCerts{Ask: ask, Ark: ark}
		opts.TrustedRoots = map[string][]*trust.AMDRootCerts{productLine: {r}}
		entry.simRoot = ark
		certs = append(certs, ask, ark)
	} else {
		if len(ev.ARK) != 0 {
			return nil, fmt.Errorf("%w: hardware evidence must not carry its own ASK/ARK", ErrChain)
		}
		roots := v.roots.AMD
		if roots == nil {
			def, err := trust.GetDefaultRootCerts(productLine)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrChain, err)
			}
			roots = map[string][]*trust.AMDRootCerts{productLine: {def}}
		}
		for _, r := range roots[productLine] {
			if r.ProductCerts != nil && r.ProductCerts.Ark != nil && r.ProductCerts.Ask != nil {
				certs = append(certs, r.ProductCerts.Ask, r.ProductCerts.Ark)
			}
		}
	}
	att.CertificateChain.AskCert, att.CertificateChain.ArkCert = ev.ASK, ev.ARK
	if err := sevverify.SnpAttestation(att, opts); err != nil {
		if errors.Is(err, ErrNetworkRefused) {
			return nil, err
		}
		// Tell a chain failure from a signature failure.
		if sigErr := sevverify.SnpReportSignature(ev.Report, vcek); sigErr != nil && chainOK(vcek, opts, productLine) {
			return nil, fmt.Errorf("%w: %v", ErrReportSignature, sigErr)
		}
		return nil, fmt.Errorf("%w: %v", ErrChain, err)
	}
	entry.notBefore, entry.notAfter = window(certs)
	return entry, nil
}

// chainOK reports whether vcek chains to some root in opts at opts.Now. It
// is only used to classify an error.
func chainOK(vcek *x509.Certificate, opts *sevverify.Options, productLine string) bool {
	for _, r := range opts.TrustedRoots[productLine] {
		if r.ProductCerts == nil {
			continue
		}
		if o := r.X509Options(opts.Now, abi.VcekReportSigner); o != nil {
			if _, err := vcek.Verify(*o); err == nil {
				return true
			}
		}
	}
	if opts.TrustedRoots == nil {
		if def, err := trust.GetDefaultRootCerts(productLine); err == nil {
			if o := def.X509Options(opts.Now, abi.VcekReportSigner); o != nil {
				_, err := vcek.Verify(*o)
				return err == nil
			}
		}
	}
	return false
}

func productLineOf(report *spb.Report, vcek *x509.Certificate) (string, error) {
	if fms := report.GetCpuid1EaxFms(); fms != 0 {
		return kds.ProductLineFromFms(fms), nil
	}
	exts, err := kds.VcekCertificateExtensions(vcek)
	if err != nil {
		return "", err
	}
	p, err := kds.ParseProductName(exts.ProductName, abi.VcekReportSigner)
	if err != nil {
		return "", err
	}
	return kds.ProductLine(p), nil
}

func window(certs []*x509.Certificate) (time.Time, time.Time) {
	nb, na := certs[0].NotBefore, certs[0].NotAfter
	for _, c := range certs[1:] {
		if c.NotBefore.After(nb) {
			nb = c.NotBefore
		}
		if c.NotAfter.Before(na) {
			na = c.NotAfter
		}
	}
	return nb, na
}

// chainEntry is what verifyChain found.
type chainEntry struct {
	vcek                *x509.Certificate
	productLine         string
	simRoot             *x509.Certificate
	notBefore, notAfter time.Time
}

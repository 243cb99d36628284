package sevsnp

// The cryptographic checks: the VCEK chains to trusted AMD roots (or, for
// simulation only, to the chain the evidence carries) at a given time, and
// the VCEK signed the report. Nothing here judges what the report says;
// see policy.go.

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	sevverify "github.com/google/go-sev-guest/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// Error classes of the cryptographic checks; every failure of
// [Verifier.Verify] wraps exactly one of them or of the policy classes
// (policy.go), or attestation.ErrMalformed for unparseable evidence.
var (
	// ErrChain: the VCEK certificate does not chain to a trusted root at the
	// given time, or does not look like an AMD KDS certificate.
	ErrChain = errors.New("sev-snp: certificate chain not trusted")
	// ErrReportSignature: the report is not signed by the VCEK.
	ErrReportSignature = errors.New("sev-snp: report signature does not verify")
)

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
	entry.notBefore, entry.notAfter = attestation.CertificatesWindow(certs...)
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

// chainEntry is what verifyChain found.
type chainEntry struct {
	vcek                *x509.Certificate
	productLine         string
	simRoot             *x509.Certificate
	notBefore, notAfter time.Time
}

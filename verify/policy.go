package verify

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/tdx"
	"github.com/acds-project/acds/attestation/tpm"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-sev-guest/verify/trust"
)

// Policy is what a verifier trusts and requires. Fields are trusted
// material (roots, measurements, notary keys), requirements (MinimumTCB,
// MaxAge) and weakening switches, each named Unsafe… and each reported in
// Result.Relaxations whenever it applies. Zero values trust the embedded
// vendor roots, refuse simulation and debuggable guests and trust no
// notary; a policy must still list at least one measurement (directly or
// through a manifest), else [New] refuses it (see [PolicyError]).
type Policy struct {
	// Manifest supplies allowed measurements per profile, minimum SEV-SNP
	// TCB and trusted notary keys. The caller has verified its signature
	// (manifest.Verify); Verify checks its validity window at the clock.
	// Zero value: none.
	Manifest *manifest.Manifest
	// Measurements lists allowed measurements per profile in addition to
	// the manifest's. Zero value: none.
	Measurements map[string][][]byte

	// AMDRoots are the trusted AMD ARK/ASK pairs per product line for the
	// sev-snp profile. Zero value: AMD's roots embedded in go-sev-guest.
	AMDRoots map[string][]*trust.AMDRootCerts
	// IntelRoots are the trusted roots for tdx quotes. Zero value: the
	// Intel SGX root embedded in package tdx.
	IntelRoots *x509.CertPool
	// TDXCollateral, when set, makes tdx verification evaluate the TCB.
	// Zero value: TCB not evaluated (reported as a relaxation).
	TDXCollateral *tdx.Collateral
	// TPMTrustedAKs pins TPM attestation keys (*ecdsa.PublicKey or
	// *rsa.PublicKey) for the tpm profile. Zero value: none.
	TPMTrustedAKs []crypto.PublicKey
	// TPMRoots are trusted issuers of TPM AK certificates for the tpm
	// profile (exclusive with TPMTrustedAKs). Zero value: none; with
	// neither, tpm evidence never verifies (fail closed).
	TPMRoots []*x509.Certificate
	// TPMPCRs are the SHA-256 PCRs the tpm measurement covers. Zero value:
	// tpm.DefaultPCRs() (0 to 9).
	TPMPCRs []int
	// MinimumTCB is the lowest acceptable SEV-SNP reported TCB, combined
	// (component-wise maximum) with the manifest's. Zero value: none.
	MinimumTCB kds.TCBParts
	// UnsafeAllowDebug accepts guests whose policy permits debugging (the
	// host can read their memory); the result lists the relaxation. Zero
	// value: refused.
	UnsafeAllowDebug bool

	// UnsafeAllowSimulation accepts the "sev-snp-sim" profile. A simulated
	// quote proves the code path, not hardware; the result lists the
	// relaxation. It needs a simulated root: SimulatedRoots, or
	// UnsafeTrustBundleSimulatedRoot. Zero value: the simulated profile is
	// never valid.
	UnsafeAllowSimulation bool
	// SimulatedRoots pins the simulated ARKs trusted with
	// UnsafeAllowSimulation (for example a server trusting its own
	// installation). Zero value: none.
	SimulatedRoots []*x509.Certificate
	// UnsafeTrustBundleSimulatedRoot trusts whatever simulated root each
	// sev-snp-sim bundle carries, so any installation's simulated enclave
	// passes (the result names the root's fingerprint). Needs
	// UnsafeAllowSimulation and excludes SimulatedRoots. Zero value: off.
	UnsafeTrustBundleSimulatedRoot bool

	// NotaryKeys are trusted MPC-TLS notary keys, in addition to the
	// manifest's. Zero value: none.
	NotaryKeys []ed25519.PublicKey
	// UnsafeTrustClaimedNotaryKey trusts the notary key that a simulated
	// enclave's signed claims name (its in-process notary). Applies only to
	// sev-snp-sim bundles and needs UnsafeAllowSimulation. Zero value: off.
	UnsafeTrustClaimedNotaryKey bool
	// SessionWindow is how long before the claims' issue time a notarized
	// session may have started. Zero value: 1 hour.
	SessionWindow time.Duration
	// ClockSkew is the tolerated difference between the enclave's, the
	// notary's and the verifier's clocks. Zero value: 5 minutes.
	ClockSkew time.Duration

	// MaxAge, when positive, is the oldest acceptable issue time relative
	// to the clock. Zero value: no limit.
	MaxAge time.Duration
	// Now is the clock. Zero value: time.Now.
	Now func() time.Time
	// CacheSize bounds how many verified pieces of evidence the verifier
	// remembers (first in, first out); see [Verifier]. It changes cost,
	// never outcomes. Zero value: DefaultCacheSize; negative: no cache.
	CacheSize int
}

// TrustEnclave returns p extended to accept outputs of the enclave whose
// boot evidence is given: its measurement is added to the allowed ones for
// its profile; for the simulated profile, simulation is allowed with
// that installation's root pinned (unless p already trusts every carried
// root: UnsafeTrustBundleSimulatedRoot); for the tpm profile, the
// attestation key the evidence names is pinned (unless p trusts AK
// certificate roots, TPMRoots). A server uses it for its own
// POST /v1/verify. It does not verify boot.
func TrustEnclave(p Policy, boot attestation.BootEvidence, measurement []byte) (Policy, error) {
	ms := make(map[string][][]byte, len(p.Measurements)+1)
	for k, v := range p.Measurements {
		ms[k] = append([][]byte(nil), v...)
	}
	ms[boot.Profile] = append(ms[boot.Profile], bytes.Clone(measurement))
	p.Measurements = ms
	if boot.Profile == attestation.ProfileTPM && len(p.TPMRoots) == 0 {
		// A server verifying its own bundles pins its own AK.
		ak, _, err := tpm.ParseAK(boot.Evidence)
		if err != nil {
			return p, err
		}
		p.TPMTrustedAKs = append(slices.Clone(p.TPMTrustedAKs), ak)
	}
	if boot.Profile == attestation.ProfileSEVSNPSim && !p.UnsafeTrustBundleSimulatedRoot {
		ev, err := sevsnp.ParseEvidence(boot.Evidence)
		if err != nil {
			return p, err
		}
		ark, err := x509.ParseCertificate(ev.ARK)
		if err != nil {
			return p, fmt.Errorf("simulated root: %w", err)
		}
		p.UnsafeAllowSimulation = true
		p.SimulatedRoots = append(append([]*x509.Certificate(nil), p.SimulatedRoots...), ark)
	}
	return p, nil
}

// ParseMeasurements reads code hashes written as hex (what `acds measure`
// and the ready line of `acds serve` print) into per-profile measurements
// for Policy.Measurements: a policy without a manifest. A hash is allowed
// for every profile whose measurements have its size
// (attestation.MeasurementSize): 48 bytes (96 hex digits) for sev-snp,
// sev-snp-sim and tdx, 32 bytes (64 digits) for tpm. Text that is not hex,
// or of a length no profile measures, is an error naming it.
func ParseMeasurements(hexes ...string) (map[string][][]byte, error) {
	ms := map[string][][]byte{}
	for _, h := range hexes {
		b, err := hex.DecodeString(strings.TrimSpace(h))
		if err != nil {
			return nil, fmt.Errorf("measurement %q is not hex", h)
		}
		n := 0
		for _, p := range attestation.Profiles() {
			if attestation.MeasurementSize(p) == len(b) {
				ms[p] = append(ms[p], b)
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("measurement %q has %d hex digits; want 96 (SHA-384: sev-snp, sev-snp-sim, tdx) or 64 (SHA-256: tpm)", h, 2*len(b))
		}
	}
	return ms, nil
}

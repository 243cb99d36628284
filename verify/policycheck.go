package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"

	"github.com/acds-project/acds/attestation"
)

// ErrPolicy is the class of every error [New] returns: the policy is
// contradictory or empty by mistake, so no verifier is made.
var ErrPolicy = errors.New("verify: policy refused")

// PolicyError says which field of a [Policy] made [New] refuse it, and
// why. It wraps ErrPolicy.
//
// The rules, each refusing a policy that could never do what its fields
// say, or that says two things at once:
//
//   - Measurements or Manifest: at least one measurement for some profile.
//     A policy that allows no code hash accepts nothing, which is always
//     a mistake (fail closed needs no verifier).
//   - Measurements: every key is a known profile (attestation.Profiles)
//     and every value has that profile's size
//     (attestation.MeasurementSize).
//   - SimulatedRoots, UnsafeTrustBundleSimulatedRoot and
//     UnsafeTrustClaimedNotaryKey: only with UnsafeAllowSimulation, since
//     they concern simulated bundles alone.
//   - UnsafeAllowSimulation: needs a simulated root, pinned
//     (SimulatedRoots) or explicitly taken from each bundle
//     (UnsafeTrustBundleSimulatedRoot); the two exclude each other.
//   - SimulatedRoots, TPMRoots: no nil certificate.
//   - AMDRoots: nil (the embedded roots) or non-empty; an empty map would
//     trust no AMD root at all.
//   - NotaryKeys: each ed25519.PublicKeySize bytes.
//   - TPMTrustedAKs and TPMRoots exclude each other (package tpm takes one
//     trust mechanism); each AK is an *ecdsa.PublicKey or *rsa.PublicKey.
//   - TPMPCRs: indices 0 to 23, none twice.
//   - SessionWindow, ClockSkew, MaxAge: not negative.
type PolicyError struct {
	// Field names the Policy field, with an index or key when one element
	// is at fault ("NotaryKeys[1]", `Measurements["tdx"][0]`).
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("verify: policy field %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrPolicy.
func (e *PolicyError) Unwrap() error { return ErrPolicy }

// check applies the rules listed with PolicyError.
func (p *Policy) check() error {
	bad := func(field, format string, a ...any) error {
		return &PolicyError{Field: field, Reason: fmt.Sprintf(format, a...)}
	}
	n := 0
	for prof, ms := range p.Measurements {
		if !attestation.KnownProfile(prof) {
			return bad(fmt.Sprintf("Measurements[%q]", prof), "unknown profile; want one of %v", attestation.Profiles())
		}
		for i, m := range ms {
			if want := attestation.MeasurementSize(prof); len(m) != want {
				return bad(fmt.Sprintf("Measurements[%q][%d]", prof, i), "%d bytes, want %d for %s", len(m), want, prof)
			}
		}
		n += len(ms)
	}
	if m := p.Manifest; m != nil {
		for _, mp := range m.Profiles {
			n += len(mp.Measurements)
		}
	}
	if n == 0 {
		return bad("Measurements", "no measurement for any profile, here or in the Manifest: no bundle could be valid")
	}

	if !p.UnsafeAllowSimulation {
		switch {
		case len(p.SimulatedRoots) > 0:
			return bad("SimulatedRoots", "set without UnsafeAllowSimulation, which refuses every simulated bundle")
		case p.UnsafeTrustBundleSimulatedRoot:
			return bad("UnsafeTrustBundleSimulatedRoot", "set without UnsafeAllowSimulation, which refuses every simulated bundle")
		case p.UnsafeTrustClaimedNotaryKey:
			return bad("UnsafeTrustClaimedNotaryKey", "set without UnsafeAllowSimulation: it applies to simulated bundles only")
		}
	} else {
		switch {
		case len(p.SimulatedRoots) > 0 && p.UnsafeTrustBundleSimulatedRoot:
			return bad("UnsafeTrustBundleSimulatedRoot", "contradicts SimulatedRoots: pin roots or trust the bundle's, not both")
		case len(p.SimulatedRoots) == 0 && !p.UnsafeTrustBundleSimulatedRoot:
			return bad("UnsafeAllowSimulation", "no simulated root to trust: set SimulatedRoots, or UnsafeTrustBundleSimulatedRoot to trust the root each bundle carries")
		}
	}
	for i, c := range p.SimulatedRoots {
		if c == nil {
			return bad(fmt.Sprintf("SimulatedRoots[%d]", i), "nil certificate")
		}
	}
	if p.AMDRoots != nil && len(p.AMDRoots) == 0 {
		return bad("AMDRoots", "empty but not nil: it would trust no AMD root (nil means the embedded ones)")
	}
	for i, k := range p.NotaryKeys {
		if len(k) != ed25519.PublicKeySize {
			return bad(fmt.Sprintf("NotaryKeys[%d]", i), "%d bytes, want %d (Ed25519)", len(k), ed25519.PublicKeySize)
		}
	}
	if len(p.TPMTrustedAKs) > 0 && len(p.TPMRoots) > 0 {
		return bad("TPMRoots", "contradicts TPMTrustedAKs: pin attestation keys or trust their issuers, not both")
	}
	for i, k := range p.TPMTrustedAKs {
		switch k.(type) {
		case *ecdsa.PublicKey, *rsa.PublicKey:
		default:
			return bad(fmt.Sprintf("TPMTrustedAKs[%d]", i), "%T, want *ecdsa.PublicKey or *rsa.PublicKey", k)
		}
	}
	for i, c := range p.TPMRoots {
		if c == nil {
			return bad(fmt.Sprintf("TPMRoots[%d]", i), "nil certificate")
		}
	}
	seen := map[int]bool{}
	for i, pcr := range p.TPMPCRs {
		if pcr < 0 || pcr > 23 {
			return bad(fmt.Sprintf("TPMPCRs[%d]", i), "PCR %d, want 0 to 23", pcr)
		}
		if seen[pcr] {
			return bad(fmt.Sprintf("TPMPCRs[%d]", i), "PCR %d listed twice", pcr)
		}
		seen[pcr] = true
	}
	for _, d := range []struct {
		field string
		v     int64
	}{{"SessionWindow", int64(p.SessionWindow)}, {"ClockSkew", int64(p.ClockSkew)}, {"MaxAge", int64(p.MaxAge)}} {
		if d.v < 0 {
			return bad(d.field, "negative")
		}
	}
	return nil
}

package verify_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/verify"
	"github.com/google/go-sev-guest/verify/trust"
)

// TestNewRefusesPolicies checks each rule of verify.New with the field
// it names.
func TestNewRefusesPolicies(t *testing.T) {
	sha384 := make([]byte, 48)
	ok := func() verify.Policy {
		return verify.Policy{Measurements: map[string][][]byte{attestation.ProfileSEVSNP: {sha384}}}
	}
	root := &x509.Certificate{}
	cases := []struct {
		name  string
		edit  func(*verify.Policy)
		field string
	}{
		{"no measurement", func(p *verify.Policy) { p.Measurements = nil }, "Measurements"},
		{"only empty lists", func(p *verify.Policy) { p.Measurements = map[string][][]byte{attestation.ProfileTDX: nil} }, "Measurements"},
		{"unknown profile", func(p *verify.Policy) { p.Measurements["sgx"] = [][]byte{sha384} }, `Measurements["sgx"]`},
		{"wrong size", func(p *verify.Policy) { p.Measurements[attestation.ProfileTPM] = [][]byte{sha384} }, `Measurements["tpm"][0]`},
		{"roots without simulation", func(p *verify.Policy) { p.SimulatedRoots = []*x509.Certificate{root} }, "SimulatedRoots"},
		{"carried root without simulation", func(p *verify.Policy) { p.UnsafeTrustBundleSimulatedRoot = true }, "UnsafeTrustBundleSimulatedRoot"},
		{"claimed notary without simulation", func(p *verify.Policy) { p.UnsafeTrustClaimedNotaryKey = true }, "UnsafeTrustClaimedNotaryKey"},
		{"simulation without a root", func(p *verify.Policy) { p.UnsafeAllowSimulation = true }, "UnsafeAllowSimulation"},
		{"pinned and carried roots", func(p *verify.Policy) {
			p.UnsafeAllowSimulation, p.UnsafeTrustBundleSimulatedRoot, p.SimulatedRoots = true, true, []*x509.Certificate{root}
		}, "UnsafeTrustBundleSimulatedRoot"},
		{"nil simulated root", func(p *verify.Policy) {
			p.UnsafeAllowSimulation, p.SimulatedRoots = true, []*x509.Certificate{nil}
		}, "SimulatedRoots[0]"},
		{"empty AMD roots", func(p *verify.Policy) { p.AMDRoots = map[string][]*trust.AMDRootCerts{} }, "AMDRoots"},
		{"short notary key", func(p *verify.Policy) { p.NotaryKeys = []ed25519.PublicKey{make([]byte, 32), make([]byte, 31)} }, "NotaryKeys[1]"},
		{"AKs and roots", func(p *verify.Policy) {
			p.TPMTrustedAKs, p.TPMRoots = []crypto.PublicKey{ed25519.PublicKey(make([]byte, 32))}, []*x509.Certificate{root}
		}, "TPMRoots"},
		{"AK of another kind", func(p *verify.Policy) { p.TPMTrustedAKs = []crypto.PublicKey{ed25519.PublicKey(make([]byte, 32))} }, "TPMTrustedAKs[0]"},
		{"PCR out of range", func(p *verify.Policy) { p.TPMPCRs = []int{0, 24} }, "TPMPCRs[1]"},
		{"PCR twice", func(p *verify.Policy) { p.TPMPCRs = []int{7, 7} }, "TPMPCRs[1]"},
		{"negative MaxAge", func(p *verify.Policy) { p.MaxAge = -time.Second }, "MaxAge"},
	}
	for _, c := range cases {
		p := ok()
		c.edit(&p)
		_, err := verify.New(p)
		var pe *verify.PolicyError
		if !errors.As(err, &pe) || !errors.Is(err, verify.ErrPolicy) || pe.Field != c.field {
			t.Errorf("%s: %v, want a PolicyError for %s", c.name, err, c.field)
		}
	}
	for name, p := range map[string]verify.Policy{
		"measurements":   ok(),
		"pinned sim":     {Measurements: ok().Measurements, UnsafeAllowSimulation: true, SimulatedRoots: []*x509.Certificate{root}},
		"carried sim":    {Measurements: ok().Measurements, UnsafeAllowSimulation: true, UnsafeTrustBundleSimulatedRoot: true, UnsafeTrustClaimedNotaryKey: true},
		"zero durations": {Measurements: ok().Measurements, TPMPCRs: []int{0, 23}},
	} {
		if _, err := verify.New(p); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

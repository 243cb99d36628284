package verify_test

import (
	"bytes"
	"crypto/x509"
	"testing"

	"github.com/acds-project/acds/attestation"
)

// FuzzVerify feeds arbitrary bytes to bundle decoding and verification,
// seeded with real bundles (raw and mpc-tls sources, a hardware-profile
// bundle with real Milan evidence) and boot evidence. Nothing may panic, and
// nothing but an unmodified seed may verify.
func FuzzVerify(f *testing.F) {
	fx := getFixture(f)
	raw := fx.rawBundle(f, []byte("fuzz output"))
	mpc := fx.mpcBundle(f, []byte("fuzz output"))
	parsed, err := attestation.ParseBundle(raw)
	if err != nil {
		f.Fatal(err)
	}
	ev := milanEvidence(f)
	parsed.Boot.Profile = attestation.ProfileSEVSNP
	if parsed.Boot.Evidence, err = ev.Marshal(); err != nil {
		f.Fatal(err)
	}
	hw, err := parsed.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	boot := fx.enclave.MarshalBootEvidence()
	seeds := [][]byte{raw, mpc, hw, boot}
	for _, s := range seeds {
		f.Add(s)
	}
	// Pin this process's simulated root: fuzz workers are separate
	// processes with their own installation, so seeds made by another
	// process must not verify there, and the only valid inputs are this
	// process's own bundles.
	p := fx.policy()
	p.SimulatedRoots, p.UnsafeTrustBundleSimulatedRoot = []*x509.Certificate{fx.backend.Root()}, false
	v := mustNew(f, p)
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := v.VerifyOutput(data, []byte("fuzz output"))
		if err == nil && res.Valid && !bytes.Equal(data, raw) && !bytes.Equal(data, mpc) {
			t.Fatalf("a modified bundle verified:\n%x", data)
		}
		bres, err := v.VerifyBoot(data)
		if err == nil && bres.Valid && !bytes.Equal(data, boot) {
			t.Fatalf("modified boot evidence verified:\n%x", data)
		}
	})
}

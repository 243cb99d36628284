package verify_test

import (
	"crypto"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/tpm"
	"github.com/acds-project/acds/verify"
)

// A bundle carrying a real go-tpm-tools attestation (from the TPM reference
// simulator, see attestation/tpm/testdata) is checked offline: with the AK
// pinned the quote verifies but does not bind this bundle's boot keys; with
// no trust anchor it fails closed.
func TestTPMBundleEvidenceChecked(t *testing.T) {
	att, err := os.ReadFile("../attestation/tpm/testdata/sim-attestation.pb")
	if err != nil {
		t.Skip("tpm test data not present")
	}
	akPEM, err := os.ReadFile("../attestation/tpm/testdata/sim-ak.pem")
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(akPEM)
	ak, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	nonceHex, _ := os.ReadFile("../attestation/tpm/testdata/sim-nonce.hex")
	nonce, _ := hex.DecodeString(strings.TrimSpace(string(nonceHex)))
	ev, err := tpm.Verify(att, nonce, tpm.Options{TrustedAKs: []crypto.PublicKey{ak}})
	if err != nil {
		t.Fatalf("reference attestation: %v", err)
	}

	f := getFixture(t)
	parsed, err := attestation.ParseBundle(f.rawBundle(t, []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	parsed.Boot.Profile = attestation.ProfileTPM
	parsed.Boot.Evidence = att
	b, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p := f.policy()
	p.Measurements = map[string][][]byte{attestation.ProfileTPM: {ev.Measurement}}
	p.TPMTrustedAKs = []crypto.PublicKey{ak}
	res, err := mustNew(t, p).Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid || res.TEEQuoteVerified || !errors.Is(res.Err(), verify.ErrBinding) || errors.Is(res.Err(), verify.ErrEvidence) {
		t.Fatalf("want only a binding failure: %v", res.Err())
	}
	p.TPMTrustedAKs = nil
	res, _ = mustNew(t, p).Verify(b)
	if res.Valid || !errors.Is(res.Err(), tpm.ErrNoTrust) {
		t.Fatalf("no trust anchor: %v", res.Err())
	}
}

package verify_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/verify"
)

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	m := &manifest.Manifest{
		Issuer: "ACDS releases", NotBefore: now.AddDate(0, -1, 0), NotAfter: now.AddDate(1, 0, 0),
		Profiles: map[string]manifest.Profile{attestation.ProfileSEVSNPSim: {Measurements: [][]byte{bytes.Repeat([]byte{7}, 48)}}},
	}
	seed := sha256.Sum256([]byte("publisher"))
	key := ed25519.NewKeyFromSeed(seed[:])
	signed, err := manifest.Sign(nil, m, key)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := json.Marshal(m.Description())
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	signedFile, descFile := write("m.cose", signed), write("m.json", desc)
	pubFile := write("pub.pem", manifest.MarshalPublicKey(key.Public().(ed25519.PublicKey)))
	hash := strings.Repeat("ab", 48)

	p, source, err := verify.LoadPolicy(verify.PolicyFiles{Manifest: signedFile, ManifestKey: pubFile}, clock)
	if err != nil || p.Manifest == nil || !strings.Contains(source, "signed by ACDS releases") {
		t.Fatalf("signed: %v %q", err, source)
	}
	if _, err := verify.New(p); err != nil {
		t.Fatalf("signed policy refused: %v", err)
	}
	p, source, err = verify.LoadPolicy(verify.PolicyFiles{Manifest: descFile, UnsafeAllowSimulated: true}, clock)
	if err != nil || p.Manifest == nil || !strings.Contains(source, "unsigned") ||
		!p.UnsafeAllowSimulation || !p.UnsafeTrustBundleSimulatedRoot || !p.UnsafeTrustClaimedNotaryKey {
		t.Fatalf("description: %v %q %+v", err, source, p)
	}
	if _, err := verify.New(p); err != nil {
		t.Fatalf("simulated policy refused: %v", err)
	}
	p, _, err = verify.LoadPolicy(verify.PolicyFiles{Measurements: []string{hash}}, nil)
	if err != nil || len(p.Measurements[attestation.ProfileSEVSNP]) != 1 || p.Manifest != nil || p.Now == nil {
		t.Fatalf("measurements: %v %+v", err, p)
	}
	p, source, err = verify.LoadPolicy(verify.PolicyFiles{}, clock)
	if err != nil || source != "" || p.Manifest != nil || p.Measurements != nil {
		t.Fatalf("empty: %v %q %+v", err, source, p)
	}
	if _, err := verify.New(p); !errors.Is(err, verify.ErrPolicy) {
		t.Fatalf("a policy with no measurement: New gave %v", err)
	}

	for name, tc := range map[string]struct {
		f    verify.PolicyFiles
		want error
	}{
		"manifest and measurements": {verify.PolicyFiles{Manifest: descFile, Measurements: []string{hash}}, verify.ErrPolicyFiles},
		"key without manifest":      {verify.PolicyFiles{ManifestKey: pubFile, Measurements: []string{hash}}, verify.ErrPolicyFiles},
		"signed without key":        {verify.PolicyFiles{Manifest: signedFile}, manifest.ErrKeyRequired},
		"description with key":      {verify.PolicyFiles{Manifest: descFile, ManifestKey: pubFile}, manifest.ErrKeyNotApplicable},
	} {
		if _, _, err := verify.LoadPolicy(tc.f, clock); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if _, _, err := verify.LoadPolicy(verify.PolicyFiles{Measurements: []string{"xy"}}, clock); err == nil {
		t.Error("bad measurement accepted")
	}
}

// --tpm-ak and --tpm-ak-roots: PEM keys and certificates become the
// policy's TPM trust; bad files and both at once are errors.
func TestLoadPolicyTPM(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
	akFile := write("ak.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "AK CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	cert, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	rootsFile := write("roots.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}))
	ms := []string{strings.Repeat("ab", 32)}

	p, _, err := verify.LoadPolicy(verify.PolicyFiles{Measurements: ms, TPMAKs: []string{akFile}}, nil)
	if err != nil || len(p.TPMTrustedAKs) != 1 || !k.PublicKey.Equal(p.TPMTrustedAKs[0]) {
		t.Fatalf("--tpm-ak: %v", err)
	}
	if _, err := verify.New(p); err != nil {
		t.Fatal(err)
	}
	p, _, err = verify.LoadPolicy(verify.PolicyFiles{Measurements: ms, TPMAKRoots: rootsFile}, nil)
	if err != nil || len(p.TPMRoots) != 1 {
		t.Fatalf("--tpm-ak-roots: %v", err)
	}
	_, edPub, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKIXPublicKey(edPub.Public())
	for name, f := range map[string]verify.PolicyFiles{
		"both":             {Measurements: ms, TPMAKs: []string{akFile}, TPMAKRoots: rootsFile},
		"missing AK":       {Measurements: ms, TPMAKs: []string{filepath.Join(dir, "none.pem")}},
		"AK not PEM":       {Measurements: ms, TPMAKs: []string{write("junk", []byte("junk"))}},
		"AK a certificate": {Measurements: ms, TPMAKs: []string{rootsFile}},
		"AK Ed25519":       {Measurements: ms, TPMAKs: []string{write("ed.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: edDER}))}},
		"roots a key":      {Measurements: ms, TPMAKRoots: akFile},
		"roots too large":  {Measurements: ms, TPMAKRoots: write("big.pem", make([]byte, 1<<20+1))},
	} {
		if _, _, err := verify.LoadPolicy(f, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSelfMeasurements(t *testing.T) {
	ms, self, err := verify.SelfMeasurements()
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.MeasureSelf()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(self, want) || len(ms) != 1 || len(ms[attestation.ProfileSEVSNPSim]) != 1 || !bytes.Equal(ms[attestation.ProfileSEVSNPSim][0], want) {
		t.Fatalf("SelfMeasurements = %x, %v; want only %x under %s", self, ms, want, attestation.ProfileSEVSNPSim)
	}
	if _, err := verify.New(verify.Policy{Measurements: ms}); err != nil {
		t.Fatalf("a policy of SelfMeasurements: %v", err)
	}
}

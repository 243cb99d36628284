package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
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

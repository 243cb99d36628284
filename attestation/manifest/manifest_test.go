package manifest_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
)

func testKey(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testManifest() *manifest.Manifest {
	return &manifest.Manifest{
		Issuer: "ACDS releases", NotBefore: t0, NotAfter: t0.AddDate(1, 0, 0),
		Profiles: map[string]manifest.Profile{
			"sev-snp":     {Measurements: [][]byte{bytes.Repeat([]byte{1}, 48)}, MinimumTCB: &manifest.TCB{Bootloader: 3, SNP: 22, Microcode: 213}},
			"sev-snp-sim": {Measurements: [][]byte{bytes.Repeat([]byte{2}, 48), bytes.Repeat([]byte{3}, 48)}},
		},
		NotaryKeys: []ed25519.PublicKey{testKey("notary").Public().(ed25519.PublicKey)},
	}
}

func TestSignVerify(t *testing.T) {
	key := testKey("publisher")
	pub := key.Public().(ed25519.PublicKey)
	signed, err := manifest.Sign(nil, testManifest(), key)
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Verify(signed, pub, t0.AddDate(0, 6, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Allows("sev-snp-sim", bytes.Repeat([]byte{3}, 48)) || m.Allows("sev-snp", bytes.Repeat([]byte{2}, 48)) || m.Profiles["sev-snp"].MinimumTCB.SNP != 22 || len(m.NotaryKeys) != 1 {
		t.Fatalf("manifest content: %+v", m)
	}
	if _, err := manifest.Verify(signed, testKey("other").Public().(ed25519.PublicKey), t0.AddDate(0, 6, 0)); !errors.Is(err, manifest.ErrSignature) {
		t.Fatalf("other key: %v", err)
	}
	if _, err := manifest.Verify(signed, pub, t0.AddDate(2, 0, 0)); !errors.Is(err, manifest.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	if _, err := manifest.Verify(signed, pub, t0.AddDate(-1, 0, 0)); !errors.Is(err, manifest.ErrNotYetValid) {
		t.Fatalf("not yet valid: %v", err)
	}
	for i := 0; i < len(signed); i += 13 {
		bad := bytes.Clone(signed)
		bad[i] ^= 0x10
		if _, err := manifest.Verify(bad, pub, t0.AddDate(0, 6, 0)); err == nil {
			t.Fatalf("byte %d changed: still verifies", i)
		}
	}
}

func TestInvalidManifests(t *testing.T) {
	key := testKey("publisher")
	for name, edit := range map[string]func(*manifest.Manifest){
		"no issuer":       func(m *manifest.Manifest) { m.Issuer = "" },
		"inverted window": func(m *manifest.Manifest) { m.NotAfter = m.NotBefore.Add(-time.Hour) },
		"unknown profile": func(m *manifest.Manifest) { m.Profiles["sgx"] = manifest.Profile{Measurements: [][]byte{{1}}} },
		"no measurements": func(m *manifest.Manifest) { m.Profiles["tdx"] = manifest.Profile{} },
		"tcb on tdx": func(m *manifest.Manifest) {
			m.Profiles["tdx"] = manifest.Profile{Measurements: [][]byte{{1}}, MinimumTCB: &manifest.TCB{}}
		},
		"short notary key": func(m *manifest.Manifest) { m.NotaryKeys = append(m.NotaryKeys, ed25519.PublicKey{1, 2}) },
	} {
		m := testManifest()
		edit(m)
		if _, err := manifest.Sign(nil, m, key); !errors.Is(err, manifest.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDescriptionAndKeys(t *testing.T) {
	desc := `{"issuer":"x","notBefore":"2026-01-01T00:00:00Z","notAfter":"2027-01-01T00:00:00Z",
	  "profiles":{"sev-snp-sim":{"measurements":["` + strings.Repeat("AB", 48) + `"]}},
	  "notaryKeys":["` + strings.Repeat("11", 32) + `"]}`
	m, err := manifest.ParseDescription([]byte(desc))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Allows("sev-snp-sim", bytes.Repeat([]byte{0xab}, 48)) {
		t.Fatal("hex measurement not parsed")
	}
	for name, bad := range map[string]string{
		"unknown field": `{"issuer":"x","bogus":1}`,
		"not hex":       strings.Replace(desc, strings.Repeat("AB", 48), "zz", 1),
		"trailing":      desc + "{}",
	} {
		if _, err := manifest.ParseDescription([]byte(bad)); !errors.Is(err, manifest.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "k")
	k1, created, err := manifest.LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatal(err)
	}
	k2, created, err := manifest.LoadOrCreateKey(path)
	if err != nil || created || !k1.Equal(k2) {
		t.Fatalf("reload: %v %v", created, err)
	}
	os.Chmod(path, 0o644)
	if _, _, err := manifest.LoadOrCreateKey(path); !errors.Is(err, manifest.ErrKey) {
		t.Fatalf("world-readable key: %v", err)
	}
	pubPath := filepath.Join(dir, "k.pub")
	os.WriteFile(pubPath, manifest.MarshalPublicKey(k1.Public().(ed25519.PublicKey)), 0o644)
	pub, err := manifest.ReadPublicKey(pubPath)
	if err != nil || !pub.Equal(k1.Public()) {
		t.Fatalf("public key file: %v", err)
	}
}

// FuzzVerify: arbitrary bytes never panic and never verify unless they are
// the signed seed.
func FuzzVerify(f *testing.F) {
	key := testKey("publisher")
	pub := key.Public().(ed25519.PublicKey)
	signed, err := manifest.Sign(nil, testManifest(), key)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := manifest.Verify(data, pub, t0.AddDate(0, 6, 0)); err == nil && !bytes.Equal(data, signed) {
			t.Fatalf("modified manifest verified: %x", data)
		}
	})
}

package manifest_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acds-project/acds/attestation/manifest"
)

// TestLoad reads each form of a policy file and each wrong pairing of file
// and key, and checks the class of every refusal.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := testKey("publisher")
	signed, err := manifest.Sign(nil, testManifest(), key)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := json.Marshal(testManifest().Description())
	if err != nil {
		t.Fatal(err)
	}
	signedFile := write("signed.cose", signed)
	descFile := write("desc.json", desc)
	pubFile := write("pub.pem", manifest.MarshalPublicKey(key.Public().(ed25519.PublicKey)))
	otherFile := write("other.pem", manifest.MarshalPublicKey(testKey("other").Public().(ed25519.PublicKey)))
	junkFile := write("junk", []byte("not a manifest"))
	badJSON := write("bad.json", []byte(`{"issuer": 1}`))
	now := t0.AddDate(0, 6, 0)

	m, isSigned, err := manifest.Load(signedFile, pubFile, now)
	if err != nil || !isSigned || m.Issuer != testManifest().Issuer {
		t.Fatalf("signed: %v %v %+v", isSigned, err, m)
	}
	m, isSigned, err = manifest.Load(descFile, "", now)
	if err != nil || isSigned || !reflect.DeepEqual(m.Description(), testManifest().Description()) {
		t.Fatalf("description: %v %v %+v", isSigned, err, m)
	}
	for name, tc := range map[string]struct {
		path, key string
		want      error
	}{
		"signed without key":    {signedFile, "", manifest.ErrKeyRequired},
		"signed with other key": {signedFile, otherFile, manifest.ErrSignature},
		"signed, key not a key": {signedFile, junkFile, manifest.ErrKey},
		"signed, expired":       {signedFile, pubFile, manifest.ErrExpired},
		"description with key":  {descFile, pubFile, manifest.ErrKeyNotApplicable},
		"bad description":       {badJSON, "", manifest.ErrInvalid},
		"junk":                  {junkFile, "", manifest.ErrInvalid},
		"junk with key":         {junkFile, pubFile, manifest.ErrInvalid},
		"missing file":          {filepath.Join(dir, "none"), "", fs.ErrNotExist},
		"signed, missing key":   {signedFile, filepath.Join(dir, "none"), fs.ErrNotExist},
	} {
		at := now
		if name == "signed, expired" {
			at = t0.AddDate(2, 0, 0)
		}
		if _, _, err := manifest.Load(tc.path, tc.key, at); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
}

// TestDescriptionRoundTrip: a manifest's description parses back to it.
func TestDescriptionRoundTrip(t *testing.T) {
	want := testManifest()
	b, err := json.Marshal(want.Description())
	if err != nil {
		t.Fatal(err)
	}
	got, err := manifest.ParseDescription(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

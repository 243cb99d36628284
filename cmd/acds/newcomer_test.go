package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
)

// TestVerifyPolicyErrorsTellTheTruth: `acds verify --policy FILE` says what
// FILE is not (issue 11, item 6): junk is "not a manifest" (it used to be
// called "a signed manifest" needing --manifest-key), a broken JSON
// description is not a valid description, and a signed manifest with the
// wrong key fails its signature. All exit 2.
func TestVerifyPolicyErrorsTellTheTruth(t *testing.T) {
	dir := t.TempDir()
	bundleFile := filepath.Join(dir, "bundle.cbor")
	os.WriteFile(bundleFile, attBundle(t, filepath.Join(dir, "data")), 0o644)
	junk := filepath.Join(dir, "junk.txt")
	os.WriteFile(junk, []byte("hello, I am not a manifest\n"), 0o644)
	badJSON := filepath.Join(dir, "bad.json")
	os.WriteFile(badJSON, []byte(`{"issuer": 7}`), 0o644)

	desc := manifest.Description{Issuer: "t", NotBefore: time.Now().Add(-time.Hour).UTC(), NotAfter: time.Now().Add(time.Hour).UTC(),
		Profiles: map[string]manifest.ProfileDescription{"sev-snp-sim": {Measurements: []string{strings.Repeat("ab", 48)}}}}
	descJSON, _ := json.Marshal(desc)
	descFile := filepath.Join(dir, "m.json")
	os.WriteFile(descFile, descJSON, 0o644)
	signed := filepath.Join(dir, "m.cose")
	if code, _, errOut := attRun(t, "", "manifest", "sign", "--key", filepath.Join(dir, "k"), "--in", descFile, "--out", signed); code != 0 {
		t.Fatalf("sign: %d %s", code, errOut)
	}
	other, _, _ := ed25519.GenerateKey(nil)
	otherFile := filepath.Join(dir, "other.pub")
	os.WriteFile(otherFile, []byte(hex.EncodeToString(other)), 0o644)

	for _, c := range []struct {
		args        []string
		want, avoid string
	}{
		{[]string{"--policy", junk}, "is not a manifest", "is a signed manifest"},
		{[]string{"--policy", junk, "--manifest-key", otherFile}, "is not a manifest", "signature"},
		{[]string{"--policy", badJSON}, "not a valid JSON manifest description", "is a signed manifest"},
		{[]string{"--policy", signed}, "is a signed manifest: give the publisher's public key", ""},
		{[]string{"--policy", signed, "--manifest-key", otherFile}, "signature does not verify with the key in " + otherFile, ""},
	} {
		code, out, errOut := attRun(t, "", append([]string{"verify", bundleFile, "--allow-simulated"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || (c.avoid != "" && strings.Contains(errOut, c.avoid)) {
			t.Errorf("%v: exit %d, stderr %q (want it to say %q, not %q)%s", c.args, code, errOut, c.want, c.avoid, out)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/fhir"
)

// fixture makes a real bundle with a simulated enclave (its keys in a
// temporary directory) and writes it (base64), its output and a signed
// manifest listing the enclave's measurement.
type fixture struct {
	dir, bundle, output, manifest, key, measurement string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	e, err := sim.Open(context.Background(), filepath.Join(dir, "enclave"), attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	output := []byte(`{"resourceType":"Bundle","type":"collection","entry":[]}`)
	b, err := e.Attest(context.Background(), attestation.Claims{RequestID: "0b8e6a4e-4f59-4c1e-9d3e-5f3f0c6b2a11",
		OutputFormat: "fhir_r4", OutputDigest: attestation.Digest(output), IssuedAt: time.Now(),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest(output)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{dir: dir, bundle: filepath.Join(dir, "attestation.b64"), output: filepath.Join(dir, "output.json"),
		manifest: filepath.Join(dir, "manifest.signed"), key: filepath.Join(dir, "publisher.pub"),
		measurement: hex.EncodeToString(e.Measurement())}
	write(t, f.bundle, []byte(base64.StdEncoding.EncodeToString(b)+"\n"))
	write(t, f.output, output)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	signed, err := manifest.Sign(rand.Reader, &manifest.Manifest{Issuer: "example publisher", NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), Profiles: map[string]manifest.Profile{
			attestation.ProfileSEVSNPSim: {Measurements: [][]byte{e.Measurement()}}}}, priv)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f.manifest, signed)
	write(t, f.key, manifest.MarshalPublicKey(pub))
	return f
}

func write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCIVerify(t *testing.T) {
	f := newFixture(t)
	tampered := filepath.Join(f.dir, "tampered.json")
	out, _ := os.ReadFile(f.output)
	write(t, tampered, bytes.Replace(out, []byte("collection"), []byte("searchset!"), 1))
	other := strings.Repeat("ab", 48)

	for _, tc := range []struct {
		name string
		args []string
		want int
		says string
	}{
		{"signed manifest", []string{"-bundle", f.bundle, "-output", f.output, "-policy", f.manifest, "-manifest-key", f.key, "-allow-simulated"}, 0, "VALID"},
		{"measurement", []string{"-bundle", f.bundle, "-measurement", f.measurement, "-allow-simulated"}, 0, "VALID"},
		{"simulation not allowed", []string{"-bundle", f.bundle, "-measurement", f.measurement}, 1, "INVALID"},
		{"other measurement", []string{"-bundle", f.bundle, "-measurement", other, "-allow-simulated"}, 1, "INVALID"},
		{"tampered output", []string{"-bundle", f.bundle, "-output", tampered, "-measurement", f.measurement, "-allow-simulated"}, 1, "INVALID"},
		{"raw data, MPC-TLS required", []string{"-bundle", f.bundle, "-measurement", f.measurement, "-allow-simulated", "-require-mpc-tls"}, 1, "MPC-TLS"},
		{"manifest without its key", []string{"-bundle", f.bundle, "-policy", f.manifest}, 2, ""},
		{"manifest with another key", []string{"-bundle", f.bundle, "-policy", f.manifest, "-manifest-key", writeOtherKey(t, f.dir)}, 2, ""},
		{"no bundle", []string{"-measurement", f.measurement}, 2, ""},
		{"not a bundle", []string{"-bundle", f.output, "-measurement", f.measurement}, 2, ""},
		{"missing file", []string{"-bundle", filepath.Join(f.dir, "nope"), "-measurement", f.measurement}, 2, ""},
		{"measurement of no profile's length", []string{"-bundle", f.bundle, "-measurement", "abcd", "-allow-simulated"}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(context.Background(), tc.args, &stdout, &stderr); got != tc.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", got, tc.want, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.says) {
				t.Errorf("stdout lacks %q: %s", tc.says, stdout.String())
			}
		})
	}
}

func writeOtherKey(t *testing.T, dir string) string {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	name := filepath.Join(dir, "other.pub")
	write(t, name, manifest.MarshalPublicKey(pub))
	return name
}

// TestCIVerifyPrettyOutput: a pretty-printed copy of a real output
// (json.MarshalIndent, which also escapes < and &) verifies, as POST
// /v1/verify accepts it: the one rule of acds.OutputBytes. It used to be
// refused (the file's bytes were digested as they were).
func TestCIVerifyPrettyOutput(t *testing.T) {
	dir := t.TempDir()
	e, err := sim.Open(context.Background(), filepath.Join(dir, "enclave"), attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"resourceType":"Patient","id":"p1","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">José &amp; Zoë</div>"},"gender":"female"}`)
	out, err := fhir.Process(in, fhir.Options{Format: acds.OutputFHIRR4, Source: "raw", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Attest(context.Background(), attestation.Claims{RequestID: "0b8e6a4e-4f59-4c1e-9d3e-5f3f0c6b2a12",
		OutputFormat: "fhir_r4", OutputDigest: attestation.Digest(out.JSON), IssuedAt: time.Now(),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest(in)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pretty, err := json.MarshalIndent(json.RawMessage(out.JSON), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	bundle, output := filepath.Join(dir, "attestation.b64"), filepath.Join(dir, "output.json")
	write(t, bundle, []byte(base64.StdEncoding.EncodeToString(b)))
	write(t, output, pretty)
	args := []string{"-bundle", bundle, "-output", output, "-measurement", hex.EncodeToString(e.Measurement()), "-allow-simulated"}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "output checked: true") {
		t.Fatalf("pretty-printed output: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	write(t, output, bytes.Replace(pretty, []byte("Zoë"), []byte("Zoe"), 1))
	stdout.Reset()
	if code := run(context.Background(), args, &stdout, &stderr); code != 1 {
		t.Fatalf("changed output: exit %d\n%s", code, stdout.String())
	}
}

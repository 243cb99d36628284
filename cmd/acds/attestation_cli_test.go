package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/testrig/dnstest"
)

// attRun runs one acds command line and returns its exit code and output.
func attRun(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }})
	return code, out.String(), errOut.String()
}

// attBundle makes a raw-source bundle from a simulated enclave measuring the
// running (test) binary, as `acds serve` would.
func attBundle(t *testing.T, dir string) []byte {
	t.Helper()
	// 2048-bit simulated ARK/ASK keys keep the test fast; `acds serve`
	// uses 4096 (sim.Open).
	b, err := sim.NewBackend(dir, sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := e.Attest(context.Background(), attestation.Claims{
		RequestID: "req-cli", OutputFormat: "fhir_r4", OutputDigest: attestation.Digest([]byte("out")),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bundle
}

func TestMeasureCommand(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "exe")
	os.WriteFile(f, []byte("some executable"), 0o755)
	code, out, _ := attRun(t, "", "measure", f)
	want := sha512.Sum384([]byte("some executable"))
	if code != 0 || strings.TrimSpace(out) != hex.EncodeToString(want[:]) {
		t.Fatalf("measure FILE = %d %q", code, out)
	}
	self, _ := sim.MeasureSelf()
	if code, out, _ := attRun(t, "", "measure"); code != 0 || strings.TrimSpace(out) != hex.EncodeToString(self) {
		t.Fatalf("measure = %d %q", code, out)
	}
	if code, _, _ := attRun(t, "", "measure", filepath.Join(dir, "missing")); code != 2 {
		t.Fatalf("missing file: exit %d", code)
	}
	if code, _, _ := attRun(t, "", "measure", "a", "b"); code != 2 {
		t.Fatalf("two files: exit %d", code)
	}
}

func TestVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	b := attBundle(t, filepath.Join(dir, "data"))
	rawFile := filepath.Join(dir, "bundle.cbor")
	os.WriteFile(rawFile, b, 0o644)

	// Simulated evidence needs --allow-simulated.
	code, out, _ := attRun(t, "", "verify", rawFile)
	if code != 1 || !strings.HasPrefix(out, "INVALID") {
		t.Fatalf("without --allow-simulated: exit %d\n%s", code, out)
	}
	code, out, _ = attRun(t, "", "verify", rawFile, "--allow-simulated")
	if code != 0 || !strings.HasPrefix(out, "VALID") || !strings.Contains(out, "relaxation") {
		t.Fatalf("--allow-simulated: exit %d\n%s", code, out)
	}
	// Base64 on standard input, JSON output.
	code, out, _ = attRun(t, base64.StdEncoding.EncodeToString(b)+"\n", "verify", "--allow-simulated", "--json", "-")
	var resp acds.VerifyResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil || code != 0 || !resp.Valid || !resp.TEEQuoteVerified || !resp.EnclaveHashMatch || resp.MPCTLSVerified {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	if resp.Details.RequestID != "req-cli" || resp.Details.Source != "raw" || resp.Details.Profile != "sev-snp-sim" {
		t.Fatalf("details: %+v", resp.Details)
	}
	// The attested output.
	outFile := filepath.Join(dir, "out")
	os.WriteFile(outFile, []byte("out"), 0o644)
	if code, _, _ := attRun(t, "", "verify", "--allow-simulated", "--output", outFile, rawFile); code != 0 {
		t.Fatalf("--output: exit %d", code)
	}
	os.WriteFile(outFile, []byte("tampered"), 0o644)
	if code, _, _ := attRun(t, "", "verify", "--allow-simulated", "--output", outFile, rawFile); code != 1 {
		t.Fatalf("--output tampered: exit %d", code)
	}
	// A tampered bundle is invalid; junk is unreadable; usage errors.
	tampered := bytes.Clone(b)
	tampered[len(tampered)-3] ^= 1
	os.WriteFile(rawFile, tampered, 0o644)
	if code, _, _ := attRun(t, "", "verify", "--allow-simulated", rawFile); code != 1 && code != 2 {
		t.Fatalf("tampered: exit %d", code)
	}
	for _, args := range [][]string{{"verify"}, {"verify", "a", "b"}, {"verify", filepath.Join(dir, "missing")}, {"verify", "--server", "https://127.0.0.1:1"}, {"verify", "--bogus", rawFile}} {
		if code, _, _ := attRun(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if code, _, _ := attRun(t, "definitely not a bundle", "verify", "-"); code != 2 {
		t.Errorf("junk: exit %d, want 2", code)
	}
}

func TestManifestCommandsAndPolicy(t *testing.T) {
	dir := t.TempDir()
	b := attBundle(t, filepath.Join(dir, "data"))
	bundleFile := filepath.Join(dir, "bundle.b64")
	os.WriteFile(bundleFile, []byte(base64.StdEncoding.EncodeToString(b)), 0o644)
	self, _ := sim.MeasureSelf()

	desc := manifest.Description{
		Issuer: "ACDS test release", NotBefore: time.Now().Add(-time.Hour).UTC(), NotAfter: time.Now().Add(24 * time.Hour).UTC(),
		Profiles: map[string]manifest.ProfileDescription{"sev-snp-sim": {Measurements: []string{hex.EncodeToString(self)}}},
	}
	descJSON, _ := json.Marshal(desc)
	descFile := filepath.Join(dir, "manifest.json")
	os.WriteFile(descFile, descJSON, 0o644)
	keyFile := filepath.Join(dir, "publisher.key")
	signed := filepath.Join(dir, "manifest.cose")

	code, _, errOut := attRun(t, "", "manifest", "sign", "--key", keyFile, "--in", descFile, "--out", signed)
	if code != 0 || !strings.Contains(errOut, "created a new signing key") || !strings.Contains(errOut, "PUBLIC KEY") {
		t.Fatalf("sign: exit %d\n%s", code, errOut)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	key, created, err := manifest.LoadOrCreateKey(keyFile)
	if err != nil || created {
		t.Fatalf("reloading the key: %v %v", created, err)
	}
	pubFile := filepath.Join(dir, "publisher.pub")
	os.WriteFile(pubFile, manifest.MarshalPublicKey(key.Public().(ed25519.PublicKey)), 0o644)

	code, out, _ := attRun(t, "", "manifest", "verify", "--key", pubFile, "--in", signed)
	if code != 0 || !strings.Contains(out, hex.EncodeToString(self)) {
		t.Fatalf("manifest verify: exit %d\n%s", code, out)
	}
	// Another publisher's key.
	otherPub, _, _ := ed25519.GenerateKey(nil)
	otherFile := filepath.Join(dir, "other.pub")
	os.WriteFile(otherFile, []byte(hex.EncodeToString(otherPub)), 0o644)
	if code, _, _ := attRun(t, "", "manifest", "verify", "--key", otherFile, "--in", signed); code != 1 {
		t.Fatalf("wrong key: exit %d", code)
	}
	// acds verify with the signed manifest as policy.
	code, out, _ = attRun(t, "", "verify", "--policy", signed, "--manifest-key", pubFile, "--allow-simulated", bundleFile)
	if code != 0 {
		t.Fatalf("verify --policy: exit %d\n%s", code, out)
	}
	if code, _, _ := attRun(t, "", "verify", "--policy", signed, "--manifest-key", otherFile, "--allow-simulated", bundleFile); code != 2 {
		t.Fatalf("verify --policy with the wrong key: exit %d", code)
	}
	if code, _, _ := attRun(t, "", "verify", "--policy", signed, "--allow-simulated", bundleFile); code != 2 {
		t.Fatalf("signed policy without --manifest-key: exit %d", code)
	}
	// The unsigned description works as a local policy; one without this
	// binary's hash makes the bundle invalid.
	if code, _, _ := attRun(t, "", "verify", "--policy", descFile, "--allow-simulated", bundleFile); code != 0 {
		t.Fatalf("description policy: exit %d", code)
	}
	desc.Profiles["sev-snp-sim"] = manifest.ProfileDescription{Measurements: []string{strings.Repeat("ab", 48)}}
	descJSON, _ = json.Marshal(desc)
	os.WriteFile(descFile, descJSON, 0o644)
	if code, _, _ := attRun(t, "", "verify", "--policy", descFile, "--allow-simulated", bundleFile); code != 1 {
		t.Fatalf("foreign measurement: exit %d", code)
	}
	for _, args := range [][]string{{"manifest"}, {"manifest", "frob"}, {"manifest", "sign", "--key", keyFile}, {"manifest", "verify", "--in", signed}} {
		if code, _, _ := attRun(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// attTLSServer serves TLS on loopback with cert until the test ends.
func attTLSServer(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return "https://" + ln.Addr().String()
}

func TestVerifyServerCommand(t *testing.T) {
	b, err := sim.NewBackend(t.TempDir(), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := e.TLSCertificate(0)
	if err != nil {
		t.Fatal(err)
	}
	url := attTLSServer(t, cert)
	code, out, errOut := attRun(t, "", "verify", "--server", url, "--allow-simulated")
	if code != 0 || !strings.HasPrefix(out, "VALID") || !strings.Contains(out, "sev-snp-sim") {
		t.Fatalf("genuine enclave: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = attRun(t, "", "verify", "--server", url, "--json", "--allow-simulated")
	var resp acds.VerifyResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil || code != 0 || !resp.TEEQuoteVerified || !resp.EnclaveHashMatch {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	if code, _, _ := attRun(t, "", "verify", "--server", url); code != 1 {
		t.Fatalf("simulated enclave without --allow-simulated: exit %d", code)
	}
	// A plain TLS server is not an enclave.
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	plain := attTLSServer(t, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k})
	if code, out, _ := attRun(t, "", "verify", "--server", plain, "--allow-simulated"); code != 1 || !strings.Contains(out, "no enclave boot evidence") {
		t.Fatalf("plain TLS: exit %d\n%s", code, out)
	}
	// Nothing listening, or not https.
	closed := "https://127.0.0.1:" + dnstest.RefusedPort(t)
	for _, args := range [][]string{{"verify", "--server", closed}, {"verify", "--server", "http://127.0.0.1:1"}, {"verify", "--server", url, "bundle.b64"}} {
		if code, _, _ := attRun(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
)

// writeCA writes a P-256 CA certificate (valid from notBefore to notAfter;
// isCA false makes an end-entity certificate) and its PKCS #8 key as PEM
// files in dir, the key with mode keyMode, and returns the paths, the
// certificate and the key file's bytes.
func writeCA(t *testing.T, dir, name string, isCA bool, notBefore, notAfter time.Time, keyMode os.FileMode) (certFile, keyFile string, cert *x509.Certificate, keyPEM []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, keyMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, keyMode); err != nil { // past the umask
		t.Fatal(err)
	}
	return certFile, keyFile, cert, keyPEM
}

// `acds serve --tls --tls-ca-cert … --tls-ca-key …` serves a certificate
// issued by the operator CA, for the attested TLS key and carrying the
// boot evidence: a client trusting the CA connects with full chain and host
// name checks, `acds verify --server` still accepts the evidence, and a
// client trusting another CA is refused.
func TestServeTLSWithOperatorCA(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	caCert, caKey, ca, _ := writeCA(t, dir, "operator", true, now.Add(-time.Hour), now.Add(90*24*time.Hour), 0o600)
	base, logs, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--tls",
		"--tls-ca-cert", caCert, "--tls-ca-key", caKey)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("base = %s", base)
	}

	roots := x509.NewCertPool()
	roots.AddCert(ca)
	var leaf *x509.Certificate
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, // full chain and host name verification
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf = cs.PeerCertificates[0]
			return nil
		},
	}}}
	c, err := client.New(base, &client.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Attestation(context.Background())
	if err != nil {
		t.Fatalf("a client trusting the operator CA: %v", err)
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		t.Fatalf("the served certificate is not issued by the operator CA: %v", err)
	}
	if len(a.TLSKey) == 0 || !bytes.Equal(a.TLSKey, leaf.RawSubjectPublicKeyInfo) {
		t.Fatal("the CA-issued certificate's key is not the attested TLS key")
	}
	if !bytes.Equal(attestation.BootEvidenceFromCertificate(leaf), a.Boot) {
		t.Fatal("the CA-issued certificate does not carry the boot evidence")
	}

	// The evidence still verifies, exactly as a client checks it.
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"verify", "--server", base, "--allow-simulated"},
		env{stdout: &out, stderr: &errOut, stdin: strings.NewReader(""), getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("acds verify --server: exit %d\n%s%s", code, out.String(), errOut.String())
	}

	// A client that trusts another CA is refused by the chain check.
	_, _, other, _ := writeCA(t, t.TempDir(), "other", true, now.Add(-time.Hour), now.Add(time.Hour), 0o600)
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other)
	oc, _ := client.New(base, &client.Options{HTTPClient: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: otherRoots}}}})
	_, err = oc.Health(context.Background())
	var ua x509.UnknownAuthorityError
	var cv *tls.CertificateVerificationError
	if !errors.As(err, &ua) && !errors.As(err, &cv) {
		t.Fatalf("a client trusting another CA: %v", err)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d; logs:\n%s", code, logs)
	}
}

// The operator-CA flags go together, only with --tls; the key file must
// be private; the CA must be a valid CA whose key matches. Every mistake is
// a usage error (exit 2) that never prints the key.
func TestServeTLSCAFlags(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	cert, key, _, keyPEM := writeCA(t, dir, "ca", true, now.Add(-time.Hour), now.Add(time.Hour), 0o600)
	_, openKey, _, openPEM := writeCA(t, dir, "open", true, now.Add(-time.Hour), now.Add(time.Hour), 0o644)
	openCert := filepath.Join(dir, "open.crt")
	leafCert, leafKey, _, leafPEM := writeCA(t, dir, "leaf", false, now.Add(-time.Hour), now.Add(time.Hour), 0o600)
	oldCert, oldKey, _, oldPEM := writeCA(t, dir, "old", true, now.Add(-48*time.Hour), now.Add(-24*time.Hour), 0o600)
	_, otherKey, _, otherPEM := writeCA(t, dir, "other", true, now.Add(-time.Hour), now.Add(time.Hour), 0o600)
	secrets := [][]byte{keyPEM, openPEM, leafPEM, oldPEM, otherPEM}

	for name, args := range map[string][]string{
		"cert without key":        {"--tls", "--tls-ca-cert", cert},
		"key without cert":        {"--tls", "--tls-ca-key", key},
		"without --tls":           {"--tls-ca-cert", cert, "--tls-ca-key", key},
		"world-readable key":      {"--tls", "--tls-ca-cert", openCert, "--tls-ca-key", openKey},
		"missing key file":        {"--tls", "--tls-ca-cert", cert, "--tls-ca-key", filepath.Join(dir, "none.key")},
		"missing cert file":       {"--tls", "--tls-ca-cert", filepath.Join(dir, "none.crt"), "--tls-ca-key", key},
		"not a CA certificate":    {"--tls", "--tls-ca-cert", leafCert, "--tls-ca-key", leafKey},
		"expired CA":              {"--tls", "--tls-ca-cert", oldCert, "--tls-ca-key", oldKey},
		"key of another CA":       {"--tls", "--tls-ca-cert", cert, "--tls-ca-key", otherKey},
		"key file as certificate": {"--tls", "--tls-ca-cert", key, "--tls-ca-key", key},
	} {
		var stderr bytes.Buffer
		args = append([]string{"--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data")}, args...)
		code := runServe(context.Background(), env{args: args, stdout: io.Discard, stderr: &stderr, getenv: func(string) string { return "" }})
		if code != 2 || stderr.Len() == 0 {
			t.Errorf("%s: exit %d, stderr %q", name, code, stderr.String())
		}
		t.Logf("%s: %s", name, strings.TrimSpace(stderr.String()))
		for _, s := range secrets {
			body := strings.Join(strings.Split(string(s), "\n")[1:3], "")
			if strings.Contains(strings.ReplaceAll(stderr.String(), "\n", ""), body) {
				t.Errorf("%s: stderr carries the private key", name)
			}
		}
	}

	var stderr bytes.Buffer
	if code := runServe(context.Background(), env{args: []string{"-h"}, stdout: &stderr, stderr: io.Discard}); code != 0 || // help goes to standard output
		!strings.Contains(stderr.String(), "-tls-ca-cert") || !strings.Contains(stderr.String(), "-tls-ca-key") {
		t.Errorf("-h: exit %d, %s", code, stderr.String())
	}
}

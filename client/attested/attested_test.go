package attested_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"github.com/acds-project/acds/attestation"
	"math/big"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/verify"
)

// plainCert is a self-signed certificate without boot evidence.
func plainCert(t *testing.T) *x509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "plain"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func refusal(t *testing.T, err error, check verify.Check, want error) {
	t.Helper()
	var ce *verify.CertificateError
	if !errors.As(err, &ce) || !errors.Is(err, want) {
		t.Fatalf("got %v, want a *verify.CertificateError wrapping %v", err, want)
	}
	for _, f := range ce.Result.Failures {
		if f.Check == check {
			return
		}
	}
	t.Fatalf("failures %v do not name the %q check", ce.Result.Failures, check)
}

func TestRefusesWithoutEvidence(t *testing.T) {
	ch := mustChecker(t, anyPolicy)
	refusal(t, ch.VerifyConnection(tls.ConnectionState{}), verify.CheckEvidence, verify.ErrNoEvidence)
	cert := plainCert(t)
	refusal(t, ch.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}), verify.CheckEvidence, verify.ErrNoEvidence)
	if s := ch.Stats(); s.Refused != 2 || s.Verified != 0 || s.Cached != 0 { // no evidence, nothing to verify
		t.Fatalf("stats %+v", s)
	}
	if ch.Result(cert) != nil {
		t.Fatal("a refused certificate has a result")
	}
}

func TestRefusesOutsideTheManifestWindow(t *testing.T) {
	now := time.Now()
	m := &manifest.Manifest{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour),
		Profiles: map[string]manifest.Profile{attestation.ProfileSEVSNP: {Measurements: anyPolicy.Measurements[attestation.ProfileSEVSNP]}}}
	ch := mustChecker(t, verify.Policy{Manifest: m, Now: func() time.Time { return now }})
	err := ch.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{plainCert(t)}})
	refusal(t, err, verify.CheckManifest, verify.ErrManifest)
	if !errors.Is(err, manifest.ErrExpired) {
		t.Fatalf("the manifest's own error is not wrapped: %v", err)
	}
}

func TestClientNeedsHTTPS(t *testing.T) {
	ch := mustChecker(t, anyPolicy)
	if _, err := ch.Client("http://127.0.0.1:8080", nil); !errors.Is(err, client.ErrAttestedNeedsHTTPS) {
		t.Fatalf("http base URL: %v", err)
	}
	tr, err := ch.Transport(nil)
	if err != nil || tr.TLSClientConfig == nil || tr.TLSClientConfig.VerifyConnection == nil || !tr.TLSClientConfig.InsecureSkipVerify {
		t.Fatalf("transport: %v", err)
	}
	cfg := ch.TLSConfig("acds.example.org")
	if cfg.ServerName != "acds.example.org" || cfg.VerifyConnection == nil || cfg.MinVersion < tls.VersionTLS12 {
		t.Fatalf("TLS config: %+v", cfg)
	}
}

// anyPolicy allows one code hash that no test enclave has.
var anyPolicy = verify.Policy{Measurements: map[string][][]byte{attestation.ProfileSEVSNP: {make([]byte, 48)}}}

func mustChecker(t *testing.T, p verify.Policy) *attested.Checker {
	t.Helper()
	ch, err := attested.NewChecker(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

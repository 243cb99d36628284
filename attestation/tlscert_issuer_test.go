package attestation_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
)

// testCA makes a CA certificate for a new P-256 key, signed by parent (nil:
// self-signed), valid from notBefore to notAfter.
func testCA(t testing.TB, name string, parent *attestation.Issuer, notBefore, notAfter time.Time) *attestation.Issuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	signerCert, signer := tmpl, crypto.Signer(k)
	if parent != nil {
		signerCert, signer = parent.Certificate, parent.Signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &k.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &attestation.Issuer{Certificate: c, Signer: k}
}

func TestIssuedTLSCertificate(t *testing.T) {
	e, _ := newEnclave(t, true)
	root := testCA(t, "operator root", nil, issued.Add(-24*time.Hour), issued.Add(365*24*time.Hour))
	cert, err := e.IssuedTLSCertificate(root, time.Hour, "enclave.example.org", "192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Certificate) != 1 {
		t.Fatalf("chain of %d certificates under a root CA, want the leaf alone", len(cert.Certificate))
	}
	if !bytes.Equal(attestation.BootEvidenceFromCertificate(cert.Leaf), e.MarshalBootEvidence()) {
		t.Fatal("the CA-issued certificate does not carry the boot evidence")
	}
	if !cert.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(e.TLSSigner().Public()) {
		t.Fatal("the CA-issued certificate is not for the enclave's TLS key")
	}
	if cert.PrivateKey != e.TLSSigner() {
		t.Fatal("the certificate does not sign with the enclave's TLS signer")
	}
	roots := x509.NewCertPool()
	roots.AddCert(root.Certificate)
	for _, host := range []string{"enclave.example.org", "192.0.2.7", "localhost", "127.0.0.1"} {
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, CurrentTime: issued}); err != nil {
			t.Fatalf("%s: %v", host, err)
		}
	}
	if !cert.Leaf.NotAfter.Equal(issued.Add(time.Hour)) || !cert.Leaf.NotBefore.Equal(issued.Add(-time.Hour)) {
		t.Fatalf("valid %s to %s", cert.Leaf.NotBefore, cert.Leaf.NotAfter)
	}
	other := testCA(t, "another CA", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	pool := x509.NewCertPool()
	pool.AddCert(other.Certificate)
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: issued}); err == nil {
		t.Fatal("verified under another CA")
	}

	// nil: self-signed, as TLSCertificate.
	self, err := e.IssuedTLSCertificate(nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := self.Leaf.CheckSignature(self.Leaf.SignatureAlgorithm, self.Leaf.RawTBSCertificate, self.Leaf.Signature); err != nil {
		t.Fatalf("nil issuer: %v", err)
	}
}

// An intermediate CA is sent after the leaf, and the leaf never outlives
// the CA certificate.
func TestIssuedByIntermediate(t *testing.T) {
	e, _ := newEnclave(t, true)
	root := testCA(t, "operator root", nil, issued.Add(-24*time.Hour), issued.Add(365*24*time.Hour))
	mid := testCA(t, "operator intermediate", root, issued.Add(-2*time.Hour), issued.Add(10*24*time.Hour))
	cert, err := e.IssuedTLSCertificate(mid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Certificate) != 2 || !bytes.Equal(cert.Certificate[1], mid.Certificate.Raw) {
		t.Fatalf("chain of %d certificates, want leaf and intermediate", len(cert.Certificate))
	}
	if !cert.Leaf.NotAfter.Equal(mid.Certificate.NotAfter) {
		t.Fatalf("the leaf ends %s, after its CA (%s)", cert.Leaf.NotAfter, mid.Certificate.NotAfter)
	}
	if !cert.Leaf.NotBefore.Equal(issued.Add(-time.Hour)) {
		t.Fatalf("the leaf starts %s", cert.Leaf.NotBefore)
	}
	roots, inter := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(root.Certificate)
	inter.AddCert(mid.Certificate)
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: "localhost", CurrentTime: issued}); err != nil {
		t.Fatal(err)
	}
}

func TestIssuerCheck(t *testing.T) {
	e, _ := newEnclave(t, true)
	good := testCA(t, "operator root", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "not a CA"},
		NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, _ := x509.CreateCertificate(rand.Reader, leafTmpl, leafTmpl, &k.PublicKey, k)
	notCA, _ := x509.ParseCertificate(der)
	noSign := &x509.Certificate{SerialNumber: big.NewInt(10), Subject: pkix.Name{CommonName: "CA without certSign"},
		NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, _ = x509.CreateCertificate(rand.Reader, noSign, noSign, &k.PublicKey, k)
	noSignCert, _ := x509.ParseCertificate(der)

	for name, ca := range map[string]*attestation.Issuer{
		"nil":                nil,
		"no certificate":     {Signer: good.Signer},
		"no key":             {Certificate: good.Certificate},
		"not a CA":           {Certificate: notCA, Signer: k},
		"no certSign usage":  {Certificate: noSignCert, Signer: k},
		"key of another":     {Certificate: good.Certificate, Signer: k},
		"expired":            testCA(t, "old", nil, issued.Add(-48*time.Hour), issued.Add(-24*time.Hour)),
		"not yet valid":      testCA(t, "future", nil, issued.Add(time.Hour), issued.Add(48*time.Hour)),
		"ends at the moment": testCA(t, "ending", nil, issued.Add(-time.Hour), issued),
	} {
		if err := ca.Check(issued); !errors.Is(err, attestation.ErrIssuer) {
			t.Errorf("%s: Check: %v", name, err)
		}
		if _, err := e.IssuedTLSCertificate(ca, 0); ca != nil && !errors.Is(err, attestation.ErrIssuer) {
			t.Errorf("%s: issued: %v", name, err)
		}
	}
	if err := good.Check(issued); err != nil {
		t.Fatal(err)
	}
}

// csrFor makes a certificate request for key carrying ev (none when nil).
func csrFor(t testing.TB, key crypto.Signer, ev []byte) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}, DNSNames: []string{"localhost"}}
	if ev != nil {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: attestation.OIDBootEvidence, Value: ev}}
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestIssueRefusesRequests(t *testing.T) {
	e, _ := newEnclave(t, true)
	ca := testCA(t, "operator root", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	good, err := e.TLSCertificateRequest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(good, issued, 0); err != nil {
		t.Fatal(err)
	}
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	noTLS, _ := newEnclave(t, false)
	badSig := bytes.Clone(good)
	badSig[len(badSig)-3] ^= 1 // inside the signature
	for name, c := range map[string]struct {
		csr  []byte
		want error
	}{
		"garbage":                          {[]byte("not DER"), attestation.ErrMalformed},
		"too large":                        {make([]byte, attestation.MaxCertificateRequestSize+1), attestation.ErrTooLarge},
		"bad signature":                    {badSig, attestation.ErrSignature},
		"no evidence":                      {csrFor(t, e.TLSSigner(), nil), attestation.ErrMalformed},
		"evidence not binding the key":     {csrFor(t, otherKey, e.MarshalBootEvidence()), attestation.ErrMalformed},
		"evidence binding no TLS key":      {csrFor(t, otherKey, noTLS.MarshalBootEvidence()), attestation.ErrMalformed},
		"evidence that is not boot wire":   {csrFor(t, e.TLSSigner(), []byte{0xa0}), attestation.ErrMalformed},
		"evidence of the enclave, its key": {csrFor(t, e.TLSSigner(), e.MarshalBootEvidence()), nil},
	} {
		_, err := ca.Issue(c.csr, issued, 0)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := noTLS.TLSCertificateRequest(); !errors.Is(err, attestation.ErrNoTLSKey) {
		t.Fatalf("request without a TLS key: %v", err)
	}
	if _, err := noTLS.IssuedTLSCertificate(ca, 0); !errors.Is(err, attestation.ErrNoTLSKey) {
		t.Fatalf("issued without a TLS key: %v", err)
	}
}

// The enclave serves only a certificate for its own key and evidence.
func TestTLSCertificateFromChain(t *testing.T) {
	e, _ := newEnclave(t, true)
	other, _ := newEnclave(t, true)
	ca := testCA(t, "operator root", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	csr, _ := other.TLSCertificateRequest()
	chain, err := ca.Issue(csr, issued, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.TLSCertificateFromChain(chain); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TLSCertificateFromChain(chain); !errors.Is(err, attestation.ErrNotEnclaveCertificate) {
		t.Fatalf("another enclave's certificate: %v", err)
	}
	// Its own key, but without its evidence.
	self, _ := e.TLSCertificate(0)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(3), NotBefore: issued, NotAfter: issued.Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, e.TLSSigner().Public(), k)
	for name, c := range map[string][][]byte{
		"empty":            nil,
		"no evidence":      {der},
		"garbage":          {[]byte("x")},
		"too many":         bytes.SplitAfter(bytes.Repeat([]byte{1}, 9), nil),
		"own, self-signed": self.Certificate,
	} {
		_, err := e.TLSCertificateFromChain(c)
		if name == "own, self-signed" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.Is(err, attestation.ErrNotEnclaveCertificate) && !errors.Is(err, attestation.ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseIssuer(t *testing.T) {
	ca := testCA(t, "operator root", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate.Raw})
	p8, _ := x509.MarshalPKCS8PrivateKey(ca.Signer)
	sec1, _ := x509.MarshalECPrivateKey(ca.Signer.(*ecdsa.PrivateKey))
	for name, keyPEM := range map[string][]byte{
		"pkcs8": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}),
		"sec1":  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}),
	} {
		got, err := attestation.ParseIssuer(certPEM, keyPEM)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := got.Check(issued); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	// RSA, PKCS #1, with a chain after the CA certificate.
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "rsa intermediate"},
		NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, ca.Certificate, &rk.PublicKey, ca.Signer)
	rsaPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), certPEM...)
	rsaKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)})
	got, err := attestation.ParseIssuer(rsaPEM, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Chain) != 1 || !bytes.Equal(got.Chain[0].Raw, ca.Certificate.Raw) {
		t.Fatal("the certificates after the CA's are not its chain")
	}
	e, _ := newEnclave(t, true)
	cert, err := e.IssuedTLSCertificate(got, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.Certificate) != 3 {
		t.Fatalf("chain of %d, want leaf, intermediate, root as configured", len(cert.Certificate))
	}

	// Ed25519 CA over the enclave's P-256 key.
	_, ek, _ := ed25519.GenerateKey(rand.Reader)
	etmpl := &x509.Certificate{SerialNumber: big.NewInt(6), Subject: pkix.Name{CommonName: "ed25519 CA"},
		NotBefore: issued.Add(-time.Hour), NotAfter: issued.Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	eder, _ := x509.CreateCertificate(rand.Reader, etmpl, etmpl, ek.Public(), ek)
	ep8, _ := x509.MarshalPKCS8PrivateKey(ek)
	eca, err := attestation.ParseIssuer(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: eder}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ep8}))
	if err != nil {
		t.Fatal(err)
	}
	ecert, err := e.IssuedTLSCertificate(eca, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ecert.Leaf.CheckSignatureFrom(eca.Certificate); err != nil {
		t.Fatalf("ed25519 CA: %v", err)
	}

	other := testCA(t, "other", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	otherKey, _ := x509.MarshalPKCS8PrivateKey(other.Signer)
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: otherKey})
	for name, c := range map[string]struct {
		cert, key []byte
		want      error
	}{
		"mismatched key": {certPEM, otherPEM, attestation.ErrIssuer},
		"no key":         {certPEM, nil, attestation.ErrMalformed},
		"no certificate": {nil, otherPEM, attestation.ErrMalformed},
		"key as cert":    {otherPEM, otherPEM, attestation.ErrMalformed},
		"encrypted key":  {certPEM, pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}}), attestation.ErrMalformed},
		"corrupt key":    {certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8[:40]}), attestation.ErrMalformed},
		"too large":      {certPEM, make([]byte, attestation.MaxIssuerPEMSize+1), attestation.ErrTooLarge},
	} {
		_, err := attestation.ParseIssuer(c.cert, c.key)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
			continue
		}
		// Errors never carry key material.
		for _, secret := range [][]byte{otherPEM, p8} {
			if strings.Contains(err.Error(), string(secret[20:40])) {
				t.Errorf("%s: the error carries key bytes", name)
			}
		}
	}
}

// FuzzIssue: whatever request bytes reach the CA, it fails with a typed
// error or issues a certificate for the key the evidence binds.
func FuzzIssue(f *testing.F) {
	e, _ := newEnclave(f, true)
	ca := testCA(f, "operator root", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	good, err := e.TLSCertificateRequest("fuzz.example.org")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, csr []byte) {
		chain, err := ca.Issue(csr, issued, 0)
		if err != nil {
			if !errors.Is(err, attestation.ErrMalformed) && !errors.Is(err, attestation.ErrSignature) && !errors.Is(err, attestation.ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		leaf, err := x509.ParseCertificate(chain[0])
		if err != nil {
			t.Fatal(err)
		}
		boot, err := attestation.ParseBootEvidence(attestation.BootEvidenceFromCertificate(leaf))
		if err != nil {
			t.Fatal(err)
		}
		bound, err := boot.TLSPublicKey()
		if err != nil || bound == nil || !bound.Equal(leaf.PublicKey) {
			t.Fatal("issued a certificate for a key its evidence does not bind")
		}
	})
}

// FuzzParseIssuer: any pair of files yields an issuer whose key is its
// certificate's, or a typed error.
func FuzzParseIssuer(f *testing.F) {
	ca := testCA(f, "operator root", nil, issued.Add(-time.Hour), issued.Add(time.Hour))
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Certificate.Raw})
	p8, _ := x509.MarshalPKCS8PrivateKey(ca.Signer)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8})
	f.Add(certPEM, keyPEM)
	f.Add(certPEM, certPEM)
	f.Add(keyPEM, keyPEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), []byte{})
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte) {
		got, err := attestation.ParseIssuer(certPEM, keyPEM)
		if err != nil {
			if !errors.Is(err, attestation.ErrMalformed) && !errors.Is(err, attestation.ErrIssuer) && !errors.Is(err, attestation.ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		pub, ok := got.Signer.Public().(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(got.Certificate.PublicKey) {
			t.Fatal("an issuer whose key is not its certificate's")
		}
	})
}

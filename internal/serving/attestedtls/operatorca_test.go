package attestedtls_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/client/attested"
	"github.com/acds-project/acds/internal/serving/attestedtls"
	"github.com/acds-project/acds/verify"
)

// operatorCA makes a self-signed CA (P-256) valid from notBefore to notAfter.
func operatorCA(tb testing.TB, name string, notBefore, notAfter time.Time) *attestation.Issuer {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &attestation.Issuer{Certificate: c, Signer: k}
}

// caCertificate has ca certify key (whatever evidence it carries: ev, none
// when nil), bypassing the checks of attestation.Issuer.Issue, as a careless
// or compromised operator CA could.
func caCertificate(tb testing.TB, ca *attestation.Issuer, key crypto.Signer, ev []byte, notBefore, notAfter time.Time) tls.Certificate {
	tb.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "acds test server"},
		NotBefore:    notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if ev != nil {
		tmpl.ExtraExtensions = []pkix.Extension{{Id: attestation.OIDBootEvidence, Value: ev}}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Certificate, key.Public(), ca.Signer)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// caClient returns an attested client for base whose transport trusts the
// roots (nil: no RootCAs, the evidence alone decides), one connection per
// call.
func caClient(t *testing.T, ch *attested.Checker, base string, roots *x509.CertPool) *client.Client {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	if roots != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	c, err := ch.Client(base, &client.Options{HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A client that trusts the operator CA and checks the evidence accepts the
// CA-issued certificate of the enclave, and refuses, before a byte of any
// request reaches the server, a certificate from another CA, a CA-issued
// certificate for a key the quote does not bind, and an expired CA-issued
// certificate. A client without RootCAs still decides by the evidence.
func TestOperatorCA(t *testing.T) {
	h := getHarness(t)
	now := time.Now()
	ca := operatorCA(t, "acds operator CA", now.Add(-72*time.Hour), now.Add(365*24*time.Hour))
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate)

	// Served as `acds serve --tls --tls-ca-cert … --tls-ca-key …` does.
	certs, err := attestedtls.NewCertificates(h.enclave, attestedtls.Options{Issuer: ca})
	if err != nil {
		t.Fatal(err)
	}
	served, err := certs.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := served.Leaf.CheckSignatureFrom(ca.Certificate); err != nil {
		t.Fatalf("the served certificate is not the operator CA's: %v", err)
	}
	base, l := h.serveTLS(t, certs.TLSConfig())

	t.Run("accepted with the CA and the evidence", func(t *testing.T) {
		ch := mustChecker(t, h.policy(t), nil)
		c := caClient(t, ch, base, roots)
		resp, err := c.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = resp
		if s := ch.Stats(); s.Verified != 1 || s.Refused != 0 {
			t.Fatalf("stats %+v: want one evidence verification", s)
		}
		if r := ch.Result(served.Leaf); r == nil || !r.Valid || !bytes.Equal(r.Boot.TLSKey, h.enclave.BootEvidence().TLSKey) {
			t.Fatal("no valid result for the CA-issued certificate's key")
		}
	})

	t.Run("accepted without RootCAs, by the evidence", func(t *testing.T) {
		ch := mustChecker(t, h.policy(t), nil)
		if _, err := caClient(t, ch, base, nil).Health(context.Background()); err != nil {
			t.Fatal(err)
		}
	})

	// The CA adds to the evidence, never replaces it: a CA-issued
	// certificate of an enclave whose measurement the policy does not
	// allow is refused, with and without RootCAs.
	otherBuild := bytes.Clone(measurement)
	otherBuild[0] ^= 0xff
	for _, r := range []*x509.CertPool{roots, nil} {
		ch := mustChecker(t, h.policy(t, otherBuild), nil)
		before := l.appBytes.Load()
		_, err := caClient(t, ch, base, r).Health(context.Background())
		var ce *verify.CertificateError
		if !errors.As(err, &ce) || !errors.Is(err, verify.ErrMeasurement) {
			t.Fatalf("RootCAs %v, measurement outside the manifest: %v", r != nil, err)
		}
		if n := l.appBytes.Load() - before; n != 0 {
			t.Fatalf("the server read %d request bytes", n)
		}
	}

	other := operatorCA(t, "another CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	fromOther, err := h.enclave.IssuedTLSCertificate(other, 0)
	if err != nil {
		t.Fatal(err)
	}
	impostor, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	genuine := h.enclave.MarshalBootEvidence()
	unbound := caCertificate(t, ca, impostor, genuine, now.Add(-time.Hour), now.Add(time.Hour))

	// An enclave whose clock is two days back gets a CA-issued certificate
	// that ended yesterday.
	past := func() time.Time { return now.Add(-48 * time.Hour) }
	old, err := attestation.New(context.Background(), h.backend, attestation.Options{TLS: true, Now: past})
	if err != nil {
		t.Fatal(err)
	}
	oldCerts, err := attestedtls.NewCertificates(old, attestedtls.Options{Issuer: ca, Validity: 2 * time.Hour, Now: past})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := oldCerts.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !expired.Leaf.NotAfter.Before(now) || expired.Leaf.CheckSignatureFrom(ca.Certificate) != nil {
		t.Fatal("the old enclave's certificate is not an expired CA-issued one")
	}

	isCAError := func(err error) bool {
		var ua x509.UnknownAuthorityError
		var cv *tls.CertificateVerificationError
		return errors.As(err, &ua) || errors.As(err, &cv)
	}
	isExpired := func(err error) bool {
		var ci x509.CertificateInvalidError
		return errors.As(err, &ci) && ci.Reason == x509.Expired
	}
	for _, tc := range []struct {
		name    string
		cert    tls.Certificate
		withCA  func(error) bool // the refusal of the client with RootCAs
		checked bool             // whether that client's evidence check ran
		noCA    error            // the refusal of the client without RootCAs (nil: accepted)
	}{
		{"certificate from another CA", fromOther, isCAError, false, nil},
		{"CA-issued certificate for a key the quote does not bind", unbound,
			func(err error) bool { return errors.Is(err, verify.ErrTLSKeyNotBound) }, true, verify.ErrTLSKeyNotBound},
		{"expired CA-issued certificate", *expired, isExpired, false, verify.ErrCertificateTime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, l := h.serve(t, tc.cert, 0)
			ch := mustChecker(t, h.policy(t), nil)
			before := h.requests.Load()
			_, err := caClient(t, ch, base, roots).Anon(context.Background(), "a passphrase that must not leave")
			if err == nil || !tc.withCA(err) {
				t.Fatalf("with the operator CA: %v", err)
			}
			if s := ch.Stats(); (s.Verified != 0) != tc.checked || s.Cached != 0 {
				t.Fatalf("stats %+v: evidence checked %v, want %v", s, s.Verified != 0, tc.checked)
			}
			if n := h.requests.Load() - before; n != 0 {
				t.Fatalf("%d requests reached the server handler", n)
			}
			if l.conns.Load() == 0 {
				t.Fatal("the client never connected: the refusal proves nothing")
			}
			if n := l.appBytes.Load(); n != 0 {
				t.Fatalf("the server read %d request bytes", n)
			}

			// Without RootCAs the evidence alone decides.
			_, err = caClient(t, mustChecker(t, h.policy(t), nil), base, nil).Health(context.Background())
			if tc.noCA == nil && err != nil || tc.noCA != nil && !errors.Is(err, tc.noCA) {
				t.Fatalf("without RootCAs: %v, want %v", err, tc.noCA)
			}
		})
	}
}

// countingSigner counts the CA's signatures.
type countingSigner struct {
	crypto.Signer
	n atomic.Int64
}

func (s *countingSigner) Sign(r io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	s.n.Add(1)
	return s.Signer.Sign(r, digest, opts)
}

// Certificates issued by the operator CA rotate for the same key and never
// outlive the CA certificate; once the CA has ended nothing is issued.
func TestOperatorCARotation(t *testing.T) {
	h := getHarness(t)
	clk := &clock{t: time.Now()}
	start := clk.now()
	ca := operatorCA(t, "short-lived operator CA", start.Add(-time.Hour), start.Add(4*time.Hour))
	signed := &countingSigner{Signer: ca.Signer}
	ca.Signer = signed
	e, err := attestation.New(context.Background(), h.backend, attestation.Options{TLS: true, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	certs, err := attestedtls.NewCertificates(e, attestedtls.Options{Issuer: ca, Validity: 3 * time.Hour, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *tls.Certificate {
		t.Helper()
		c, err := certs.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Leaf.CheckSignatureFrom(ca.Certificate) != nil {
			t.Fatal("a certificate not issued by the operator CA")
		}
		if !bytes.Equal(attestation.BootEvidenceFromCertificate(c.Leaf), e.MarshalBootEvidence()) {
			t.Fatal("a certificate without the boot evidence")
		}
		return c
	}
	c1 := get()
	if !c1.Leaf.NotAfter.Equal(start.Add(3 * time.Hour).Truncate(time.Second)) {
		t.Fatalf("first certificate ends %s", c1.Leaf.NotAfter)
	}
	clk.add(2*time.Hour + time.Minute)
	c2 := get()
	if c2 == c1 || !c2.Leaf.NotAfter.Equal(ca.Certificate.NotAfter) {
		t.Fatalf("reissued certificate ends %s, want the CA's end %s", c2.Leaf.NotAfter, ca.Certificate.NotAfter)
	}
	if !bytes.Equal(c2.Leaf.RawSubjectPublicKeyInfo, c1.Leaf.RawSubjectPublicKeyInfo) {
		t.Fatal("a reissued certificate has another key")
	}
	// In its last third, but a new one would end no later: kept, and not
	// re-signed on every handshake.
	clk.add(time.Hour)
	if get() != c2 {
		t.Fatal("replaced by a certificate that ends no later")
	}
	n := signed.n.Load()
	for range 10 {
		if get() != c2 {
			t.Fatal("replaced on a later handshake")
		}
	}
	if signed.n.Load() != n {
		t.Fatalf("the CA signed %d more certificates that gain nothing", signed.n.Load()-n)
	}
	clk.add(7 * time.Minute) // past a thirtieth of the validity (6 min): tried again
	get()
	if signed.n.Load() != n+1 {
		t.Fatalf("%d signatures after the retry delay, want 1", signed.n.Load()-n)
	}

	p := h.policy(t)
	p.Now = clk.now
	base, _ := h.serveTLS(t, certs.TLSConfig())
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate)
	cfg := mustChecker(t, p, nil).TLSConfig("127.0.0.1")
	cfg.InsecureSkipVerify, cfg.RootCAs, cfg.Time = false, roots, clk.now
	conn, err := tls.Dial("tcp", base[len("https://"):], cfg)
	if err != nil {
		t.Fatalf("near the CA's end: %v", err)
	}
	conn.Close()

	// After the CA's end: nothing valid to serve, and the error says why.
	clk.add(time.Hour)
	if _, err := certs.GetCertificate(nil); !errors.Is(err, attestation.ErrIssuer) {
		t.Fatalf("after the CA ended: %v", err)
	}
	if _, err := attestedtls.NewCertificates(e, attestedtls.Options{Issuer: ca, Now: clk.now}); !errors.Is(err, attestation.ErrIssuer) {
		t.Fatalf("starting with an ended CA: %v", err)
	}
}

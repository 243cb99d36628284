package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/client"
)

// refusal is the typed error a peer check returns in these tests.
type refusal struct{ why string }

func (r *refusal) Error() string { return "refused: " + r.why }

// healthServer answers GET /v1/health over TLS on loopback and counts the
// requests that reached its handler.
func healthServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"healthy","version":"1.0.0","enclave":"test","uptime":"0h 00m"}`))
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, &n
}

func TestAttestedAcceptsWhatTheCheckAccepts(t *testing.T) {
	ts, n := healthServer(t)
	var seen atomic.Int64
	c, err := client.NewAttested(ts.URL, func(cs tls.ConnectionState) error {
		seen.Add(1)
		if len(cs.PeerCertificates) == 0 || !cs.PeerCertificates[0].Equal(ts.Certificate()) {
			return &refusal{"not the test server's certificate"}
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "healthy" {
		t.Fatalf("health through an accepting check: %+v %v", h, err)
	}
	if seen.Load() != 1 || n.Load() != 1 {
		t.Fatalf("check ran %d times, handler %d times; want 1 and 1", seen.Load(), n.Load())
	}
}

func TestAttestedRefusalSendsNothing(t *testing.T) {
	ts, n := healthServer(t)
	c, err := client.NewAttested(ts.URL, func(tls.ConnectionState) error { return &refusal{"no evidence"} }, &client.Options{MaxRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Health(context.Background())
	var r *refusal
	if !errors.As(err, &r) || r.why != "no evidence" {
		t.Fatalf("got %v, want the check's *refusal through the client's wrapping", err)
	}
	if n.Load() != 0 {
		t.Fatalf("the handler saw %d requests from a refused handshake", n.Load())
	}
}

func TestAttestedConfigurationErrors(t *testing.T) {
	ok := func(tls.ConnectionState) error { return nil }
	if _, err := client.NewAttested("http://127.0.0.1:1", ok, nil); !errors.Is(err, client.ErrAttestedNeedsHTTPS) {
		t.Errorf("http base URL: %v", err)
	}
	if _, err := client.NewAttested("https://user:secret@127.0.0.1:1", nil, nil); !errors.Is(err, client.ErrAttestedNoCheck) {
		t.Errorf("nil check: %v", err)
	}
	rt := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("unused") })
	if _, err := client.NewAttested("https://127.0.0.1:1", ok, &client.Options{HTTPClient: &http.Client{Transport: rt}}); !errors.Is(err, client.ErrAttestedTransport) {
		t.Errorf("custom RoundTripper: %v", err)
	}
	dialer := &http.Transport{DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("unused") }}
	if _, err := client.AttestedTransport(dialer, ok); !errors.Is(err, client.ErrAttestedTransport) {
		t.Errorf("DialTLSContext: %v", err)
	}
	_, err := client.NewAttested("ftp://user:secret@127.0.0.1:1", ok, nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error leaks URL credentials or is nil: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestAttestedRefusesRedirectToPlainHTTP(t *testing.T) {
	var plain atomic.Int64
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { plain.Add(1) }))
	defer p.Close()
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, p.URL+"/v1/health", http.StatusFound)
	}))
	defer ts.Close()
	c, err := client.NewAttested(ts.URL, func(tls.ConnectionState) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(context.Background()); !errors.Is(err, client.ErrAttestedNeedsHTTPS) {
		t.Fatalf("redirect to http: %v", err)
	}
	if plain.Load() != 0 {
		t.Fatal("the redirect reached the plain HTTP server")
	}
}

// With an operator CA (RootCAs set), the chain and host name are checked
// before the peer check, which never sees an untrusted chain.
func TestAttestedWithOperatorCA(t *testing.T) {
	ts, n := healthServer(t)
	var seen atomic.Int64
	check := func(tls.ConnectionState) error { seen.Add(1); return nil }

	// The server's own CA: accepted, and the check ran.
	c, err := client.NewAttested(ts.URL, check, &client.Options{HTTPClient: ts.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(context.Background()); err != nil || seen.Load() != 1 || n.Load() != 1 {
		t.Fatalf("operator CA that issued the certificate: %v (check %d, handler %d)", err, seen.Load(), n.Load())
	}

	// Another CA: refused by the chain check; the peer check never ran.
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other operator CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	c, err = client.NewAttested(ts.URL, check, &client.Options{HTTPClient: &http.Client{Transport: tr, Timeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Health(context.Background())
	var ue x509.UnknownAuthorityError
	var cve *tls.CertificateVerificationError
	if !errors.As(err, &ue) && !errors.As(err, &cve) {
		t.Fatalf("certificate from another CA: %v", err)
	}
	if seen.Load() != 1 || n.Load() != 1 {
		t.Fatalf("after a CA refusal: check %d, handler %d; want 1 and 1", seen.Load(), n.Load())
	}
}

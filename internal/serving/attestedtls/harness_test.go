package attestedtls_test

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"github.com/acds-project/acds/client/attested"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/verify"
)

// measurement is the code hash of the simulated test build.
var measurement = func() []byte { s := sha512.Sum384([]byte("acds attested TLS test build")); return s[:] }()

// harness is one simulated installation with two enclaves booted on it
// (the service, and "another server" whose evidence is genuine too), and
// one real ACDS server whose handler every test listener serves.
type harness struct {
	dir     string
	backend *sim.Backend
	enclave *attestation.Enclave // the service
	other   *attestation.Enclave // another genuine enclave
	cert    tls.Certificate      // the service's attested certificate
	srv     *server.Server
	st      store.Store
	handler http.Handler

	publisher ed25519.PrivateKey // signs the test manifests

	requests atomic.Int64 // requests that reached the server handler
}

var (
	hOnce sync.Once
	h     *harness
	hErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if h != nil {
		_ = h.srv.Close(context.Background())
		_ = h.st.Close()
		os.RemoveAll(h.dir)
	}
	os.Exit(code)
}

// getHarness builds the shared harness once (RSA key generation for the
// simulated chain is the slow part).
func getHarness(tb testing.TB) *harness {
	tb.Helper()
	hOnce.Do(func() { h, hErr = newHarness() })
	if hErr != nil {
		tb.Fatal(hErr)
	}
	return h
}

func newHarness() (*harness, error) {
	ctx := context.Background()
	x := &harness{}
	var err error
	if x.dir, err = os.MkdirTemp("", "acds-attestedtls-"); err != nil {
		return nil, err
	}
	if x.backend, err = sim.NewBackend(filepath.Join(x.dir, "enclave"), sim.Options{Measurement: measurement, RSABits: 2048}); err != nil {
		return nil, err
	}
	if x.enclave, err = attestation.New(ctx, x.backend, attestation.Options{TLS: true}); err != nil {
		return nil, err
	}
	if x.other, err = attestation.New(ctx, x.backend, attestation.Options{TLS: true}); err != nil {
		return nil, err
	}
	if x.cert, err = x.enclave.TLSCertificate(0); err != nil {
		return nil, err
	}
	if _, x.publisher, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, err
	}
	if x.st, err = sqlstore.OpenSQLite(ctx, filepath.Join(x.dir, "acds.db")); err != nil {
		return nil, err
	}
	x.srv, err = server.New(server.Config{
		Store: x.st, Pipeline: &servertest.Pipeline{}, Enclave: server.AttestationEnclave(x.enclave, nil), Verifier: servertest.Verifier{},
		RateLimit: -1, AuthRateLimit: -1, Workers: 1,
	})
	if err != nil {
		return nil, err
	}
	inner := x.srv.Handler()
	x.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.requests.Add(1)
		inner.ServeHTTP(w, r)
	})
	return x, nil
}

// policy trusts the harness's installation (its simulated root pinned) and
// the measurements of a manifest signed by the test publisher, verified as
// a client would.
func (x *harness) policy(tb testing.TB, allowed ...[]byte) verify.Policy {
	tb.Helper()
	if allowed == nil {
		allowed = [][]byte{measurement}
	}
	now := time.Now()
	signed, err := manifest.Sign(nil, &manifest.Manifest{
		Issuer:    "acds attested TLS tests",
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		Profiles: map[string]manifest.Profile{attestation.ProfileSEVSNPSim: {Measurements: allowed}},
	}, x.publisher)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := manifest.Verify(signed, x.publisher.Public().(ed25519.PublicKey), now)
	if err != nil {
		tb.Fatal(err)
	}
	return verify.Policy{Manifest: m, UnsafeAllowSimulation: true, SimulatedRoots: []*x509.Certificate{x.backend.Root()}}
}

// listener counts what reaches the server: TCP connections accepted and
// plaintext bytes read from TLS connections after their handshake (the
// bytes of requests).
type listener struct {
	net.Listener
	cfg      *tls.Config
	conns    atomic.Int64
	appBytes atomic.Int64
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.conns.Add(1)
	return &countingConn{Conn: tls.Server(c, l.cfg), n: &l.appBytes}, nil
}

type countingConn struct {
	net.Conn // a *tls.Conn: Read returns plaintext
	n        *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// serve runs the harness's server handler over TLS with cert on a loopback
// port (maxVersion 0: TLS 1.3) until the test ends, and returns the base
// URL and the listener's counters.
func (x *harness) serve(tb testing.TB, cert tls.Certificate, maxVersion uint16) (string, *listener) {
	tb.Helper()
	return x.serveTLS(tb, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion})
}

// serveTLS is serve with a TLS configuration.
func (x *harness) serveTLS(tb testing.TB, cfg *tls.Config) (string, *listener) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	l := &listener{Listener: ln, cfg: cfg}
	hs := &http.Server{Handler: x.handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go hs.Serve(l)
	tb.Cleanup(func() { hs.Close() })
	return "https://" + ln.Addr().String(), l
}

// certificate makes a certificate for signer's public key, signed by
// signer, carrying ev in the boot-evidence extension (none when nil), valid
// from notBefore to notAfter.
func certificate(tb testing.TB, signer crypto.Signer, ev []byte, notBefore, notAfter time.Time) tls.Certificate {
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, signer.Public(), signer)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: signer, Leaf: leaf}
}

// mustChecker is attested.NewChecker for a policy the test knows to be
// well-formed.
func mustChecker(tb testing.TB, p verify.Policy, o *attested.Options) *attested.Checker {
	tb.Helper()
	ch, err := attested.NewChecker(p, o)
	if err != nil {
		tb.Fatal(err)
	}
	return ch
}

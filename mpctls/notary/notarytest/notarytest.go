// Package notarytest provides what tests of notarized TLS need: a
// throwaway certificate authority, TLS servers on loopback, a notary on
// loopback whose resolver maps every name to 127.0.0.1, and nginx.
//
// Everything here listens on and dials loopback only.
package notarytest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/mpctls/notary"
)

// KeyType selects the server key algorithm.
type KeyType int

// Server key types.
const (
	ECDSA KeyType = iota // P-256
	RSA                  // 2048-bit
)

// String names the key type.
func (k KeyType) String() string {
	if k == RSA {
		return "rsa"
	}
	return "ecdsa"
}

// CA is a throwaway certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  []byte
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "acds test ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a server certificate for names, valid from an hour ago for
// a day.
func (ca *CA) Issue(t testing.TB, kt KeyType, names ...string) tls.Certificate {
	t.Helper()
	return ca.IssueValid(t, kt, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), names...)
}

// IssueValid makes a server certificate for names with the given validity.
func (ca *CA) IssueValid(t testing.TB, kt KeyType, notBefore, notAfter time.Time, names ...string) tls.Certificate {
	t.Helper()
	var key crypto.Signer
	var err error
	if kt == RSA {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}
}

// WriteFiles writes the certificate chain and key of c as PEM files in
// dir and returns their paths.
func WriteFiles(t testing.TB, dir string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	var chain []byte
	for _, der := range c.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, chain, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// LoopbackResolver resolves every name to 127.0.0.1.
type LoopbackResolver struct{}

// LookupNetIP implements notary.Resolver.
func (LoopbackResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// LoopbackOnly refuses any address that is not loopback, as a test
// notary's AllowAddr.
func LoopbackOnly(a netip.AddrPort) error {
	if !a.Addr().IsLoopback() {
		return errors.New("not loopback")
	}
	return nil
}

// Notary is a notary running on a loopback listener.
type Notary struct {
	*notary.Notary
	Addr string             // host:port of the listener
	Key  ed25519.PublicKey  // statement key
	Priv ed25519.PrivateKey // for tests that sign on their own
}

// StartNotary starts a notary on 127.0.0.1 with cfg, filling in a fresh
// key, the loopback resolver and a loopback-only AllowAddr when cfg leaves
// them empty. It is closed when the test ends.
func StartNotary(t testing.TB, cfg notary.Config) *Notary {
	t.Helper()
	if cfg.Key == nil {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Key = priv
	}
	if cfg.Resolver == nil {
		cfg.Resolver = LoopbackResolver{}
	}
	if cfg.AllowAddr == nil {
		cfg.AllowAddr = LoopbackOnly
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	n, err := notary.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Serve(l) }()
	t.Cleanup(func() {
		n.Close()
		// ErrClosed: the test ended before Serve began (a test that
		// skipped at once), which is not a failure of the notary.
		if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, notary.ErrClosed) {
			t.Errorf("notary serve: %v", err)
		}
	})
	return &Notary{Notary: n, Addr: l.Addr().String(), Key: n.PublicKey(), Priv: cfg.Key}
}

// StartTLSServer serves h over TLS with cfg on 127.0.0.1 and returns the
// port. It is closed when the test ends.
func StartTLSServer(t testing.TB, cfg *tls.Config, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ServeTLS(t, l, cfg, h)
}

// ServeTLS serves h over TLS with cfg on l (HTTP/1.1 only) and returns
// the port of l. The server is closed when the test ends.
func ServeTLS(t testing.TB, l net.Listener, cfg *tls.Config, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	// The server must not negotiate h2: the prover speaks HTTP/1.1.
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	go srv.Serve(tls.NewListener(l, cfg))
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// NginxConfig describes one nginx TLS server.
type NginxConfig struct {
	Cert       tls.Certificate // server certificate chain and key
	ServerName string          // server_name
	Protocols  string          // ssl_protocols, e.g. "TLSv1.3"
	// Ciphers is the TLS 1.2 cipher list (OpenSSL names); empty leaves
	// nginx's default.
	Ciphers string
	// Ciphersuites is the TLS 1.3 suite list (ssl_conf_command
	// Ciphersuites); empty leaves OpenSSL's default.
	Ciphersuites string
	// Curves is ssl_ecdh_curve (e.g. "secp384r1" to make a client whose
	// first key share is X25519 retry); empty leaves nginx's default.
	Curves string
	// Files maps a URL path below / to the content served there.
	Files map[string][]byte
}

// StartNginx runs nginx (daemon off, no master process, every path in a
// temporary directory) on a free 127.0.0.1 port and returns the port. It
// skips the test when no nginx binary is installed, and stops nginx when
// the test ends.
func StartNginx(t testing.TB, c NginxConfig) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		t.Skip("no nginx binary installed")
	}
	dir := t.TempDir()
	www := filepath.Join(dir, "www")
	if err := os.MkdirAll(www, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range c.Files {
		p := filepath.Join(www, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	certFile, keyFile := WriteFiles(t, dir, c.Cert)
	port := freePort(t)
	var tlsLines strings.Builder
	fmt.Fprintf(&tlsLines, "    ssl_protocols %s;\n", c.Protocols)
	if c.Ciphers != "" {
		fmt.Fprintf(&tlsLines, "    ssl_ciphers %s;\n    ssl_prefer_server_ciphers on;\n", c.Ciphers)
	}
	if c.Ciphersuites != "" {
		fmt.Fprintf(&tlsLines, "    ssl_conf_command Ciphersuites %s;\n", c.Ciphersuites)
	}
	if c.Curves != "" {
		fmt.Fprintf(&tlsLines, "    ssl_ecdh_curve %s;\n", c.Curves)
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  types { application/fhir+json json; }
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:%[2]s ssl;
    server_name %[3]s;
    ssl_certificate %[4]s;
    ssl_certificate_key %[5]s;
%[6]s    ssl_session_tickets off;
    ssl_session_cache off;
    keepalive_requests 1000;
    root %[7]s;
  }
}
`, dir, port, c.ServerName, certFile, keyFile, tlsLines.String(), www)
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", confFile)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
			return port
		}
		select {
		case err := <-exited:
			elog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s\n%s", err, out.String(), elog)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s in time", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

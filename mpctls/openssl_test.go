package mpctls

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePEM writes a test certificate and key where openssl can read them.
func writePEM(t *testing.T, cert tls.Certificate) (certFile, keyFile string) {
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	var cb bytes.Buffer
	for _, der := range cert.Certificate {
		pem.Encode(&cb, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	kd, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, cb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// startOpenSSL runs `openssl s_server` for one connection on loopback and
// returns its address.
func startOpenSSL(t *testing.T, args ...string) string {
	bin, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cmd := exec.CommandContext(ctx, bin, append([]string{"s_server", "-accept", "127.0.0.1:0", "-naccept", "1", "-www"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "ACCEPT "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return addr
		}
	}
	t.Fatal("openssl s_server did not start")
	return ""
}

// TestOpenSSLInterop covers the TLS 1.3 suites a crypto/tls server never
// picks against a crypto/tls client (AES-256-GCM, ChaCha20-Poly1305) and a
// non-Go server implementation: handshake check, statement, presentation.
func TestOpenSSLInterop(t *testing.T) {
	p := getPKI(t)
	key := testKey(t, 11)
	trusted := []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
	type tc struct {
		name  string
		cert  tls.Certificate
		args  []string
		suite uint16
		hrr   bool
	}
	var cases []tc
	for _, s := range []uint16{0x1301, 0x1302, 0x1303} {
		su, _ := SuiteByID(s)
		cases = append(cases,
			tc{"tls13/" + su.Name + "/ecdsa", p.ecdsa, []string{"-tls1_3", "-ciphersuites", su.Name}, s, false},
			tc{"tls13/" + su.Name + "/rsa", p.rsa, []string{"-tls1_3", "-ciphersuites", su.Name}, s, false})
	}
	cases = append(cases,
		tc{"tls13/hello-retry", p.ecdsa, []string{"-tls1_3", "-groups", "P-384"}, 0x1301, true},
		tc{"tls12/ECDHE_RSA_AES_256_GCM", p.rsa, []string{"-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"}, 0xc030, false},
		tc{"tls12/ECDHE_ECDSA_CHACHA20", p.ecdsa, []string{"-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"}, 0xcca9, false},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf, kf := writePEM(t, c.cert)
			addr := startOpenSSL(t, append([]string{"-cert", cf, "-key", kf}, c.args...)...)
			cap := captureClient(t, addr, &tls.Config{})
			if cap.state.CipherSuite != c.suite {
				t.Fatalf("negotiated %#04x", cap.state.CipherSuite)
			}
			hs, stmt := notarize(t, cap, key)
			if hs.HelloRetry != c.hrr {
				t.Fatalf("hello retry %v", hs.HelloRetry)
			}
			pr, err := BuildPresentation(cap.records, stmt, serverSecret(t, cap, hs), []uint64{hs.ServerProtectedFrom}, serverSeqs(cap, hs.ServerProtectedFrom))
			if err != nil {
				t.Fatal(err)
			}
			d, err := VerifyPresentation(stmt, pr, trusted)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(d.Data(), cap.response) || len(cap.response) == 0 || !d.Complete {
				t.Fatalf("disclosed %q, want %q", d.Data(), cap.response)
			}
		})
	}
}

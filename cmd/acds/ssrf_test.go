package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/testrig/dnstest"
	"github.com/acds-project/acds/mpctls/notary"
	"github.com/acds-project/acds/mpctls/notary/notarytest"
)

// trapListener counts the connections accepted on it and the bytes read
// from them.
type trapListener struct {
	net.Listener
	conns, bytes atomic.Int64
}

func (l *trapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.Add(1)
		c = &trapConn{Conn: c, l: l}
	}
	return c, err
}

type trapConn struct {
	net.Conn
	l *trapListener
}

func (c *trapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.bytes.Add(int64(n))
	return n, err
}

// startTrapPortal is an HTTPS server on loopback for trap.portal.test,
// with a certificate the portal CA issues (so a TLS session to it would
// succeed), recording every request it gets.
func startTrapPortal(t *testing.T, ca *notarytest.CA) (*trapListener, string, func() []string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := &trapListener{Listener: l}
	var mu sync.Mutex
	var seen []string
	port := notarytest.ServeTLS(t, tl, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, notarytest.ECDSA, "trap.portal.test")}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+string(b))
			mu.Unlock()
			http.Error(w, "trap", http.StatusUnauthorized)
		}))
	return tl, port, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), seen...) }
}

// TestExternalNotarySSRF is issue 15's SSRF through an external notary:
// `acds serve --notary HOST:PORT` without --allow-private-portals, and a
// portal name that the notary's resolver (a stub) maps to 127.0.0.1,
// where a trap listens with a certificate the portal CA issued.
//
//   - default `acds notary`: it refuses the target; no connection reaches
//     the trap;
//   - `acds notary --allow-private-targets` (a notary laxer than the
//     service): it dials the trap, but serve checks the address the
//     notary reports and sends nothing, not even a ClientHello.
//
// Either way the request fails forbidden-portal, the credentials never
// leave, and no answer names the address.
func TestExternalNotarySSRF(t *testing.T) {
	for _, c := range []struct {
		name      string
		notaryArg []string
		maxConns  int64
	}{
		{"notary guard", nil, 0},
		{"serve checks the reported address", []string{"--allow-private-targets"}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := notarytest.NewCA(t)
			caFile := filepath.Join(dir, "portal-ca.pem")
			if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
				t.Fatal(err)
			}
			trap, port, seen := startTrapPortal(t, ca)
			dns := dnstest.Start(t, map[string]dnstest.Mode{"trap.portal.test.": dnstest.Loopback})

			args := append([]string{"--addr", "127.0.0.1:0", "--key", filepath.Join(dir, "notary.key"), "--portal-ca", caFile}, c.notaryArg...)
			out, naddr, stopNotary, nlog := startNotaryCmdResolver(t, dns.Resolver(), args...)
			pub, err := notary.ParsePublicKey(out)
			if err != nil {
				t.Fatal(err)
			}
			pubPEM, err := notary.MarshalPublicKey(pub)
			if err != nil {
				t.Fatal(err)
			}
			keyFile := filepath.Join(dir, "notary.pub")
			if err := os.WriteFile(keyFile, pubPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			base, logs, stop := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
				"--portal-ca", caFile, "--notary", naddr, "--notary-key", keyFile)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, _ := client.New(base, &client.Options{PollInterval: 50 * time.Millisecond})
			sess, err := cl.Anon(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			cl = cl.WithToken(sess.Token)
			const user, password = "trap-user-5521", "trap-password-SECRET-8830"
			acc, err := cl.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic,
				PortalURL: "https://trap.portal.test:" + port + "/fhir", RecordID: "pat-1",
				Username: user, Password: password, OutputFormat: acds.OutputFHIRR4})
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := cl.Wait(ctx, acc.RequestID)
			if rec.Status != acds.StatusFailed || rec.Error == nil || rec.Error.Code() != acds.ProblemForbiddenPortal {
				t.Errorf("request = %s %+v, want failed forbidden-portal", rec.Status, rec.Error)
			}
			if rec.Error != nil && strings.Contains(rec.Error.Detail, "127.0.0.1") {
				t.Errorf("the problem names the address: %s", rec.Error.Detail)
			}
			if stop() != 0 {
				t.Error("serve did not stop cleanly")
			}
			if stopNotary() != 0 {
				t.Error("notary did not stop cleanly")
			}
			if n := trap.conns.Load(); n > c.maxConns {
				t.Errorf("%d connections reached the trap; want at most %d", n, c.maxConns)
			}
			if n := trap.bytes.Load(); n != 0 {
				t.Errorf("the trap received %d bytes; want none", n)
			}
			if s := seen(); len(s) != 0 {
				t.Errorf("the trap got requests: %q", s)
			}
			for _, secret := range []string{password, sess.Token} {
				if strings.Contains(logs.String(), secret) || strings.Contains(nlog.String(), secret) {
					t.Errorf("a log contains %q", secret)
				}
			}
		})
	}
}

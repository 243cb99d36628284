package attestedtls_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/verify"
)

// passthrough relays TCP bytes to target unchanged (a layer-4 load
// balancer) and returns its https URL.
func passthrough(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go io.Copy(u, c)
				io.Copy(c, u)
			}()
		}
	}()
	return "https://" + ln.Addr().String()
}

// TLS passthrough keeps the session end to end with the enclave: accepted.
// A TLS-terminating proxy in front of the same enclave is refused, whether
// it presents its own certificate or one carrying the enclave's evidence,
// and neither it nor the enclave behind it receives a request byte.
func TestProxies(t *testing.T) {
	h := getHarness(t)
	base, _ := h.serve(t, h.cert, 0)
	target := base[len("https://"):]
	ctx := context.Background()

	ch := mustChecker(t, h.policy(t), nil)
	if _, err := newClient(t, ch, passthrough(t, target)).Health(ctx); err != nil {
		t.Fatalf("through TLS passthrough: %v", err)
	}

	// The proxy decrypts, then re-encrypts to the enclave (trusting it).
	u, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	rp.ErrorLog = log.New(io.Discard, "", 0)
	var proxied atomic.Int64
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { proxied.Add(1); rp.ServeHTTP(w, r) })
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name string
		cert tls.Certificate
		want error
	}{
		{"own certificate", certificate(t, key, nil, now.Add(-time.Hour), now.Add(time.Hour)), verify.ErrNoEvidence},
		{"enclave's evidence", certificate(t, key, attestation.BootEvidenceFromCertificate(h.cert.Leaf), now.Add(-time.Hour), now.Add(time.Hour)), verify.ErrTLSKeyNotBound},
	} {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{tc.cert}})
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: proxy, ErrorLog: log.New(io.Discard, "", 0)}
		go hs.Serve(ln)
		before := h.requests.Load()
		_, err = newClient(t, ch, "https://"+ln.Addr().String()).Anon(ctx, "a passphrase that must not leave")
		hs.Close()
		if !errors.Is(err, tc.want) {
			t.Errorf("terminating proxy with its %s: %v, want %v", tc.name, err, tc.want)
		}
		if proxied.Load() != 0 || h.requests.Load() != before {
			t.Errorf("terminating proxy with its %s: a request got through", tc.name)
		}
	}
}

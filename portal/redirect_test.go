package portal

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
)

// TestConnectorRechecksRedirects: a portal (reached by name, so the strict
// guard lets the URL through) that redirects its FHIR API to the metadata
// address or to plain http is refused before anything is dialled there.
func TestConnectorRechecksRedirects(t *testing.T) {
	var mu sync.Mutex
	var dialed []string
	for _, target := range []string{"https://169.254.169.254/latest/meta-data/", "http://portal.example/fhir/Patient/1", "https://[::ffff:10.0.0.1]/x"} {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target, http.StatusFound)
		}))
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
			// Stands in for DNS: every dial goes to the test server on
			// loopback, and is recorded.
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				mu.Lock()
				dialed = append(dialed, addr)
				mu.Unlock()
				return (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, "127.0.0.1:"+port)
			},
		}
		c := &Connector{Backoff: time.Millisecond} // the strict guard
		_, err := c.Fetch(context.Background(), &http.Client{Transport: tr}, Request{
			SystemType: acds.SystemFHIRBasic, PortalURL: "https://portal.example:" + port + "/fhir", RecordID: "p1", Credentials: testCreds})
		if !errors.Is(err, ErrForbidden) {
			t.Errorf("redirect to %s: %v, want forbidden", target, err)
		}
		tr.CloseIdleConnections()
		srv.Close()
	}
	for _, a := range dialed {
		if host, _, _ := net.SplitHostPort(a); host != "portal.example" {
			t.Errorf("dialled %s", a)
		}
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for h, want := range map[string]time.Duration{
		"0": 0, "7": 7 * time.Second, " 2 ": 2 * time.Second,
		"99999999999999999999":          time.Duration(1<<32) * time.Second,
		"Thu, 01 Jan 2026 00:00:30 GMT": 30 * time.Second,
		"Wed, 31 Dec 2025 00:00:00 GMT": 0,
	} {
		got, ok := retryAfter(h, now)
		if !ok || got != want {
			t.Errorf("retryAfter(%q) = %v, %v; want %v", h, got, ok, want)
		}
	}
	for _, h := range []string{"", "-1", "soon", "1.5"} {
		if _, ok := retryAfter(h, now); ok {
			t.Errorf("retryAfter(%q) accepted", h)
		}
	}
}

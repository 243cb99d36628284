package portal

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/testrig/dnstest"
)

// TestPlainTransportErrorsTellTheTruth: through the guard's own dialer
// (GuardedDialer, the non-notarized transport), a name that does not
// resolve, a failing or silent resolver and a refused connection are
// ErrUnavailable (portal-unavailable), a name resolving to loopback under
// the strict guard is ErrForbidden; no error text names the resolver,
// the resolved address or "lookup … on …". The resolver is a
// net.Resolver asking a fake DNS server on loopback.
func TestPlainTransportErrorsTellTheTruth(t *testing.T) {
	dns := dnstest.Start(t, map[string]dnstest.Mode{
		"servfail.portal.test.": dnstest.ServFail,
		"silent.portal.test.":   dnstest.Silent,
		"closed.portal.test.":   dnstest.Loopback,
	})
	port := dnstest.RefusedPort(t)
	for _, tc := range []struct {
		name, url, host string
		guard           Guard
		code, want      string
	}{
		{"NXDOMAIN", "https://portal.example.org/fhir", "portal.example.org", Guard{}, acds.ProblemPortalUnavailable, "the name does not resolve"},
		{"SERVFAIL", "https://servfail.portal.test/fhir", "servfail.portal.test", Guard{}, acds.ProblemPortalUnavailable, "resolving the name failed"},
		{"timeout", "https://silent.portal.test/fhir", "silent.portal.test", Guard{}, acds.ProblemPortalUnavailable, "resolving the name timed out"},
		{"connection refused", "https://closed.portal.test:" + port + "/fhir", "closed.portal.test", Guard{AllowPrivate: true}, acds.ProblemPortalUnavailable, "connection refused"},
		{"resolves to loopback", "https://closed.portal.test:" + port + "/fhir", "closed.portal.test", Guard{}, acds.ProblemForbiddenPortal, "loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &GuardedDialer{Guard: tc.guard, Resolver: dns.Resolver()}
			hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
			c := &Connector{Guard: tc.guard, MaxRetries: -1}
			_, err := c.Fetch(context.Background(), hc, Request{SystemType: acds.SystemFHIRBasic, PortalURL: tc.url, RecordID: "pat-1", Credentials: testCreds})
			if err == nil {
				t.Fatal("fetched")
			}
			msg := err.Error()
			t.Logf("%s", msg)
			if got := ProblemCode(err); got != tc.code {
				t.Errorf("code %s, want %s", got, tc.code)
			}
			if !strings.Contains(msg, tc.host) || !strings.Contains(msg, tc.want) {
				t.Errorf("%q does not say that %s: %s", msg, tc.host, tc.want)
			}
			if leaks := dns.Leaks(msg, "dial tcp"); leaks != nil {
				t.Errorf("%q gives away %q", msg, leaks)
			}
		})
	}
	if len(dns.Asked()) == 0 {
		t.Fatal("the fake DNS server was never asked")
	}
}

// TestNotaryDownIsTheServicesFault: when the notary cannot be reached the
// fetch fails as notarization (unavailable: the service's side, not the
// portal's), and the error does not name the notary's address.
func TestNotaryDownIsTheServicesFault(t *testing.T) {
	notaryAddr := "127.0.0.1:" + dnstest.RefusedPort(t)
	pub, _, _ := ed25519.GenerateKey(nil)
	f := &Fetcher{Connector: Connector{Guard: Guard{AllowPrivate: true}, MaxRetries: -1},
		NewTransport: Notarized{Notary: notaryAddr, NotaryKeys: []ed25519.PublicKey{pub}, Guard: Guard{AllowPrivate: true}}.Factory()}
	_, err := f.Fetch(context.Background(), Request{SystemType: acds.SystemFHIRBasic, PortalURL: "https://" + portalHost + "/fhir", RecordID: "pat-1", Credentials: testCreds})
	if err == nil {
		t.Fatal("fetched without a notary")
	}
	t.Logf("%s", err)
	if got := ProblemCode(err); got != acds.ProblemUnavailable {
		t.Errorf("code %s, want %s", got, acds.ProblemUnavailable)
	}
	if strings.Contains(err.Error(), notaryAddr) || strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("%q names the notary's address", err)
	}
}

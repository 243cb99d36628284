package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/testrig/dnstest"
	"github.com/acds-project/acds/service"
)

// TestUnreachablePortalIsUnavailable: a portal whose name does not
// resolve (NXDOMAIN), whose resolver fails (SERVFAIL) or stays silent, or
// that refuses the connection, ends the request failed with
// portal-unavailable; a name that resolves to a refused address ends it
// forbidden-portal. No detail names the service's resolver, the notary,
// any address, or "lookup … on …"; each names the portal's host. The
// in-process notary resolves through a net.Resolver whose queries go to a
// fake DNS server on loopback. (Before, a name that did not resolve ended
// forbidden-portal with "lookup portal.example.org on 10.x.x.x:53: no such
// host", and a refused address was named in the detail.)
func TestUnreachablePortalIsUnavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dns := dnstest.Start(t, map[string]dnstest.Mode{
		"servfail.portal.test.": dnstest.ServFail,
		"silent.portal.test.":   dnstest.Silent,
		"closed.portal.test.":   dnstest.Loopback,
	})
	closedPort := dnstest.RefusedPort(t) // held, never listening: connection refused

	start := func(allowPrivate bool) (*service.Service, *client.Client) {
		o := service.Options{DataDir: dataDir(t), AllowPrivatePortals: allowPrivate}
		service.SetPortalResolver(&o, dns.Resolver())
		svc, c := open(t, o)
		c, _ = session(t, ctx, c)
		return svc, c
	}
	strictSvc, strict := start(false)
	laxSvc, lax := start(true)

	cases := []struct {
		name, url, host string
		c               *client.Client
		code, want      string // want: in the detail
	}{
		{"NXDOMAIN", "https://portal.example.org/fhir", "portal.example.org", strict, acds.ProblemPortalUnavailable, "could not be resolved"},
		{"SERVFAIL", "https://servfail.portal.test/fhir", "servfail.portal.test", strict, acds.ProblemPortalUnavailable, "could not be resolved"},
		{"timeout", "https://silent.portal.test/fhir", "silent.portal.test", strict, acds.ProblemPortalUnavailable, "could not be resolved"},
		{"connection refused", "https://closed.portal.test:" + closedPort + "/fhir", "closed.portal.test", lax, acds.ProblemPortalUnavailable, "answered"},
		{"resolves to loopback", "https://closed.portal.test:" + closedPort + "/fhir", "closed.portal.test", strict, acds.ProblemForbiddenPortal, "refused its address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acc, err := tc.c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: tc.url,
				RecordID: "pat-1", Username: "u", Password: "p"})
			if err != nil {
				t.Fatalf("not accepted: %v", err)
			}
			rec, err := tc.c.Wait(ctx, acc.RequestID)
			if rec == nil {
				t.Fatalf("wait: %v", err)
			}
			if rec.Status != acds.StatusFailed || rec.Error == nil {
				t.Fatalf("request ended %s, %+v", rec.Status, rec.Error)
			}
			p := rec.Error
			t.Logf("%s: %s: %s", tc.url, p.Code(), p.Detail)
			if p.Code() != tc.code || p.Status != acds.ProblemStatus(tc.code) {
				t.Errorf("code %s (%d), want %s", p.Code(), p.Status, tc.code)
			}
			if !strings.Contains(p.Detail, tc.host) || !strings.Contains(p.Detail, tc.want) {
				t.Errorf("detail %q does not say that %s %s", p.Detail, tc.host, tc.want)
			}
			if leaks := dns.Leaks(p.Detail, strictSvc.NotaryAddr(), laxSvc.NotaryAddr(), "dial tcp"); leaks != nil {
				t.Errorf("detail %q gives away %q", p.Detail, leaks)
			}
		})
	}
	if len(dns.Asked()) == 0 {
		t.Fatal("the fake DNS server was never asked: the stub is not in use")
	}
}

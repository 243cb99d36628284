package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// TestSecretsNeverLeak runs every flow with recognisable secrets and scans
// every log line, every response body (other than the one that issues a
// token, for that token) and the stored rows for them.
func TestSecretsNeverLeak(t *testing.T) {
	const (
		passphrase = "PASSPHRASE-zebra-quartz-917"
		username   = "USERNAME-walrus-5521"
		password   = "PASSWORD-kumquat-8832"
	)
	failing := &servertest.Fetcher{Err: errors.New("portal said: invalid login for " + username + " with " + password)}
	ok := &servertest.Fetcher{FHIR: []byte(sampleBundle)}
	var fetcher server.Fetcher = ok
	h := newHarness(t, func(c *server.Config) { c.Fetcher = fetcherFunc(func() server.Fetcher { return fetcher }) })

	resp, b := h.do("POST", "/v1/auth/anon", "", acds.AnonRequest{Passphrase: passphrase})
	if resp.StatusCode != 201 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	s1 := decode[acds.Session](t, b)
	resp, b = h.do("POST", "/v1/auth/recover", "", acds.RecoverRequest{Pseudonym: s1.Pseudonym, Passphrase: passphrase})
	s2 := decode[acds.Session](t, b)
	h.do("POST", "/v1/auth/recover", "", acds.RecoverRequest{Pseudonym: s1.Pseudonym, Passphrase: passphrase + "x"})
	issued := h.allBodies() // the responses that issue tokens
	h.mu.Lock()
	h.bodies = nil
	h.mu.Unlock()

	req := acds.FetchAndAttestRequest{
		SystemType: acds.SystemDemo, PortalURL: "https://portal.example/", RecordID: "p1",
		Username: username, Password: password, OutputFormat: acds.OutputFHIRR4,
	}
	_, b = h.do("POST", "/v1/fetch-and-attest", s1.Token, req)
	okID := decode[acds.Accepted](t, b).RequestID
	h.wait(s1.Token, okID, 5*time.Second)
	fetcher = failing
	_, b = h.do("POST", "/v1/fetch-and-attest", s2.Token, req)
	failID := decode[acds.Accepted](t, b).RequestID
	r := h.wait(s2.Token, failID, 5*time.Second)
	if r.Status != acds.StatusFailed || !strings.Contains(r.Error.Detail, "[redacted]") {
		t.Fatalf("failed fetch = %+v %+v", r, r.Error)
	}
	// Bad input echoing secrets back must not reflect them either.
	h.do("POST", "/v1/fetch-and-attest", s1.Token, `{"systemType":"demo","portalUrl":"https://p.example","recordId":"1","username":"`+username+`","password":"`+password+`","extra":1,"outputFormat":"fhir_r4"}`)
	h.do("POST", "/v1/fetch-and-attest", s1.Token, `{"systemType":"demo","portalUrl":"https://p.example","recordId":"1","username":"`+username+`","password":`+strings.ReplaceAll(password, "-", "")+`,"outputFormat":"fhir_r4"}`)
	h.do("POST", "/v1/process", s1.Token, processBody(acds.OutputFHIRR4))
	h.do("GET", "/v1/requests", s1.Token, nil)
	h.do("GET", "/v1/requests/"+okID, s1.Token, nil)
	h.do("DELETE", "/v1/requests/"+okID, s1.Token, nil)
	h.do("GET", "/v1/requests", s1.Token+"x", nil)

	logs := h.logs.String()
	if !strings.Contains(logs, "request accepted") {
		t.Fatalf("the logs were not captured: %q", logs)
	}
	later := h.allBodies()
	for _, secret := range []string{passphrase, username, password, strings.ReplaceAll(password, "-", ""), s1.Token, s2.Token, s1.Token[5:], s2.Token[5:]} {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line contains the secret %q", secret)
		}
		if strings.Contains(later, secret) {
			t.Errorf("a response contains the secret %q", secret)
		}
	}
	if strings.Contains(issued, passphrase) {
		t.Error("a session response contains the passphrase")
	}
	for _, row := range h.store.(*servertest.MemStore).Snapshot() {
		for _, secret := range []string{passphrase, username, password} {
			if strings.Contains(string(row.Input)+string(row.Sealed)+string(row.Result)+string(row.Error), secret) {
				t.Errorf("stored request %s contains %q", row.ID, secret)
			}
		}
	}
}

// fetcherFunc lets a test switch fetchers between requests.
type fetcherFunc func() server.Fetcher

func (f fetcherFunc) Admit(r portal.Request) error { return f().Admit(r) }

func (f fetcherFunc) Fetch(ctx context.Context, r portal.Request) (*portal.Result, error) {
	return f().Fetch(ctx, r)
}

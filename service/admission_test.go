package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/mpctls/prover"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/service"
)

// admissionRow is one portalUrl and recordId with the decision expected
// with the strict guard and with AllowPrivatePortals: "" admits, else the
// problem code of the refusal.
type admissionRow struct {
	url, id      string
	strict, lax  string
	dialDecision bool // the refusal, if any, is the address's: the dial decides it too
}

const (
	admit     = ""
	forbidden = acds.ProblemForbiddenPortal
	invalid   = acds.ProblemInvalidRequest
)

func admissionRows() []admissionRow {
	addr := func(u, strict string) admissionRow {
		return admissionRow{url: u, id: "pat-1", strict: strict, lax: admit, dialDecision: true}
	}
	id := func(id, want string) admissionRow {
		return admissionRow{url: "https://portal.example/fhir", id: id, strict: want, lax: want, dialDecision: want == admit}
	}
	return []admissionRow{
		addr("https://portal.example/fhir", admit),
		addr("https://93.184.216.34/fhir", admit),
		addr("https://[2606:4700::1111]/fhir", admit),
		addr("https://[64:ff9b::5db8:d822]/fhir", admit), // NAT64 of a public address
		addr("https://[2002:5db8:d822::1]/fhir", admit),  // 6to4 of a public address
		// Literal forms of refused addresses (issue 11 item 3).
		addr("https://0x7f000001/fhir", forbidden),
		addr("https://192.0.2.1/fhir", forbidden),
		addr("https://198.18.0.1/fhir", forbidden),
		addr("https://240.0.0.1/fhir", forbidden),
		addr("https://0.1.2.3/fhir", forbidden),
		addr("https://[fec0::1]/fhir", forbidden),
		addr("https://[64:ff9b::7f00:1]/fhir", forbidden),                      // NAT64 of 127.0.0.1
		addr("https://[64:ff9b::127.0.0.1]/fhir", forbidden),                   // the same, dotted
		addr("https://[2002:7f00:1::]/fhir", forbidden),                        // 6to4 of 127.0.0.1
		addr("https://[64:ff9b:1::a00:1]/fhir", forbidden),                     // local-use NAT64
		addr("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/fhir", forbidden), // Teredo
		addr("https://[::ffff:127.0.0.1]/fhir", forbidden),
		addr("https://[::ffff:0:7f00:1]/fhir", forbidden), // IPv4-translated
		addr("https://[::127.0.0.1]/fhir", forbidden),     // IPv4-compatible
		addr("https://[3fff::1]/fhir", forbidden),         // documentation
		addr("https://[2001:db8::1]/fhir", forbidden),
		addr("https://[fd00::1]/fhir", forbidden),
		addr("https://[fe80::1%25eth0]/fhir", forbidden),
		addr("https://[::1]:8443/fhir", forbidden),
		addr("https://127.0.0.1:8443/fhir", forbidden),
		addr("https://127.1/fhir", forbidden),
		addr("https://10.0.1/fhir", forbidden),
		addr("https://0177.0.0.1/fhir", forbidden),
		addr("https://2130706433/fhir", forbidden),
		addr("https://017700000001/fhir", forbidden),
		addr("https://0x7f.1/fhir", forbidden),
		addr("https://127.0.0.1./fhir", forbidden),
		addr("https://169.254.169.254/latest", forbidden),
		addr("https://[fd00:ec2::254]/latest", forbidden),
		addr("https://100.64.0.1/fhir", forbidden),
		addr("https://192.168.1.1/fhir", forbidden),
		addr("https://255.255.255.255/fhir", forbidden),
		addr("https://224.0.0.1/fhir", forbidden),
		addr("https://localhost/fhir", forbidden),
		addr("https://api.localhost./fhir", forbidden),
		addr("https://metadata.google.internal/computeMetadata/v1", forbidden),
		// Refusals that are not the address's: the same with or without
		// private portals.
		{url: "http://portal.example/fhir", id: "pat-1", strict: forbidden, lax: forbidden},
		{url: "ftp://portal.example/fhir", id: "pat-1", strict: forbidden, lax: forbidden},
		{url: "https://portal.example:99999/fhir", id: "pat-1", strict: invalid, lax: invalid},
		// recordId: the connectors' FHIR id rule (issue 11 item 3).
		id("pat-1", admit),
		id("a.B-9", admit),
		id(strings.Repeat("a", 64), admit),
		id(strings.Repeat("a", 65), invalid),
		id(strings.Repeat("a", 256), invalid),
		id(strings.Repeat("a", 257), invalid),
		id("pat_1", invalid),
		id("pat 1", invalid),
		id("pät-1", invalid),
		id("1:2", invalid),
		id("a%2Fb", invalid),
		id("../1", invalid),
		id("1?x", invalid),
		// An empty recordId means the patient of the login, which
		// fhir-basic has not.
		id("", invalid),
	}
}

// malformedURLs are refused by both paths, as a malformed field
// (invalid-request) at acceptance and as a refused portal by the fetch.
// malformedURLs are not absolute URLs with a host and a valid port, or
// carry user information: portal's one URL rule (Guard.CheckURL) calls
// them malformed, so acceptance and the fetch both answer invalid-request
// naming portalUrl, never forbidden-portal.
var malformedURLs = []string{"https://user:pw@portal.example/fhir", "https:///fhir", "not a url", "https://portal.example%zz/", "portal.example/fhir", "javascript:alert(1)"}

// stubResolver answers without any network: the names that resolve to
// refused addresses in real life do so here, every other name resolves
// to a public address. It records the names asked.
type stubResolver struct {
	mu    sync.Mutex
	asked []string
}

func (r *stubResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	switch h := strings.TrimSuffix(host, "."); {
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
	case h == "metadata.google.internal":
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

// dialRecorder records every address the guard lets through and refuses
// to connect to it: nothing ever leaves the process.
type dialRecorder struct {
	mu     sync.Mutex
	dialed []string
}

var errDialRecorded = errors.New("dial recorded and refused by the test")

func (d *dialRecorder) dial(_ context.Context, _, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dialed = append(d.dialed, address)
	return nil, errDialRecorded
}

func (d *dialRecorder) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dialed)
}

// recordingTransport is a portal.Transport whose connections go through
// the guard's dialer into a dialRecorder.
type recordingTransport struct{ *http.Transport }

func (recordingTransport) Finish(context.Context) ([]portal.Session, error) { return nil, nil }

// fetchDecision runs the worker's path (portal.Fetcher.Fetch, whose
// connections are decided by the guard's dialer) for one row and returns
// "" when it got as far as dialling, or the problem code of its refusal.
func fetchDecision(t *testing.T, g portal.Guard, rawURL, id string) string {
	t.Helper()
	rec := &dialRecorder{}
	d := &portal.GuardedDialer{Guard: g, Resolver: &stubResolver{}, Dial: rec.dial}
	f := &portal.Fetcher{
		Connector: portal.Connector{Guard: g, MaxRetries: -1},
		CheckHost: prover.CheckServerName, // as the service's notarized Fetcher
		NewTransport: func(context.Context) (portal.Transport, error) {
			return recordingTransport{&http.Transport{DialContext: d.DialContext, DialTLSContext: d.DialContext}}, nil
		},
	}
	_, err := f.Fetch(context.Background(), portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: rawURL, RecordID: id,
		Credentials: portal.Credentials{Username: "u", Password: "p"}})
	if rec.count() > 0 {
		if !errors.Is(err, errDialRecorded) {
			t.Errorf("%s %q: dialled, then %v", rawURL, id, err)
		}
		return admit
	}
	if err == nil {
		t.Fatalf("%s %q: fetched without dialling", rawURL, id)
	}
	return portal.ProblemCode(err)
}

// dialDecision asks the guard's dialer alone about the URL's host and
// port, as the transport would: "" when it dials, else the problem code.
func dialDecision(t *testing.T, g portal.Guard, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	rec := &dialRecorder{}
	res := &stubResolver{}
	d := &portal.GuardedDialer{Guard: g, Resolver: res, Dial: rec.dial}
	_, err = d.DialContext(context.Background(), "tcp", net.JoinHostPort(u.Hostname(), port))
	if _, perr := portal.ParseHostAddr(u.Hostname()); perr == nil && len(res.asked) > 0 {
		t.Errorf("%s: the dialer resolved a literal address (%v)", rawURL, res.asked)
	}
	if rec.count() > 0 {
		return admit
	}
	return portal.ProblemCode(err)
}

// acceptance posts a SPEC-shaped fetch-and-attest body to the real
// handler and returns "" for 202, else the problem code.
func acceptance(t *testing.T, base, token, rawURL, id string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"systemType": "fhir-basic", "portalUrl": rawURL, "username": "u", "password": "p", "recordId": id})
	req, _ := http.NewRequest("POST", base+"/v1/fetch-and-attest", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		return admit
	}
	var p acds.Problem
	if err := json.Unmarshal(b, &p); err != nil || p.Status != resp.StatusCode {
		t.Fatalf("%s %q: %d %s", rawURL, id, resp.StatusCode, b)
	}
	return p.Code()
}

// acceptanceServer opens a service that accepts but never fetches
// (Workers -1: no test resolves or dials a portal) and returns its base
// URL and a token.
func acceptanceServer(t *testing.T, allowPrivate bool) (string, string) {
	t.Helper()
	o := service.Options{DataDir: dataDir(t), AllowPrivatePortals: allowPrivate}
	o.Server.Workers = -1
	o.Server.RateLimit = -1
	svc, err := service.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	ts := httptest.NewServer(svc.Handler())
	t.Cleanup(ts.Close)
	resp, err := http.Post(ts.URL+"/v1/auth/anon", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s acds.Session
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return ts.URL, s.Token
}

// TestAcceptanceDecidesAsTheFetch feeds one table of portal URLs and
// recordIds to the acceptance of POST /v1/fetch-and-attest (the real
// handler wired by package service) and to the worker's fetch path and
// the guard's dialer (with a resolver stub and a dialer that records and
// refuses), with and without AllowPrivatePortals: every row gets the same
// decision from all of them, the one the table expects.
func TestAcceptanceDecidesAsTheFetch(t *testing.T) {
	for _, allowPrivate := range []bool{false, true} {
		t.Run(fmt.Sprintf("AllowPrivatePortals=%v", allowPrivate), func(t *testing.T) {
			base, token := acceptanceServer(t, allowPrivate)
			g := portal.Guard{AllowPrivate: allowPrivate}
			for _, row := range admissionRows() {
				want := row.strict
				if allowPrivate {
					want = row.lax
				}
				// The guard admits some address literals, but the
				// notarized transport needs a DNS name
				// (prover.CheckServerName): both paths refuse those.
				guardWant := want
				if want == admit && ipHost(row.url) {
					want = forbidden
				}
				got := acceptance(t, base, token, row.url, row.id)
				fetch := fetchDecision(t, g, row.url, row.id)
				if got != want || fetch != want {
					t.Errorf("%s recordId %s: acceptance %q, fetch %q; want %q for both", row.url, label(row.id), got, fetch, want)
				}
				if row.dialDecision {
					if dial := dialDecision(t, g, row.url); dial != guardWant {
						t.Errorf("%s: the dialer decides %q, the table %q", row.url, dial, guardWant)
					}
				}
			}
			for _, u := range malformedURLs {
				got := acceptance(t, base, token, u, "pat-1")
				fetch := fetchDecision(t, g, u, "pat-1")
				if got != invalid || fetch != invalid {
					t.Errorf("%s: acceptance %q, fetch %q; want invalid-request for both", u, got, fetch)
				}
			}
		})
	}
}

// ipHost reports whether rawURL's host is an IP address literal.
func ipHost(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && prover.CheckServerName(u.Hostname()) != nil
}

// label shows a recordId, or its length when it is long.
func label(id string) string {
	if len(id) > 20 {
		return fmt.Sprintf("(%d characters)", len(id))
	}
	return fmt.Sprintf("%q", id)
}

// TestAcceptanceRefusalNamesTheField: a refused portal names portalUrl
// and says why; a bad recordId names recordId and the id rule.
func TestAcceptanceRefusalNamesTheField(t *testing.T) {
	base, token := acceptanceServer(t, false)
	post := func(rawURL, id string) *acds.Problem {
		body, _ := json.Marshal(map[string]string{"systemType": "fhir-basic", "portalUrl": rawURL, "username": "u", "password": "p", "recordId": id})
		req, _ := http.NewRequest("POST", base+"/v1/fetch-and-attest", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			t.Fatalf("%s recordId %s: accepted", rawURL, label(id))
		}
		var p acds.Problem
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		return &p
	}
	p := post("https://0x7f000001/fhir", "pat-1")
	if p.Status != http.StatusForbidden || len(p.Errors) != 1 || p.Errors[0].Field != "portalUrl" || !strings.Contains(p.Detail, "loopback") {
		t.Errorf("loopback portal: %+v", p)
	}
	// A public IP address passes the address guard, but a notarized
	// session needs a DNS name (prover.CheckServerName): refused at
	// acceptance, not accepted and failed at the first dial.
	for _, u := range []string{"https://93.184.216.34/fhir", "https://[2606:2800:220:1:248:1893:25c8:1946]/fhir"} {
		p = post(u, "pat-1")
		if p.Status != http.StatusForbidden || len(p.Errors) != 1 || p.Errors[0].Field != "portalUrl" || !strings.Contains(p.Detail, "DNS name") {
			t.Errorf("public IP portal %s: %+v", u, p)
		}
	}
	// A username HTTP Basic cannot carry (RFC 7617) is refused at once,
	// on its field, without quoting it.
	body, _ := json.Marshal(map[string]string{"systemType": "fhir-basic", "portalUrl": "https://portal.example/fhir",
		"username": "dr:who-7731", "password": "p", "recordId": "pat-1"})
	req, _ := http.NewRequest("POST", base+"/v1/fetch-and-attest", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		var up acds.Problem
		_ = json.NewDecoder(resp.Body).Decode(&up)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || len(up.Errors) != 1 || up.Errors[0].Field != "username" || strings.Contains(up.Detail, "7731") {
			t.Errorf("username with a colon: %d %+v", resp.StatusCode, up)
		}
	}
	p = post("https://portal.example/fhir", strings.Repeat("7", 65))
	if p.Status != http.StatusBadRequest || len(p.Errors) != 1 || p.Errors[0].Field != "recordId" || !strings.Contains(p.Errors[0].Message, "64") {
		t.Errorf("long recordId: %+v", p)
	}
}

// TestEmptyRecordIDAtAcceptance: recordId "" is the patient of the login
// for the connectors whose login names one, and refused at acceptance for
// fhir-basic with a 400 naming recordId; a body without recordId is
// refused as before (SPEC's field is sent, as a string).
func TestEmptyRecordIDAtAcceptance(t *testing.T) {
	base, token := acceptanceServer(t, false)
	post := func(body map[string]string) (int, acds.Problem) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", base+"/v1/fetch-and-attest", strings.NewReader(string(b)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p acds.Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return resp.StatusCode, p
	}
	body := func(systemType string) map[string]string {
		return map[string]string{"systemType": systemType, "portalUrl": "https://portal.example/fhir", "username": "u", "password": "p", "recordId": ""}
	}
	for _, st := range []string{acds.SystemSMARTForm, acds.SystemSMARTPassword, acds.SystemDemo} {
		if status, p := post(body(st)); status != http.StatusAccepted {
			t.Errorf("%s with recordId \"\": %d %+v", st, status, p)
		}
	}
	status, p := post(body(acds.SystemFHIRBasic))
	if status != http.StatusBadRequest || p.Code() != acds.ProblemInvalidRequest || len(p.Errors) != 1 || p.Errors[0].Field != "recordId" ||
		!strings.Contains(p.Errors[0].Message, "fhir-basic") {
		t.Errorf("fhir-basic with recordId \"\": %d %+v", status, p)
	}
	missing := body(acds.SystemSMARTForm)
	delete(missing, "recordId")
	if status, p := post(missing); status != http.StatusBadRequest || len(p.Errors) != 1 || p.Errors[0].Field != "recordId" {
		t.Errorf("no recordId: %d %+v", status, p)
	}
}

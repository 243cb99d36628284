package portal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

func TestFallbackWithoutEverything(t *testing.T) {
	p := startDemo(t, demoportal.Options{Failures: demoportal.Failures{NoEverything: true}})
	want := p.Patients()[2]
	for _, st := range []string{acds.SystemFHIRBasic, acds.SystemSMARTForm} {
		t.Run(st, func(t *testing.T) {
			rec, err := testConnector().Fetch(context.Background(), p.client, portal.Request{SystemType: st, PortalURL: p.Base, RecordID: want.ID, Credentials: demoCreds})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Coverage.Everything {
				t.Fatal("Everything is true on a portal without $everything")
			}
			// Every compartment resource comes from the searches; the
			// shared ones (Practitioner, Organization, Medication) from
			// reference follow-up.
			got := strings.Count(string(rec.FHIR), `"fullUrl"`)
			compartment, shared := want.Compartment, want.Resources-want.Compartment
			if got < compartment+1 || got > compartment+shared {
				t.Errorf("fetched %d resources; want all %d compartment resources and up to %d shared ones", got, compartment, shared)
			}
			for _, typ := range []string{"Practitioner/", "Organization/", "Medication/"} {
				if !strings.Contains(string(rec.FHIR), `"fullUrl":"`+p.Base+"/"+typ) {
					t.Errorf("no %s resource followed from references", typ)
				}
			}
			if out := fhir.Validate(rec.FHIR); out.HasErrors() {
				t.Errorf("fetched bundle is invalid: %v", out.Issues[0])
			}
			if _, err := fhir.Process(rec.FHIR, fhir.Options{Format: acds.OutputFHIRR4, Source: rec.Host, Measurement: strings.Repeat("ab", 48), Now: time.Unix(1.8e9, 0)}); err != nil {
				t.Errorf("fhir.Process: %v", err)
			}
		})
	}
}

func TestInjectedFailures(t *testing.T) {
	type tc struct {
		name     string
		failures demoportal.Failures
		conn     func(*portal.Connector)
		creds    portal.Credentials
		record   string
		systems  []string
		want     []error
		problem  string
	}
	all := acds.SystemTypes()
	cases := []tc{
		{name: "wrong password", creds: portal.Credentials{Username: demoportal.Username, Password: "not-the-password"}, systems: all,
			want: []error{portal.ErrAuthFailed}, problem: acds.ProblemPortalAuthFailed},
		{name: "rejected password", failures: demoportal.Failures{RejectPassword: true}, systems: all, want: []error{portal.ErrAuthFailed}, problem: acds.ProblemPortalAuthFailed},
		{name: "locked account", failures: demoportal.Failures{Locked: true}, systems: all, want: []error{portal.ErrAuthFailed, portal.ErrAccountLocked}, problem: acds.ProblemPortalAuthFailed},
		{name: "mfa required", failures: demoportal.Failures{MFA: true}, systems: all, want: []error{portal.ErrMFARequired}, problem: acds.ProblemPortalMFARequired},
		{name: "unknown record", record: "pat-9999", systems: all, want: []error{portal.ErrRecordNotFound}, problem: acds.ProblemRecordNotFound},
		{name: "unknown record without $everything", record: "pat-9999", failures: demoportal.Failures{NoEverything: true}, systems: []string{acds.SystemFHIRBasic},
			want: []error{portal.ErrRecordNotFound}, problem: acds.ProblemRecordNotFound},
		{name: "always 503", failures: demoportal.Failures{ServerErrors: -1}, systems: []string{acds.SystemFHIRBasic, acds.SystemSMARTPassword},
			conn: func(c *portal.Connector) { c.MaxRetries = 2 }, want: []error{portal.ErrUnavailable}, problem: acds.ProblemPortalUnavailable},
		{name: "always 429", failures: demoportal.Failures{RateLimited: 1 << 30, RetryAfter: time.Second}, systems: []string{acds.SystemFHIRBasic},
			conn: func(c *portal.Connector) { c.MaxRetries = 1 }, want: []error{portal.ErrUnavailable}, problem: acds.ProblemPortalUnavailable},
		{name: "Retry-After beyond the limit", failures: demoportal.Failures{RateLimited: 1, RetryAfter: time.Hour}, systems: []string{acds.SystemFHIRBasic},
			want: []error{portal.ErrUnavailable}, problem: acds.ProblemPortalUnavailable},
		{name: "slow", failures: demoportal.Failures{Slow: 3 * time.Second}, systems: []string{acds.SystemFHIRBasic},
			conn: func(c *portal.Connector) { c.RequestTimeout = 100 * time.Millisecond; c.MaxRetries = 1 }, want: []error{portal.ErrUnavailable}, problem: acds.ProblemPortalUnavailable},
		{name: "truncated pages", failures: demoportal.Failures{TruncatePages: true}, systems: []string{acds.SystemFHIRBasic, acds.SystemSMARTForm},
			want: []error{portal.ErrResponseInvalid}, problem: acds.ProblemPortalResponseInvalid},
		{name: "too many bytes", systems: []string{acds.SystemFHIRBasic}, record: demoportal.PatientID(2),
			conn: func(c *portal.Connector) { c.MaxBytes = 100 << 10 }, want: []error{portal.ErrResponseInvalid, portal.ErrLimit}, problem: acds.ProblemPortalResponseInvalid},
		{name: "too many pages", systems: []string{acds.SystemFHIRBasic}, record: demoportal.PatientID(2),
			conn: func(c *portal.Connector) { c.MaxPages = 2 }, want: []error{portal.ErrResponseInvalid, portal.ErrLimit}, problem: acds.ProblemPortalResponseInvalid},
		{name: "unsupported system type", systems: []string{"epic-magic"}, want: []error{portal.ErrUnsupportedSystemType}, problem: acds.ProblemUnsupportedSystemType},
		{name: "bad record id", systems: []string{acds.SystemFHIRBasic}, record: "../Observation", want: []error{portal.ErrInvalidRequest}, problem: acds.ProblemInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := startDemo(t, demoportal.Options{Patients: 3, Failures: c.failures})
			creds := c.creds
			if creds == (portal.Credentials{}) {
				creds = demoCreds
			}
			record := c.record
			if record == "" {
				record = demoportal.PatientID(1)
			}
			for _, st := range c.systems {
				conn := testConnector()
				if c.conn != nil {
					c.conn(conn)
				}
				_, err := conn.Fetch(context.Background(), p.client, portal.Request{SystemType: st, PortalURL: p.Base, RecordID: record, Credentials: creds})
				for _, w := range c.want {
					if !errors.Is(err, w) {
						t.Errorf("%s: error %v, want %v", st, err, w)
					}
				}
				if got := portal.ProblemCode(err); got != c.problem {
					t.Errorf("%s: problem %q, want %q (error %v)", st, got, c.problem, err)
				}
				if err != nil && strings.Contains(err.Error(), creds.Password) {
					t.Errorf("%s: error contains the password: %v", st, err)
				}
			}
		})
	}
}

func TestRetriesRecover(t *testing.T) {
	for _, f := range []demoportal.Failures{{RateLimited: 2, RetryAfter: time.Second}, {ServerErrors: 2}} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			p := startDemo(t, demoportal.Options{Patients: 2, Failures: f})
			start := time.Now()
			rec, err := testConnector().Fetch(context.Background(), p.client, portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: p.Base, RecordID: demoportal.PatientID(0), Credentials: demoCreds})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Resources != p.Patients()[0].Resources {
				t.Errorf("got %d resources, want %d", rec.Resources, p.Patients()[0].Resources)
			}
			// Retry-After was honoured: two 429s of 1 s each.
			if f.RateLimited > 0 && time.Since(start) < 2*time.Second {
				t.Errorf("finished after %s, before the two Retry-After waits", time.Since(start))
			}
		})
	}
}

func TestRetriesStopWithTheContext(t *testing.T) {
	p := startDemo(t, demoportal.Options{Patients: 1, Failures: demoportal.Failures{ServerErrors: -1}})
	conn := testConnector()
	conn.Backoff = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := conn.Fetch(ctx, p.client, portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: p.Base, RecordID: demoportal.PatientID(0), Credentials: demoCreds})
	if !errors.Is(err, portal.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want unavailable after the deadline", err)
	}
}

// TestSecretsNeverInErrors runs every flow against a hostile portal that
// echoes whatever it receives (headers, forms) into its error answers.
func TestSecretsNeverInErrors(t *testing.T) {
	const user, pass = "user-SECRET-7f3a", "pw-SECRET-91bc"
	echo := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		dump := fmt.Sprintf("you sent %q %q %v", r.Header.Get("Authorization"), r.URL.String(), r.PostForm)
		if u, p, ok := r.BasicAuth(); ok {
			dump += " basic " + u + ":" + p
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/.well-known/smart-configuration"):
			fmt.Fprintf(w, `{"authorization_endpoint":"https://%s/authorize","token_endpoint":"https://%s/token","grant_types_supported":["authorization_code","password"]}`, r.Host, r.Host)
		case r.URL.Path == "/token":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, dump)
		case r.URL.Path == "/authorize":
			fmt.Fprint(w, `<form method="post" action="/login"><input name="username"><input type="password" name="password"></form>`)
		case r.URL.Path == "/login":
			fmt.Fprintf(w, `<p data-error=%q>no</p><form method="post" action="/login"><input name="username"><input type="password" name="password"></form>`, dump)
		default:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"login","diagnostics":%q}]}`, dump)
		}
	}))
	defer echo.Close()
	hc := echo.Client()
	for _, st := range acds.SystemTypes() {
		req := portal.Request{SystemType: st, PortalURL: echo.URL + "/fhir", RecordID: "p1", Credentials: portal.Credentials{Username: user, Password: pass}}
		_, err := testConnector().Fetch(context.Background(), hc, req)
		if !errors.Is(err, portal.ErrAuthFailed) {
			t.Errorf("%s: error %v, want auth failed", st, err)
		}
		var pe *portal.Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %T is not an *portal.Error", st, err)
		}
		js, _ := json.Marshal(req)
		var logged bytes.Buffer
		slog.New(slog.NewJSONHandler(&logged, nil)).Info("fetch", "request", req, "credentials", req.Credentials, "err", err)
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", pe), fmt.Sprintf("%+v %#v %s", req, req, req.Credentials), string(js), logged.String()} {
			for _, secret := range []string{user, pass, "SECRET"} {
				if strings.Contains(text, secret) {
					t.Errorf("%s: %q appears in %q", st, secret, text)
				}
			}
		}
	}
}

func TestProblemCodes(t *testing.T) {
	for err, want := range map[error]string{
		nil: acds.ProblemInternal, errors.New("x"): acds.ProblemInternal,
		&portal.Error{Kind: portal.ErrAuthFailed, Err: portal.ErrAccountLocked}: acds.ProblemPortalAuthFailed,
		&portal.Error{Kind: portal.ErrMFARequired}:                              acds.ProblemPortalMFARequired,
		&portal.Error{Kind: portal.ErrUnavailable}:                              acds.ProblemPortalUnavailable,
		&portal.Error{Kind: portal.ErrRecordNotFound}:                           acds.ProblemRecordNotFound,
		&portal.Error{Kind: portal.ErrResponseInvalid, Err: portal.ErrLimit}:    acds.ProblemPortalResponseInvalid,
		&portal.ForbiddenError{Target: "x", Reason: "y"}:                        acds.ProblemForbiddenPortal,
		&portal.Error{Kind: portal.ErrNotarization}:                             acds.ProblemUnavailable,
		&portal.Error{Kind: portal.ErrUnsupported}:                              acds.ProblemPortalUnsupported,
		fmt.Errorf("wrapped: %w", &portal.Error{Kind: portal.ErrMFARequired}):   acds.ProblemPortalMFARequired,
	} {
		if got := portal.ProblemCode(err); got != want {
			t.Errorf("ProblemCode(%v) = %q, want %q", err, got, want)
		}
	}
}

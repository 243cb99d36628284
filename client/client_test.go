package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

const bundle = `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p1","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">a &amp; b</div>"}}}]}`

// newServer runs the real server handler (with servertest fakes) under a
// prefix and returns its base URL.
func newServer(t testing.TB, mod func(*server.Config), wrap func(http.Handler) http.Handler) string {
	t.Helper()
	cfg := server.Config{
		Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{}, Enclave: servertest.NewEnclave(),
		Verifier: servertest.Verifier{}, Fetcher: &servertest.Fetcher{FHIR: []byte(bundle)},
		PollInterval: 10 * time.Millisecond, RateLimit: -1, AuthRateLimit: -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = http.StripPrefix("/acds", srv.Handler())
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(func() { ts.Close(); _ = srv.Close(context.Background()) })
	return ts.URL + "/acds"
}

func TestEveryEndpoint(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(newServer(t, nil, nil), &client.Options{PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "healthy" || h.Version != acds.Version {
		t.Fatalf("health = %+v, %v", h, err)
	}
	if doc, err := c.OpenAPI(ctx); err != nil || !strings.Contains(string(doc), `"3.0.3"`) {
		t.Fatalf("openapi: %v", err)
	}
	if a, err := c.Attestation(ctx); err != nil || a.Profile != servertest.FakeProfile {
		t.Fatalf("attestation = %+v, %v", a, err)
	}
	sess, err := c.Anon(ctx, "a long enough passphrase")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Recover(ctx, sess.Pseudonym, "a long enough passphrase")
	if err != nil || again.Pseudonym != sess.Pseudonym {
		t.Fatalf("recover = %+v, %v", again, err)
	}
	c = c.WithToken(again.Token)

	acc, err := c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(bundle), OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("wait = %+v, %v", rec, err)
	}
	if string(rec.Result.Output) != bundle {
		t.Fatalf("output bytes changed in transit: %s", rec.Result.Output)
	}
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil || !v.EnclaveHashMatch {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	fa, err := c.FetchAndAttest(ctx, acds.FetchAndAttestRequest{
		SystemType: acds.SystemDemo, PortalURL: "https://portal.example", RecordID: "p1",
		Username: "u", Password: "p", OutputFormat: acds.OutputFHIRR4Deidentified,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := c.Wait(ctx, fa.RequestID); err != nil || rec.Status != acds.StatusCompleted || rec.Kind != acds.KindFetchAndAttest {
		t.Fatalf("fetch = %+v, %v", rec, err)
	}
	l, err := c.Requests(ctx, "", 1)
	if err != nil || len(l.Items) != 1 || l.Items[0].RequestID != fa.RequestID || l.NextCursor == "" {
		t.Fatalf("page 1 = %+v, %v", l, err)
	}
	l, err = c.Requests(ctx, l.NextCursor, 1)
	if err != nil || len(l.Items) != 1 || l.Items[0].RequestID != acc.RequestID {
		t.Fatalf("page 2 = %+v, %v", l, err)
	}
	if err := c.DeleteRequest(ctx, acc.RequestID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Request(ctx, acc.RequestID)
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemNotFound || p.Status != 404 {
		t.Fatalf("after delete: %v", err)
	}
	if !errors.Is(err, acds.NewProblem(acds.ProblemNotFound, "")) {
		t.Fatalf("errors.Is by problem type failed")
	}
	_, err = c.WithToken("").Requests(ctx, "", 0)
	if !errors.As(err, &p) || p.Code() != acds.ProblemUnauthorized {
		t.Fatalf("without token: %v", err)
	}
	_, err = c.Process(ctx, acds.ProcessRequest{Data: json.RawMessage(`{"resourceType":"Bundle"}`), OutputFormat: "pdf"})
	if !errors.As(err, &p) || p.Code() != acds.ProblemUnsupportedOutputFormat {
		t.Fatalf("bad format: %v", err)
	}
}

// flaky answers the first n requests with status (and Retry-After when
// retryAfter is not ""), then passes through.
func flaky(n int32, status int, retryAfter string, calls *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) <= n {
				if retryAfter != "" {
					w.Header().Set("Retry-After", retryAfter)
				}
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(status)
				_, _ = w.Write([]byte("busy"))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TestRevokeAndRecoverWith: Revoke ends the client's token, and
// RecoverWith(RevokeOthers) ends every other token of the pseudonym.
func TestRevokeAndRecoverWith(t *testing.T) {
	ctx := context.Background()
	base := newServer(t, nil, nil)
	c, err := client.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.Anon(ctx, "a long enough passphrase")
	if err != nil {
		t.Fatal(err)
	}
	old := c.WithToken(sess.Token)
	if _, err := old.Requests(ctx, "", 0); err != nil {
		t.Fatal(err)
	}
	fresh, err := c.RecoverWith(ctx, acds.RecoverRequest{Pseudonym: sess.Pseudonym, Passphrase: "a long enough passphrase", RevokeOthers: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Requests(ctx, "", 0); !errors.Is(err, acds.ErrUnauthorized) {
		t.Fatalf("the old token after RevokeOthers: %v, want unauthorized", err)
	}
	now := c.WithToken(fresh.Token)
	if err := now.Revoke(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := now.Requests(ctx, "", 0); !errors.Is(err, acds.ErrUnauthorized) {
		t.Fatalf("after Revoke: %v, want unauthorized", err)
	}
}

func TestRetriesHonourRetryAfter(t *testing.T) {
	var calls atomic.Int32
	base := newServer(t, nil, flaky(1, http.StatusTooManyRequests, "1", &calls))
	c, _ := client.New(base, &client.Options{MinBackoff: time.Millisecond})
	start := time.Now()
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "healthy" {
		t.Fatalf("health = %+v, %v", h, err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("retried after %v, before the Retry-After of 1 s", d)
	}
	if calls.Load() != 2 {
		t.Fatalf("calls = %d, want 2", calls.Load())
	}
}

func TestRetriesBackoffOn503AndGiveUp(t *testing.T) {
	var calls atomic.Int32
	base := newServer(t, nil, flaky(100, http.StatusServiceUnavailable, "", &calls))
	c, _ := client.New(base, &client.Options{MaxRetries: 3, MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	_, err := c.Health(context.Background())
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemUnavailable || p.Detail != "busy" {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 4 {
		t.Fatalf("calls = %d, want 1 + 3 retries", calls.Load())
	}
	// Non-retryable statuses are not retried.
	calls.Store(0)
	base = newServer(t, nil, flaky(100, http.StatusBadGateway, "", &calls))
	c, _ = client.New(base, &client.Options{MinBackoff: time.Millisecond})
	if _, err := c.Health(context.Background()); err == nil || calls.Load() != 1 {
		t.Fatalf("502: err %v after %d calls", err, calls.Load())
	}
}

func TestNoRetryAfterContextEnds(t *testing.T) {
	var calls atomic.Int32
	base := newServer(t, nil, flaky(100, http.StatusTooManyRequests, "30", &calls))
	c, _ := client.New(base, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Health(ctx)
	var p *acds.Problem
	if !errors.As(err, &p) || p.RetryAfter != 30 {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 4*time.Second || calls.Load() != 1 {
		t.Fatalf("waited %v and called %d times although the context ends before the retry", time.Since(start), calls.Load())
	}
	// Cancelled mid-backoff: returns promptly.
	calls.Store(0)
	base = newServer(t, nil, flaky(100, http.StatusServiceUnavailable, "", &calls))
	c, _ = client.New(base, &client.Options{MinBackoff: 5 * time.Second, MaxBackoff: 5 * time.Second})
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	start = time.Now()
	if _, err := c.Health(ctx2); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	base := newServer(t, func(c *server.Config) { c.Workers = -1 }, nil) // nothing is processed
	c, _ := client.New(base, &client.Options{PollInterval: 5 * time.Millisecond})
	s, err := c.Anon(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(s.Token)
	acc, err := c.Process(context.Background(), acds.ProcessRequest{Data: json.RawMessage(bundle), OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, acc.RequestID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v", err)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "/relative", "http://"} {
		if _, err := client.New(u, nil); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}

// TestHealthDegraded: a server that reports itself degraded (503 with its
// health document) gives that document at once, without retries, so a
// readiness probe sees the status; a 503 that is not one is retried and
// ends as an error, as before.
func TestHealthDegraded(t *testing.T) {
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"degraded","version":"0.1.0","enclave":"sev-snp-sim","uptime":"0h 01m"}`))
	}))
	defer ts.Close()
	c, _ := client.New(ts.URL, &client.Options{MinBackoff: time.Millisecond})
	start := time.Now()
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "degraded" || h.Version != "0.1.0" {
		t.Fatalf("health = %+v, %v; want the degraded document", h, err)
	}
	if calls.Load() != 1 || time.Since(start) > time.Second {
		t.Fatalf("%d calls in %v; want one, at once", calls.Load(), time.Since(start))
	}
}

// TestHealthJSON503NotHealth: a 503 whose JSON is not a health document
// (a load balancer's page) is an unavailable problem, retried as before.
func TestHealthJSON503NotHealth(t *testing.T) {
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"no healthy upstream","status":503}`))
	}))
	defer ts.Close()
	c, _ := client.New(ts.URL, &client.Options{MaxRetries: 2, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond})
	_, err := c.Health(context.Background())
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemUnavailable {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 1 + 2 retries", calls.Load())
	}
}

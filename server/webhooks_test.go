package server_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/webhook"
)

// hit is one delivery attempt a receiver saw.
type hit struct {
	at                  time.Time
	sig, key, userAgent string
	body                []byte
	status              int
}

// receiver is an HTTPS webhook receiver on loopback that answers the
// n-th attempt (from 1) with answer(n).
type receiver struct {
	ts     *httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int) int
	got    chan hit
}

func newReceiver(t testing.TB, answer func(n int) int) *receiver {
	rc := &receiver{answer: answer, got: make(chan hit, 100)}
	rc.ts = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, webhook.MaxPayloadSize+1))
		rc.mu.Lock()
		n := len(rc.hits) + 1
		h := hit{at: time.Now(), sig: r.Header.Get(webhook.SignatureHeader), key: r.Header.Get(webhook.IdempotencyHeader),
			userAgent: r.UserAgent(), body: body, status: rc.answer(n)}
		rc.hits = append(rc.hits, h)
		rc.mu.Unlock()
		if h.status == http.StatusFound {
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		} else {
			w.WriteHeader(h.status)
		}
		rc.got <- h
	}))
	t.Cleanup(rc.ts.Close)
	return rc
}

func (rc *receiver) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(rc.ts.Certificate())
	return p
}

// next waits for the next attempt.
func (rc *receiver) next(t *testing.T, within time.Duration) hit {
	t.Helper()
	select {
	case h := <-rc.got:
		return h
	case <-time.After(within):
		t.Fatalf("no delivery attempt within %v", within)
		return hit{}
	}
}

// fastWebhooks are delivery options for tests: the receiver's CA,
// loopback allowed, short backoff and poll.
func fastWebhooks(rc *receiver) server.WebhookOptions {
	tls := rc.ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tls.RootCAs = rc.roots()
	return server.WebhookOptions{Guard: portal.Guard{AllowPrivate: true}, TLS: tls,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 80 * time.Millisecond, Poll: 10 * time.Millisecond, Timeout: 5 * time.Second}
}

func submitWithCallback(t *testing.T, h *harness, token, callback string) (*http.Response, []byte) {
	t.Helper()
	return h.do("POST", "/v1/process", token, map[string]any{"data": json.RawMessage(validFHIRBundle), "outputFormat": "fhir_r4", "callbackUrl": callback})
}

// TestWebhookDelivered: a receiver that fails three times first gets the
// fourth attempt; every attempt carries the same idempotency key and a
// signature that webhook.Verify accepts against the server's boot
// evidence under the verifier's policy; the payload names the attested
// output digest; the URL's secret query never reaches the logs.
func TestWebhookDelivered(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	encl := newRealEnclave(t)
	h := realHarness(t, encl, func(c *server.Config) { c.Webhooks = fastWebhooks(rc) })
	s := h.anon()
	resp, b := submitWithCallback(t, h, s.Token, rc.ts.URL+"/hook?secret=s3cr3t-value")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	id := decode[acds.Accepted](t, b).RequestID
	rec := h.wait(s.Token, id, 10*time.Second)
	var hits []hit
	for len(hits) < 4 {
		hits = append(hits, rc.next(t, 10*time.Second))
	}
	for i, x := range hits {
		if x.key != server.IdempotencyKey(id) || x.key != hits[0].key {
			t.Errorf("attempt %d: idempotency key %q", i+1, x.key)
		}
		p, res, err := webhook.Verify(encl.verifier, encl.enclave.MarshalBootEvidence(), x.sig, x.body)
		if err != nil || !res.Valid {
			t.Fatalf("attempt %d does not verify: %v", i+1, err)
		}
		if p.RequestID != id || p.Status != acds.StatusCompleted || p.OutputDigest != rec.Result.OutputDigest {
			t.Fatalf("payload %+v, record digest %s", p, rec.Result.OutputDigest)
		}
	}
	select {
	case x := <-rc.got:
		t.Fatalf("a fifth attempt after the delivery succeeded: %d", x.status)
	case <-time.After(200 * time.Millisecond):
	}
	if strings.Contains(h.logs.String(), "s3cr3t") {
		t.Error("the callback URL's query reached the logs")
	}
	if !strings.Contains(h.logs.String(), "webhook delivered") {
		t.Error("no log of the delivery")
	}
}

// TestWebhookFailedRequest: a failed request's delivery carries its
// problem; a redirect is a failed attempt, not followed.
func TestWebhookFailedRequest(t *testing.T) {
	rc := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusFound
		}
		return http.StatusOK
	})
	encl := newRealEnclave(t)
	h := realHarness(t, encl, func(c *server.Config) {
		c.Webhooks = fastWebhooks(rc)
		c.Pipeline = &servertest.Pipeline{Hook: func(context.Context, []byte) error {
			return &fhir.InvalidError{Outcome: &fhir.OperationOutcome{Issues: []fhir.Issue{{Severity: fhir.SeverityError, Code: "structure", Diagnostics: "refused by the test"}}}}
		}}
	})
	s := h.anon()
	if resp, b := submitWithCallback(t, h, s.Token, rc.ts.URL); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	first, second := rc.next(t, 10*time.Second), rc.next(t, 10*time.Second)
	if first.status != http.StatusFound || second.status != http.StatusOK {
		t.Fatalf("attempts answered %d, %d", first.status, second.status)
	}
	p, _, err := webhook.Verify(encl.verifier, encl.enclave.MarshalBootEvidence(), second.sig, second.body)
	if err != nil || p.Status != acds.StatusFailed || p.Error == nil || p.OutputDigest != "" {
		t.Fatalf("%+v %v", p, err)
	}
}

// TestWebhookAcceptance: callbackUrl is decided at acceptance by the
// portal guard (literal private addresses, plain http, user information),
// and refused by a server that cannot deliver.
func TestWebhookAcceptance(t *testing.T) {
	h := realHarness(t, newRealEnclave(t), nil) // the default guard: public https only
	s := h.anon()
	for _, c := range []struct {
		url  any
		code string
	}{
		{"http://receiver.example/hook", acds.ProblemForbiddenPortal},
		{"https://127.0.0.1/hook", acds.ProblemForbiddenPortal},
		{"https://2130706433/hook", acds.ProblemForbiddenPortal},
		{"https://[::ffff:169.254.169.254]/", acds.ProblemForbiddenPortal},
		{"https://localhost/hook", acds.ProblemForbiddenPortal},
		{"https://user:pw@receiver.example/", acds.ProblemInvalidRequest},
		{"not a url at all", acds.ProblemInvalidRequest},
		{"https://receiver.example/" + strings.Repeat("a", 2100), acds.ProblemInvalidRequest},
		{42, acds.ProblemInvalidRequest},
	} {
		resp, b := h.do("POST", "/v1/process", s.Token, map[string]any{"data": json.RawMessage(validFHIRBundle), "outputFormat": "fhir_r4", "callbackUrl": c.url})
		p := wantProblem(t, resp, b, c.code)
		if len(p.Errors) != 1 || p.Errors[0].Field != "callbackUrl" {
			t.Errorf("%v: errors %+v", c.url, p.Errors)
		}
		if strings.Contains(string(b), ":pw@") {
			t.Errorf("the problem quotes the user information: %s", b)
		}
	}
	if resp, b := submitWithCallback(t, h, s.Token, "https://receiver.example/hook"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a public https callback: %d %s", resp.StatusCode, b)
	}
	// fetch-and-attest decides it the same way (after the portal checks).
	fake := newHarness(t, func(c *server.Config) {
		c.Fetcher = &servertest.Fetcher{}
	})
	fs := fake.anon()
	resp, b := fake.do("POST", "/v1/fetch-and-attest", fs.Token, map[string]any{"systemType": "demo", "portalUrl": "https://portal.example",
		"recordId": "1", "username": "u", "password": "p", "callbackUrl": "https://receiver.example/"})
	p := wantProblem(t, resp, b, acds.ProblemInvalidRequest) // the fake enclave cannot sign deliveries
	if len(p.Errors) != 1 || p.Errors[0].Field != "callbackUrl" || !strings.Contains(p.Detail, "does not deliver") {
		t.Errorf("%s", b)
	}
}

// TestWebhookSurvivesRestart: a delivery that failed while one server
// ran is made by the next server on the same SQLite database, with the
// same idempotency key.
func TestWebhookSurvivesRestart(t *testing.T) {
	var up atomic.Bool
	rc := newReceiver(t, func(int) int {
		if up.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	path := filepath.Join(t.TempDir(), "acds.db")
	st := openSQLite(t, path)
	encl := newRealEnclave(t)
	a := realHarness(t, encl, func(c *server.Config) { c.Store = st; c.Webhooks = fastWebhooks(rc) })
	s := a.anon()
	_, b := submitWithCallback(t, a, s.Token, rc.ts.URL+"/hook")
	id := decode[acds.Accepted](t, b).RequestID
	first := rc.next(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	a.ts.Close()
	st.Close()
	for len(rc.got) > 0 { // attempts made before the close
		<-rc.got
	}
	up.Store(true)
	st2 := openSQLite(t, path)
	t.Cleanup(func() { _ = st2.Close() })
	realHarness(t, encl, func(c *server.Config) { c.Store = st2; c.Webhooks = fastWebhooks(rc) })
	for {
		x := rc.next(t, 10*time.Second)
		if x.key != first.key || x.key != server.IdempotencyKey(id) {
			t.Fatalf("key %q after the restart, %q before", x.key, first.key)
		}
		if x.status == http.StatusOK {
			break
		}
	}
	// The delivery ends (just after the receiver answered).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := st2RawCount(st2, id, &n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivery is still pending after it succeeded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWebhookGivesUp: a receiver that never accepts is retried until
// RetryFor has passed since the request ended, then the delivery ends.
func TestWebhookGivesUp(t *testing.T) {
	rc := newReceiver(t, func(int) int { return http.StatusBadGateway })
	ms := servertest.NewMemStore()
	h := realHarness(t, newRealEnclave(t), func(c *server.Config) {
		c.Store = ms
		c.Webhooks = fastWebhooks(rc)
		c.Webhooks.RetryFor = 300 * time.Millisecond
	})
	s := h.anon()
	submitWithCallback(t, h, s.Token, rc.ts.URL)
	rc.next(t, 10*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := ms.ClaimDelivery(context.Background(), time.Now().Add(48*time.Hour), time.Now().Add(49*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if d == nil {
			break // given up and ended
		}
		if err := ms.RetryDelivery(context.Background(), d.RequestID, time.Now(), d.LastError); err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("still retrying after %d attempts", d.Attempts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(h.logs.String(), "webhook: giving up") {
		t.Error("no log of giving up")
	}
}

// st2RawCount counts the pending deliveries of request id: one claimable
// far in the future is leased and put back at once.
func st2RawCount(st *sqlstore.SQLite, id string, n *int) error {
	ctx := context.Background()
	far := time.Now().Add(48 * time.Hour)
	d, err := st.ClaimDelivery(ctx, far, far)
	if err != nil || d == nil {
		*n = 0
		return err
	}
	*n = 1
	if d.RequestID != id {
		return errors.New("an unexpected delivery " + d.RequestID)
	}
	err = st.RetryDelivery(ctx, d.RequestID, time.Now().Add(time.Hour), d.LastError)
	if errors.Is(err, store.ErrNotFound) { // ended meanwhile
		*n = 0
		return nil
	}
	return err
}

// TestWebhookTwoReplicasPostgres: two replicas on one PostgreSQL deliver
// each request's outcome, each once (the claim leases the delivery), both
// taking part.
func TestWebhookTwoReplicasPostgres(t *testing.T) {
	dsn := postgresDSN(t)
	rc := newReceiver(t, func(int) int { return http.StatusOK })
	var hs []*harness
	for range 2 {
		st, err := sqlstore.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		hs = append(hs, realHarness(t, newRealEnclave(t), func(c *server.Config) { c.Store = st; c.Webhooks = fastWebhooks(rc) }))
	}
	const n = 20
	s := hs[0].anon()
	for i := range n {
		if resp, b := submitWithCallback(t, hs[i%2], s.Token, rc.ts.URL); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	seen := map[string]int{}
	agents := map[string]bool{}
	for len(seen) < n {
		x := rc.next(t, 20*time.Second)
		seen[x.key]++
		agents[strings.Split(x.sig, ".")[0]] = true // the JWS header names the signing key: which replica sent it
	}
	time.Sleep(300 * time.Millisecond)
	for len(rc.got) > 0 {
		x := <-rc.got
		seen[x.key]++
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s delivered %d times", k, c)
		}
	}
	if len(agents) != 2 {
		t.Logf("only one replica delivered (%d kids); both could", len(agents))
	}
}

package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// TestRetentionErasesEndedRequests: an ended request shows when it will be
// erased; once the retention time has passed, a sweep erases its input,
// output and proofs, and the record says when — status, times and a
// failure's problem stay. A request still processing is never erased.
func TestRetentionErasesEndedRequests(t *testing.T) {
	clock := servertest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	mem := servertest.NewMemStore()
	fetcher := &servertest.Fetcher{FHIR: []byte(sampleBundle)}
	h := newHarness(t, func(c *server.Config) {
		c.Store, c.Now, c.Retention, c.Fetcher = mem, clock.Now, 48*time.Hour, fetcher
		c.TokenLifetime = 1000 * time.Hour
	})
	s := h.anon()
	_, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	done := decode[acds.Accepted](t, b).RequestID
	rec := h.wait(s.Token, done, 10*time.Second)
	if rec.Result == nil || rec.RetainedUntil == nil || !rec.RetainedUntil.Equal(rec.CompletedAt.Add(48*time.Hour)) {
		t.Fatalf("completed record: result %v, retainedUntil %v, want completedAt + 48h", rec.Result != nil, rec.RetainedUntil)
	}
	fetcher.Err = &portal.Error{Kind: portal.ErrUnavailable, Detail: "down"}
	_, b = h.do("POST", "/v1/fetch-and-attest", s.Token, acds.FetchAndAttestRequest{SystemType: "demo",
		PortalURL: "https://portal.example/fhir", RecordID: "r1", Username: "u", Password: "p"})
	failed := decode[acds.Accepted](t, b).RequestID
	h.wait(s.Token, failed, 10*time.Second)

	clock.Advance(47 * time.Hour)
	server.Sweep(h.srv)
	if got := h.wait(s.Token, done, time.Second); got.Result == nil || got.ErasedAt != nil {
		t.Fatalf("erased before its retention time: %+v", got)
	}
	// A request accepted now, with no worker to run it, stays processing.
	h2 := newHarness(t, func(c *server.Config) { c.Store, c.Now, c.Retention, c.Workers = mem, clock.Now, 48*time.Hour, -1 })
	_, b = h2.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	queued := decode[acds.Accepted](t, b).RequestID

	clock.Advance(2 * time.Hour)
	server.Sweep(h2.srv)
	got := h.wait(s.Token, done, time.Second)
	if got.Result != nil || got.ErasedAt == nil || !got.ErasedAt.Equal(clock.Now().UTC().Truncate(time.Microsecond)) || got.RetainedUntil != nil {
		t.Fatalf("after the retention time: result %v, erasedAt %v, retainedUntil %v", got.Result != nil, got.ErasedAt, got.RetainedUntil)
	}
	if got.Status != acds.StatusCompleted || got.CompletedAt == nil {
		t.Fatalf("the record must keep its status and times: %+v", got)
	}
	gotFailed := h.wait(s.Token, failed, time.Second)
	if gotFailed.Error == nil || gotFailed.Error.Code() != acds.ProblemPortalUnavailable || gotFailed.ErasedAt == nil {
		t.Fatalf("a failed record keeps its problem: %+v", gotFailed)
	}
	for _, r := range mem.Snapshot() {
		switch r.ID {
		case done, failed:
			if len(r.Input) != 0 || len(r.Result) != 0 || len(r.Sealed) != 0 {
				t.Errorf("request %s still holds input %d, result %d, sealed %d bytes", r.ID, len(r.Input), len(r.Result), len(r.Sealed))
			}
		case queued:
			if len(r.Input) == 0 || !r.ErasedAt.IsZero() {
				t.Errorf("a processing request was erased")
			}
		}
	}
	// The list says the same.
	_, b = h.do("GET", "/v1/requests", s.Token, nil)
	for _, it := range decode[acds.RequestList](t, b).Items {
		if it.RequestID == done && (it.ErasedAt == nil || it.Result != nil) {
			t.Errorf("list item of an erased request: %+v", it)
		}
	}
}

// TestRetentionOff: a negative Retention keeps everything and promises
// nothing.
func TestRetentionOff(t *testing.T) {
	clock := servertest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, func(c *server.Config) { c.Now, c.Retention, c.TokenLifetime = clock.Now, -1, 20*365*24*time.Hour })
	s := h.anon()
	_, b := h.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID
	h.wait(s.Token, id, 10*time.Second)
	clock.Advance(10 * 365 * 24 * time.Hour)
	server.Sweep(h.srv)
	got := h.wait(s.Token, id, time.Second)
	if got.Result == nil || got.ErasedAt != nil || got.RetainedUntil != nil {
		t.Fatalf("Retention < 0 must keep everything: %+v", got)
	}
}

// TestRevoke: POST /v1/auth/revoke ends the calling token at once, leaves
// the pseudonym's other tokens alone, and a replica sharing the store
// stops accepting the token once its cache entry ages out.
func TestRevoke(t *testing.T) {
	clock := servertest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	mem := servertest.NewMemStore()
	a := newHarness(t, func(c *server.Config) { c.Store, c.Now = mem, clock.Now })
	b := newHarness(t, func(c *server.Config) { c.Store, c.Now = mem, clock.Now })
	s := a.anon()
	keep := a.anon()
	for _, h := range []*harness{a, b} {
		if resp, body := h.do("GET", "/v1/requests", s.Token, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("before revoking: %d %s", resp.StatusCode, body)
		}
	}
	resp, body := a.do("POST", "/v1/auth/revoke", s.Token, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	resp, body = a.do("GET", "/v1/requests", s.Token, nil)
	wantProblem(t, resp, body, acds.ProblemUnauthorized)
	resp, body = a.do("POST", "/v1/auth/revoke", s.Token, `{}`)
	wantProblem(t, resp, body, acds.ProblemUnauthorized)
	if resp, body := a.do("GET", "/v1/requests", keep.Token, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("another session was revoked too: %d %s", resp.StatusCode, body)
	}
	// Replica b cached the session before the revocation.
	clock.Advance(11 * time.Second)
	resp, body = b.do("GET", "/v1/requests", s.Token, nil)
	wantProblem(t, resp, body, acds.ProblemUnauthorized)
	// A body other than an empty object is refused.
	resp, body = a.do("POST", "/v1/auth/revoke", keep.Token, `{"all":true}`)
	wantProblem(t, resp, body, acds.ProblemInvalidRequest)
	if strings.Contains(a.logs.String(), keep.Token) || strings.Contains(a.logs.String(), s.Token) {
		t.Error("a token reached the logs")
	}
}

// TestRecoverRevokeOthers: a recovery with revokeOthers revokes every
// other token of the pseudonym (a stolen one too) and keeps the new one;
// without it, the old tokens keep working.
func TestRecoverRevokeOthers(t *testing.T) {
	h := newHarness(t, nil)
	resp, b := h.do("POST", "/v1/auth/anon", "", acds.AnonRequest{Passphrase: "correct horse battery"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("anon: %d %s", resp.StatusCode, b)
	}
	first := decode[acds.Session](t, b)
	other := h.anon()
	recover := func(revoke bool) acds.Session {
		t.Helper()
		resp, b := h.do("POST", "/v1/auth/recover", "", acds.RecoverRequest{Pseudonym: first.Pseudonym, Passphrase: "correct horse battery", RevokeOthers: revoke})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("recover: %d %s", resp.StatusCode, b)
		}
		return decode[acds.Session](t, b)
	}
	second := recover(false)
	for _, tok := range []string{first.Token, second.Token} {
		if resp, b := h.do("GET", "/v1/requests", tok, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("without revokeOthers every token works: %d %s", resp.StatusCode, b)
		}
	}
	third := recover(true)
	for _, tok := range []string{first.Token, second.Token} {
		resp, b := h.do("GET", "/v1/requests", tok, nil)
		wantProblem(t, resp, b, acds.ProblemUnauthorized)
	}
	for _, tok := range []string{third.Token, other.Token} {
		if resp, b := h.do("GET", "/v1/requests", tok, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("the new token and another pseudonym's must work: %d %s", resp.StatusCode, b)
		}
	}
}

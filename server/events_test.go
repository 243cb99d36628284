package server_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// sseEvent is one server-sent event as read off the wire.
type sseEvent struct {
	name, data string
	comments   int // comment lines (keep-alives) before it
}

// sseStream is an open GET /v1/requests/{id}/events.
type sseStream struct {
	resp *http.Response
	r    *bufio.Reader
}

func openEvents(t *testing.T, ctx context.Context, h *harness, id, token string) *sseStream {
	t.Helper()
	// No test waits for an event longer than this: a missed wake-up
	// fails instead of hanging.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", h.ts.URL+"/v1/requests/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseStream{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next reads the next event; ok is false at the end of the stream.
func (s *sseStream) next(t *testing.T) (ev sseEvent, ok bool) {
	t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if line != "" {
				t.Fatalf("stream ended inside a line: %q", line)
			}
			return ev, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" || ev.data != "" {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			ev.comments++
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

func statusEvent(t *testing.T, ev sseEvent) acds.Request {
	t.Helper()
	if ev.name != "status" {
		t.Fatalf("event %q (%s), want status", ev.name, ev.data)
	}
	if strings.Contains(ev.data, `"output"`) {
		t.Fatalf("a status event carries the output: %s", ev.data)
	}
	return decode[acds.Request](t, []byte(ev.data))
}

// TestEventsStream: the stream starts with the record, sends keep-alive
// comments while nothing changes, then the completed record without the
// output (the outputDigest and bundle are there), and ends. Only the
// worker's wake-up can deliver it: the store re-read interval is an hour.
func TestEventsStream(t *testing.T) {
	g := newGate()
	h := newHarness(t, func(c *server.Config) {
		c.Pipeline = &servertest.Pipeline{Hook: g.hook}
		c.EventKeepAlive = 20 * time.Millisecond
	})
	server.SetLongPollTiming(h.srv, time.Second, time.Hour)
	s := h.anon()
	id := submit(t, h, s.Token)
	<-g.reached
	st := openEvents(t, context.Background(), h, id, s.Token)
	if st.resp.StatusCode != 200 || st.resp.Header.Get("Content-Type") != "text/event-stream" || st.resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%d %v", st.resp.StatusCode, st.resp.Header)
	}
	ev, _ := st.next(t)
	if r := statusEvent(t, ev); r.Status != acds.StatusProcessing || r.RequestID != id {
		t.Fatalf("first event %+v", r)
	}
	time.Sleep(100 * time.Millisecond) // several keep-alive periods
	g.release()
	ev, _ = st.next(t)
	r := statusEvent(t, ev)
	if r.Status != acds.StatusCompleted || r.Result == nil || !strings.HasPrefix(r.Result.OutputDigest, "sha256:") || r.Result.AttestationBundle == "" || r.CompletedAt == nil {
		t.Fatalf("completed event %s", ev.data)
	}
	if ev.comments < 2 {
		t.Errorf("%d keep-alive comments in 100 ms at a 20 ms interval", ev.comments)
	}
	if ev, ok := st.next(t); ok {
		t.Fatalf("the stream goes on after the terminal status: %+v", ev)
	}
	// A stream of an ended request is its record, then the end.
	st = openEvents(t, context.Background(), h, id, s.Token)
	ev, _ = st.next(t)
	if r := statusEvent(t, ev); r.Status != acds.StatusCompleted {
		t.Fatalf("%+v", r)
	}
	if _, ok := st.next(t); ok {
		t.Fatal("the stream of an ended request goes on")
	}
}

// TestEventsClient: client.Events yields processing then failed (with
// its problem), through the real server.
func TestEventsClient(t *testing.T) {
	g := newGate()
	h := newHarness(t, func(c *server.Config) {
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, in []byte) error {
			if err := g.hook(ctx, in); err != nil {
				return err
			}
			return &fhir.InvalidError{Outcome: &fhir.OperationOutcome{Issues: []fhir.Issue{{Severity: fhir.SeverityError, Code: "structure", Diagnostics: "refused by the test"}}}}
		}}
	})
	s := h.anon()
	id := submit(t, h, s.Token)
	c, err := client.New(h.ts.URL, &client.Options{Token: s.Token})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var statuses []string
	for rec, err := range c.Events(ctx, id) {
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, rec.Status)
		if rec.Status == acds.StatusProcessing {
			g.release()
		}
		if rec.Status == acds.StatusFailed && !errors.Is(rec.Err(), acds.ErrInvalidFHIR) {
			t.Errorf("failed record's problem: %v", rec.Err())
		}
	}
	if strings.Join(statuses, ",") != "processing,failed" {
		t.Fatalf("statuses %v", statuses)
	}
}

// TestEventsRefused: another owner's, unknown and malformed ids are 404,
// no token 401, a query parameter 400; past the per-owner bound 429 with
// Retry-After, and a closed stream frees its place.
func TestEventsRefused(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1; c.MaxEventStreamsPerOwner = 2 })
	s, other := h.anon(), h.anon()
	id := submit(t, h, s.Token)
	for _, c := range []struct {
		path, token, code string
	}{
		{"/v1/requests/" + id + "/events", other.Token, acds.ProblemNotFound},
		{"/v1/requests/00000000-0000-4000-8000-000000000000/events", s.Token, acds.ProblemNotFound},
		{"/v1/requests/nope/events", s.Token, acds.ProblemNotFound},
		{"/v1/requests/" + id + "/events", "", acds.ProblemUnauthorized},
		{"/v1/requests/" + id + "/events?wait=3", s.Token, acds.ProblemInvalidRequest},
	} {
		resp, b := h.do("GET", c.path, c.token, nil)
		wantProblem(t, resp, b, c.code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := openEvents(t, ctx, h, id, s.Token)
	openEvents(t, context.Background(), h, id, s.Token)
	for _, st := range []*sseStream{first} {
		if ev, _ := st.next(t); ev.name != "status" {
			t.Fatal(ev)
		}
	}
	resp, b := h.do("GET", "/v1/requests/"+id+"/events", s.Token, nil)
	wantProblem(t, resp, b, acds.ProblemRateLimited)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// Another owner has its own bound.
	id2 := submit(t, h, other.Token)
	if st := openEvents(t, context.Background(), h, id2, other.Token); st.resp.StatusCode != 200 {
		t.Fatalf("other owner: %d", st.resp.StatusCode)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := openEvents(t, context.Background(), h, id, s.Token)
		if st.resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream did not free its place: %d", st.resp.StatusCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEventsDeleted: a request deleted while streamed ends the stream
// with a not-found problem event, which client.Events returns.
func TestEventsDeleted(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	server.SetLongPollTiming(h.srv, time.Second, 10*time.Millisecond)
	s := h.anon()
	id := submit(t, h, s.Token)
	c, _ := client.New(h.ts.URL, &client.Options{Token: s.Token})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	for rec, err := range c.Events(ctx, id) {
		if err == nil {
			n++
			if resp, b := h.do("DELETE", "/v1/requests/"+rec.RequestID, s.Token, nil); resp.StatusCode != http.StatusNoContent {
				t.Fatalf("delete: %d %s", resp.StatusCode, b)
			}
			continue
		}
		var p *acds.Problem
		if !errors.As(err, &p) || p.Code() != acds.ProblemNotFound || n != 1 {
			t.Fatalf("after %d records: %v", n, err)
		}
		return
	}
	t.Fatal("the sequence ended without the not-found problem")
}

// TestEventsServerClose: Close ends open streams (a client reconnects,
// to this replica or another, and gets the current record first).
func TestEventsServerClose(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	s := h.anon()
	id := submit(t, h, s.Token)
	st := openEvents(t, context.Background(), h, id, s.Token)
	if ev, _ := st.next(t); ev.name != "status" {
		t.Fatal(ev)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { _, ok := st.next(t); done <- ok }()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("an event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the stream")
	}
}

// TestEventsOtherReplica: a request another server sharing the store
// runs is seen by the store re-read: the fake store, a real SQLite file
// and, with ACDS_TEST_POSTGRES, two replicas on one PostgreSQL.
func TestEventsOtherReplica(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) func() store.Store{
		"memstore": func(*testing.T) func() store.Store {
			st := servertest.NewMemStore()
			return func() store.Store { return st }
		},
		"sqlite": func(t *testing.T) func() store.Store {
			st := openSQLite(t, filepath.Join(t.TempDir(), "acds.db"))
			t.Cleanup(func() { _ = st.Close() })
			return func() store.Store { return st }
		},
		"postgres": func(t *testing.T) func() store.Store {
			dsn := postgresDSN(t)
			return func() store.Store {
				st, err := sqlstore.OpenPostgres(context.Background(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := newGate()
			stores := open(t)
			front := newHarness(t, func(c *server.Config) { c.Store = stores(); c.Workers = -1 })
			newHarness(t, func(c *server.Config) { c.Store = stores(); c.Pipeline = &servertest.Pipeline{Hook: g.hook} })
			server.SetLongPollTiming(front.srv, time.Second, 20*time.Millisecond)
			s := front.anon()
			id := submit(t, front, s.Token)
			<-g.reached // the other replica runs it
			st := openEvents(t, context.Background(), front, id, s.Token)
			if ev, _ := st.next(t); statusEvent(t, ev).Status != acds.StatusProcessing {
				t.Fatal(ev)
			}
			g.release()
			ev, _ := st.next(t)
			if r := statusEvent(t, ev); r.Status != acds.StatusCompleted || r.Result == nil {
				t.Fatalf("%s", ev.data)
			}
			if _, ok := st.next(t); ok {
				t.Fatal("the stream goes on")
			}
		})
	}
}

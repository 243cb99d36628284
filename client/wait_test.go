package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/portal"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

// getLog records the query of every GET of a request record.
type getLog struct {
	mu      sync.Mutex
	queries []string
}

func (l *getLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/v1/requests/") {
			l.mu.Lock()
			l.queries = append(l.queries, r.URL.RawQuery)
			l.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (l *getLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.queries...)
}

// blocked returns a pipeline that blocks until release is closed and
// tells on reached when a request gets there.
func blocked(release <-chan struct{}, reached chan<- struct{}) *servertest.Pipeline {
	return &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
		reached <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
}

// session returns a client with a fresh token and an accepted request.
func session(t *testing.T, base string, opts *client.Options) (*client.Client, string) {
	t.Helper()
	c, err := client.New(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Anon(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(s.Token)
	acc, err := c.Process(context.Background(), acds.ProcessRequest{Data: json.RawMessage(bundle), OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	return c, acc.RequestID
}

// TestWaitLongPolls: Wait holds one GET with wait=25 until the request
// completes; it does not poll.
func TestWaitLongPolls(t *testing.T) {
	release, reached := make(chan struct{}), make(chan struct{}, 1)
	var log getLog
	base := newServer(t, func(c *server.Config) { c.Pipeline = blocked(release, reached) }, log.wrap)
	// A poll interval of an hour: a Wait that polled would not return.
	c, id := session(t, base, &client.Options{PollInterval: time.Hour})
	<-reached
	done := make(chan *acds.Request, 1)
	errc := make(chan error, 1)
	go func() {
		r, err := c.Wait(context.Background(), id)
		done <- r
		errc <- err
	}()
	// Release once the GET is held by the server.
	deadline := time.Now().Add(10 * time.Second)
	for len(log.get()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Wait sent no GET")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	select {
	case r := <-done:
		if err := <-errc; err != nil || r.Status != acds.StatusCompleted || r.Result == nil {
			t.Fatalf("Wait = %+v, %v", r, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Wait did not return after the request completed")
	}
	if q := log.get(); len(q) != 1 || q[0] != "wait=25" {
		t.Fatalf("GET queries = %q, want one wait=25", q)
	}
}

// TestWaitFallsBackToPolling: a server that refuses wait with 400 (older
// than long-polling) is polled instead, without wait.
func TestWaitFallsBackToPolling(t *testing.T) {
	var log getLog
	old := func(next http.Handler) http.Handler {
		return log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("wait") {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"type":"urn:acds:problem:invalid-request","title":"Invalid request","status":400,"errors":[{"field":"wait","message":"unknown query parameter"}]}`))
				return
			}
			next.ServeHTTP(w, r)
		}))
	}
	base := newServer(t, nil, old)
	c, id := session(t, base, &client.Options{PollInterval: 5 * time.Millisecond})
	r, err := c.Wait(context.Background(), id)
	if err != nil || r.Status != acds.StatusCompleted {
		t.Fatalf("Wait = %+v, %v", r, err)
	}
	q := log.get()
	if len(q) < 2 || q[0] != "wait=25" {
		t.Fatalf("GET queries = %q, want wait=25 then polls", q)
	}
	for _, x := range q[1:] {
		if x != "" {
			t.Fatalf("GET queries = %q: wait sent again after the server refused it", q)
		}
	}
}

// TestWaitDoesNotSpin: a server that ignores wait (answers processing at
// once) is asked again only after a growing pause.
func TestWaitDoesNotSpin(t *testing.T) {
	var log getLog
	ignoring := func(next http.Handler) http.Handler {
		return log.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.URL.RawQuery = "" // an older server that ignores the parameter
			next.ServeHTTP(w, r)
		}))
	}
	base := newServer(t, func(c *server.Config) { c.Workers = -1 }, ignoring)
	c, id := session(t, base, &client.Options{PollInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v", err)
	}
	// Pauses of 10, 20, 40, 80, 160 ms fit in 400 ms: about 6 GETs.
	if n := len(log.get()); n > 10 {
		t.Fatalf("%d GETs in 400 ms: Wait spins", n)
	}
}

// TestWaitContextEndsLongPoll: ending the context ends a held GET at once
// and nothing is sent afterwards.
func TestWaitContextEndsLongPoll(t *testing.T) {
	var log getLog
	base := newServer(t, func(c *server.Config) { c.Workers = -1 }, log.wrap)
	c, id := session(t, base, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := c.Wait(ctx, id); errc <- err }()
	deadline := time.Now().Add(10 * time.Second)
	for len(log.get()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("Wait sent no GET")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return when its context ended")
	}
	if n := len(log.get()); n != 1 {
		t.Fatalf("%d GETs, want 1", n)
	}
}

// TestWaitLongPollOptions: the wait sent follows Options.LongPoll and the
// HTTP client's timeout; LongPoll < 0 polls.
func TestWaitLongPollOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts client.Options
		want string
	}{
		{"default", client.Options{}, "wait=25"},
		{"explicit", client.Options{LongPoll: 3 * time.Second}, "wait=3"},
		{"capped", client.Options{LongPoll: time.Hour}, "wait=30"},
		{"short HTTP timeout", client.Options{HTTPClient: &http.Client{Timeout: 9 * time.Second}}, "wait=4"},
		{"off", client.Options{LongPoll: -1}, ""},
		{"under a second", client.Options{LongPoll: 500 * time.Millisecond}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log getLog
			base := newServer(t, nil, log.wrap)
			tc.opts.PollInterval = 5 * time.Millisecond
			c, id := session(t, base, &tc.opts)
			if r, err := c.Wait(context.Background(), id); err != nil || !r.Done() {
				t.Fatalf("Wait = %+v, %v", r, err)
			}
			if q := log.get(); len(q) == 0 || q[0] != tc.want {
				t.Fatalf("GET queries = %q, want first %q", q, tc.want)
			}
		})
	}
}

// TestWaitFailedIsAnError: a request that ends failed is returned with its
// problem as the error, reachable with errors.As and errors.Is, and the
// record is returned too.
func TestWaitFailedIsAnError(t *testing.T) {
	fetcher := &servertest.Fetcher{Err: &portal.Error{Kind: portal.ErrAuthFailed, Detail: "the portal refused the login"}}
	base := newServer(t, func(c *server.Config) { c.Fetcher = fetcher }, nil)
	c, err := client.New(base, &client.Options{PollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Anon(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	c = c.WithToken(s.Token)
	acc, err := c.FetchAndAttest(context.Background(), acds.FetchAndAttestRequest{
		SystemType: acds.SystemFHIRBasic, PortalURL: "https://portal.example/fhir", Username: "u", Password: "p", RecordID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Wait(context.Background(), acc.RequestID)
	if rec == nil || rec.Status != acds.StatusFailed {
		t.Fatalf("Wait = %+v, %v; want the failed record", rec, err)
	}
	var p *acds.Problem
	if !errors.As(err, &p) || p.Code() != acds.ProblemPortalAuthFailed {
		t.Fatalf("Wait error = %v; want a *acds.Problem portal-auth-failed", err)
	}
	if !errors.Is(err, acds.ErrPortalAuthFailed) || errors.Is(err, acds.ErrPortalUnavailable) {
		t.Fatalf("errors.Is(%v) does not match its class alone", err)
	}
	if rec.Err() != err {
		t.Fatalf("rec.Err() = %v, Wait's error %v", rec.Err(), err)
	}
}

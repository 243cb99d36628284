package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// gate blocks the fake pipeline until opened, and tells when a request
// reached it.
type gate struct {
	open    chan struct{}
	reached chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{}), reached: make(chan struct{}, 100)} }

func (g *gate) hook(ctx context.Context, _ []byte) error {
	g.reached <- struct{}{}
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// polled is the outcome of one GET made off the test goroutine.
type polled struct {
	status int
	body   []byte
	err    error
	took   time.Duration
}

// getAsync sends GET path with token on ctx from a new goroutine.
func getAsync(ctx context.Context, h *harness, path, token string) <-chan polled {
	out := make(chan polled, 1)
	go func() {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, "GET", h.ts.URL+path, nil)
		if err != nil {
			out <- polled{err: err}
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := h.ts.Client().Do(req)
		if err != nil {
			out <- polled{err: err, took: time.Since(start)}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- polled{status: resp.StatusCode, body: b, err: err, took: time.Since(start)}
	}()
	return out
}

// await returns the outcome of a GET, failing the test if it takes longer
// than within (long-polls in these tests ask for 30 s, so an answer well
// within that came from a wake-up, not the deadline).
func await(t *testing.T, ch <-chan polled, within time.Duration) polled {
	t.Helper()
	select {
	case p := <-ch:
		if p.err != nil {
			t.Fatalf("GET: %v", p.err)
		}
		return p
	case <-time.After(within):
		t.Fatalf("no answer within %v", within)
		return polled{}
	}
}

// waitWaiters waits until the server holds n long-polling GETs.
func waitWaiters(t *testing.T, srv *server.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := server.LongPollWaiters(srv)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiters = %d, want %d", got, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func submit(t *testing.T, h *harness, token string) string {
	t.Helper()
	resp, b := h.do("POST", "/v1/process", token, processBody(acds.OutputFHIRR4))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("process: %d %s", resp.StatusCode, b)
	}
	return decode[acds.Accepted](t, b).RequestID
}

// TestLongPollWakesOnCompletion: a GET waiting for a request a local
// worker runs is answered as soon as the worker stores the outcome. The
// store re-read interval is an hour and the wait 30 s, so only the
// worker's wake-up can answer it in time.
func TestLongPollWakesOnCompletion(t *testing.T) {
	g := newGate()
	h := newHarness(t, func(c *server.Config) { c.Pipeline = &servertest.Pipeline{Hook: g.hook} })
	server.SetLongPollTiming(h.srv, time.Second, time.Hour)
	s := h.anon()
	id := submit(t, h, s.Token)
	<-g.reached // a worker runs it
	got := getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token)
	waitWaiters(t, h.srv, 1)
	released := time.Now()
	g.release()
	p := await(t, got, 10*time.Second)
	latency := time.Since(released)
	if p.status != http.StatusOK {
		t.Fatalf("status %d: %s", p.status, p.body)
	}
	if r := decode[acds.Request](t, p.body); r.Status != acds.StatusCompleted || r.Result == nil {
		t.Fatalf("record = %+v, want completed with a result", r)
	}
	t.Logf("answered %v after the pipeline returned", latency)
	waitWaiters(t, h.srv, 0)
	if _, ids := server.LongPollWaiters(h.srv); ids != 0 {
		t.Fatalf("%d ids left in the notifier", ids)
	}
}

// TestLongPollFailureWakes: a request that fails wakes its waiters too.
func TestLongPollFailureWakes(t *testing.T) {
	g := newGate()
	h := newHarness(t, func(c *server.Config) {
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, in []byte) error {
			if err := g.hook(ctx, in); err != nil {
				return err
			}
			return &fhir.InvalidError{Outcome: &fhir.OperationOutcome{Issues: []fhir.Issue{{Severity: fhir.SeverityError, Code: "processing", Diagnostics: "refused by the test"}}}}
		}}
	})
	server.SetLongPollTiming(h.srv, time.Second, time.Hour)
	s := h.anon()
	id := submit(t, h, s.Token)
	<-g.reached
	got := getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token)
	waitWaiters(t, h.srv, 1)
	g.release()
	p := await(t, got, 10*time.Second)
	if r := decode[acds.Request](t, p.body); r.Status != acds.StatusFailed || r.Error == nil || r.Error.Code() != acds.ProblemInvalidFHIR {
		t.Fatalf("record = %s", p.body)
	}
}

// TestLongPollAlreadyDone: a request that has ended is answered at once.
func TestLongPollAlreadyDone(t *testing.T) {
	h := newHarness(t, nil)
	server.SetLongPollTiming(h.srv, time.Second, time.Hour)
	s := h.anon()
	id := submit(t, h, s.Token)
	h.wait(s.Token, id, 10*time.Second)
	p := await(t, getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token), 10*time.Second)
	if r := decode[acds.Request](t, p.body); p.status != 200 || r.Status != acds.StatusCompleted {
		t.Fatalf("%d %s", p.status, p.body)
	}
}

// TestLongPollTimesOut: while nothing processes the request, the GET is
// held for the whole wait and then answers processing.
func TestLongPollTimesOut(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	const unit = 20 * time.Millisecond
	server.SetLongPollTiming(h.srv, unit, 5*time.Millisecond)
	s := h.anon()
	id := submit(t, h, s.Token)
	p := await(t, getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=3", s.Token), 10*time.Second)
	if p.status != http.StatusOK {
		t.Fatalf("status %d: %s", p.status, p.body)
	}
	if r := decode[acds.Request](t, p.body); r.Status != acds.StatusProcessing || r.Result != nil {
		t.Fatalf("record = %+v, want processing", r)
	}
	if p.took < 3*unit {
		t.Fatalf("answered after %v, before the wait of %v", p.took, 3*unit)
	}
	waitWaiters(t, h.srv, 0)
}

// TestLongPollOtherReplica: a request completed by another server sharing
// the store (the fake, and a real SQLite database) is seen by re-reading
// the store while waiting.
func TestLongPollOtherReplica(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Store{
		"memstore": func(*testing.T) store.Store { return servertest.NewMemStore() },
		"sqlite": func(t *testing.T) store.Store {
			st := openSQLite(t, filepath.Join(t.TempDir(), "acds.db"))
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := newGate()
			shared := open(t)
			front := newHarness(t, func(c *server.Config) { c.Store = shared; c.Workers = -1 })
			newHarness(t, func(c *server.Config) { c.Store = shared; c.Pipeline = &servertest.Pipeline{Hook: g.hook} })
			server.SetLongPollTiming(front.srv, time.Second, 20*time.Millisecond)
			s := front.anon()
			id := submit(t, front, s.Token)
			<-g.reached // the other replica runs it
			got := getAsync(context.Background(), front, "/v1/requests/"+id+"?wait=30", s.Token)
			waitWaiters(t, front.srv, 1)
			g.release()
			p := await(t, got, 10*time.Second)
			if r := decode[acds.Request](t, p.body); p.status != 200 || r.Status != acds.StatusCompleted || r.Result == nil {
				t.Fatalf("%d %s", p.status, p.body)
			}
		})
	}
}

// TestLongPollClientGone: a waiter whose client leaves is released.
func TestLongPollClientGone(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	server.SetLongPollTiming(h.srv, time.Second, time.Hour)
	s := h.anon()
	id := submit(t, h, s.Token)
	ctx, cancel := context.WithCancel(context.Background())
	got := getAsync(ctx, h, "/v1/requests/"+id+"?wait=30", s.Token)
	waitWaiters(t, h.srv, 1)
	cancel()
	if p := <-got; p.err == nil {
		t.Fatalf("the canceled GET got an answer: %d %s", p.status, p.body)
	}
	waitWaiters(t, h.srv, 0)
}

// TestLongPollClose: Close answers waiting GETs at once with the current
// record, and GETs after Close do not wait (no worker here will end the
// request).
func TestLongPollClose(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	server.SetLongPollTiming(h.srv, time.Second, time.Hour)
	s := h.anon()
	id := submit(t, h, s.Token)
	got := getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token)
	waitWaiters(t, h.srv, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p := await(t, got, 10*time.Second)
	if r := decode[acds.Request](t, p.body); p.status != 200 || r.Status != acds.StatusProcessing {
		t.Fatalf("%d %s", p.status, p.body)
	}
	p = await(t, getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token), 10*time.Second)
	if p.status != 200 {
		t.Fatalf("after Close: %d %s", p.status, p.body)
	}
	waitWaiters(t, h.srv, 0)
}

// TestLongPollOwnership: another owner's request is not found at once,
// and a request deleted while waited for ends the wait with not found.
func TestLongPollOwnership(t *testing.T) {
	h := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	server.SetLongPollTiming(h.srv, time.Second, 10*time.Millisecond)
	s, other := h.anon(), h.anon()
	id := submit(t, h, s.Token)
	p := await(t, getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", other.Token), 10*time.Second)
	if p.status != http.StatusNotFound {
		t.Fatalf("other owner: %d %s", p.status, p.body)
	}
	got := getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token)
	waitWaiters(t, h.srv, 1)
	if resp, b := h.do("DELETE", "/v1/requests/"+id, s.Token, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	p = await(t, got, 10*time.Second)
	if p.status != http.StatusNotFound {
		t.Fatalf("deleted while waiting: %d %s", p.status, p.body)
	}
}

// TestLongPollInvalidWait: wait must be one integer from 1 to 30; other
// query parameters are refused by name.
func TestLongPollInvalidWait(t *testing.T) {
	h := newHarness(t, nil)
	s := h.anon()
	id := submit(t, h, s.Token)
	for _, q := range []string{"wait=0", "wait=31", "wait=-1", "wait=abc", "wait=1.5", "wait=", "wait=1&wait=2", "wait=99999999999999999999"} {
		resp, b := h.do("GET", "/v1/requests/"+id+"?"+q, s.Token, nil)
		p := wantProblem(t, resp, b, acds.ProblemInvalidRequest)
		if len(p.Errors) != 1 || p.Errors[0].Field != "wait" {
			t.Errorf("%s: errors = %+v, want one naming wait", q, p.Errors)
		}
	}
	resp, b := h.do("GET", "/v1/requests/"+id+"?wiat=3", s.Token, nil)
	if p := wantProblem(t, resp, b, acds.ProblemInvalidRequest); len(p.Errors) != 1 || p.Errors[0].Field != "wiat" {
		t.Errorf("unknown parameter: errors = %+v", p.Errors)
	}
}

// TestLongPollBounds: many waiters are held and all released by the
// completions, leaving no waiter or goroutine behind; one owner holds at
// most MaxWaitersPerOwner, beyond which GETs are answered at once.
func TestLongPollBounds(t *testing.T) {
	g := newGate()
	h := newHarness(t, func(c *server.Config) {
		c.Pipeline = &servertest.Pipeline{Hook: g.hook}
		c.Workers = 4
	})
	server.SetLongPollTiming(h.srv, time.Second, 20*time.Millisecond)
	before := runtime.NumGoroutine()
	const owners, per = 8, 25
	var chans []<-chan polled
	for range owners {
		s := h.anon()
		id := submit(t, h, s.Token)
		for range per {
			chans = append(chans, getAsync(context.Background(), h, "/v1/requests/"+id+"?wait=30", s.Token))
		}
	}
	waitWaiters(t, h.srv, owners*per)
	if _, ids := server.LongPollWaiters(h.srv); ids != owners {
		t.Fatalf("ids = %d, want %d", ids, owners)
	}
	g.release()
	for _, ch := range chans {
		p := await(t, ch, 20*time.Second)
		if r := decode[acds.Request](t, p.body); p.status != 200 || r.Status != acds.StatusCompleted {
			t.Fatalf("%d %s", p.status, p.body)
		}
	}
	waitWaiters(t, h.srv, 0)
	if _, ids := server.LongPollWaiters(h.srv); ids != 0 {
		t.Fatalf("%d ids left in the notifier", ids)
	}
	// The handler goroutines are gone (idle keep-alive connections may
	// remain: close them).
	h.ts.Client().CloseIdleConnections()
	h.ts.CloseClientConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+5 {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Per-owner bound: with nothing processing, the next GET beyond the
	// bound is answered at once, still processing.
	idle := newHarness(t, func(c *server.Config) { c.Workers = -1 })
	server.SetLongPollTiming(idle.srv, time.Second, time.Hour)
	s := idle.anon()
	id := submit(t, idle, s.Token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var held []<-chan polled
	for range server.MaxWaitersPerOwner {
		held = append(held, getAsync(ctx, idle, "/v1/requests/"+id+"?wait=30", s.Token))
	}
	waitWaiters(t, idle.srv, server.MaxWaitersPerOwner)
	p := await(t, getAsync(context.Background(), idle, "/v1/requests/"+id+"?wait=30", s.Token), 10*time.Second)
	if r := decode[acds.Request](t, p.body); p.status != 200 || r.Status != acds.StatusProcessing {
		t.Fatalf("beyond the bound: %d %s", p.status, p.body)
	}
	// Another owner still waits.
	o := idle.anon()
	oid := submit(t, idle, o.Token)
	held = append(held, getAsync(ctx, idle, "/v1/requests/"+oid+"?wait=30", o.Token))
	waitWaiters(t, idle.srv, server.MaxWaitersPerOwner+1)
	cancel()
	for _, ch := range held {
		<-ch
	}
	waitWaiters(t, idle.srv, 0)
}

// TestOpenAPILongPoll validates long-polling traffic against the served
// OpenAPI document: answers of ?wait=N match it, and the values the
// server refuses are refused by the document too.
func TestOpenAPILongPoll(t *testing.T) {
	h := newHarness(t, nil)
	server.SetLongPollTiming(h.srv, 10*time.Millisecond, 5*time.Millisecond)
	rc := &recorder{next: h.srv.Handler()}
	h.ts.Config.Handler = rc
	s := h.anon()
	id := submit(t, h, s.Token)
	h.do("GET", "/v1/requests/"+id+"?wait=30", s.Token, nil)
	h.do("GET", "/v1/requests/"+id+"?wait=1", s.Token, nil)
	malformed := map[string]bool{}
	for _, q := range []string{"wait=0", "wait=31", "wait=abc", "wait=1.5"} {
		path := "/v1/requests/" + id + "?" + q
		resp, b := h.do("GET", path, s.Token, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %d %s", q, resp.StatusCode, b)
		}
		malformed["GET "+path] = true
	}
	validateRecorded(t, h, rc, malformed, "getRequest")
}

// validateRecorded checks every recorded exchange against the served
// document, and that op succeeded at least once.
func validateRecorded(t *testing.T, h *harness, rc *recorder, malformed map[string]bool, op string) {
	t.Helper()
	_, router := loadServedDocument(t, h)
	seen := false
	rc.mu.Lock()
	log := append([]exchange(nil), rc.log...)
	rc.mu.Unlock()
	for _, ex := range log {
		req := ex.req.Clone(context.Background())
		req.URL.Scheme, req.URL.Host = "http", h.ts.Listener.Addr().String()
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s: no route: %v", key(req), err)
			continue
		}
		reqErr, respErr := validateExchange(route, params, req, ex)
		if malformed[key(ex.req)] {
			if reqErr == nil {
				t.Errorf("%s: the server refused it (%d) but the document accepts it", key(req), ex.status)
			}
		} else if reqErr != nil {
			t.Errorf("%s: an accepted request breaks the document: %v", key(req), reqErr)
		}
		if respErr != nil {
			t.Errorf("%s → %d: the response breaks the document: %v\n%s", key(req), ex.status, respErr, ex.respBody)
		}
		if ex.status == 200 && route.Operation.OperationID == op {
			seen = true
		}
	}
	if !seen {
		t.Errorf("%s never succeeded", op)
	}
}

// loadServedDocument loads GET /v1/openapi.json with kin-openapi and
// returns a router for it.
func loadServedDocument(t *testing.T, h *harness) (*openapi3.T, routers.Router) {
	t.Helper()
	resp, b := h.do("GET", "/v1/openapi.json", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("openapi.json: %d", resp.StatusCode)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("loading the served document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the document is not valid OpenAPI: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: h.ts.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// validateExchange validates one recorded request and its response.
func validateExchange(route *routers.Route, params map[string]string, req *http.Request, ex exchange) (reqErr, respErr error) {
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	req.Body = io.NopCloser(bytes.NewReader(ex.reqBody))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	reqErr = openapi3filter.ValidateRequest(context.Background(), in)
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: ex.status, Header: ex.header,
		Body: io.NopCloser(bytes.NewReader(ex.respBody)), Options: opts}
	return reqErr, openapi3filter.ValidateResponse(context.Background(), rin)
}

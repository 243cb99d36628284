package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type harness struct {
	t     *testing.T
	srv   *server.Server
	ts    *httptest.Server
	store store.Store
	logs  *syncBuffer
	// bodies collects every response body, for secret scans.
	mu     sync.Mutex
	bodies []string
}

// newHarness starts a server with fake seams on a loopback httptest server.
// mod may change the config before New.
func newHarness(t *testing.T, mod func(*server.Config)) *harness {
	t.Helper()
	logs := &syncBuffer{}
	cfg := server.Config{
		Store:        servertest.NewMemStore(),
		Pipeline:     &servertest.Pipeline{},
		Enclave:      servertest.NewEnclave(),
		Verifier:     servertest.Verifier{},
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		RateLimit:    -1,
		PollInterval: 20 * time.Millisecond,
		Workers:      2,
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	h := &harness{t: t, srv: srv, ts: ts, store: cfg.Store, logs: logs}
	t.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return h
}

// do sends a request. body may be nil, a string or []byte (sent as is), or
// a value encoded as JSON. Content-Type is application/json when there is
// a body, unless headers set it ("" in headers removes it).
func (h *harness) do(method, path, token string, body any, headers ...string) (*http.Response, []byte) {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		var j bytes.Buffer
		enc := json.NewEncoder(&j)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(b); err != nil {
			h.t.Fatal(err)
		}
		rd = &j
	}
	req, err := http.NewRequest(method, h.ts.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.bodies = append(h.bodies, string(out))
	h.mu.Unlock()
	return resp, out
}

func (h *harness) allBodies() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.bodies, "\n")
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %T from %s: %v", v, b, err)
	}
	return v
}

func (h *harness) anon() acds.Session {
	h.t.Helper()
	resp, b := h.do("POST", "/v1/auth/anon", "", nil)
	if resp.StatusCode != http.StatusCreated {
		h.t.Fatalf("anon: %d %s", resp.StatusCode, b)
	}
	return decode[acds.Session](h.t, b)
}

// wait polls a request until it ends.
func (h *harness) wait(token, id string, within time.Duration) acds.Request {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, b := h.do("GET", "/v1/requests/"+id, token, nil)
		if resp.StatusCode != http.StatusOK {
			h.t.Fatalf("get %s: %d %s", id, resp.StatusCode, b)
		}
		r := decode[acds.Request](h.t, b)
		if r.Done() {
			return r
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("request %s still %s after %v", id, r.Status, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const sampleBundle = `{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Patient","id":"p1","name":[{"family":"Chalmers","given":["Peter"]}],"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">Peter &amp; co</div>"}}}]}`

func processBody(format string) map[string]any {
	return map[string]any{"data": json.RawMessage(sampleBundle), "outputFormat": format}
}

// wantProblem checks that a response is a problem of the given code and status.
func wantProblem(t *testing.T, resp *http.Response, body []byte, code string) *acds.Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json (body %s)", ct, body)
	}
	p := decode[acds.Problem](t, body)
	if p.Type != acds.ProblemTypePrefix+code {
		t.Fatalf("problem type = %q, want %q (status %d, body %s)", p.Type, acds.ProblemTypePrefix+code, resp.StatusCode, body)
	}
	if resp.StatusCode != acds.ProblemStatus(code) || p.Status != resp.StatusCode {
		t.Fatalf("status = %d (body %d), want %d", resp.StatusCode, p.Status, acds.ProblemStatus(code))
	}
	if p.Title == "" {
		t.Errorf("problem without title: %s", body)
	}
	return &p
}

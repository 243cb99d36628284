package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
)

const eventsID = "6f2b8a1e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"

func statusData(status string, updated int) string {
	rec := fmt.Sprintf(`{"requestId":%q,"kind":"process","status":%q,"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:%02dZ"`, eventsID, status, updated)
	if status == acds.StatusCompleted {
		rec += `,"completedAt":"2026-01-01T00:00:09Z","result":{"outputFormat":"fhir_r4","outputDigest":"sha256:00","attestationBundle":"AA=="}`
	}
	return "event: status\ndata: " + rec + "}\n\n"
}

// eventsServer answers the n-th stream (from 1) with script(n, w).
func eventsServer(t *testing.T, script func(n int, w http.ResponseWriter)) (*client.Client, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/requests/"+eventsID+"/events" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "bad request", 400)
			return
		}
		script(int(calls.Add(1)), w)
	}))
	t.Cleanup(ts.Close)
	c, err := client.New(ts.URL, &client.Options{Token: "tok", MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, EventIdleTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c, &calls
}

func sse(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprint(w, c)
		w.(http.Flusher).Flush()
	}
}

func collect(t *testing.T, c *client.Client) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	for rec, err := range c.Events(ctx, eventsID) {
		if err != nil {
			return got, err
		}
		got = append(got, rec.Status)
		if rec.Result != nil && rec.Result.Output != nil {
			t.Error("a record with an output")
		}
	}
	return got, nil
}

// TestEventsReconnects: a stream that drops, or goes silent past the idle
// timeout, is reopened; the record already seen is not yielded twice, and
// comments, unknown fields and CRLF lines are ignored.
func TestEventsReconnects(t *testing.T) {
	c, calls := eventsServer(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 1:
			sse(w, ": keep-alive\n\n", statusData("processing", 1)) // then the connection drops
		case 2:
			sse(w, statusData("processing", 1), ": keep-alive\r\n\r\n") // then silence
			time.Sleep(time.Second)
		default:
			sse(w, "id: 7\nretry: 10\n"+strings.ReplaceAll(statusData("processing", 2), "\n", "\r\n"), statusData("completed", 3), statusData("completed", 4))
		}
	})
	got, err := collect(t, c)
	if err != nil || strings.Join(got, ",") != "processing,processing,completed" || calls.Load() != 3 {
		t.Fatalf("got %v, %v after %d streams", got, err, calls.Load())
	}
}

// TestEventsErrors: a refused stream is its problem; a problem event ends
// the sequence with it; a response that is not an event stream, and a
// status event that is not a record, are ErrEventStream; a stream that
// keeps dropping ends after MaxRetries.
func TestEventsErrors(t *testing.T) {
	for name, c := range map[string]struct {
		script func(n int, w http.ResponseWriter)
		check  func(err error) bool
	}{
		"404": {func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			fmt.Fprint(w, `{"type":"urn:acds:problem:not-found","title":"Not found","status":404}`)
		}, func(err error) bool {
			var p *acds.Problem
			return errors.As(err, &p) && p.Code() == acds.ProblemNotFound
		}},
		"problem event": {func(_ int, w http.ResponseWriter) {
			sse(w, statusData("processing", 1), "event: problem\ndata: {\"type\":\"urn:acds:problem:not-found\",\"title\":\"Not found\",\"status\":404}\n\n")
		}, func(err error) bool {
			var p *acds.Problem
			return errors.As(err, &p) && p.Code() == acds.ProblemNotFound
		}},
		"not an event stream": {func(_ int, w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{}`)
		}, func(err error) bool { return errors.Is(err, client.ErrEventStream) }},
		"not a record": {func(_ int, w http.ResponseWriter) {
			sse(w, "event: status\ndata: [1,2]\n\n")
		}, func(err error) bool { return errors.Is(err, client.ErrEventStream) }},
		"too large": {func(_ int, w http.ResponseWriter) {
			sse(w, "event: status\ndata: "+strings.Repeat("x", 2<<20)+"\n\n")
		}, func(err error) bool { return errors.Is(err, client.ErrEventStream) }},
		"keeps dropping": {func(_ int, w http.ResponseWriter) {
			sse(w, ": keep-alive\n\n")
		}, func(err error) bool { return errors.Is(err, client.ErrEventStream) }},
	} {
		t.Run(name, func(t *testing.T) {
			cl, _ := eventsServer(t, c.script)
			if _, err := collect(t, cl); !c.check(err) {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// TestEventsContextEnds: the sequence ends with ctx's error, and breaking
// out of the loop closes the stream.
func TestEventsContextEnds(t *testing.T) {
	closed := make(chan struct{})
	var once sync.Once // the second stream below ends the same way
	cl, _ := eventsServer(t, func(_ int, w http.ResponseWriter) {
		sse(w, statusData("processing", 1))
		<-w.(interface{ CloseNotify() <-chan bool }).CloseNotify()
		once.Do(func() { close(closed) })
	})
	for range cl.Events(context.Background(), eventsID) {
		break
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("breaking out of the loop left the stream open")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var last error
	for _, err := range cl.Events(ctx, eventsID) {
		last = err
	}
	if !errors.Is(last, context.DeadlineExceeded) {
		t.Fatalf("last error %v", last)
	}
}

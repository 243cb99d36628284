package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
)

// BenchmarkEventLatency measures how long after a request's processing
// ends its completion reaches an open event stream (the worker then
// stores the outcome; the stream sees it by the worker's wake-up on the
// same replica, by the 200 ms store re-read on another), with the
// default timings, over loopback, each completion at a random point of
// the re-read interval. It reports p50 and p99 in ms; the
// long-poll GET of the same completion is measured in the same run as the
// baseline ("longpoll").
//
//	go test -run '^$' -bench BenchmarkEventLatency -benchtime 200x ./server/
func BenchmarkEventLatency(b *testing.B) {
	mem := func(testing.TB) func() store.Store {
		st := servertest.NewMemStore()
		return func() store.Store { return st }
	}
	pg := func(tb testing.TB) func() store.Store {
		dsn := postgresDSN(tb)
		return func() store.Store {
			st, err := sqlstore.OpenPostgres(context.Background(), dsn)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = st.Close() })
			return st
		}
	}
	for _, c := range []struct {
		name     string
		stores   func(testing.TB) func() store.Store
		replicas int
	}{
		{"1-replica/memstore", mem, 1},
		{"1-replica/postgres", pg, 1},
		{"2-replicas/postgres", pg, 2},
	} {
		for _, mode := range []string{"sse", "longpoll"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) { benchEventLatency(b, c.stores(b), c.replicas, mode == "sse") })
		}
	}
}

// benchServer is a server on loopback for benchmarks.
func benchServer(tb testing.TB, mod func(*server.Config)) *httptest.Server {
	cfg := server.Config{
		Store: servertest.NewMemStore(), Pipeline: &servertest.Pipeline{}, Enclave: servertest.NewEnclave(),
		Verifier: servertest.Verifier{}, Logger: slog.New(slog.DiscardHandler), RateLimit: -1, Workers: 2,
	}
	mod(&cfg)
	srv, err := server.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() {
		ts.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return ts
}

func benchCall(tb testing.TB, ts *httptest.Server, method, path, token string, body any, out any) *http.Response {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, ts.URL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			tb.Fatal(err)
		}
	}
	return resp
}

func benchEventLatency(b *testing.B, stores func() store.Store, replicas int, sse bool) {
	reached, release := make(chan struct{}, 1), make(chan struct{})
	var doneAt atomic.Int64
	pipeline := &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
		reached <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		doneAt.Store(time.Now().UnixNano())
		return nil
	}}
	front := benchServer(b, func(c *server.Config) {
		c.Store, c.Pipeline = stores(), pipeline
		if replicas == 2 {
			c.Workers = -1
		}
	})
	if replicas == 2 {
		benchServer(b, func(c *server.Config) { c.Store, c.Pipeline = stores(), pipeline })
	}
	var s acds.Session
	benchCall(b, front, "POST", "/v1/auth/anon", "", struct{}{}, &s)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var acc acds.Accepted
		benchCall(b, front, "POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4), &acc)
		<-reached
		var got func() acds.Request
		if sse {
			got = benchStream(b, front, acc.RequestID, s.Token)
		} else {
			ch := make(chan acds.Request, 1)
			go func() {
				var r acds.Request
				benchCall(b, front, "GET", "/v1/requests/"+acc.RequestID+"?wait=30", s.Token, nil, &r)
				ch <- r
			}()
			time.Sleep(5 * time.Millisecond) // the GET is waiting
			got = func() acds.Request { return <-ch }
		}
		// Completions do not come in step with the store re-read: end
		// the processing at a random point of its 200 ms interval.
		time.Sleep(time.Duration(rand.Int64N(int64(250 * time.Millisecond))))
		b.StartTimer()
		release <- struct{}{}
		r := got()
		end := time.Now()
		if r.Status != acds.StatusCompleted {
			b.Fatalf("status %s", r.Status)
		}
		lat = append(lat, end.Sub(time.Unix(0, doneAt.Load())))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// benchStream opens the event stream of id, reads its first (processing)
// event, and returns a function reading until the terminal record.
func benchStream(tb testing.TB, ts *httptest.Server, id, token string) func() acds.Request {
	req, _ := http.NewRequest("GET", ts.URL+"/v1/requests/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.Client().Do(req)
	if err != nil || resp.StatusCode != 200 {
		tb.Fatalf("events: %v %v", err, resp)
	}
	r := bufio.NewReader(resp.Body)
	read := func() acds.Request {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				tb.Fatalf("stream: %v", err)
			}
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				var rec acds.Request
				if err := json.Unmarshal([]byte(data), &rec); err != nil {
					tb.Fatal(err)
				}
				return rec
			}
		}
	}
	if first := read(); first.Status != acds.StatusProcessing {
		tb.Fatalf("first event %s", first.Status)
	}
	return func() acds.Request {
		defer resp.Body.Close()
		return read()
	}
}

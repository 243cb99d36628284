package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
	"github.com/google/uuid"
)

// BenchmarkProcessAccept drives POST /v1/process over real HTTP on loopback
// with 32 concurrent clients, each posting a 16 KB FHIR Bundle, against a
// server on the SQLite store (WAL, synchronous=FULL, group commit: every
// 202 is on disk). In the same run it drives two baselines:
//
//   - bare: a net/http handler that reads the same body and answers 202
//     (the baseline; ratio = req/s / bare-req/s, goal ≥ 0.40);
//   - floor: the bare handler plus one durable insert of the same bytes
//     into a SQLite store of its own through the same group commit, with
//     no routing, JSON, auth or problem handling: the least any durable
//     implementation must do. floor-ratio = req/s / floor-req/s says how
//     much of the remaining gap is the accept path's own work.
//
// For each it reports accepted requests/s and p50/p99 accept latency
// (goal p99 ≤ 25 ms). Workers are off (Workers: -1) so the figure is the
// accept path alone: HTTP, bearer auth, strict JSON decoding and the
// durable insert. The pipeline has no acceptance-time Checker; `acds
// serve` also checks the FHIR there (fhir.Check, benchmarked in package
// fhir), which adds its own cost per byte. Rate limiting is off as with
// `acds serve --rate-limit 0`. As a diagnostic, nodisk-req/s is the same
// server on the in-memory store, and checked-req/s (with checked-ratio to
// bare) the same server on a SQLite store of its own with the acceptance-
// time FHIR check of `acds serve` (fhir.Check) as its Checker: what a
// deployment pays per byte on top of req/s. Each server's goroutines
// carry the pprof label bench=acds|bare|floor|nodisk|checked, so a -cpuprofile splits by server
// (go tool pprof -tagfocus bench=acds ...). Run it with:
//
//	go test ./server -run '^$' -bench ProcessAccept -benchtime 3000x
//
// The phases run one after the other in the order bare, nodisk, floor,
// checked, acds; on a shared machine repeat the run (-count 5) and compare the
// ratios, which are measured seconds apart, rather than absolute rates.
func BenchmarkProcessAccept(b *testing.B) {
	const clients = 32
	body := bundleOfSize(16 << 10)

	// The ACDS server on SQLite. The store is opened under the label so
	// that its writer goroutine carries it too.
	var st *sqlstore.SQLite
	labelled("acds", func() { st = openSQLite(b, filepath.Join(b.TempDir(), "bench.db")) })
	defer st.Close()
	srv, err := server.New(server.Config{Store: st, Pipeline: processOnly{&servertest.Pipeline{}}, Enclave: servertest.NewEnclave(), Workers: -1, RateLimit: -1, AuthRateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(context.Background())
	acdsTS := httptest.NewServer(withLabel("acds", srv.Handler()))
	defer acdsTS.Close()

	// The bare baseline: read the body, answer 202.
	bare := httptest.NewServer(withLabel("bare", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"requestId":"00000000-0000-4000-8000-000000000000","status":"processing"}`)
	})))
	defer bare.Close()

	// The floor: the bare handler plus one durable insert of the body as
	// read, through the same SQLite group commit, on a store of its own.
	var floorSt *sqlstore.SQLite
	labelled("floor", func() { floorSt = openSQLite(b, filepath.Join(b.TempDir(), "floor.db")) })
	defer floorSt.Close()
	floor := httptest.NewServer(withLabel("floor", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		id := uuid.NewString()
		now := time.Now()
		err = floorSt.CreateRequest(r.Context(), store.Request{ID: id, Owner: "floor", Kind: acds.KindProcess, Input: body, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"requestId":"`+id+`","status":"processing"}`)
	})))
	defer floor.Close()

	hc := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 2 * clients, MaxIdleConnsPerHost: 2 * clients,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	tokens := make([]string, clients)
	for i := range tokens {
		resp, err := hc.Post(acdsTS.URL+"/v1/auth/anon", "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		tokens[i] = decode[acds.Session](b, mustRead(b, resp)).Token
	}

	// Diagnostic: the same server on the in-memory store, to split the
	// cost of HTTP, auth and JSON from that of durability.
	memSrv, err := server.New(server.Config{Store: servertest.NewMemStore(), Pipeline: processOnly{&servertest.Pipeline{}}, Enclave: servertest.NewEnclave(), Workers: -1, RateLimit: -1, AuthRateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer memSrv.Close(context.Background())
	memTS := httptest.NewServer(withLabel("nodisk", memSrv.Handler()))
	defer memTS.Close()
	memTokens := make([]string, clients)
	for i := range memTokens {
		resp, err := hc.Post(memTS.URL+"/v1/auth/anon", "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		memTokens[i] = decode[acds.Session](b, mustRead(b, resp)).Token
	}

	// The server as `acds serve` runs it: fhir.Check at acceptance.
	var ckSt *sqlstore.SQLite
	labelled("checked", func() { ckSt = openSQLite(b, filepath.Join(b.TempDir(), "checked.db")) })
	defer ckSt.Close()
	ckSrv, err := server.New(server.Config{Store: ckSt, Pipeline: fhirChecked{processOnly{&servertest.Pipeline{}}}, Enclave: servertest.NewEnclave(), Workers: -1, RateLimit: -1, AuthRateLimit: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer ckSrv.Close(context.Background())
	ckTS := httptest.NewServer(withLabel("checked", ckSrv.Handler()))
	defer ckTS.Close()
	ckTokens := make([]string, clients)
	for i := range ckTokens {
		resp, err := hc.Post(ckTS.URL+"/v1/auth/anon", "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		ckTokens[i] = decode[acds.Session](b, mustRead(b, resp)).Token
	}

	n := b.N
	bareRate, bareP50, bareP99 := drive(b, hc, bare.URL+"/v1/process", nil, body, n, clients)
	memRate, _, _ := drive(b, hc, memTS.URL+"/v1/process", memTokens, body, n, clients)
	floorRate, floorP50, floorP99 := drive(b, hc, floor.URL+"/v1/process", nil, body, n, clients)
	ckRate, _, ckP99 := drive(b, hc, ckTS.URL+"/v1/process", ckTokens, body, n, clients)
	b.ResetTimer()
	rate, p50, p99 := drive(b, hc, acdsTS.URL+"/v1/process", tokens, body, n, clients)
	b.StopTimer()

	b.ReportMetric(rate, "req/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(bareRate, "bare-req/s")
	b.ReportMetric(float64(bareP50.Microseconds())/1000, "bare-p50-ms")
	b.ReportMetric(float64(bareP99.Microseconds())/1000, "bare-p99-ms")
	b.ReportMetric(rate/bareRate, "ratio")
	b.ReportMetric(floorRate, "floor-req/s")
	b.ReportMetric(float64(floorP50.Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(floorP99.Microseconds())/1000, "floor-p99-ms")
	b.ReportMetric(rate/floorRate, "floor-ratio")
	b.ReportMetric(memRate, "nodisk-req/s")
	b.ReportMetric(ckRate, "checked-req/s")
	b.ReportMetric(float64(ckP99.Microseconds())/1000, "checked-p99-ms")
	b.ReportMetric(ckRate/bareRate, "checked-ratio")
}

// fhirChecked adds the acceptance-time check of `acds serve` to a
// pipeline: fhir.Check, which accepts exactly what fhir.Process will.
type fhirChecked struct{ processOnly }

func (fhirChecked) Check(_ context.Context, input []byte, format string) error {
	return fhir.Check(input, fhir.Options{Format: format})
}

// labelled runs f with the pprof label bench=name; goroutines f starts
// inherit it.
func labelled(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("bench", name), func(context.Context) { f() })
}

// withLabel serves h with the pprof label bench=name.
func withLabel(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), pprof.Labels("bench", name), func(ctx context.Context) { h.ServeHTTP(w, r.WithContext(ctx)) })
	})
}

// drive sends n POSTs from `clients` goroutines and returns the rate and
// the p50/p99 latency. Any answer but 202 fails the benchmark.
func drive(b *testing.B, hc *http.Client, url string, tokens []string, body []byte, n, clients int) (float64, time.Duration, time.Duration) {
	var next atomic.Int64
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if tokens != nil {
					req.Header.Set("Authorization", "Bearer "+tokens[c])
				}
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat[i] = time.Since(t0)
				if resp.StatusCode != http.StatusAccepted {
					failed.Store(fmt.Sprintf("status %d", resp.StatusCode))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if f := failed.Load(); f != nil {
		b.Fatalf("%s: %v", url, f)
	}
	slices.Sort(lat)
	return float64(n) / elapsed.Seconds(), lat[n*50/100], lat[min(n-1, n*99/100)]
}

func mustRead(b testing.TB, resp *http.Response) []byte {
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// bundleOfSize returns a process request body of about size bytes: a FHIR
// collection Bundle of Observations.
func bundleOfSize(size int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"outputFormat":"fhir_r4","data":{"resourceType":"Bundle","type":"collection","entry":[`)
	for i := 0; sb.Len() < size-200; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"fullUrl":"urn:uuid:00000000-0000-4000-8000-%012d","resource":{"resourceType":"Observation","id":"o%d","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"8867-4","display":"Heart rate"}]},"subject":{"reference":"Patient/p1"},"valueQuantity":{"value":%d,"unit":"/min"}}}`, i, i, 60+i%40)
	}
	sb.WriteString(`]}}`)
	return []byte(sb.String())
}

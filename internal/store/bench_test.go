package store_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acds-project/acds/internal/store"
	"github.com/acds-project/acds/internal/store/storetest"
)

// Benchmark parameters: what the server's /v1/process benchmark does.
const (
	benchClients   = 32
	benchInputSize = 16 << 10
)

// BenchmarkCreateRequest measures how fast a store accepts requests: 32
// goroutines each storing requests with a 16 KiB FHIR bundle as input, as
// the server does before it answers 202. Each returned CreateRequest is
// durable.
//
// In the same run it measures a baseline: the same goroutines appending the
// same 16 KiB to a file with one fdatasync per request (the cost of
// "durable before 202" without group commit), and reports
//
//	req/s            requests accepted per second
//	p50-ms, p99-ms   CreateRequest latency
//	fsync-req/s      the baseline's requests per second
//	x-fsync          req/s divided by fsync-req/s
//
// Run it with
//
//	go test -run '^$' -bench CreateRequest -benchtime 4000x ./internal/store/
//
// and with ACDS_TEST_POSTGRES set for the PostgreSQL figures.
func BenchmarkCreateRequest(b *testing.B) {
	// A FHIR bundle, as the server stores it: what compresses on disk is
	// what real inputs would let compress.
	input := storetest.Bundle(benchInputSize)

	b.Run("sqlite", func(b *testing.B) {
		dir := b.TempDir()
		s, err := store.OpenSQLite(b.Context(), filepath.Join(dir, "acds.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCreate(b, s, input, dir)
	})
	b.Run("postgres", func(b *testing.B) {
		s, err := store.OpenPostgres(b.Context(), postgresDSN(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCreate(b, s, input, b.TempDir())
	})
}

func benchCreate(b *testing.B, s store.Store, input []byte, dir string) {
	baseline := fsyncBaseline(b, dir, input, 512)

	now := time.Now()
	var next atomic.Int64
	lat := make([][]time.Duration, benchClients)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	b.SetBytes(int64(len(input)))
	b.ResetTimer()
	start := time.Now()
	for c := range benchClients {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				r := store.Request{
					ID: uuid.NewString(), Owner: fmt.Sprintf("anon-%d", c), Kind: store.KindProcess,
					Input: input, CreatedAt: now.Add(time.Duration(i)),
				}
				t0 := time.Now()
				if err := s.CreateRequest(b.Context(), r); err != nil {
					failed.Store(&err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(ms(percentile(all, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(all, 0.99)), "p99-ms")
	b.ReportMetric(baseline, "fsync-req/s")
	b.ReportMetric(rate/baseline, "x-fsync")
}

// fsyncBaseline returns the requests per second of benchClients goroutines
// that each make a request durable by appending it to one file and calling
// fdatasync (Sync) before returning, one request per sync.
func fsyncBaseline(b *testing.B, dir string, input []byte, n int) float64 {
	f, err := os.OpenFile(filepath.Join(dir, "baseline.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	start := time.Now()
	for range benchClients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				mu.Lock()
				_, err := f.Write(input)
				if err == nil {
					err = f.Sync()
				}
				mu.Unlock()
				if err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	return float64(n) / time.Since(start).Seconds()
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

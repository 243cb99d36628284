package sqlstore_test

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

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
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
//	go test -run '^$' -bench CreateRequest -benchtime 4000x ./internal/stores/sqlstore/
//
// and with ACDS_TEST_POSTGRES set for the PostgreSQL figures.
func BenchmarkCreateRequest(b *testing.B) {
	// A FHIR bundle, as the server stores it: what compresses on disk is
	// what real inputs would let compress.
	input := storetest.Bundle(benchInputSize)

	b.Run("sqlite", func(b *testing.B) {
		dir := b.TempDir()
		s, err := sqlstore.OpenSQLite(b.Context(), filepath.Join(dir, "acds.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchCreate(b, s, input, dir)
	})
	b.Run("postgres", func(b *testing.B) {
		s, err := sqlstore.OpenPostgres(b.Context(), postgresDSN(b))
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
					ID: uuid.NewString(), Owner: fmt.Sprintf("anon-%d", c), Kind: acds.KindProcess,
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

// BenchmarkClaimComplete measures the worker side: 16 workers claiming and
// completing requests (16 KiB inputs, 4 KiB results) until none is left,
// against the same number of plain CreateRequest writes measured in the
// same run as the baseline (a claim and a completion are two writes, so
// x-create near 0.5 means claiming costs no more than writing).
//
//	go test -run '^$' -bench ClaimComplete -benchtime 2000x ./internal/stores/sqlstore/
func BenchmarkClaimComplete(b *testing.B) {
	input, result := storetest.Bundle(benchInputSize), storetest.Bundle(4<<10)
	b.Run("sqlite", func(b *testing.B) {
		s, err := sqlstore.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "acds.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchClaim(b, s, input, result)
	})
	b.Run("postgres", func(b *testing.B) {
		s, err := sqlstore.OpenPostgres(b.Context(), postgresDSN(b))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchClaim(b, s, input, result)
	})
}

func benchClaim(b *testing.B, s store.Store, input, result []byte) {
	const workers = 16
	now := time.Now()
	create := func(n int) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range benchClients {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					r := store.Request{ID: uuid.NewString(), Owner: "anon-bench", Kind: acds.KindProcess, Input: input, CreatedAt: now.Add(time.Duration(i))}
					if err := s.CreateRequest(b.Context(), r); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	createTime := create(b.N) // the baseline, and the requests to claim

	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		worker := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				c, err := s.Claim(b.Context(), store.ClaimOptions{Worker: worker, Lease: time.Hour, MaxAttempts: 3, Now: now.Add(time.Hour)})
				if err != nil {
					b.Error(err)
					return
				}
				if c == nil {
					return
				}
				if err := s.Complete(b.Context(), c.ID, worker, result, now.Add(time.Hour)); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if int(done.Load()) != b.N {
		b.Fatalf("completed %d of %d requests", done.Load(), b.N)
	}
	rate := float64(b.N) / elapsed.Seconds()
	createRate := float64(b.N) / createTime.Seconds()
	b.ReportMetric(rate, "req/s")
	b.ReportMetric(createRate, "create-req/s")
	b.ReportMetric(rate/createRate, "x-create")
}

package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/server/servertest"
)

func openSQLite(t testing.TB, path string) *sqlstore.SQLite {
	t.Helper()
	st, err := sqlstore.OpenSQLite(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A request accepted by a server that then dies mid-processing survives on
// disk: after the store is closed and reopened (a restart), a new server
// re-claims it when the lease expires and completes it.
func TestSQLiteRestartCompletesAbandonedRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acds.db")
	st := openSQLite(t, path)
	claimed := make(chan struct{}, 1)
	lease := 300 * time.Millisecond
	a := newHarness(t, func(c *server.Config) {
		c.Store, c.Lease, c.Workers = st, lease, 1
		c.Pipeline = &servertest.Pipeline{Hook: func(ctx context.Context, _ []byte) error {
			claimed <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}}
	})
	s := a.anon()
	_, b := a.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4))
	id := decode[acds.Accepted](t, b).RequestID
	// A second request is accepted but never claimed before the "crash".
	_, b = a.do("POST", "/v1/process", s.Token, processBody(acds.OutputFHIRR4Deidentified))
	id2 := decode[acds.Accepted](t, b).RequestID
	<-claimed
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	_ = a.srv.Close(dead)
	a.ts.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := openSQLite(t, path)
	t.Cleanup(func() { _ = st2.Close() })
	bsrv := newHarness(t, func(c *server.Config) { c.Store, c.Lease = st2, lease })
	for _, rid := range []string{id, id2} {
		r := bsrv.wait(s.Token, rid, 10*time.Second) // the old token is durable too
		if r.Status != acds.StatusCompleted {
			t.Fatalf("after restart %s = %+v (%+v)", rid, r, r.Error)
		}
	}
}

// postgresDSN returns a DSN for a fresh schema of ACDS_TEST_POSTGRES,
// dropped at the end; it skips the test when the variable is unset.
func postgresDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("ACDS_TEST_POSTGRES")
	if base == "" {
		t.Skip("ACDS_TEST_POSTGRES is not set; skipping the PostgreSQL test")
	}
	var rb [8]byte
	_, _ = rand.Read(rb[:])
	schema := "acds_server_test_" + hex.EncodeToString(rb[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to ACDS_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return base + " search_path=" + schema
}

// Two server instances share one PostgreSQL database; 500 requests
// accepted through both are each processed exactly once and all complete.
func TestPostgresTwoInstancesExactlyOnce(t *testing.T) {
	dsn := postgresDSN(t)
	var mu sync.Mutex
	processed := map[string]int{} // bundle id → times processed
	byInstance := [2]atomic.Int32{}
	mk := func(i int) *harness {
		st, err := sqlstore.OpenPostgres(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() }) // after the server's Close (cleanups run last-in first-out)
		h := newHarness(t, func(c *server.Config) {
			c.Store, c.Workers, c.PollInterval = st, 4, 10*time.Millisecond
			c.Pipeline = &servertest.Pipeline{Hook: func(_ context.Context, in []byte) error {
				mu.Lock()
				processed[string(in)]++
				mu.Unlock()
				byInstance[i].Add(1)
				return nil
			}}
		})
		return h
	}
	a, b := mk(0), mk(1)
	s := a.anon()
	const n = 500
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			h := a
			if i%2 == 1 {
				h = b
			}
			body := `{"data":{"resourceType":"Bundle","id":"b` + strconv.Itoa(i) + `","type":"collection"},"outputFormat":"fhir_r4"}`
			resp, rb := h.do("POST", "/v1/process", s.Token, body)
			if resp.StatusCode != 202 {
				t.Errorf("request %d: %d %s", i, resp.StatusCode, rb)
				return
			}
			ids[i] = decode[acds.Accepted](t, rb).RequestID
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	deadline := time.Now().Add(60 * time.Second)
	for i, id := range ids {
		h := a
		if i%3 == 0 {
			h = b
		}
		r := h.wait(s.Token, id, time.Until(deadline))
		if r.Status != acds.StatusCompleted {
			t.Fatalf("request %d = %+v (%+v)", i, r, r.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(processed) != n {
		t.Fatalf("%d distinct inputs processed, want %d", len(processed), n)
	}
	for in, c := range processed {
		if c != 1 {
			t.Fatalf("input processed %d times: %s", c, in)
		}
	}
	t.Logf("instance A processed %d, instance B %d", byInstance[0].Load(), byInstance[1].Load())
	if byInstance[0].Load() == 0 || byInstance[1].Load() == 0 {
		t.Errorf("one instance processed nothing: %d / %d", byInstance[0].Load(), byInstance[1].Load())
	}
}

package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

func openMarked(t *testing.T, dsn, mark, replica string, installed, accept bool) (*sqlstore.Postgres, error) {
	t.Helper()
	s, err := sqlstore.OpenPostgresWith(t.Context(), dsn, sqlstore.MarkOptions{Path: mark, Replica: replica, Installed: installed, AcceptDataLoss: accept})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// The conformance suite holds with the mark kept.
func TestPostgresMarkedConformance(t *testing.T) {
	t.Parallel()
	postgresDSN(t) // skips without PostgreSQL
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := openMarked(t, postgresDSN(t), filepath.Join(t.TempDir(), "mark"), "replica-a", false, false)
		require.NoError(t, err)
		return s
	})
}

// schemaOf is the search_path schema of a pgtest DSN.
func schemaOf(t *testing.T, dsn string) string {
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	return u.Query().Get("search_path")
}

// snapshot copies every table of the DSN's schema into a schema of its
// own, as a dump would keep them; restore puts the copy back in place of
// the schema, as restoring that dump would.
func snapshot(t *testing.T, conn *pgx.Conn, schema string) (restore func()) {
	t.Helper()
	ctx := t.Context()
	snap := schema + "_snap"
	_, err := conn.Exec(ctx, "CREATE SCHEMA "+snap)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+snap+" CASCADE") })
	rows, err := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, tables)
	for _, tb := range tables {
		_, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.%s (LIKE %s.%s INCLUDING ALL); INSERT INTO %s.%s SELECT * FROM %s.%s",
			snap, tb, schema, tb, snap, tb, schema, tb))
		require.NoError(t, err)
	}
	return func() {
		_, err := conn.Exec(ctx, fmt.Sprintf("DROP SCHEMA %s CASCADE; ALTER SCHEMA %s RENAME TO %s", schema, snap, schema))
		require.NoError(t, err)
	}
}

// A replica refuses a database restored from before writes it
// acknowledged, and a database reset; a restart without a loss, or a
// second replica's writes, never make it refuse; an accepted loss is
// recorded and opens.
func TestPostgresMark(t *testing.T) {
	t.Parallel()
	dsn := postgresDSN(t)
	dir := t.TempDir()
	markA, markB := filepath.Join(dir, "a-mark"), filepath.Join(dir, "b-mark")
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	a, err := openMarked(t, dsn, markA, "replica-a", false, false)
	require.NoError(t, err)
	b, err := openMarked(t, dsn, markB, "replica-b", false, false)
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, a.CreateRequest(ctx, storetest.NewRequest("anon-a", storetest.T0.Add(time.Duration(i)))))
		require.NoError(t, b.CreateRequest(ctx, storetest.NewRequest("anon-b", storetest.T0.Add(time.Duration(i)))))
	}
	restore := snapshot(t, conn, schemaOf(t, dsn))
	// After the dump, only replica b acknowledges more.
	late := storetest.NewRequest("anon-b", storetest.T0.Add(time.Hour))
	require.NoError(t, b.CreateRequest(ctx, late))
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	// Restarts in either order: nothing lost, nobody refuses.
	b, err = openMarked(t, dsn, markB, "replica-b", true, false)
	require.NoError(t, err)
	a, err = openMarked(t, dsn, markA, "replica-a", true, false)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	restore()
	// b acknowledged a request the restored database lacks: it refuses.
	_, err = openMarked(t, dsn, markB, "replica-b", true, false)
	var loss *sqlstore.DataLossError
	require.ErrorAs(t, err, &loss)
	require.ErrorIs(t, err, store.ErrDataLoss)
	require.Equal(t, sqlstore.LossBehind, loss.Kind, "%v", err)
	t.Log(err)
	// a, restarted since the dump, acknowledged nothing after it, but its
	// restart advanced its row past the dump: it refuses too (the
	// database went back in time behind it).
	_, err = openMarked(t, dsn, markA, "replica-a", true, false)
	require.ErrorIs(t, err, store.ErrDataLoss)

	// b accepts: it opens, the acceptance is recorded, and it opens
	// again without accepting.
	b, err = openMarked(t, dsn, markB, "replica-b", true, true)
	require.NoError(t, err)
	require.NotNil(t, b.AcceptedLoss())
	_, err = b.GetRequest(ctx, "anon-b", late.ID)
	require.ErrorIs(t, err, store.ErrNotFound, "the restore did lose it")
	require.NoError(t, b.Close())
	b, err = openMarked(t, dsn, markB, "replica-b", true, false)
	require.NoError(t, err)
	require.Nil(t, b.AcceptedLoss())
	require.NoError(t, b.Close())
	var kind, replica string
	require.NoError(t, conn.QueryRow(ctx, "SELECT kind, replica FROM data_loss_accepted").Scan(&kind, &replica))
	require.Equal(t, "behind", kind)
	require.Equal(t, "replica-b", replica)
	// a still refuses: each replica accepts its own loss.
	_, err = openMarked(t, dsn, markA, "replica-a", true, false)
	require.ErrorIs(t, err, store.ErrDataLoss)

	// A reset database (the schema dropped and made anew) is refused as
	// new, and, once migrated by another replica, as another database.
	schema := schemaOf(t, dsn)
	_, err = conn.Exec(ctx, fmt.Sprintf("DROP SCHEMA %s CASCADE; CREATE SCHEMA %s", schema, schema))
	require.NoError(t, err)
	_, err = openMarked(t, dsn, markB, "replica-b", true, false)
	require.ErrorAs(t, err, &loss)
	require.Equal(t, sqlstore.LossNewDatabase, loss.Kind, "%v", err)
	c, err := openMarked(t, dsn, filepath.Join(dir, "c-mark"), "replica-c", false, false)
	require.NoError(t, err, "a new replica starts on a new database")
	require.NoError(t, c.Close())
	_, err = openMarked(t, dsn, markB, "replica-b", true, false)
	require.ErrorAs(t, err, &loss)
	require.Equal(t, sqlstore.LossOtherDatabase, loss.Kind, "%v", err)
	// A replica whose data directory holds state but has no mark yet
	// (an installation from before marks, or another store before) on a
	// new database is refused as well.
	_, err = conn.Exec(ctx, fmt.Sprintf("DROP SCHEMA %s CASCADE; CREATE SCHEMA %s", schema, schema))
	require.NoError(t, err)
	_, err = openMarked(t, dsn, filepath.Join(dir, "d-mark"), "replica-d", true, false)
	require.ErrorAs(t, err, &loss)
	require.Equal(t, sqlstore.LossNewDatabase, loss.Kind, "%v", err)
}

// cutProxy forwards TCP connections to target and cuts one of them,
// picked at random, when cut is called: a connection dropped
// mid-statement, maybe mid-COMMIT.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]net.Conn // client side → server side
	cuts   atomic.Int64
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]net.Conn{}}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for c, u := range p.conns {
			c.Close()
			u.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c] = u
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
	c.Close()
	u.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, u := range p.conns { // map order is random enough
		c.Close()
		u.Close()
		p.cuts.Add(1)
		return
	}
}

// Connections to PostgreSQL dropped at random points — mid-statement,
// mid-COMMIT — while requests are created, claimed and completed: every
// request whose CreateRequest returned nil is in the database exactly
// once, one whose answer was lost is there at most once (creating it again
// with its id is a conflict, never a second row), no request is completed
// twice, and the replica's mark, whose rounds go through the same
// connections, opens again.
func TestPostgresConnectionDroppedMidCommit(t *testing.T) {
	t.Parallel()
	dsn := postgresDSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	proxy := newCutProxy(t, u.Host)
	pu := *u
	pu.Host = proxy.ln.Addr().String()
	q := pu.Query()
	q.Set("connect_timeout", "5")
	pu.RawQuery = q.Encode()
	mark := filepath.Join(t.TempDir(), "mark")
	s, err := openMarked(t, pu.String(), mark, "replica-cut", false, false)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second)
	defer cancel()
	var (
		mu        sync.Mutex
		acked     = map[string]bool{}
		unknown   = map[string]bool{}
		completed = map[string]int{}
		wg        sync.WaitGroup
	)
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				r := storetest.NewRequest("anon-cut", storetest.T0.Add(time.Duration(c*100000+i)))
				err := s.CreateRequest(ctx, r)
				mu.Lock()
				if err == nil {
					acked[r.ID] = true
				} else {
					unknown[r.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	for w := range 4 {
		wg.Go(func() {
			worker := fmt.Sprintf("w%d", w)
			for ctx.Err() == nil {
				c, err := s.Claim(ctx, store.ClaimOptions{Worker: worker, Lease: 200 * time.Millisecond, Now: time.Now()})
				if err != nil || c == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if s.Complete(ctx, c.ID, worker, []byte(`{}`), time.Now()) == nil {
					mu.Lock()
					completed[c.ID]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(time.Duration(5+rand.IntN(30)) * time.Millisecond)
			proxy.cut()
		}
	})
	wg.Wait()
	require.NoError(t, s.Close())
	require.Greater(t, proxy.cuts.Load(), int64(20))
	require.NotEmpty(t, acked)
	t.Logf("%d acknowledged, %d answers lost, %d completed, %d cuts", len(acked), len(unknown), len(completed), proxy.cuts.Load())

	direct, err := openMarked(t, dsn, mark, "replica-cut", true, false)
	require.NoError(t, err, "the mark is ahead of the database after dropped connections")
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var rows, ids int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT id) FROM requests").Scan(&rows, &ids))
	require.Equal(t, rows, ids)
	for id := range acked {
		_, err := direct.GetRequest(t.Context(), "anon-cut", id)
		require.NoError(t, err, "acknowledged request %s lost", id)
	}
	require.LessOrEqual(t, rows, len(acked)+len(unknown), "rows nobody created")
	committed := 0 // answers lost after the commit went through
	for id := range unknown {
		r := storetest.NewRequest("anon-cut", storetest.T0)
		r.ID = id
		err := direct.CreateRequest(t.Context(), r)
		require.True(t, err == nil || errors.Is(err, store.ErrConflict), "retrying %s: %v", id, err)
		if err != nil {
			committed++
		}
	}
	t.Logf("%d of the lost answers were for requests committed", committed)
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT id) FROM requests").Scan(&rows, &ids))
	require.Equal(t, rows, ids)
	require.Equal(t, len(acked)+len(unknown), rows)
	for id, n := range completed {
		require.Equal(t, 1, n, "request %s completed %d times", id, n)
	}
}

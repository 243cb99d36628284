package sqlstore_test

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "data", "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSQLiteConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openSQLite)
}

func TestSQLiteDurableAcrossReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "acds.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	r := storetest.NewRequest("anon-a", storetest.T0)
	r.Sealed = []byte("sealed")
	require.NoError(t, s.CreateRequest(ctx, r))
	ses := store.Session{Pseudonym: "anon-a", TokenHash: storetest.Token("a"), CreatedAt: storetest.T0, ExpiresAt: storetest.T0.Add(time.Hour)}
	require.NoError(t, s.CreateSession(ctx, ses))
	require.NoError(t, s.SetPassphrase(ctx, "anon-a", "$argon2id$x"))
	c, err := s.Claim(ctx, store.ClaimOptions{Worker: "w1", Lease: time.Minute, MaxAttempts: 3, Now: storetest.T0})
	require.NoError(t, err)
	require.NotNil(t, c)
	require.NoError(t, s.Close())

	s, err = sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err, "reopening an existing database")
	defer s.Close()
	got, err := s.GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, acds.StatusProcessing, got.Status)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, "w1", got.LeaseOwner)
	require.Equal(t, r.Sealed, got.Sealed)
	_, err = s.SessionByTokenHash(ctx, storetest.Token("a"))
	require.NoError(t, err)
	h, err := s.Passphrase(ctx, "anon-a")
	require.NoError(t, err)
	require.Equal(t, "$argon2id$x", h)
	// The worker died with the old process: its request is re-claimed
	// once the lease has run out.
	c, err = s.Claim(ctx, store.ClaimOptions{Worker: "w2", Lease: time.Minute, MaxAttempts: 3, Now: storetest.T0.Add(time.Hour)})
	require.NoError(t, err)
	require.NotNil(t, c)
	require.Equal(t, 2, c.Attempts)
}

func TestSQLiteFileModes(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "new", "data")
	path := filepath.Join(dir, "acds.db")
	s, err := sqlstore.OpenSQLite(t.Context(), path)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateRequest(t.Context(), storetest.NewRequest("anon-a", storetest.T0)))
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "data directory")
	for _, name := range []string{"acds.db", "acds.db-wal", "acds.db-shm", "acds.db-reserve"} {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Zero(t, st.Mode().Perm()&0o077, "%s is %v: readable by others", name, st.Mode().Perm())
	}
}

func TestSQLiteSettings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "acds.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// Inspect the file with a connection of our own.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var mode string
	require.NoError(t, db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode, "WAL is persistent in the file")
	var versions []int
	rows, err := db.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
	require.NoError(t, err)
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		versions = append(versions, v)
	}
	require.NoError(t, rows.Err())
	require.Len(t, versions, sqlstore.SchemaVersion())
	require.Equal(t, 1, versions[0])

	// A database whose last migration was applied by another build (same
	// number, other name) is refused, not migrated further.
	last := sqlstore.SchemaVersion()
	var name string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT name FROM schema_migrations WHERE version = ?", last).Scan(&name))
	_, err = db.ExecContext(ctx, "UPDATE schema_migrations SET name = 'from_another_branch' WHERE version = ?", last)
	require.NoError(t, err)
	_, err = sqlstore.OpenSQLite(ctx, path)
	require.ErrorContains(t, err, "migrated by another build")
	_, err = db.ExecContext(ctx, "UPDATE schema_migrations SET name = ? WHERE version = ?", name, last)
	require.NoError(t, err)
	s2, err := sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err, "the same build's record opens")
	require.NoError(t, s2.Close())

	// A database migrated by a newer build is refused, not clobbered.
	_, err = db.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', 0)", sqlstore.SchemaVersion()+1)
	require.NoError(t, err)
	_, err = sqlstore.OpenSQLite(ctx, path)
	require.Error(t, err)
}

func TestSQLiteInvalidPath(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=memory"} {
		_, err := sqlstore.OpenSQLite(t.Context(), p)
		require.ErrorIs(t, err, store.ErrInvalid, "path %q", p)
	}
}

// Deleted and erased data must not linger in the database file.
func TestSQLiteErasureLeavesNoTrace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "acds.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	deleted := storetest.NewRequest("anon-a", storetest.T0)
	deleted.Input = []byte(`{"marker":"INPUT-MARKER-5f1d2c"}`)
	deleted.Sealed = []byte("SEALED-MARKER-0b7e91")
	require.NoError(t, s.CreateRequest(ctx, deleted))
	completed := storetest.NewRequest("anon-a", storetest.T0.Add(time.Second))
	completed.Sealed = []byte("SEALED-MARKER-77aa03")
	require.NoError(t, s.CreateRequest(ctx, completed))
	require.NoError(t, s.DeleteRequest(ctx, "anon-a", deleted.ID))
	c, err := s.Claim(ctx, store.ClaimOptions{Worker: "w", Lease: time.Minute, Now: storetest.T0})
	require.NoError(t, err)
	require.Equal(t, completed.ID, c.ID)
	require.NoError(t, s.Complete(ctx, completed.ID, "w", []byte(`{}`), storetest.T0))
	require.NoError(t, s.Close())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		for _, m := range []string{"INPUT-MARKER-5f1d2c", "SEALED-MARKER-0b7e91", "SEALED-MARKER-77aa03"} {
			require.False(t, bytes.Contains(b, []byte(m)), "%s still holds %s", e.Name(), m)
		}
	}
}

// Two processes (here: two stores) opening one file at once both start;
// the migrations run once, under SQLite's write lock, and writes of one
// are seen by the other.
func TestSQLiteConcurrentOpeners(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "acds.db")
	const n = 4
	stores := make([]*sqlstore.SQLite, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = sqlstore.OpenSQLite(ctx, path) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i], "opener %d", i)
		defer stores[i].Close()
	}
	r := storetest.NewRequest("anon-a", storetest.T0)
	require.NoError(t, stores[0].CreateRequest(ctx, r))
	got, err := stores[n-1].GetRequest(ctx, "anon-a", r.ID)
	require.NoError(t, err)
	require.Equal(t, r.ID, got.ID)
	// Claims from both are serialised by SQLite's lock: one wins.
	o := store.ClaimOptions{Worker: "a", Lease: time.Minute, Now: storetest.T0}
	c1, err := stores[0].Claim(ctx, o)
	require.NoError(t, err)
	o.Worker = "b"
	c2, err := stores[1].Claim(ctx, o)
	require.NoError(t, err)
	require.NotNil(t, c1)
	require.Nil(t, c2)
}

// Inputs are compressed on disk, and a damaged value reads as ErrCorrupt.
func TestSQLiteCompressesAndDetectsDamage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "acds.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer s.Close()
	r := storetest.NewRequest("anon-a", storetest.T0)
	r.Input = storetest.Bundle(64 << 10)
	require.NoError(t, s.CreateRequest(ctx, r))

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT length(input) FROM requests WHERE id = ?", r.ID).Scan(&n))
	require.Less(t, n, len(r.Input)/3, "a %d-byte bundle takes %d bytes on disk", len(r.Input), n)

	_, err = db.ExecContext(ctx, "UPDATE requests SET input = x'deadbeef' WHERE id = ?", r.ID)
	require.NoError(t, err)
	_, err = s.GetRequest(ctx, "anon-a", r.ID)
	require.ErrorIs(t, err, store.ErrCorrupt)
	_, _, err = s.ListRequests(ctx, "anon-a", store.Page{Limit: 10})
	require.ErrorIs(t, err, store.ErrCorrupt)
}

// While the store stays open, an idle pause truncates the WAL, so values
// erased by a completed request or a delete do not linger in it.
func TestSQLiteIdleWALHoldsNoErasedValues(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
	require.NoError(t, err)
	defer s.Close()
	r := storetest.NewRequest("anon-a", storetest.T0)
	r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte("SEALED-MARKER-c41a9e")
	require.NoError(t, s.CreateRequest(ctx, r))
	c, err := s.Claim(ctx, store.ClaimOptions{Worker: "w", Lease: time.Minute, Now: storetest.T0})
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, c.ID, "w", []byte(`{}`), storetest.T0))

	deadline := time.Now().Add(10 * time.Second)
	for {
		clean := true
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			if bytes.Contains(b, []byte("SEALED-MARKER-c41a9e")) {
				clean = false
			}
		}
		if clean {
			break
		}
		require.True(t, time.Now().Before(deadline), "the erased value is still on disk after 10 s idle")
		time.Sleep(50 * time.Millisecond)
	}
	st, err := os.Stat(filepath.Join(dir, "acds.db-wal"))
	require.NoError(t, err)
	require.Zero(t, st.Size(), "an idle WAL is truncated")
}

// Under sustained writes the WAL restarts instead of growing with the
// data: 24 MB of incompressible inputs leave a log of about 16 MB (without
// the restart it would hold about twice the data).
func TestSQLiteWALStaysBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
	require.NoError(t, err)
	defer s.Close()
	const goroutines, each = 8, 192 // 1536 × 16 KiB = 24 MiB
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			in := make([]byte, 16<<10) // random, so it does not compress
			_, _ = rand.Read(in)
			for i := range each {
				r := storetest.NewRequest("anon-a", storetest.T0.Add(time.Duration(g*each+i)))
				r.Input = in
				if err := s.CreateRequest(ctx, r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := os.Stat(filepath.Join(dir, "acds.db-wal"))
	require.NoError(t, err)
	require.Less(t, st.Size(), int64(28<<20), "WAL of %d MB after 24 MB of writes", st.Size()>>20)
}

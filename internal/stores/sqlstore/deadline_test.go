package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// TestSQLiteWriteHonoursDeadline (issue 15): a write stuck behind the
// write lock of another process (the same stand-in as a stalled disk)
// returns the caller's deadline error when its context ends, instead of
// waiting for SQLite's 10 s busy timeout; the write it gave up is not
// made, and the store works once the lock is gone.
func TestSQLiteWriteHonoursDeadline(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "acds.db")
	s, err := sqlstore.OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	r := storetest.NewRequest("anon-deadline", storetest.T0)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.CreateRequest(wctx, r)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CreateRequest behind a held lock: %v, want the deadline's error", err)
	}
	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	r2 := storetest.NewRequest("anon-deadline", storetest.T0.Add(time.Second))
	if err := s.CreateRequest(ctx, r2); err != nil {
		t.Fatalf("after the lock: %v", err)
	}
	if _, err := s.GetRequest(ctx, "anon-deadline", r.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the abandoned write was made: %v", err)
	}
}

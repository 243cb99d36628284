package sqlstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/internal/testrig/disktest"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// TestFullDiskDeletionRunsAgainAlone: a deletion whose batch fails
// because the disk is full (here another program took every byte while
// the log was empty, so the deletion's log needs new blocks) is run again
// alone after the reserve is released and the log truncated, and goes
// through; other writes fail with ErrDiskFull.
func TestFullDiskDeletionRunsAgainAlone(t *testing.T) {
	dir := disktest.Small(t, 16<<20)
	ctx := t.Context()
	s, err := OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.room.isHeld() || s.room.size != 1<<20 || fileSize(s.room.reserve) != s.room.size {
		t.Fatalf("reserve: held %v, size %d, file %d bytes; want 1 MiB", s.room.isHeld(), s.room.size, fileSize(s.room.reserve))
	}
	var ids []string
	for range 20 {
		r := storetest.NewRequest("anon-a", storetest.T0)
		r.Input = make([]byte, 16<<10)
		if err := s.CreateRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	s.ckmu.Lock()
	var busy, logPages, done int
	err = s.ckdb.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
	s.ckmu.Unlock()
	if err != nil || busy != 0 || fileSize(s.room.wal) != 0 {
		t.Fatalf("truncating the log: %v, busy %d, log %d bytes", err, busy, fileSize(s.room.wal))
	}
	disktest.Fill(t, dir, "other-program.log")

	if err := s.SetPassphrase(ctx, "anon-a", "$argon2id$x"); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a write on a full disk: %v, want ErrDiskFull", err)
	}
	if err := s.CreateRequest(ctx, storetest.NewRequest("anon-a", storetest.T0)); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("a new request on a full disk: %v, want ErrDiskFull", err)
	}
	// DeleteRequest's job, without the release DeleteRequest does first
	// on a full disk: the batch fails for room, and the writer runs it
	// again.
	err = s.submit(ctx, &writeJob{ctx: ctx, single: true, frees: true, done: make(chan error, 1),
		fn: func(w *writeConn) error {
			res, err := w.exec("DELETE FROM requests WHERE id = ? AND owner = ?", ids[0], "anon-a")
			if err != nil {
				return err
			}
			return oneRow(res, store.ErrNotFound)
		}})
	if err != nil {
		t.Fatalf("deletion on a full disk: %v", err)
	}
	if s.room.isHeld() {
		t.Fatal("the deletion went through without the reserve's room?")
	}
	if _, err := os.Stat(s.room.reserve); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reserve after its release: %v", err)
	}
	if _, err := s.GetRequest(ctx, "anon-a", ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("request after its deletion: %v", err)
	}
	for _, id := range ids[1:] {
		if _, err := s.GetRequest(ctx, "anon-a", id); err != nil {
			t.Fatalf("request %s, not deleted: %v", id, err)
		}
	}
}

// TestSparseReserveIsRewritten: a reserve that holds no room (made
// sparse, as truncate or a sparse copy leaves it) is not taken for held
// at open, whatever its size says, and is written again with its room.
func TestSparseReserveIsRewritten(t *testing.T) {
	dir := disktest.Small(t, 16<<20)
	ctx := t.Context()
	path := filepath.Join(dir, "acds.db")
	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	size := s.room.size
	if !s.room.isHeld() || heldOnDisk(s.room.reserve) < size {
		t.Fatalf("reserve at first open: held %v, %d bytes on disk of %d", s.room.isHeld(), heldOnDisk(s.room.reserve), size)
	}
	reserve := s.room.reserve
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(reserve, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(reserve, size); err != nil { // sparse: the size, no blocks
		t.Fatal(err)
	}
	if fileSize(reserve) != size || heldOnDisk(reserve) >= size {
		t.Fatalf("the reserve was not made sparse: %d bytes, %d on disk", fileSize(reserve), heldOnDisk(reserve))
	}
	s, err = OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.room.isHeld() || heldOnDisk(reserve) < size {
		t.Fatalf("a sparse reserve at open: held %v, %d bytes on disk of %d", s.room.isHeld(), heldOnDisk(reserve), size)
	}
}

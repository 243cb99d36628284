package sqlstore_test

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/internal/testrig/disktest"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// fullDiskSize is the size of the test disk: the reserve is a sixteenth
// of it (1 MiB), room for many deletions of fullDiskInput bytes.
const (
	fullDiskSize  = 16 << 20
	fullDiskInput = 16 << 10
)

// newFullDiskRequest is a request whose input does not compress.
func newFullDiskRequest(t *testing.T) store.Request {
	r := storetest.NewRequest("anon-a", storetest.T0)
	r.Input = make([]byte, fullDiskInput)
	if _, err := rand.Read(r.Input); err != nil {
		t.Fatal(err)
	}
	return r
}

// fillStore creates requests until the store refuses one and returns the
// ids of those it accepted and the refusal.
func fillStore(t *testing.T, s *sqlstore.SQLite) ([]string, error) {
	t.Helper()
	var ids []string
	for range fullDiskSize / fullDiskInput * 2 {
		r := newFullDiskRequest(t)
		if err := s.CreateRequest(t.Context(), r); err != nil {
			if len(ids) < 100 {
				t.Fatalf("refused after only %d requests: %v", len(ids), err)
			}
			return ids, err
		}
		ids = append(ids, r.ID)
	}
	t.Fatal("the disk never filled")
	return nil, nil
}

// TestSQLiteFullDiskDeletes: once the disk is full, new requests are
// refused, but deleting requests still works, one after another (a user
// must be able to erase their data, and deleting is how an operator frees
// room); after the deletes, a new request is accepted again (issue 15:
// DELETE failed with SQLITE_FULL, 503). filledByOthers: after the store
// stopped accepting, something else takes every byte left on the disk
// (ENOSPC), and gives its room back only after the deletes.
func TestSQLiteFullDiskDeletes(t *testing.T) {
	for _, filledByOthers := range []bool{false, true} {
		name := "filled by the store"
		if filledByOthers {
			name = "filled by others"
		}
		t.Run(name, func(t *testing.T) {
			dir := disktest.Small(t, fullDiskSize)
			ctx := t.Context()
			s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ids, full := fillStore(t, s)
			t.Logf("full after %d requests: %v", len(ids), full)
			filler := ""
			if filledByOthers {
				filler = disktest.Fill(t, dir, "other-program.log")
				if err := s.CreateRequest(ctx, newFullDiskRequest(t)); err == nil {
					t.Fatal("a new request was accepted on a disk with no room left")
				}
			}
			// Several deletions in a row, from different places of the
			// table: each must go through.
			var gone []string
			for i := 0; i < 6; i++ {
				id := ids[i*len(ids)/6]
				if err := s.DeleteRequest(ctx, "anon-a", id); err != nil {
					t.Fatalf("deletion %d on a full disk: %v", i+1, err)
				}
				gone = append(gone, id)
			}
			for _, id := range gone {
				if _, err := s.GetRequest(ctx, "anon-a", id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("request %s after its deletion: %v", id, err)
				}
			}
			if filler != "" {
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
			}
			// The room the deletes freed takes new requests again.
			for i := 0; i < 2; i++ {
				if err := s.CreateRequest(ctx, newFullDiskRequest(t)); err != nil {
					t.Fatalf("new request %d after the deletes: %v", i+1, err)
				}
			}
			// Nothing accepted was lost on the way.
			for _, id := range ids[1:6] {
				if _, err := s.GetRequest(ctx, "anon-a", id); err != nil {
					t.Fatalf("request %s, accepted and not deleted: %v", id, err)
				}
			}
		})
	}
}

// TestSQLiteFullDiskErases: retention's erasure works on a disk another
// program filled, even in batches too large for the room a full disk can
// make; then, once that program gives its room back, new requests are
// accepted.
func TestSQLiteFullDiskErases(t *testing.T) {
	dir := disktest.Small(t, fullDiskSize)
	ctx := t.Context()
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const ended = 40
	var endedIDs []string
	for range ended {
		r := newFullDiskRequest(t)
		if err := s.CreateRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
		endedIDs = append(endedIDs, r.ID)
	}
	for range ended {
		c, err := s.Claim(ctx, store.ClaimOptions{Worker: "w", Lease: time.Minute, Now: storetest.T0})
		if err != nil || c == nil {
			t.Fatalf("claim: %v %v", c, err)
		}
		result := make([]byte, fullDiskInput)
		_, _ = rand.Read(result)
		if err := s.Complete(ctx, c.ID, "w", result, storetest.T0); err != nil {
			t.Fatal(err)
		}
	}
	ids, full := fillStore(t, s)
	t.Logf("full after %d more requests: %v", len(ids), full)
	filler := disktest.Fill(t, dir, "other-program.log")
	total := 0
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("erasing never ended")
		}
		n, err := s.EraseEndedBefore(ctx, storetest.T0.Add(time.Hour), storetest.T0.Add(time.Hour), 500)
		if err != nil {
			t.Fatalf("erasure on a full disk, after %d erased: %v", total, err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != ended {
		t.Fatalf("erased %d requests, want %d", total, ended)
	}
	for _, id := range endedIDs {
		r, err := s.GetRequest(ctx, "anon-a", id)
		if err != nil || r.Input != nil || r.Result != nil || r.ErasedAt.IsZero() {
			t.Fatalf("request %s after its erasure: input %d bytes, result %d, erased at %v, %v", id, len(r.Input), len(r.Result), r.ErasedAt, err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRequest(ctx, newFullDiskRequest(t)); err != nil {
		t.Fatalf("a new request after the erasures: %v", err)
	}
}

package sqlstore_test

import (
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/internal/disktest"
	"github.com/acds-project/acds/internal/sqlstore"
	"github.com/acds-project/acds/store/storetest"
)

// TestSQLiteDeleteOnFullDisk: once the disk is full, new requests are
// refused, but deleting one still works — a user must be able to erase
// their data, and deleting is how an operator frees room — and then the
// room it freed takes new requests again.
func TestSQLiteDeleteOnFullDisk(t *testing.T) {
	dir := disktest.Small(t, 4<<20)
	ctx := t.Context()
	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reserve := filepath.Join(dir, "acds.db-reserve")
	if fi, err := os.Stat(reserve); err != nil || fi.Size() == 0 {
		t.Fatalf("no disk reserve written at open: %v", err)
	}
	var ids []string
	var full error
	for i := 0; i < 10000; i++ {
		r := storetest.NewRequest("anon-a", storetest.T0)
		r.Input = make([]byte, 20<<10)
		_, _ = rand.Read(r.Input) // incompressible
		if err := s.CreateRequest(ctx, r); err != nil {
			full = err
			break
		}
		ids = append(ids, r.ID)
	}
	if full == nil {
		t.Fatal("the disk never filled")
	}
	t.Logf("full after %d requests: %v", len(ids), full)
	if len(ids) < 10 {
		t.Fatalf("only %d requests fit", len(ids))
	}
	for _, id := range ids[:5] {
		if err := s.DeleteRequest(ctx, "anon-a", id); err != nil {
			t.Fatalf("delete on a full disk: %v", err)
		}
	}
	// Every delete took: the requests are gone.
	for _, id := range ids[:5] {
		if _, err := s.GetRequest(ctx, "anon-a", id); err == nil {
			t.Fatalf("request %s still there after its delete", id)
		}
	}
	if _, err := os.Stat(reserve); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reserve was not released for the deletes: %v", err)
	}
	// The room the deletes freed inside the database takes new requests.
	r := storetest.NewRequest("anon-a", storetest.T0)
	r.Input = make([]byte, 20<<10)
	_, _ = rand.Read(r.Input)
	if err := s.CreateRequest(ctx, r); err != nil {
		t.Fatalf("a new request after the deletes: %v", err)
	}
}

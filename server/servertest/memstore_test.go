package servertest_test

import (
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// TestMemStoreConformance runs the store conformance suite against the
// fake, so server tests that use it rely on the same behaviour as with the
// real backends.
func TestMemStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := servertest.NewMemStore()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// Snapshot is the fake's own door for tests: it returns copies, and keeps
// working after Close so a test can inspect what a closed server left.
func TestMemStoreSnapshot(t *testing.T) {
	s := servertest.NewMemStore()
	r := storetest.NewRequest("anon-a", storetest.T0)
	r.Kind, r.Sealed = acds.KindFetchAndAttest, []byte("sealed")
	if err := s.CreateRequest(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if len(snap) != 1 || snap[0].ID != r.ID || string(snap[0].Sealed) != "sealed" {
		t.Fatalf("snapshot = %+v", snap)
	}
	snap[0].Sealed[0] = 'X'
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.Snapshot(); len(got) != 1 || string(got[0].Sealed) != "sealed" {
		t.Fatalf("snapshot after close = %+v; want the stored row unchanged", got)
	}
}

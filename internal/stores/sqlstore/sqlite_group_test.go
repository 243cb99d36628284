package sqlstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// Many concurrent writes, some of them duplicates, share group commits
// (including writes that join a batch while its statements run): each
// duplicate alone fails with ErrConflict, every other write that returned
// nil is on disk after a reopen, with its exact input.
func TestSQLiteGroupCommitIsolatesFailures(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "acds.db")
	s, err := sqlstore.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	input := storetest.Bundle(4 << 10)
	mk := func(id string) store.Request {
		return store.Request{ID: id, Owner: "anon_group", Kind: acds.KindProcess, Input: input, CreatedAt: now, UpdatedAt: now}
	}
	if err := s.CreateRequest(t.Context(), mk("taken")); err != nil {
		t.Fatal(err)
	}
	const writers, each = 32, 8
	var wg sync.WaitGroup
	errs := make([]error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				i := w*each + k
				id := fmt.Sprintf("r%03d", i)
				if i%5 == 0 {
					id = "taken"
				}
				errs[i] = s.CreateRequest(t.Context(), mk(id))
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%5 == 0 {
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("duplicate %d: %v, want ErrConflict", i, err)
			}
		} else if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlstore.OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range writers * each {
		if i%5 == 0 {
			continue
		}
		r, err := s.GetRequest(t.Context(), "anon_group", fmt.Sprintf("r%03d", i))
		if err != nil {
			t.Fatalf("write %d after reopen: %v", i, err)
		}
		if !bytes.Equal(r.Input, input) {
			t.Fatalf("write %d: input changed", i)
		}
	}
}

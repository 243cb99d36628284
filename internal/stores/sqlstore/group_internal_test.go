package sqlstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// fastSyncDir is a directory on a memory file system where there is one
// (/dev/shm), so that a COMMIT's fsync takes next to no time and writes
// that arrive a little apart do not share a batch by the mere slowness of
// the disk: what batches them there is gather alone.
func fastSyncDir(t *testing.T) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "acds-group-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func groupRequest(id string) store.Request {
	now := time.Now()
	return store.Request{ID: id, Owner: "anon_group", Kind: acds.KindProcess, Input: storetest.Bundle(2 << 10), CreatedAt: now, UpdatedAt: now}
}

// Writes that arrive a little apart (every 150 µs, each from its own
// goroutine, as handlers finish validating at different moments) share
// commits once writes have come together: after a batch of more than one
// write, the writer waits for the next ones (gather) instead of committing
// each alone as it comes, which on a fast disk it would.
func TestGroupCommitGathersWritesArrivingApart(t *testing.T) {
	s, err := OpenSQLite(t.Context(), filepath.Join(fastSyncDir(t), "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c0, b0 := s.commits.Load(), s.batched.Load()
	const n, spacing = 200, 150 * time.Microsecond
	var wg sync.WaitGroup
	errs := make([]error, n)
	create := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.CreateRequest(t.Context(), groupRequest(fmt.Sprintf("g%03d", i)))
		}()
	}
	// Writes come together: two queue behind a write that holds the
	// writer until they are waiting, and join its batch.
	started, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.write(t.Context(), false, func(*writeConn) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	create(0)
	create(1)
	time.Sleep(50 * time.Millisecond) // for both to reach the writer's queue; one is enough
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// Then they arrive apart.
	start := time.Now()
	for i := 2; i < n; i++ {
		for time.Since(start) < time.Duration(i-2)*spacing {
			// Spin: a sleep this short would last far longer.
		}
		create(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	commits, writes := s.commits.Load()-c0, s.batched.Load()-b0
	if writes != n+1 {
		t.Fatalf("%d writes committed, want %d", writes, n+1)
	}
	if s.lingers.Load() == 0 || writes < 4*commits {
		t.Fatalf("%d writes in %d commits (%d batches waited for): want at least 4 writes a commit", writes, commits, s.lingers.Load())
	}
	t.Logf("%d writes in %d commits", writes, commits)
}

// Writes one after the other never wait for company: each batch holds
// one write, so the next is not delayed.
func TestGroupCommitSequentialWritesDoNotWait(t *testing.T) {
	s, err := OpenSQLite(t.Context(), filepath.Join(fastSyncDir(t), "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c0 := s.commits.Load()
	const n = 50
	for i := range n {
		if err := s.CreateRequest(t.Context(), groupRequest(fmt.Sprintf("s%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.commits.Load() - c0; got != n {
		t.Fatalf("%d commits for %d writes one after the other, want one each", got, n)
	}
	if l := s.lingers.Load(); l != 0 {
		t.Fatalf("the writer waited for %d batches of writes one after the other, want none", l)
	}
}

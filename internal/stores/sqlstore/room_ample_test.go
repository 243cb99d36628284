package sqlstore

import (
	"path/filepath"
	"testing"
	"time"
)

// TestAdmitReusesAmpleRoom: on a disk with far more room than the
// requests take, admission measures the disk once for many requests, and
// again once the measurement is ampleFor old, once the requests admitted
// against it would use up its spare room, and after the reserve is
// released. On a disk without that much to spare (the full-disk tests'),
// every request is measured.
func TestAdmitReusesAmpleRoom(t *testing.T) {
	dir := t.TempDir()
	if _, free, err := diskSpace(dir); err != nil || free < 4*ampleSlack {
		t.Skipf("the test needs %d bytes free in %s (%d, %v)", 4*ampleSlack, dir, free, err)
	}
	s, err := OpenSQLite(t.Context(), filepath.Join(dir, "acds.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.room
	if r.size == 0 {
		t.Skip("room is not measured here")
	}
	measured := 0
	var lastFree int64
	r.space = func(dir string) (int64, int64, error) {
		measured++
		total, free, err := diskSpace(dir)
		lastFree = free
		return total, free, err
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }
	ctx := t.Context()
	admit := func(need int64) {
		t.Helper()
		done, err := r.admit(ctx, need)
		if err != nil {
			t.Fatalf("admit(%d): %v", need, err)
		}
		done()
	}
	for range 1000 {
		admit(40 << 10)
	}
	if measured != 1 {
		t.Fatalf("1000 requests measured the disk %d times, want once", measured)
	}
	now = now.Add(ampleFor)
	admit(40 << 10)
	if measured != 2 {
		t.Fatalf("after %v: %d measurements, want 2", ampleFor, measured)
	}
	// A request that would use up the spare room is measured, and the
	// measurement is not reused once it finds none to spare.
	slack := r.ample.Load().slack
	if _, err := r.admit(ctx, lastFree); err == nil {
		t.Fatal("a request needing all the free room was admitted")
	}
	if measured != 3 || r.ample.Load() != nil {
		t.Fatalf("%d measurements, ample %v; want 3 and none kept", measured, r.ample.Load())
	}
	admit(40 << 10)
	admit(slack / 4)
	if measured != 4 {
		t.Fatalf("%d measurements, want 4", measured)
	}
	if !r.release() {
		t.Fatal("the reserve was not held")
	}
	admit(40 << 10)
	if measured != 5 {
		t.Fatalf("after the reserve's release: %d measurements, want 5", measured)
	}
}

package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"modernc.org/sqlite"
)

// A full disk must not stop deletions: a user erasing their data and an
// operator freeing room both go through DELETE, and with secure_delete a
// deletion writes (it zeroes the freed pages through the write-ahead log).
// So the store keeps a reserve: a file of zeros beside the database,
// written when the store opens. When a deletion fails because the disk is
// full, the reserve is removed and the deletion runs again in the room it
// gave back; the checkpointer writes the reserve again once the disk has
// room for it. Other writes never release it, so the disk fills up to the
// reserve and new requests are refused (503) while deletions still work.
// docs/deploy.md ("A full data disk") says so for operators.

// maxReserve bounds the reserve. It is also at most an eighth of the room
// left on the disk when it is written, so a small disk keeps most of its
// room for data.
const maxReserve = 64 << 20

// reserve is the file of zeros set aside for deletions on a full disk.
type reserve struct {
	path string
	mu   sync.Mutex
	gone bool // released (or never written), to be written again
}

func newReserve(dbPath string) *reserve {
	return &reserve{path: dbPath + "-reserve", gone: true}
}

// ensure writes the reserve if it is gone and the disk has room for it
// and as much again; errors leave it gone, to be tried again later.
func (r *reserve) ensure() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gone {
		return
	}
	have := int64(0)
	if fi, err := os.Stat(r.path); err == nil {
		have = fi.Size()
	}
	free, err := freeBytes(r.path)
	if err != nil {
		return
	}
	want := min(int64(maxReserve), (free+have)/8)
	if have >= want && have > 0 {
		r.gone = false
		return
	}
	if free < 2*(want-have) {
		return // not yet: leave the room to the data
	}
	if err := writeZeros(r.path, want); err != nil {
		_ = os.Remove(r.path)
		return
	}
	r.gone = false
}

// release removes the reserve and reports whether it gave room back.
func (r *reserve) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return false
	}
	r.gone = true
	return os.Remove(r.path) == nil
}

// missing reports whether the reserve is to be written again.
func (r *reserve) missing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone
}

// writeZeros makes path a file of size bytes that holds its room on
// disk (not sparse, which would hold none): allocated where the file
// system can (allocate, reserve_linux.go), else written with zeros; synced.
func writeZeros(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := allocate(f, size); err != nil {
		err = fillZeros(f, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// fillZeros writes size zero bytes to f from its start.
func fillZeros(f *os.File, size int64) error {
	if _, err := f.Seek(0, 0); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := min(left, int64(len(buf)))
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i+1]
		}
	}
	return "."
}

// isDiskFull reports whether err says the disk (or the database's size
// limit) is full: SQLITE_FULL, or ENOSPC from a write.
func isDiskFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == 13 { // SQLITE_FULL
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}

// freeingWrite is write for a job that frees room (a deletion, an
// erasure): when it fails on a full disk, the reserve is released and the
// job runs once more.
func (s *SQLite) freeingWrite(ctx context.Context, fn func(w *writeConn) error) error {
	err := s.write(ctx, true, fn)
	if err == nil || !isDiskFull(err) || s.reserve == nil || !s.reserve.release() {
		return err
	}
	if err2 := s.write(ctx, true, fn); err2 != nil {
		return fmt.Errorf("%w (again after releasing the disk reserve)", err2)
	}
	return nil
}

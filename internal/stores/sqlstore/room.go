package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/acds-project/acds/store"
)

// ErrDiskFull is the error of a write that failed, or of a new request
// that was refused, because the disk holding the SQLite database is full
// (or too nearly full to take it: see SQLite's Full disk section). It
// passes: retry once data is deleted or the disk is grown. The server
// answers it with 503 and Retry-After.
var ErrDiskFull = fmt.Errorf("%w: the data disk is full", store.ErrFull)

// A full disk must not stop deletions: a user erasing their
// data and an operator freeing room both go through them, and with
// secure_delete a deletion writes — every page it frees is zeroed through
// the write-ahead log, so it needs log room about the size of what it
// deletes. Room comes from three places, all planned here:
//
//   - The reserve: a file of zeros beside the database (acds.db-reserve,
//     0600), of reserveSize, allocated at open. New requests never use
//     it. It is released (removed) by the first deletion that finds the
//     disk full, and written again, by the checkpointer, once the disk has
//     room for it twice over beyond the log.
//   - The admission watermark: while the reserve is released, a new
//     request is refused (ErrDiskFull) when it would leave less than half
//     the reserve's size free, so the store's own writes never take the
//     room the next deletions need. Deletions are never refused.
//   - The log's debt: pages the write-ahead log holds beyond the end of
//     the database file must be written into it (the file grows) before
//     the log can start over; room owed to that is not free. New requests
//     are refused when it is not there, and, on a disk within twice the
//     reserve of full, when the log owes more than half the reserve, so
//     that a released reserve can always pay for a checkpoint even when
//     another program took the rest of the disk.
//
// A deletion that still fails because the disk is full (another program
// filled it) is run again, alone: the reserve is released, the log is
// checkpointed and truncated to zero bytes (giving its blocks back), and
// the deletion runs in that room.
//
// Deleted rows free pages inside the database, which new requests reuse;
// the database file does not shrink. The room measurements need statfs
// (Linux; see room_linux.go); elsewhere there is no reserve and no
// watermark, and only the retry after truncating the log remains.

const (
	// maxReserve bounds the reserve; it is also at most 1/reserveShare of
	// the file system, so that a small disk keeps most of its room for
	// data. Sized from the file system's size, not its free room, it is
	// the same at every start.
	maxReserve   = 64 << 20
	reserveShare = 16
	// rowOverhead is what a new request takes beyond its values: its
	// table leaf and index entries, a page each at most.
	rowOverhead = 2 * 4096
)

// room plans the disk room of a SQLite store; see above.
type room struct {
	dir, db, wal, reserve string
	rdb                   *sql.DB // for the log's debt (page_count)
	pageSize              int64
	// checkpoint copies the log into the database file now, paying its
	// debt; set by the store.
	checkpoint func(context.Context)
	size       int64 // the reserve's size; 0: room is not measured here

	mu   sync.Mutex
	held bool // the reserve is on disk
	// pending is the room admitted to new requests whose writes have
	// not returned yet: admit counts it as taken, so that requests
	// admitted at once do not all count the same free room.
	pending atomic.Int64
	// ample is the last measurement that found ample room, which admit
	// reuses for a while (see admitting); nil when there is none.
	ample atomic.Pointer[ampleRoom]
	now   func() time.Time                                // time.Now; a test's clock
	space func(dir string) (total, free int64, err error) // diskSpace for admission; a test's counter
}

// ampleRoom is a measurement of the disk that found room to spare,
// slack bytes beyond what admit asks for, at a time.
type ampleRoom struct {
	at    time.Time
	slack int64
	used  atomic.Int64 // the room admitted against it
}

const (
	// ampleSlack is the spare room above which a measurement is reused:
	// four times the largest reserve, so that on a disk with less to
	// spare (every test disk of the full-disk tests) each request is
	// measured as before.
	ampleSlack = 4 * maxReserve
	// ampleFor is how long a measurement is reused. Another program
	// filling the disk meanwhile is found by the write, as one filling it
	// between a measurement and the write always was.
	ampleFor = 100 * time.Millisecond
)

// newRoom plans the room of the database at dbPath (absolute) and writes
// the reserve if the disk has room for it.
func newRoom(dbPath string, rdb *sql.DB, pageSize int64) *room {
	r := &room{
		dir: filepath.Dir(dbPath), db: dbPath, wal: dbPath + "-wal", reserve: dbPath + "-reserve",
		rdb: rdb, pageSize: pageSize, now: time.Now, space: diskSpace,
	}
	total, _, err := diskSpace(r.dir)
	if err != nil {
		return r // not measured here: no reserve, no watermark
	}
	r.size = min(maxReserve, total/reserveShare) &^ 4095
	if r.size > 0 && fileSize(r.reserve) >= r.size && heldOnDisk(r.reserve) >= r.size {
		r.held = true // from an earlier start (and not made sparse since)
	} else {
		r.ensure()
	}
	return r
}

// fileSize is the size of the file at path; 0 if there is none.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// isHeld reports whether the reserve is on disk.
func (r *room) isHeld() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// ensure writes the reserve if it is released and the disk has room for
// it twice over beyond the log (whose debt is at most its size), so that
// writing it leaves at least its size free. Failures leave it released,
// to be tried again later.
func (r *room) ensure() {
	if r.size == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		return
	}
	_, free, err := diskSpace(r.dir)
	if err != nil || free+fileSize(r.reserve) < 2*r.size+fileSize(r.wal) {
		return
	}
	if err := writeZeros(r.reserve, r.size); err != nil {
		_ = os.Remove(r.reserve)
		return
	}
	r.held = true
}

// release removes the reserve, giving its room to the deletions, and
// reports whether it was there.
func (r *room) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.held {
		return false
	}
	r.held = false
	r.ample.Store(nil)
	err := os.Remove(r.reserve)
	return err == nil
}

// logDebt is the room the write-ahead log is owed: the bytes of the pages
// it holds beyond the end of the database file, which its checkpoint will
// append to the file. It is at most the log's size.
func (r *room) logDebt(ctx context.Context) (int64, error) {
	var pages int64
	if err := r.rdb.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return 0, fmt.Errorf("store: page count: %w", err)
	}
	return max(0, pages*r.pageSize-fileSize(r.db)), nil
}

// admit refuses, with ErrDiskFull, a new request that needs about need
// bytes when the disk has not the room for it that the deletions can
// spare (see above). It reads the log's debt only on a disk near full.
// An admitted request's room counts as taken (pending) until the
// returned done is called, once its write has returned.
func (r *room) admit(ctx context.Context, need int64) (done func(), err error) {
	if r.size == 0 {
		return func() {}, nil
	}
	taken := 2 * need // the request's pages, and as much again in the log
	r.pending.Add(taken)
	done = func() { r.pending.Add(-taken) }
	if err := r.admitting(ctx, need); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// freeRoom is the room free on the disk less what other admitted
// requests (pending, which holds this one's too) will take.
func (r *room) freeRoom(need int64) (int64, error) {
	_, free, err := r.space(r.dir)
	return free - (r.pending.Load() - 2*need), err
}

// admitting is admit's decision, with the room admitted to other
// requests not yet written counted as taken. Measuring the disk (statfs
// and a stat of the log) costs more than the rest of the decision; when
// the last measurement found more than ampleSlack to spare, less than
// ampleFor ago, and the requests admitted against it since have not
// used that up, the request is admitted on it.
func (r *room) admitting(ctx context.Context, need int64) error {
	if a := r.ample.Load(); a != nil && r.now().Sub(a.at) < ampleFor && a.used.Add(2*need) <= a.slack {
		return nil
	}
	free, err := r.freeRoom(need)
	if err != nil {
		return nil // not measured: the write finds out
	}
	held := r.isHeld()
	keep := int64(0)
	if !held {
		keep = r.size / 2
	}
	// The request's pages, and as much again in the log until the log
	// starts over.
	want := keep + 2*need
	wal := fileSize(r.wal) // ≥ the log's debt
	if slack := free - wal - max(want, 2*r.size); slack > ampleSlack {
		r.ample.Store(&ampleRoom{at: r.now(), slack: slack})
		return nil
	}
	r.ample.Store(nil)
	if free-wal >= max(want, 2*r.size) || (free-wal >= want && wal <= r.size/2) {
		return nil
	}
	debt, err := r.logDebt(ctx)
	if err != nil {
		return err
	}
	if held && debt > r.size/2 && free-debt < 2*r.size && r.checkpoint != nil {
		// The log owes more than a released reserve could pay: pay it
		// now (it is owed anyway, and this is what makes room for the
		// log to start over), then measure again.
		r.checkpoint(ctx)
		if free, err = r.freeRoom(need); err != nil {
			return nil
		}
		if debt, err = r.logDebt(ctx); err != nil {
			return err
		}
	}
	switch avail := free - debt; {
	case avail < want:
		return fmt.Errorf("%w: %d bytes free, %d of them owed to the write-ahead log; a new request is refused below %d",
			ErrDiskFull, free, debt, want)
	case held && avail < 2*r.size && debt > r.size/2:
		return fmt.Errorf("%w: %d bytes free, and the write-ahead log owes %d, more than half the %d-byte reserve; retry once it is checkpointed",
			ErrDiskFull, free, debt, r.size)
	}
	return nil
}

// beforeFreeing releases the reserve before a deletion when the disk
// has less than half the reserve's size free beyond the log's debt: the
// disk is full, and new requests will then be kept from the room the
// reserve gives back.
func (r *room) beforeFreeing(ctx context.Context) {
	if r.size == 0 || !r.isHeld() {
		return
	}
	_, free, err := diskSpace(r.dir)
	if err != nil || free-fileSize(r.wal) >= r.size/2 {
		return
	}
	debt, err := r.logDebt(ctx)
	if err != nil || free-debt < r.size/2 {
		r.release()
	}
}

// writeZeros makes path a file of size bytes that holds its room on
// disk (not sparse, which would hold none), mode 0600: allocated where
// the file system can (allocate), else written with zeros; synced.
func writeZeros(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if aerr := allocate(f, size); aerr != nil {
		if !allocateUnsupported(aerr) {
			_ = f.Close()
			return aerr
		}
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

// isDiskFull reports whether err says the disk is full: SQLITE_FULL,
// ENOSPC, or ErrDiskFull.
func isDiskFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	return errors.Is(err, ErrDiskFull) || errors.Is(err, syscall.ENOSPC)
}

// asDiskFull makes a disk-full error match ErrDiskFull.
func asDiskFull(err error) error {
	if err == nil || errors.Is(err, ErrDiskFull) || !isDiskFull(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrDiskFull, err)
}

// writeFreeing is write for a job that frees room (a deletion, an
// erasure): it releases the reserve first if the disk is full. Once the
// reserve is released, the writer runs the job alone, after truncating
// the log (recoverFreeing); before, it runs it in a batch, and again
// alone in the room it can make if the batch fails because the disk is
// full.
func (s *SQLite) writeFreeing(ctx context.Context, fn func(w *writeConn) error) error {
	s.room.beforeFreeing(ctx)
	alone := s.room.size > 0 && !s.room.isHeld()
	return s.submit(ctx, &writeJob{ctx: ctx, single: true, frees: true, alone: alone, fn: fn, done: make(chan error, 1)})
}

// recoverFreeing runs the freeing job j again, alone, after its batch
// failed because the disk is full (the batch was rolled back): with the
// checkpointer held off, it releases the reserve, checkpoints the log
// and truncates it to zero bytes — giving its blocks back — and runs j
// in its own transaction in that room. It runs in the writer goroutine,
// so no other write takes the room first.
func (s *SQLite) recoverFreeing(j *writeJob) error {
	if err := j.ctx.Err(); err != nil {
		return err
	}
	s.ckmu.Lock()
	defer s.ckmu.Unlock()
	s.room.release()
	if err := s.truncateLog(); err != nil {
		return asDiskFull(err)
	}
	return asDiskFull(s.runAlone(j))
}

// truncateLog checkpoints the whole write-ahead log into the database and
// truncates it to zero bytes, on the write connection (whose busy_timeout
// lets readers of older snapshots finish first). The caller holds ckmu,
// so the background checkpointer is not in the way.
func (s *SQLite) truncateLog() error {
	var busy, logPages, done int
	err := s.wconn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
	if err != nil {
		return fmt.Errorf("store: truncate the write-ahead log: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("store: truncate the write-ahead log: still in use after %v", sqliteBusyTimeout)
	}
	return nil
}

// runAlone runs j in a transaction of its own.
func (s *SQLite) runAlone(j *writeJob) error {
	w := s.w
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	if err := s.run(j); err != nil {
		_, _ = w.exec("ROLLBACK")
		return err
	}
	next, err := s.advance(w)
	if err != nil {
		_, _ = w.exec("ROLLBACK")
		return err
	}
	if _, err := w.exec("COMMIT"); err != nil {
		_, _ = w.exec("ROLLBACK")
		return fmt.Errorf("store: commit: %w", err)
	}
	s.pos = next
	s.commits.Add(1)
	return nil
}

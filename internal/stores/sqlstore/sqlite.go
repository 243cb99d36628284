package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acds-project/acds"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/acds-project/acds/store"
)

// SQLite is the embedded store: one database file, written by one process.
// It is the default of `acds serve --data-dir`.
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL. In WAL mode, FULL
// makes SQLite fsync the write-ahead log at every COMMIT, before COMMIT
// returns; so once a method returns nil its change is on stable storage and
// survives a process kill or power loss (NORMAL, by contrast, only syncs at
// checkpoints and may lose the last commits on power loss). This is what
// lets the server answer 202 only after the request is on disk.
//
// A database can still go back in time when its files are damaged while
// the store is not running — a write-ahead log deleted, truncated or
// corrupted, a database file emptied or deleted — and SQLite opens what
// is left as if it were the latest state. So every commit also advances
// the database's commit count (store_mark), and a write returns only once
// the high-water mark file beside the database (PATH-mark) records that
// count, synced after the commit was (mark.go). Opening compares the two
// and refuses a database behind its mark, or new where there was one
// (OpenSQLiteWith); it also checkpoints the log and refuses a database
// file cut short.
//
// # Group commit
//
// All writes go through a single writer goroutine that owns the only write
// connection, so writers never contend for SQLite's lock (no SQLITE_BUSY
// within the process). Writes that arrive while a commit is in flight are
// queued and then committed together: one transaction, one fsync, and one
// failing write (say a duplicate id) does not undo the others (SQLite undoes
// a failed statement by itself; multi-statement writes get a savepoint).
// Writes that arrive while a batch's statements run still join that batch
// before its COMMIT, so they share its fsync rather than wait for the next
// one. Every caller still returns only after the commit that holds its
// write has been synced: a nil error from a write means its row is in the
// fsynced WAL. Under concurrency this amortises the fsync over many writes;
// a lone write pays one fsync. Once writes have come together, the writer
// also waits a little (at most groupDelay) for writes about to arrive
// before it runs a batch (see groupDelay). The writer's statements are
// prepared once.
//
// Checkpoints (copying the WAL back into the database file) run in the
// background on a connection of their own, not inside a request's commit.
//
// Request inputs and results of 512 bytes or more are stored S2-compressed
// when that saves at least an eighth (FHIR JSON shrinks several times),
// compressed by the calling goroutine so that the writer copies and syncs
// fewer bytes; values written before schema version 7 are DEFLATE, and
// still read. Reads decompress with a size limit; a damaged value reads as
// ErrCorrupt.
//
// Reads use a separate pool of read-only connections and run concurrently
// with writes (WAL readers see the last committed state).
//
// # Erasure
//
// secure_delete is on, so deleted rows and erased columns are overwritten
// with zeros in the database file rather than left in free space.
//
// # Full disk
//
// Deleting must work on a full disk, and a deletion writes (secure_delete
// zeroes what it frees through the log). So the store keeps a reserve,
// acds.db-reserve beside the database (at most 64 MiB and a sixteenth of
// the file system), which new requests never use; a deletion or erasure on
// a full disk releases it, and, should it still fail for room, runs again
// alone after the log is checkpointed and truncated. While the reserve is
// released, new requests are refused with ErrDiskFull when they would
// leave less than half its size free; once deletions have freed pages in
// the database, new requests reuse them. room.go has the details.
type SQLite struct {
	wdb   *sql.DB
	wconn *sql.Conn  // the single write connection
	w     *writeConn // wconn with its prepared statements, owned by the writer goroutine
	rdb   *sql.DB
	ckdb  *sql.DB // one connection for background checkpoints

	codecs codecs

	jobs   chan *writeJob
	quit   chan struct{}
	done   chan struct{} // closed when the writer has stopped
	ckdone chan struct{} // closed when the checkpointer has stopped
	closed atomic.Bool
	// commits counts committed write transactions (for the checkpointer).
	commits atomic.Uint64
	// lingers counts the batches the writer waited for (gather), and
	// batched the writes committed; for tests.
	lingers, batched atomic.Uint64
	once             sync.Once
	cerr             error
	// ckmu is held by the checkpointer while it works and by a deletion
	// run again on a full disk (recoverFreeing), which must truncate the
	// log without a background checkpoint in the way.
	ckmu sync.Mutex
	room *room // disk room for deletions (room.go)

	// The high-water mark (mark.go): the database's position, advanced
	// by the writer goroutine with every commit, the mark file, written
	// by the marker goroutine, and the loss accepted at open, if any.
	pos      markState
	mfile    *markFile
	mark     *marker
	accepted *DataLossError
}

var _ store.Store = (*SQLite)(nil)

// sqliteBusyTimeout is how long a connection waits for a lock held by
// another process (a second `acds` opening the same file) before failing.
const sqliteBusyTimeout = 10 * time.Second

// maxGroupCommit bounds how many queued writes one transaction takes.
const maxGroupCommit = 256

// OpenSQLite opens (creating if needed) the SQLite database at path and
// applies the embedded schema migrations. A new database file is created
// with mode 0600 and a missing parent directory with mode 0700; existing
// ones keep their modes. The path must be a plain file name (no URI, no
// "?"), and not ":memory:": the store is meant to be durable.
//
// The database's high-water mark is kept in path+"-mark" (see
// OpenSQLiteWith, which names another file and accepts a loss).
func OpenSQLite(ctx context.Context, path string) (*SQLite, error) {
	return OpenSQLiteWith(ctx, path, MarkOptions{})
}

// OpenSQLiteWith is OpenSQLite with the options of the database's durable
// high-water mark (see the type's Durability section). A database that
// lost acknowledged commits, or is new while its mark or the
// installation says it held data, is refused with a *DataLossError
// (errors.Is store.ErrDataLoss) unless o.AcceptDataLoss; so is a damaged
// database file, accepted or not.
func OpenSQLiteWith(ctx context.Context, path string, o MarkOptions) (*SQLite, error) {
	if path == "" || path == ":memory:" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("%w: sqlite path must be a plain file name", store.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: sqlite path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("store: create data directory: %w", err)
	}
	// Create the file ourselves so that it is 0600 from the first byte;
	// SQLite gives the -wal and -shm files the database file's mode.
	_, statErr := os.Stat(abs)
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: create database file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("store: create database file: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// The new file's name must be as durable as what is committed
		// to it, or a crash could lose the database but keep its mark.
		if err := syncDir(filepath.Dir(abs)); err != nil {
			return nil, fmt.Errorf("store: create database file: %w", err)
		}
	}

	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", sqliteBusyTimeout.Milliseconds())
	s := &SQLite{
		jobs:   make(chan *writeJob),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		ckdone: make(chan struct{}),
	}
	s.wdb, err = sql.Open("sqlite", abs+"?"+common+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=secure_delete(1)"+
		fmt.Sprintf("&_pragma=wal_autocheckpoint(%d)", walRestartPages))
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	fail := func(err error) (*SQLite, error) {
		_ = s.mfile.close()
		if s.wconn != nil {
			_ = s.wconn.Close()
		}
		_ = s.wdb.Close()
		if s.rdb != nil {
			_ = s.rdb.Close()
		}
		if s.ckdb != nil {
			_ = s.ckdb.Close()
		}
		return nil, err
	}
	s.wconn, err = s.wdb.Conn(ctx)
	if err != nil {
		return fail(asDamaged(abs, fmt.Errorf("store: open sqlite: %w", err)))
	}
	if err := checkSQLitePragmas(ctx, s.wconn); err != nil {
		return fail(asDamaged(abs, err))
	}
	if err := s.openMark(ctx, abs, o); err != nil {
		return fail(err)
	}
	s.rdb, err = sql.Open("sqlite", abs+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		return fail(fmt.Errorf("store: open sqlite: %w", err))
	}
	s.rdb.SetMaxOpenConns(4)
	s.rdb.SetMaxIdleConns(4)
	if err := s.rdb.PingContext(ctx); err != nil {
		return fail(asDamaged(abs, fmt.Errorf("store: open sqlite: %w", err)))
	}
	s.ckdb, err = sql.Open("sqlite", abs+"?"+fmt.Sprintf("_pragma=busy_timeout(%d)", ckBusyTimeout.Milliseconds())+
		"&_pragma=synchronous(FULL)")
	if err != nil {
		return fail(fmt.Errorf("store: open sqlite: %w", err))
	}
	s.ckdb.SetMaxOpenConns(1)
	s.ckdb.SetConnMaxIdleTime(0)
	var pageSize int64
	if err := s.wconn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fail(fmt.Errorf("store: read page_size: %w", err))
	}
	s.room = newRoom(abs, s.rdb, pageSize)
	s.room.checkpoint = s.checkpointNow
	s.w = &writeConn{c: s.wconn, stmts: map[string]*sql.Stmt{}}
	s.mark = newMarker(s.syncMark)
	go s.writer()
	go s.checkpointer()
	return s, nil
}

// openMark migrates the database between the two halves of the check of
// its high-water mark (mark.go): a database without a schema is judged
// before anything is written to it, so that refusing it leaves it as it
// was; the rest once the schema, and its store_mark row, are there. It
// then checks that the database file is whole, records an accepted
// loss, and brings the mark file up to the database.
func (s *SQLite) openMark(ctx context.Context, abs string, mo MarkOptions) error {
	version, err := sqliteSchemaVersion(ctx, s.wconn)
	if err != nil {
		return asDamaged(abs, fmt.Errorf("store: read the schema version: %w", err))
	}
	o := opened{database: "sqlite:" + abs, mark: mo.Path, installed: mo.Installed, dbNew: version == 0}
	if o.mark == "" {
		o.mark = abs + "-mark"
	}
	var gen uint64
	o.file, gen, o.fileExists, o.fileErr = readMark(o.mark)
	if o.dbNew {
		if loss := o.verdict(); loss != nil && !mo.AcceptDataLoss {
			return loss
		}
	}
	if err := migrateSQLite(ctx, s.wconn); err != nil {
		return asDamaged(abs, err)
	}
	var marked int
	var at int64
	err = s.wconn.QueryRowContext(ctx, "SELECT identity, seq, at, marked FROM store_mark WHERE id = 1").
		Scan(&o.db.identity, &o.db.seq, &at, &marked)
	if errors.Is(err, sql.ErrNoRows) {
		err = errors.New("its store_mark row is missing")
	}
	if err != nil {
		return asDamaged(abs, fmt.Errorf("store: read the high-water mark: %w", err))
	}
	if at != 0 {
		o.db.at = fromMicros(at)
	}
	o.dbMarked = marked != 0
	loss := o.verdict()
	if loss != nil && !mo.AcceptDataLoss {
		return loss
	}
	if err := checkWhole(ctx, s.wconn, abs); err != nil {
		return err
	}
	s.pos = o.db
	if loss != nil {
		if err := s.openWrite(ctx, "INSERT INTO data_loss_accepted (at, kind, detail) VALUES (?, ?, ?)",
			time.Now().UnixMicro(), loss.Kind.String(), loss.Error()); err != nil {
			return fmt.Errorf("store: record the accepted loss: %w", err)
		}
		s.accepted = loss
	}
	// The mark file comes first, the flag that the database has one
	// second: a crash in between leaves a mark and an unflagged
	// database, which opens.
	if s.mfile, err = openMarkFile(o.mark, s.pos, gen, o.fileExists, o.fileErr != nil); err != nil {
		return err
	}
	if !o.dbMarked {
		if err := s.openWrite(ctx, "UPDATE store_mark SET marked = 1 WHERE id = 1"); err != nil {
			return fmt.Errorf("store: high-water mark: %w", err)
		}
		return s.mfile.write(s.pos)
	}
	return nil
}

// openWrite commits one statement while the store opens, before the
// writer goroutine runs, advancing the database's position with it.
func (s *SQLite) openWrite(ctx context.Context, q string, args ...any) (err error) {
	if _, err := s.wconn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = s.wconn.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if _, err := s.wconn.ExecContext(ctx, q, args...); err != nil {
		return err
	}
	next := markState{identity: s.pos.identity, seq: s.pos.seq + 1, at: time.Now()}
	if _, err := s.wconn.ExecContext(ctx, "UPDATE store_mark SET seq = ?, at = ? WHERE id = 1", next.seq, next.at.UnixMicro()); err != nil {
		return err
	}
	if _, err := s.wconn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	s.pos = next
	return nil
}

// advance writes the position of the commit being made, in the writer's
// transaction; the caller sets s.pos to next once it has committed.
func (s *SQLite) advance(w *writeConn) (next markState, err error) {
	next = markState{identity: s.pos.identity, seq: s.pos.seq + 1, at: time.Now()}
	if _, err := w.exec("UPDATE store_mark SET seq = ?, at = ? WHERE id = 1", next.seq, next.at.UnixMicro()); err != nil {
		return markState{}, fmt.Errorf("store: high-water mark: %w", err)
	}
	return next, nil
}

// syncMark is the marker's sync: it writes need, the newest commit's
// position, to the mark file, unless the file already covers it.
func (s *SQLite) syncMark(need markState) error {
	if need.seq <= s.mfile.last.seq {
		return nil
	}
	return s.mfile.write(need)
}

// AcceptedLoss is the loss this store accepted when it opened
// (MarkOptions.AcceptDataLoss), or nil.
func (s *SQLite) AcceptedLoss() *DataLossError { return s.accepted }

// sqliteSchemaVersion is the highest migration the database records, 0
// for a database without a schema (new, or an empty file).
func sqliteSchemaVersion(ctx context.Context, c *sql.Conn) (int, error) {
	var n int
	if err := c.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'").Scan(&n); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	err := c.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
	return v, err
}

// checkWhole checkpoints the whole write-ahead log into the database file
// and checks that the file then holds every page the database has: a file
// cut short otherwise opens, and fails only when a missing page is read.
// A reader of another process in the way of the checkpoint leaves the
// check to the next open.
func checkWhole(ctx context.Context, c *sql.Conn, abs string) error {
	var busy, logPages, done int
	if err := c.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done); err != nil {
		return asDamaged(abs, fmt.Errorf("store: checkpoint: %w", err))
	}
	if busy != 0 {
		return nil
	}
	var pages, pageSize int64
	if err := c.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return asDamaged(abs, fmt.Errorf("store: page count: %w", err))
	}
	if err := c.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return asDamaged(abs, fmt.Errorf("store: page size: %w", err))
	}
	// The header's own count too, which SQLite ignores when it thinks
	// it stale and then goes by the file's size.
	if hdr, err := headerPages(abs); err == nil {
		pages = max(pages, hdr)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if fi.Size() < pages*pageSize {
		return &DataLossError{Kind: LossDamaged, Database: "sqlite:" + abs,
			Err: fmt.Errorf("the file holds %d bytes but its %d pages take %d: it was cut short", fi.Size(), pages, pages*pageSize)}
	}
	return nil
}

// headerPages reads the page count of the database header at path, when
// the header says it is current (its change counter matches the
// version-valid-for number).
func headerPages(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return 0, err
	}
	if !bytes.Equal(h[24:28], h[92:96]) {
		return 0, errors.New("header page count not current")
	}
	return int64(binary.BigEndian.Uint32(h[28:32])), nil
}

// asDamaged turns SQLite's errors for a damaged file (SQLITE_CORRUPT,
// SQLITE_NOTADB) met while opening into a DataLossError of kind
// LossDamaged; other errors pass unchanged.
func asDamaged(abs string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return &DataLossError{Kind: LossDamaged, Database: "sqlite:" + abs, Err: se}
		}
	}
	return err
}

// checkSQLitePragmas makes sure the durability settings took effect: a
// journal_mode change can silently fail (for example on a file system
// without shared memory), and the durability promise depends on it.
func checkSQLitePragmas(ctx context.Context, c *sql.Conn) error {
	var mode string
	if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("store: read journal_mode: %w", err)
	}
	var sync, fk int
	if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		return fmt.Errorf("store: read synchronous: %w", err)
	}
	if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
		return fmt.Errorf("store: read foreign_keys: %w", err)
	}
	if !strings.EqualFold(mode, "wal") || sync != 2 || fk != 1 {
		return fmt.Errorf("store: sqlite settings not applied (journal_mode=%s synchronous=%d foreign_keys=%d)", mode, sync, fk)
	}
	return nil
}

func migrateSQLite(ctx context.Context, c *sql.Conn) (err error) {
	ms, err := migrations("sqlite")
	if err != nil {
		return err
	}
	// BEGIN IMMEDIATE takes SQLite's write lock at once, so a second
	// process opening the same file waits here (busy_timeout) instead of
	// racing us through the migrations.
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	var have int
	if err := c.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&have); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if have > len(ms) {
		return errNewerSchema(have, len(ms))
	}
	applied := map[int]string{}
	rows, err := c.QueryContext(ctx, "SELECT version, name FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			rows.Close()
			return fmt.Errorf("store: migrate: %w", err)
		}
		applied[v] = name
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if err := checkApplied(applied, ms); err != nil {
		return err
	}
	for _, m := range ms[have:] {
		if _, err := c.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("store: migration %d (%s): %w", m.version, m.name, err)
		}
		if _, err := c.ExecContext(ctx, "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.version, m.name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("store: migration %d: %w", m.version, err)
		}
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// A writeJob is one write, run by the writer goroutine inside a group
// transaction.
type writeJob struct {
	ctx context.Context // checked before the job runs; its statements do not use it (see run)
	// single: fn runs one statement, which SQLite undoes by itself if it
	// fails on a constraint, so the job needs no savepoint of its own.
	single bool
	// frees: the job frees room (a deletion, an erasure), so it is run
	// again alone if its batch fails because the disk is full.
	frees bool
	// alone: a freeing job on a disk near full (the reserve released):
	// it is not batched but run by recoverFreeing, after the log is
	// checkpointed and truncated, so that the room the reserve gave back
	// pays the log's debt before any write takes it.
	alone bool
	fn    func(w *writeConn) error
	done  chan error
}

// writeConn is the write connection as the writer goroutine sees it: its
// statements are prepared once and reused, since every write of the hot
// path (the request insert, BEGIN, COMMIT, savepoints) is the same SQL.
type writeConn struct {
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

func (w *writeConn) stmt(q string) (*sql.Stmt, error) {
	if st, ok := w.stmts[q]; ok {
		return st, nil
	}
	st, err := w.c.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	w.stmts[q] = st
	return st, nil
}

// exec runs one statement (q must hold exactly one).
func (w *writeConn) exec(q string, args ...any) (sql.Result, error) {
	st, err := w.stmt(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.Background(), args...)
}

func (w *writeConn) queryRow(q string, args ...any) scanner {
	st, err := w.stmt(q)
	if err != nil {
		return errScanner{err}
	}
	return st.QueryRowContext(context.Background(), args...)
}

func (w *writeConn) close() error {
	var errs []error
	for _, st := range w.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

type errScanner struct{ err error }

func (e errScanner) Scan(...any) error { return e.err }

// write runs fn in the writer goroutine and returns once the transaction
// holding it has committed (and been synced) or failed, or when ctx ends
// first: then it returns ctx's error without waiting, and a job that was
// already running may still commit and may still be writing the variables
// fn captured. A caller therefore reads what fn writes only when write
// returned nil (the done channel orders those writes before the return).
func (s *SQLite) write(ctx context.Context, single bool, fn func(w *writeConn) error) error {
	return s.submit(ctx, &writeJob{ctx: ctx, single: single, fn: fn, done: make(chan error, 1)})
}

// submit hands j to the writer and waits for it as write says.
func (s *SQLite) submit(ctx context.Context, j *writeJob) error {
	select {
	case s.jobs <- j:
	case <-s.quit:
		return store.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// The caller's deadline holds while the job waits for the writer
	// (behind a lock another process holds, a stalled disk): it gets
	// ctx's error then, as with PostgreSQL, and the job is skipped if it
	// has not run yet (commit checks its context). A job that already ran
	// may still commit, like a COMMIT whose answer is lost; done is
	// buffered, so the writer never waits for a caller that left.
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("store: write: %w", ctx.Err())
	}
}

// Checkpoints copy the write-ahead log back into the database file. SQLite
// would run them inside the COMMIT that crosses wal_autocheckpoint pages,
// stalling every request of that batch behind a large write and two
// fsyncs. Instead a background goroutine runs PASSIVE checkpoints on a
// connection of its own, concurrently with the writer (WAL lets a writer
// append while a checkpointer copies). Under sustained writes a background
// checkpoint never catches up with the end of the log, so the log would
// never restart and would keep growing; the writer's own autocheckpoint,
// at walRestartPages, bounds it: by then the background checkpointer has
// copied nearly every frame, so the inline checkpoint has little left to
// copy, completes, and the log restarts from its beginning.
//
// The WAL holds old page images, among them values since erased (sealed
// credentials, deleted requests). Under load they are soon overwritten as
// the log restarts; when writes pause, the checkpointer truncates the log
// to zero bytes so that they do not linger at rest. It does so only once
// a passive checkpoint has copied every frame, and gives up after
// ckBusyTimeout if a reader is in the way, so that the truncation (which
// holds off writers while it is pending) is brief.
const (
	checkpointEvery = 200 * time.Millisecond
	walRestartPages = 4000 // ~16 MB at 4 KiB pages
	ckBusyTimeout   = 100 * time.Millisecond
)

func (s *SQLite) checkpointer() {
	defer close(s.ckdone)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	var seen uint64
	dirty := false
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.ckmu.Lock()
			s.room.ensure() // a released reserve, once there is room for it
			// An error (SQLITE_BUSY while a reader holds an old snapshot,
			// say) only delays the work to a later tick; the data is in
			// the synced WAL either way.
			switch n := s.commits.Load(); {
			case n != seen:
				seen, dirty = n, true
				_, _ = s.ckdb.Exec("PRAGMA wal_checkpoint(PASSIVE)")
			case dirty:
				var busy, logPages, done int
				err := s.ckdb.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &done)
				if err == nil && busy == 0 && done >= logPages && s.commits.Load() == seen {
					err = s.ckdb.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done)
					dirty = err != nil || busy != 0
				} // else not caught up, or writes resumed: later
			}
			s.ckmu.Unlock()
		}
	}
}

// checkpointNow runs a passive checkpoint at once, between the
// checkpointer's ticks: for a new request on a disk near full whose log
// owes too much room (room.admit). An error leaves it to the next tick.
func (s *SQLite) checkpointNow(ctx context.Context) {
	s.ckmu.Lock()
	defer s.ckmu.Unlock()
	_, _ = s.ckdb.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
}

func (s *SQLite) writer() {
	defer close(s.done)
	batch := make([]*writeJob, 0, maxGroupCommit)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	var together time.Time // when a batch last held more than one write
	for {
		select {
		case <-s.quit:
			return
		case j := <-s.jobs:
			batch = append(batch[:0], j)
		}
		if time.Since(together) < groupBusy {
			batch = s.gather(batch, linger)
		}
		if batch = s.commit(s.drain(batch)); len(batch) > 1 {
			together = time.Now()
		}
	}
}

// groupDelay, groupQuiet and groupBusy shape group commit under
// concurrency. For groupBusy after a batch held more than one write, the
// writer does not run a batch as soon as its first write arrives: it waits
// for more, until none has arrived for groupQuiet or groupDelay has passed
// since the first. Handlers that write at about the same time then share
// one COMMIT and its fsync even when each arrives just after the last
// commit ended (their goroutines busy validating in between), instead of
// each paying its own: at 32 concurrent POST /v1/process of 20 KB
// bundles, batches went from 1.4 writes to about 9, and the server's CPU
// per request fell by about a sixth (scripts/accept-bench.sh). A lone
// writer, or writes one after the other, never wait: their batches hold
// one write (but for groupBusy after writes came together, when each waits
// groupQuiet at most).
const (
	groupDelay = 2 * time.Millisecond
	groupQuiet = 500 * time.Microsecond
	groupBusy  = 100 * time.Millisecond
)

// gather adds to batch the jobs that arrive before a pause of groupQuiet,
// for at most groupDelay, up to maxGroupCommit; it stops early when the
// store is closing. t is the writer's timer, stopped.
func (s *SQLite) gather(batch []*writeJob, t *time.Timer) []*writeJob {
	s.lingers.Add(1)
	deadline := time.Now().Add(groupDelay)
	t.Reset(groupQuiet)
	defer t.Stop()
	for len(batch) < maxGroupCommit {
		select {
		case j := <-s.jobs:
			batch = append(batch, j)
			t.Reset(min(groupQuiet, time.Until(deadline)))
		case <-t.C:
			return batch
		case <-s.quit:
			return batch
		}
	}
	return batch
}

// drain adds the jobs already waiting to batch, up to maxGroupCommit,
// without blocking.
func (s *SQLite) drain(batch []*writeJob) []*writeJob {
	for len(batch) < maxGroupCommit {
		select {
		case j := <-s.jobs:
			batch = append(batch, j)
		default:
			return batch
		}
	}
	return batch
}

// commit runs a batch of jobs in one transaction and reports each job's
// outcome. A job that fails is undone alone (by SQLite for a failed
// single statement, by its savepoint otherwise). An error that may have
// broken the transaction, or a failed COMMIT, rolls back and fails every
// job of the batch.
//
// Jobs that arrive while the batch's statements run join it before the
// COMMIT (up to maxGroupCommit), so that they share its fsync instead of
// waiting for the next one; a job is reported only after the COMMIT that
// holds it has returned, that is after its write is synced (see the
// type's Durability section). commit returns the batch, which it may
// have grown, for reuse.
func (s *SQLite) commit(batch []*writeJob) []*writeJob {
	w := s.w
	errs := make([]error, 0, len(batch))
	var alone []int // the jobs run alone, after the batch
	finish := func() {
		for _, i := range alone {
			errs[i] = s.recoverFreeing(batch[i])
		}
		// Each job is answered once the mark covers the commits so far
		// (the marker's round runs while the next batch commits).
		ws := make([]markWaiter, len(batch))
		for i, j := range batch {
			ws[i] = markWaiter{done: j.done, err: errs[i]}
		}
		s.mark.after(s.pos, ws...)
	}
	abort := func(err error) []*writeJob {
		_, _ = w.exec("ROLLBACK")
		err = asDiskFull(err)
		for i := range batch {
			if i >= len(errs) {
				errs = append(errs, nil)
			}
			if errs[i] == nil {
				errs[i] = err
			} else {
				errs[i] = asDiskFull(errs[i])
			}
		}
		if errors.Is(err, ErrDiskFull) {
			// The disk is full: a deletion or erasure must still go
			// through, so each is run again alone in the room it can
			// make; the other jobs fail (503: retry later).
			for i, j := range batch {
				if j.frees && !j.alone && isDiskFull(errs[i]) {
					errs[i] = s.recoverFreeing(j)
				}
			}
		}
		finish()
		return batch
	}
	if _, err := w.exec("BEGIN IMMEDIATE"); err != nil {
		return abort(fmt.Errorf("store: begin: %w", err))
	}
	for i := 0; ; i++ {
		if i == len(batch) {
			if batch = s.drain(batch); i == len(batch) {
				break
			}
		}
		j := batch[i]
		errs = append(errs, nil)
		if err := j.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if j.alone {
			alone = append(alone, i)
			continue
		}
		if j.single {
			if errs[i] = s.run(j); errs[i] != nil && !statementUndone(errs[i]) {
				return abort(fmt.Errorf("store: transaction rolled back: %w", errs[i]))
			}
			continue
		}
		if _, err := w.exec("SAVEPOINT job"); err != nil {
			return abort(fmt.Errorf("store: savepoint: %w", err))
		}
		if errs[i] = s.run(j); errs[i] != nil {
			if _, err := w.exec("ROLLBACK TO job"); err != nil {
				return abort(fmt.Errorf("store: rollback to savepoint: %w", err))
			}
		}
		if _, err := w.exec("RELEASE job"); err != nil {
			return abort(fmt.Errorf("store: release savepoint: %w", err))
		}
	}
	next, err := s.advance(w)
	if err != nil {
		return abort(err)
	}
	if _, err := w.exec("COMMIT"); err != nil {
		return abort(fmt.Errorf("store: commit: %w", err))
	}
	s.pos = next
	s.commits.Add(1)
	s.batched.Add(uint64(len(batch)))
	finish()
	return batch
}

// statementUndone tells whether a single-statement job that failed with
// err left the transaction as it was: true for our own outcomes (the
// statement ran and matched nothing, or a conflict was recognised) and for
// constraint violations, which SQLite undoes statement by statement; false
// for any other SQLite error, after which the transaction may be gone.
func statementUndone(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return true
	}
	return se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// run runs one job. Its statements do not get the caller's context: a
// cancellation landing on the shared write connection could interrupt a
// statement of the next job, and the caller usually waits for the outcome
// (jobs are single short statements or, for Claim, a few; a caller whose
// context ends first stops waiting, see write). A panic is
// turned into an error so that the writer goroutine survives it.
func (s *SQLite) run(j *writeJob) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store: write panicked: %v", p)
		}
	}()
	return j.fn(s.w)
}

// readErr maps errors of the read pool.
func (s *SQLite) readErr(what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	return fmt.Errorf("store: %s: %w", what, err)
}

func sqliteConflict(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return true
		}
	}
	return false
}

// CreateSession implements [Store].
func (s *SQLite) CreateSession(ctx context.Context, ses store.Session) error {
	if err := store.CheckSession(ses); err != nil {
		return err
	}
	return s.write(ctx, true, func(w *writeConn) error {
		_, err := w.exec("INSERT INTO sessions (pseudonym, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?)",
			ses.Pseudonym, ses.TokenHash, store.StoredTime(ses.CreatedAt).UnixMicro(), store.StoredTime(ses.ExpiresAt).UnixMicro())
		if sqliteConflict(err) {
			return store.ErrConflict
		}
		if err != nil {
			return fmt.Errorf("store: create session: %w", err)
		}
		return nil
	})
}

// SessionByTokenHash implements [Store].
func (s *SQLite) SessionByTokenHash(ctx context.Context, tokenHash []byte) (store.Session, error) {
	if err := store.CheckTokenHash(tokenHash); err != nil {
		return store.Session{}, err
	}
	var ses store.Session
	var created, expires int64
	err := s.rdb.QueryRowContext(ctx, "SELECT pseudonym, token_hash, created_at, expires_at FROM sessions WHERE token_hash = ?", tokenHash).
		Scan(&ses.Pseudonym, &ses.TokenHash, &created, &expires)
	if err != nil {
		return store.Session{}, s.readErr("session", err)
	}
	ses.CreatedAt, ses.ExpiresAt = fromMicros(created), fromMicros(expires)
	return ses, nil
}

// maxEncodedHash bounds a stored passphrase hash (a PHC string is ~100 bytes).
const maxEncodedHash = 1024

func checkPassphrase(pseudonym, encodedHash string) error {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return err
	}
	if encodedHash == "" || len(encodedHash) > maxEncodedHash {
		return fmt.Errorf("%w: encoded passphrase hash must be 1..%d bytes", store.ErrInvalid, maxEncodedHash)
	}
	return nil
}

// SetPassphrase implements [Store]. It replaces an existing passphrase.
func (s *SQLite) SetPassphrase(ctx context.Context, pseudonym, encodedHash string) error {
	if err := checkPassphrase(pseudonym, encodedHash); err != nil {
		return err
	}
	return s.write(ctx, true, func(w *writeConn) error {
		_, err := w.exec(`INSERT INTO passphrases (pseudonym, encoded_hash, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (pseudonym) DO UPDATE SET encoded_hash = excluded.encoded_hash, updated_at = excluded.updated_at`,
			pseudonym, encodedHash, time.Now().UnixMicro())
		if err != nil {
			return fmt.Errorf("store: set passphrase: %w", err)
		}
		return nil
	})
}

// Passphrase implements [Store].
func (s *SQLite) Passphrase(ctx context.Context, pseudonym string) (string, error) {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return "", err
	}
	var h string
	err := s.rdb.QueryRowContext(ctx, "SELECT encoded_hash FROM passphrases WHERE pseudonym = ?", pseudonym).Scan(&h)
	if err != nil {
		return "", s.readErr("passphrase", err)
	}
	return h, nil
}

// DeleteExpiredSessions implements [Store].
func (s *SQLite) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	var n int64
	err := s.writeFreeing(ctx, func(w *writeConn) error {
		res, err := w.exec("DELETE FROM sessions WHERE expires_at < ?", store.StoredTime(now).UnixMicro())
		if err != nil {
			return fmt.Errorf("store: delete expired sessions: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err // n may still be written by a job the deadline left behind
	}
	return int(n), nil
}

// DeleteSession implements [Store].
func (s *SQLite) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if err := store.CheckTokenHash(tokenHash); err != nil {
		return err
	}
	return s.writeFreeing(ctx, func(w *writeConn) error {
		res, err := w.exec("DELETE FROM sessions WHERE token_hash = ?", tokenHash)
		if err != nil {
			return fmt.Errorf("store: delete session: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrNotFound
		}
		return nil
	})
}

// DeleteSessionsOf implements [Store].
func (s *SQLite) DeleteSessionsOf(ctx context.Context, pseudonym string, keep []byte) (int, error) {
	if err := store.CheckName("pseudonym", pseudonym); err != nil {
		return 0, err
	}
	lo, hi := store.SessionKeyRange(pseudonym)
	var n int64
	err := s.writeFreeing(ctx, func(w *writeConn) error {
		res, err := w.exec(`DELETE FROM sessions WHERE (pseudonym = ? OR (pseudonym >= ? AND pseudonym < ?))
			AND token_hash IS NOT ?`, pseudonym, lo, hi, keep)
		if err != nil {
			return fmt.Errorf("store: delete sessions: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err // n may still be written by a job the deadline left behind
	}
	return int(n), nil
}

// CreateRequest implements [Store]. The request is stored as
// acds.StatusProcessing with no attempts and no lease, whatever r says about
// those; UpdatedAt is set to CreatedAt.
func (s *SQLite) CreateRequest(ctx context.Context, r store.Request) error {
	if err := store.CheckNewRequest(r); err != nil {
		return err
	}
	created := store.StoredTime(r.CreatedAt).UnixMicro()
	input, codec := s.codecs.compress(r.Input) // here, in parallel, not in the writer
	admitted, err := s.room.admit(ctx, int64(len(input)+len(r.Sealed)+len(r.Callback))+rowOverhead)
	if err != nil {
		return err
	}
	defer admitted()
	return s.write(ctx, true, func(w *writeConn) error {
		_, err := w.exec(`INSERT INTO requests (id, owner, kind, status, input, input_codec, sealed, affinity, created_at, updated_at)
			VALUES (?, ?, ?, 'processing', ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Owner, r.Kind, input, codec, r.Sealed, r.Affinity, created, created)
		if sqliteConflict(err) {
			return store.ErrConflict
		}
		if err != nil {
			return fmt.Errorf("store: create request: %w", err)
		}
		if r.Callback != "" { // the delivery exists as soon as the request does
			if _, err := w.exec(`INSERT INTO webhooks (request_id, url, next_at, created_at) VALUES (?, ?, ?, ?)`,
				r.ID, r.Callback, created, created); err != nil {
				return fmt.Errorf("store: create request: webhook: %w", err)
			}
		}
		return nil
	})
}

const sqliteRequestCols = `id, owner, kind, status, input, sealed, result, error, attempts,
	lease_owner, lease_until, created_at, updated_at, completed_at, input_codec, result_codec, erased_at, affinity, isolation`

// storedRequest is a request as scanned, its input and result possibly
// still compressed.
type storedRequest struct {
	store.Request
	inputCodec, resultCodec int
}

// decode decompresses the input and result.
func (s *SQLite) decode(sr storedRequest) (store.Request, error) {
	r := sr.Request
	var err error
	if r.Input, err = s.codecs.decompress(r.Input, sr.inputCodec); err != nil {
		return store.Request{}, fmt.Errorf("request %s input: %w", r.ID, err)
	}
	if r.Result, err = s.codecs.decompress(r.Result, sr.resultCodec); err != nil {
		return store.Request{}, fmt.Errorf("request %s result: %w", r.ID, err)
	}
	return r, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanSQLiteRequest(sc scanner) (storedRequest, error) {
	var sr storedRequest
	r := &sr.Request
	var leaseUntil, completedAt, erasedAt sql.NullInt64
	var created, updated int64
	err := sc.Scan(&r.ID, &r.Owner, &r.Kind, &r.Status, &r.Input, &r.Sealed, &r.Result, &r.Error, &r.Attempts,
		&r.LeaseOwner, &leaseUntil, &created, &updated, &completedAt, &sr.inputCodec, &sr.resultCodec, &erasedAt, &r.Affinity, &r.Isolation)
	if err != nil {
		return storedRequest{}, err
	}
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	if leaseUntil.Valid {
		r.LeaseUntil = fromMicros(leaseUntil.Int64)
	}
	if completedAt.Valid {
		r.CompletedAt = fromMicros(completedAt.Int64)
	}
	if erasedAt.Valid {
		r.ErasedAt = fromMicros(erasedAt.Int64)
	}
	return sr, nil
}

// GetRequest implements [Store].
func (s *SQLite) GetRequest(ctx context.Context, owner, id string) (store.Request, error) {
	if owner == "" || id == "" || len(owner) > store.MaxIDLen || len(id) > store.MaxIDLen {
		return store.Request{}, store.ErrNotFound
	}
	sr, err := scanSQLiteRequest(s.rdb.QueryRowContext(ctx,
		"SELECT "+sqliteRequestCols+" FROM requests WHERE id = ? AND owner = ?", id, owner))
	if err != nil {
		return store.Request{}, s.readErr("get request", err)
	}
	return s.decode(sr)
}

// QueueStats implements [store.QueueStatter].
func (s *SQLite) QueueStats(ctx context.Context) (store.QueueStats, error) {
	var n int
	var oldest sql.NullInt64
	err := s.rdb.QueryRowContext(ctx, "SELECT COUNT(*), MIN(created_at) FROM requests WHERE status = 'processing'").Scan(&n, &oldest)
	if err != nil {
		return store.QueueStats{}, s.readErr("queue stats", err)
	}
	st := store.QueueStats{Processing: n}
	if oldest.Valid {
		st.Oldest = fromMicros(oldest.Int64)
	}
	return st, nil
}

// ListRequests implements [Store]. A cursor it did not issue is ErrInvalid.
func (s *SQLite) ListRequests(ctx context.Context, owner string, p store.Page) ([]store.Request, string, error) {
	if err := store.CheckName("owner", owner); err != nil {
		return nil, "", err
	}
	g := store.NewPager(p)
	var rows *sql.Rows
	var err error
	if p.Cursor == "" {
		rows, err = s.rdb.QueryContext(ctx, "SELECT "+sqliteRequestCols+
			" FROM requests WHERE owner = ? ORDER BY created_at DESC, id DESC LIMIT ?", owner, g.Query())
	} else {
		curAt, curID, cerr := store.DecodeCursor(p.Cursor)
		if cerr != nil {
			return nil, "", cerr
		}
		rows, err = s.rdb.QueryContext(ctx, "SELECT "+sqliteRequestCols+
			` FROM requests WHERE owner = ? AND (created_at < ? OR (created_at = ? AND id < ?))
			ORDER BY created_at DESC, id DESC LIMIT ?`, owner, curAt.UnixMicro(), curAt.UnixMicro(), curID, g.Query())
	}
	if err != nil {
		return nil, "", s.readErr("list requests", err)
	}
	defer rows.Close()
	for rows.Next() && g.Room() {
		sr, err := scanSQLiteRequest(rows)
		if err != nil {
			return nil, "", s.readErr("list requests", err)
		}
		r, err := s.decode(sr)
		if err != nil {
			return nil, "", err
		}
		g.Add(r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.readErr("list requests", err)
	}
	items, next := g.Page()
	return items, next, nil
}

// DeleteRequest implements [Store].
func (s *SQLite) DeleteRequest(ctx context.Context, owner, id string) error {
	if owner == "" || id == "" || len(owner) > store.MaxIDLen || len(id) > store.MaxIDLen {
		return store.ErrNotFound
	}
	return s.writeFreeing(ctx, func(w *writeConn) error {
		res, err := w.exec("DELETE FROM requests WHERE id = ? AND owner = ?", id, owner)
		if err != nil {
			return fmt.Errorf("store: delete request: %w", err)
		}
		return oneRow(res, store.ErrNotFound)
	})
}

func oneRow(res sql.Result, none error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: rows affected: %w", err)
	}
	if n == 0 {
		return none
	}
	return nil
}

// Claim implements [Store]. Claims are serialised by the single writer, so
// no two workers of this process can lease the same request.
func (s *SQLite) Claim(ctx context.Context, o store.ClaimOptions) (*store.Request, error) {
	o, err := store.NormalizeClaim(o)
	if err != nil {
		return nil, err
	}
	now := o.Now.UnixMicro()
	var claimed *storedRequest
	err = s.write(ctx, false, func(w *writeConn) error {
		claimed = nil
		for {
			var id, leaseOwner string
			var attempts int
			var isolation store.Isolation
			err := w.queryRow(`SELECT id, attempts, lease_owner, isolation FROM requests
				WHERE status = 'processing' AND (lease_until IS NULL OR lease_until <= ?)
				AND (? = '' OR affinity = '' OR affinity = ?)`+isolationFilter(o)+`
				ORDER BY created_at, id LIMIT 1`, now, o.Affinity, o.Affinity).Scan(&id, &attempts, &leaseOwner, &isolation)
			if errors.Is(err, sql.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("store: claim: %w", err)
			}
			if o.Isolate && leaseOwner != "" { // a lease that ran out
				if isolation == store.Solo {
					if err := w.failClaimable(id, o.Crashed, now); err != nil {
						return err
					}
					continue
				}
				attempts = max(attempts-1, 0)
				if _, err := w.exec(`UPDATE requests SET isolation = 1, attempts = ?, lease_owner = '', lease_until = NULL
					WHERE id = ?`, attempts, id); err != nil {
					return fmt.Errorf("store: claim: isolate request: %w", err)
				}
				if !o.Solo {
					continue
				}
			}
			if o.MaxAttempts > 0 && attempts >= o.MaxAttempts {
				if err := w.failClaimable(id, o.Exhausted, now); err != nil {
					return err
				}
				continue
			}
			if o.Solo {
				isolation = store.Solo
			}
			if _, err := w.exec(`UPDATE requests SET attempts = attempts + 1, lease_owner = ?,
				lease_until = ?, updated_at = ?, isolation = ? WHERE id = ?`,
				o.Worker, store.StoredTime(o.Now.Add(o.Lease)).UnixMicro(), now, isolation, id); err != nil {
				return fmt.Errorf("store: claim: %w", err)
			}
			sr, err := scanSQLiteRequest(w.queryRow("SELECT "+sqliteRequestCols+" FROM requests WHERE id = ?", id))
			if err != nil {
				return fmt.Errorf("store: claim: %w", err)
			}
			claimed = &sr
			return nil
		}
	})
	if err != nil || claimed == nil {
		return nil, err
	}
	r, err := s.decode(*claimed) // outside the writer
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// isolationFilter is the condition Claim adds, for both backends, to
// select the requests a claim under crash isolation considers: a normal
// claim never takes a suspect; a solo claim takes only suspects, solo
// requests whose lease ran out (to fail them) and requests whose lease ran
// out (which become suspects).
func isolationFilter(o store.ClaimOptions) string {
	switch {
	case o.Solo:
		return ` AND (isolation <> 0 OR lease_owner <> '')`
	case o.Isolate:
		return ` AND isolation <> 1`
	}
	return ""
}

// failClaimable ends request id, found by a claim, as failed with problem.
func (w *writeConn) failClaimable(id string, problem []byte, now int64) error {
	if _, err := w.exec(`UPDATE requests SET status = 'failed', error = ?, sealed = NULL, affinity = '',
		lease_owner = '', lease_until = NULL, updated_at = ?, completed_at = ? WHERE id = ?`,
		problem, now, now, id); err != nil {
		return fmt.Errorf("store: claim: fail request: %w", err)
	}
	return nil
}

// Release implements [Store].
func (s *SQLite) Release(ctx context.Context, id, worker string) error {
	if id == "" || worker == "" {
		return store.ErrLeaseLost
	}
	return s.write(ctx, true, func(w *writeConn) error {
		res, err := w.exec(`UPDATE requests SET lease_owner = '', lease_until = NULL,
			isolation = CASE WHEN isolation = 2 THEN 1 ELSE isolation END
			WHERE id = ? AND lease_owner = ? AND status = 'processing'`, id, worker)
		if err != nil {
			return fmt.Errorf("store: release: %w", err)
		}
		return oneRow(res, store.ErrLeaseLost)
	})
}

// Suspects implements [Store].
func (s *SQLite) Suspects(ctx context.Context, now time.Time, affinity string) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM requests
		WHERE status = 'processing' AND (? = '' OR affinity = '' OR affinity = ?)
		AND ((isolation = 1 AND lease_owner = '') OR (isolation = 0 AND lease_owner <> '' AND lease_until <= ?))`,
		affinity, affinity, store.StoredTime(now).UnixMicro()).Scan(&n)
	if err != nil {
		return 0, s.readErr("suspects", err)
	}
	return n, nil
}

// Heartbeat implements [Store].
func (s *SQLite) Heartbeat(ctx context.Context, id, worker string, until time.Time) error {
	if id == "" || worker == "" {
		return store.ErrLeaseLost
	}
	return s.write(ctx, true, func(w *writeConn) error {
		res, err := w.exec(`UPDATE requests SET lease_until = ?
			WHERE id = ? AND lease_owner = ? AND status = 'processing'`, store.StoredTime(until).UnixMicro(), id, worker)
		if err != nil {
			return fmt.Errorf("store: heartbeat: %w", err)
		}
		return oneRow(res, store.ErrLeaseLost)
	})
}

// Complete implements [Store].
func (s *SQLite) Complete(ctx context.Context, id, worker string, result []byte, now time.Time) error {
	result, codec := s.codecs.compress(result)
	return s.finish(ctx, id, worker, acds.StatusCompleted, "result = ?, result_codec = ?", now, result, codec)
}

// Fail implements [Store].
func (s *SQLite) Fail(ctx context.Context, id, worker string, problem []byte, now time.Time) error {
	return s.finish(ctx, id, worker, acds.StatusFailed, "error = ?", now, problem)
}

// finish ends a request; set assigns its outcome from vals.
func (s *SQLite) finish(ctx context.Context, id, worker, status, set string, now time.Time, vals ...any) error {
	if id == "" || worker == "" {
		return store.ErrLeaseLost
	}
	t := store.StoredTime(now).UnixMicro()
	args := append([]any{status}, vals...)
	args = append(args, t, t, id, worker)
	return s.write(ctx, true, func(w *writeConn) error {
		res, err := w.exec(`UPDATE requests SET status = ?, `+set+`, sealed = NULL, affinity = '',
			lease_owner = '', lease_until = NULL, updated_at = ?, completed_at = ?
			WHERE id = ? AND lease_owner = ? AND status = 'processing'`, args...)
		if err != nil {
			return fmt.Errorf("store: %s: %w", status, err)
		}
		return oneRow(res, store.ErrLeaseLost)
	})
}

// EraseSealedBefore implements [Store].
func (s *SQLite) EraseSealedBefore(ctx context.Context, t time.Time) (int, error) {
	var n int64
	err := s.writeFreeing(ctx, func(w *writeConn) error {
		res, err := w.exec("UPDATE requests SET sealed = NULL, affinity = '' WHERE sealed IS NOT NULL AND created_at < ?",
			store.StoredTime(t).UnixMicro())
		if err != nil {
			return fmt.Errorf("store: erase sealed: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err // n may still be written by a job the deadline left behind
	}
	return int(n), nil
}

// EraseEndedBefore implements [Store]. On a full disk, a batch of limit
// requests whose erasure needs more log room than the disk can make is
// erased in smaller batches instead (fewer rows, less log): it then
// returns fewer than limit, and the caller's next sweep goes on.
func (s *SQLite) EraseEndedBefore(ctx context.Context, t, now time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("%w: limit %d", store.ErrInvalid, limit)
	}
	for {
		n, err := s.eraseEnded(ctx, t, now, limit)
		if !errors.Is(err, ErrDiskFull) || limit == 1 || ctx.Err() != nil {
			return n, err
		}
		limit = max(1, limit/8)
	}
}

// eraseEnded is one batch of EraseEndedBefore.
func (s *SQLite) eraseEnded(ctx context.Context, t, now time.Time, limit int) (int, error) {
	var n int64
	err := s.writeFreeing(ctx, func(w *writeConn) error {
		at := store.StoredTime(now).UnixMicro()
		res, err := w.exec(`UPDATE requests SET input = NULL, input_codec = 0, result = NULL, result_codec = 0,
			sealed = NULL, erased_at = ?, updated_at = ?
			WHERE id IN (SELECT id FROM requests WHERE erased_at IS NULL AND completed_at IS NOT NULL
				AND completed_at < ? ORDER BY completed_at LIMIT ?)`,
			at, at, store.StoredTime(t).UnixMicro(), limit)
		if err != nil {
			return fmt.Errorf("store: erase ended: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err // n may still be written by a job the deadline left behind
	}
	return int(n), nil
}

// Close stops the writer (after the write in progress, if any, commits),
// checkpoints the write-ahead log into the database file and closes every
// connection. Methods called after Close return ErrClosed.
func (s *SQLite) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		close(s.quit)
		<-s.done
		s.mark.close()
		<-s.ckdone
		_, _ = s.wconn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
		s.cerr = errors.Join(s.w.close(), s.wconn.Close(), s.rdb.Close(), s.ckdb.Close(), s.wdb.Close(), s.mfile.close())
	})
	return s.cerr
}

// fromMicros turns a stored microsecond count back into a UTC time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

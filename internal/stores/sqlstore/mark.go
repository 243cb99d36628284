package sqlstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/store"
)

// The durable high-water mark.
//
// A database can go back in time without noticing: SQLite opens a
// database whose write-ahead log was deleted, truncated or damaged as the
// state of its last intact commit (integrity_check says ok), an emptied or
// deleted database file as a new database, and PostgreSQL a database
// restored from an older copy as it was then. Every write the store
// acknowledged after that point would be gone, silently. So the store
// keeps a mark outside the database — a small file, the mark file — that
// says how far the database had got, and compares the two when it opens:
//
//   - the database has a random identity and a commit sequence number,
//     kept in its store_mark table and advanced in the same transaction
//     as the writes it counts (SQLite: every commit; PostgreSQL: each
//     replica has its own row, see Postgres);
//   - a write returns only once the mark file records a sequence number
//     at least as high as the commit that holds the write, synced to
//     disk after that commit was (so the mark is never ahead of what the
//     database made durable, and a crash at any point leaves a database
//     at or ahead of its mark);
//   - at open, a database behind its mark, a different database than the
//     mark's, a new or emptied database where the mark (or the
//     installation, MarkOptions.Installed) says there was one, or a mark
//     missing for a database that had one, is refused with a
//     *DataLossError (errors.Is store.ErrDataLoss), unless the caller
//     accepts the loss (MarkOptions.AcceptDataLoss): the store then opens,
//     records the acceptance in the database's data_loss_accepted table,
//     and moves the mark to the database. A database ahead of its mark
//     is normal (the mark of its last commits was not yet written when
//     the process stopped) and the mark moves up to it.
//
// "Behind" is a comparison of commit sequence numbers, never of clocks.
//
// The mark file holds two slots of markSlotSize bytes, each one line of
// text with a checksum, written alternately in place and made durable
// with fdatasync: an update costs one write and one flush, no rename and
// no directory sync (the file keeps its size), and an update torn by a
// crash leaves the other slot, one step older and so still not ahead of
// the database. The file is created whole (a temporary file, fsync,
// rename, fsync of the directory). Writes that commit together wait for
// one mark update together, which a goroutine of its own makes while the
// next commit runs (marker), so the mark adds its flush to a write's
// latency but not to the rate of commits.

// MarkOptions configure the durable high-water mark a store keeps outside
// its database (see the Durability sections of SQLite and Postgres).
type MarkOptions struct {
	// Path is the mark file. SQLite's zero value is the database's path
	// followed by "-mark"; PostgreSQL keeps no mark without one.
	Path string
	// Replica names this replica in a PostgreSQL database that several
	// share (the service uses its replica id): each replica's mark counts
	// its own row. Required with Path there; SQLite ignores it.
	Replica string
	// Installed says that the installation the store belongs to already
	// holds state (keys, a replica id in its data directory): a new,
	// empty database is then a loss, not a first start.
	Installed bool
	// AcceptDataLoss opens a database despite a loss the mark reveals
	// (all but LossDamaged, which cannot be opened at all): the
	// acceptance is recorded in the database, AcceptedLoss returns it,
	// and the mark is moved to the database as it is.
	AcceptDataLoss bool
}

// A LossKind says what a DataLossError found.
type LossKind int

// The kinds of DataLossError.
const (
	// LossBehind: the database is behind its mark — commits the store
	// acknowledged are missing (a write-ahead log deleted, truncated or
	// damaged; a database restored from an older copy).
	LossBehind LossKind = iota + 1
	// LossNewDatabase: the database is new or empty (its file was
	// deleted or emptied, the database was reset) although the mark, or
	// the installation's state, says it held data.
	LossNewDatabase
	// LossOtherDatabase: the database is not the one the mark was kept
	// for (another installation's, or one made anew).
	LossOtherDatabase
	// LossMarkMissing: the mark file is missing although this database
	// had one, so whether writes were lost cannot be checked.
	LossMarkMissing
	// LossMarkDamaged: the mark file exists but holds no valid mark.
	LossMarkDamaged
	// LossDamaged: the database file is damaged (truncated, not a
	// database). It cannot be opened, accepted or not.
	LossDamaged
)

var lossNames = map[LossKind]string{
	LossBehind: "behind", LossNewDatabase: "new-database", LossOtherDatabase: "other-database",
	LossMarkMissing: "mark-missing", LossMarkDamaged: "mark-damaged", LossDamaged: "damaged",
}

// String is the kind's name as recorded in data_loss_accepted.
func (k LossKind) String() string {
	if n, ok := lossNames[k]; ok {
		return n
	}
	return "loss(" + strconv.Itoa(int(k)) + ")"
}

// DataLossError is the error of opening a store whose database lost, or
// may have lost, writes the store acknowledged. It matches
// store.ErrDataLoss (errors.Is).
type DataLossError struct {
	Kind     LossKind
	Database string // "sqlite:PATH" or "postgres"
	Mark     string // the mark file
	// MarkSeq and MarkAt are the commit the mark records, DBSeq and DBAt
	// the database's last (for LossBehind; for PostgreSQL, this
	// replica's count).
	MarkSeq, DBSeq uint64
	MarkAt, DBAt   time.Time
	// Err is the underlying error of LossDamaged and LossMarkDamaged.
	Err error
}

func (e *DataLossError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: %s: ", e.Database)
	switch e.Kind {
	case LossBehind:
		cause := "a deleted, truncated or damaged write-ahead log, or a database file restored from an older copy"
		if e.Database == "postgres" {
			cause = "the database restored from an older dump, backup or point in time"
		}
		fmt.Fprintf(&b, "the database is behind its high-water mark %s: its last commit is number %d%s, the mark records number %d%s, so %d acknowledged commits are missing (%s)",
			e.Mark, e.DBSeq, when(e.DBAt), e.MarkSeq, when(e.MarkAt), e.MarkSeq-e.DBSeq, cause)
	case LossNewDatabase:
		if e.MarkSeq > 0 || !e.MarkAt.IsZero() {
			fmt.Fprintf(&b, "the database is new or empty, but the high-water mark %s records %d commits%s: its data is gone (the database file deleted or emptied, or the database reset)",
				e.Mark, e.MarkSeq, when(e.MarkAt))
		} else {
			b.WriteString("the database is new or empty, but the installation holds state (its keys, its replica id): its data is gone (the database file deleted or emptied, or the database reset)")
		}
	case LossOtherDatabase:
		fmt.Fprintf(&b, "the database is not the one its high-water mark %s was kept for (another database, or one made anew): the data the mark counted (%d commits%s) is not in it",
			e.Mark, e.MarkSeq, when(e.MarkAt))
	case LossMarkMissing:
		fmt.Fprintf(&b, "the high-water mark %s is missing although this database had one, so whether acknowledged writes were lost cannot be checked", e.Mark)
	case LossMarkDamaged:
		fmt.Fprintf(&b, "the high-water mark %s is damaged (%v), so whether acknowledged writes were lost cannot be checked", e.Mark, e.Err)
	case LossDamaged:
		fmt.Fprintf(&b, "the database file is damaged (%v)", e.Err)
	default:
		b.WriteString("acknowledged data lost")
	}
	return b.String()
}

func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " (" + t.UTC().Format(time.RFC3339Nano) + ")"
}

// Is matches store.ErrDataLoss.
func (e *DataLossError) Is(target error) bool { return target == store.ErrDataLoss }

// Unwrap returns the underlying error, if any.
func (e *DataLossError) Unwrap() error { return e.Err }

// Acceptable reports whether MarkOptions.AcceptDataLoss can open the
// store despite the loss (every kind but LossDamaged).
func (e *DataLossError) Acceptable() bool { return e.Kind != LossDamaged }

// markState is a database's position: its identity and the sequence
// number (and time) of its last counted commit.
type markState struct {
	identity []byte
	seq      uint64
	at       time.Time
}

// opened is what a store found when it opened, for the verdict.
type opened struct {
	database, mark string
	installed      bool
	// dbNew: the database held no schema before this open.
	dbNew bool
	// db is the database's position; dbMarked tells whether a mark file
	// was ever written for it (SQLite: store_mark.marked; PostgreSQL:
	// this replica's row exists).
	db       markState
	dbMarked bool
	// file is the mark file's position when fileExists; fileErr is why
	// a mark file that exists holds no valid mark.
	file       markState
	fileExists bool
	fileErr    error
}

// verdict compares the database with its mark; nil means no loss.
func (o opened) verdict() *DataLossError {
	e := &DataLossError{Database: o.database, Mark: o.mark, MarkSeq: o.file.seq, MarkAt: o.file.at, DBSeq: o.db.seq, DBAt: o.db.at}
	switch {
	case o.fileErr != nil:
		e.Kind, e.Err = LossMarkDamaged, o.fileErr
	case o.fileExists && o.dbNew:
		e.Kind = LossNewDatabase
	case o.fileExists && !bytes.Equal(o.db.identity, o.file.identity):
		e.Kind = LossOtherDatabase
	case o.fileExists && o.db.seq < o.file.seq:
		e.Kind = LossBehind
	case !o.fileExists && o.dbNew && o.installed:
		e.Kind, e.MarkSeq, e.MarkAt = LossNewDatabase, 0, time.Time{}
	case !o.fileExists && !o.dbNew && o.dbMarked:
		e.Kind = LossMarkMissing
	default:
		return nil
	}
	return e
}

// markSlotSize is the size of each of the mark file's two slots, a
// file-system block, so that a torn write of one leaves the other.
const markSlotSize = 4096

const markMagic = "acds-store-mark"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeSlot is one slot: a line of text, zero-padded.
func encodeSlot(st markState, gen uint64) []byte {
	line := fmt.Sprintf("%s v1 database=%s seq=%d at=%d gen=%d", markMagic, hex.EncodeToString(st.identity), st.seq, st.at.UnixMicro(), gen)
	line += fmt.Sprintf(" crc32c=%08x\n", crc32.Checksum([]byte(line), castagnoli))
	b := make([]byte, markSlotSize)
	copy(b, line)
	return b
}

// decodeSlot parses a slot; ok is false for one that is empty, torn or
// not a mark.
func decodeSlot(b []byte) (st markState, gen uint64, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return markState{}, 0, false
	}
	line := string(b[:i])
	body, sum, found := strings.Cut(line, " crc32c=")
	if !found || fmt.Sprintf("%08x", crc32.Checksum([]byte(body), castagnoli)) != sum {
		return markState{}, 0, false
	}
	f := strings.Fields(body)
	if len(f) != 6 || f[0] != markMagic || f[1] != "v1" {
		return markState{}, 0, false
	}
	vals := make([]string, 4)
	for j, key := range []string{"database=", "seq=", "at=", "gen="} {
		v, found := strings.CutPrefix(f[2+j], key)
		if !found {
			return markState{}, 0, false
		}
		vals[j] = v
	}
	id, err1 := hex.DecodeString(vals[0])
	seq, err2 := strconv.ParseUint(vals[1], 10, 64)
	at, err3 := strconv.ParseInt(vals[2], 10, 64)
	gen, err4 := strconv.ParseUint(vals[3], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil || len(id) == 0 {
		return markState{}, 0, false
	}
	st = markState{identity: id, seq: seq}
	if at != 0 {
		st.at = time.UnixMicro(at).UTC()
	}
	return st, gen, true
}

// readMark reads the mark file at path: exists is false when there is
// none; err says why one that exists holds no valid mark.
func readMark(path string) (st markState, gen uint64, exists bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return markState{}, 0, false, nil
	}
	if err != nil {
		return markState{}, 0, true, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 2*markSlotSize+1))
	if err != nil {
		return markState{}, 0, true, err
	}
	found := false
	for i := 0; i < 2; i++ {
		lo := i * markSlotSize
		if lo >= len(b) {
			break
		}
		s, g, ok := decodeSlot(b[lo:min(len(b), lo+markSlotSize)])
		if ok && (!found || g > gen) {
			st, gen, found = s, g, true
		}
	}
	if !found {
		return markState{}, 0, true, errors.New("no valid mark in it")
	}
	return st, gen, true, nil
}

// markFile is an open mark file, written by one goroutine at a time.
type markFile struct {
	path string
	f    *os.File
	gen  uint64
	last markState // what it holds
}

// openMarkFile opens the mark file at path for writing st to it,
// creating it, holding st, when it is missing (or replacing it when
// replace is set: one whose slots are damaged). gen is the generation
// readMark returned.
func openMarkFile(path string, st markState, gen uint64, exists, replace bool) (*markFile, error) {
	if !exists || replace {
		if err := createMarkFile(path, st); err != nil {
			return nil, fmt.Errorf("store: create the high-water mark %s: %w", path, err)
		}
		gen = 1
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("store: open the high-water mark: %w", err)
	}
	m := &markFile{path: path, f: f, gen: gen, last: st}
	if exists && !replace {
		if err := m.write(st); err != nil {
			f.Close()
			return nil, err
		}
	}
	return m, nil
}

// createMarkFile makes the mark file whole, holding st in both slots:
// written and synced under a temporary name, renamed into place, and
// the directory synced, so that path never names a partial file.
func createMarkFile(path string, st markState) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	b := append(encodeSlot(st, 0), encodeSlot(st, 1)...)
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// write records st in the slot the last write did not use and flushes
// it to disk.
func (m *markFile) write(st markState) error {
	gen := m.gen + 1
	if _, err := m.f.WriteAt(encodeSlot(st, gen), int64(gen%2)*markSlotSize); err != nil {
		return fmt.Errorf("store: write the high-water mark: %w", err)
	}
	if err := datasync(m.f); err != nil {
		return fmt.Errorf("store: sync the high-water mark: %w", err)
	}
	m.gen, m.last = gen, st
	return nil
}

func (m *markFile) close() error {
	if m == nil || m.f == nil {
		return nil
	}
	return m.f.Close()
}

// A markWaiter is a write waiting for the mark to cover it: done gets
// err once the mark has been made durable, or err itself when the write
// failed (then it waits for nothing), or the mark's error.
type markWaiter struct {
	done chan<- error // buffered: a send never blocks
	err  error
}

// marker makes the mark durable for the writes waiting for it, in rounds:
// each round takes every write waiting, runs sync once for all of them
// and then answers them. A write that arrives during a round waits for
// the next.
type marker struct {
	// sync makes the mark cover need: SQLite passes the position of the
	// newest commit it reports; PostgreSQL ignores need and advances the
	// replica's row.
	sync func(need markState) error

	mu      sync.Mutex
	waiting []markWaiter
	need    markState
	closed  bool
	spare   []markWaiter // the marker goroutine's

	kick chan struct{}
	quit chan struct{}
	done chan struct{}
}

func newMarker(sync func(need markState) error) *marker {
	m := &marker{sync: sync, kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

// after queues ws, the writes of commits up to need, for the next round.
func (m *marker) after(need markState, ws ...markWaiter) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		for _, w := range ws {
			w.done <- cmpErr(w.err, store.ErrClosed)
		}
		return
	}
	if need.seq > m.need.seq {
		m.need = need
	}
	m.waiting = append(m.waiting, ws...)
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func cmpErr(own, other error) error {
	if own != nil {
		return own
	}
	return other
}

// wait returns once a round that began after the call has made the mark
// durable (for PostgreSQL, whose writes are committed by the time they
// call it), or with ctx's error.
func (m *marker) wait(ctx context.Context) error {
	done := make(chan error, 1)
	m.after(markState{}, markWaiter{done: done})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("store: high-water mark: %w", ctx.Err())
	}
}

func (m *marker) run() {
	defer close(m.done)
	for {
		select {
		case <-m.kick:
			m.round()
		case <-m.quit:
			m.round() // the writes still waiting
			return
		}
	}
}

func (m *marker) round() {
	// Two buffers: after appends to waiting while this round answers
	// the other one (spare is the marker goroutine's alone).
	m.mu.Lock()
	ws, need := m.waiting, m.need
	m.waiting, m.spare = m.spare[:0], nil
	m.mu.Unlock()
	var err error
	for _, w := range ws {
		if w.err == nil { // some write succeeded: it needs the mark
			err = m.sync(need)
			break
		}
	}
	for i, w := range ws {
		w.done <- cmpErr(w.err, err)
		ws[i] = markWaiter{}
	}
	m.spare = ws[:0]
}

// close answers the writes still waiting, after a last round, and stops
// the marker; later writes get ErrClosed.
func (m *marker) close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.mu.Unlock()
	close(m.quit)
	<-m.done
}

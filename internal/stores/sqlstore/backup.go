package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acds-project/acds/store"
)

// SQLiteBackup describes a copy BackupSQLite made.
type SQLiteBackup struct {
	Path string // the copy
	Mark string // its high-water mark, Path+"-mark"
	// Seq and At are the copy's last commit: the commit count its mark
	// records and when that commit was made.
	Seq uint64
	At  time.Time
	// Bytes is the size of the copy.
	Bytes int64
}

// BackupSQLite writes a consistent copy of the SQLite store at src, which
// a running server may be using, to dst (which must not exist), with a
// high-water mark for the copy beside it, so that a store opened on the
// copy finds itself at its mark, and checks the copy (quick_check).
//
// The copy is one read transaction of src (VACUUM INTO) on a read-only
// connection of its own with the store's busy timeout: it holds every commit made before
// it began and none made after, needs neither the server stopped nor its
// data directory lock, and holds no free pages, so values the store
// erased are not in it. While it runs, the server's checkpoints cannot
// pass it, so the server's write-ahead log grows by what it writes
// meanwhile. src must be a database of this build's schema.
func BackupSQLite(ctx context.Context, src, dst string) (SQLiteBackup, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %w", err) // never create the source
	} else if !fi.Mode().IsRegular() {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %s is not a database file", abs)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, os.ErrNotExist) {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %s already exists", dst)
	}
	if strings.ContainsAny(abs, "?#") {
		return SQLiteBackup{}, fmt.Errorf("%w: sqlite path must be a plain file name", store.ErrInvalid)
	}
	// Read-only: the backup never writes the source, not even a
	// checkpoint when it closes the last connection.
	uri := "file:" + strings.ReplaceAll(abs, "%", "%25") + "?mode=ro&" + fmt.Sprintf("_pragma=busy_timeout(%d)", sqliteBusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: open %s: %w", abs, err)
	}
	defer c.Close()
	version, err := sqliteSchemaVersion(ctx, c)
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %s: %w", abs, err)
	}
	if want := SchemaVersion(); version != want {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %s has schema version %d, this build %d: back it up with the acds that serves it", abs, version, want)
	}
	if _, err := c.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		_ = os.Remove(dst)
		return SQLiteBackup{}, fmt.Errorf("store: backup: copy %s: %w", abs, err)
	}
	b, err := finishBackup(ctx, dst)
	if err != nil {
		_ = os.Remove(dst)
		_ = os.Remove(dst + "-mark")
		return SQLiteBackup{}, err
	}
	return b, nil
}

// finishBackup checks the copy at dst, reads its position, syncs it and
// writes its mark.
func finishBackup(ctx context.Context, dst string) (SQLiteBackup, error) {
	db, err := sql.Open("sqlite", dst)
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %w", err)
	}
	defer db.Close()
	var check string
	if err := db.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: check the copy: %w", err)
	}
	if check != "ok" {
		return SQLiteBackup{}, fmt.Errorf("store: backup: the copy is damaged: %s", check)
	}
	var st markState
	var at int64
	if err := db.QueryRowContext(ctx, "SELECT identity, seq, at FROM store_mark WHERE id = 1").Scan(&st.identity, &st.seq, &at); err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: read the copy's high-water mark: %w", err)
	}
	if at != 0 {
		st.at = fromMicros(at)
	}
	if err := db.Close(); err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %w", err)
	}
	f, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: sync the copy: %w", err)
	}
	mark := dst + "-mark"
	if err := createMarkFile(mark, st); err != nil {
		return SQLiteBackup{}, fmt.Errorf("store: backup: write the copy's high-water mark: %w", err)
	}
	return SQLiteBackup{Path: dst, Mark: mark, Seq: st.seq, At: st.at, Bytes: fi.Size()}, nil
}

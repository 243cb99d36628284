package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	tpmdevice "github.com/acds-project/acds/attestation/tpm/device"
	"github.com/acds-project/acds/internal/stores/sqlstore"
)

// BackupOptions configure Backup.
type BackupOptions struct {
	// DataDir is the installation's data directory. Required.
	DataDir string
	// Store names its store as Options.Store does ("" for
	// DataDir/acds.db).
	Store string
	// Dir is where the backup goes: a directory that does not exist yet
	// (or is empty). It becomes a data directory an installation can be
	// started on.
	Dir string
}

// ErrBackupPostgres is the error of Backup for a PostgreSQL store, which
// PostgreSQL's own tools back up.
var ErrBackupPostgres = errors.New("service: a PostgreSQL store is backed up with PostgreSQL's own tools")

// BackupFile is the description Backup writes into the backup directory.
const BackupFile = "BACKUP"

// BackupReport says what Backup wrote.
type BackupReport struct {
	Dir string // the backup directory
	// Seq and At are the last commit in the copy of the store (what its
	// high-water mark records); Bytes is the copy's size.
	Seq   uint64
	At    time.Time
	Bytes int64
	// Files are the data directory's files copied beside the store, by
	// name relative to it.
	Files []string
	// LeftOut are the data directory's files that are not in the backup,
	// and why.
	LeftOut []LeftOut
	// Took is how long the backup took.
	Took time.Duration
}

// LeftOut is a file of the data directory a backup does not hold.
type LeftOut struct {
	Name, Why string
}

// Backup writes a consistent copy of an installation's store, which a
// running server may be using (it takes no lock: see
// sqlstore.BackupSQLite, a single read transaction), into o.Dir together
// with its high-water mark and the files of the data directory a restored
// installation needs that are safe to keep anywhere: replica.id, the
// sealed de-identification key, a TPM's PCR-sealed sealing key and its
// public attestation key. It never copies a secret kept unsealed: the
// in-process notary's private key (a restored installation makes a new
// one, named in the claims of every bundle it signs) and a simulated
// enclave's keys (files in the clear that stand for a chip: copy
// DataDir/enclave yourself to restore on the same simulated machine) are
// left out, and the report and o.Dir/BACKUP say so. o.Dir is written
// under a temporary name and renamed into place once complete and synced.
//
// To restore, start an installation on o.Dir (or a copy of it): its store
// is at its mark. A PostgreSQL store is refused with ErrBackupPostgres:
// back it up with pg_dump or a base backup.
func Backup(ctx context.Context, o BackupOptions) (*BackupReport, error) {
	start := time.Now()
	if o.DataDir == "" || o.Dir == "" {
		return nil, fmt.Errorf("%w: Backup needs DataDir and Dir", ErrInvalidOptions)
	}
	if isPostgres(o.Store) {
		return nil, fmt.Errorf("%w: use pg_dump (pg_dump --format=custom, restored with pg_restore) or a base backup with WAL archiving for point-in-time recovery, "+
			"and keep each replica's data directory (its sealed keys, replica.id and %s) beside it", ErrBackupPostgres, PostgresMarkFile)
	}
	src, ok := strings.CutPrefix(o.Store, "sqlite:")
	switch {
	case o.Store == "" || o.Store == "sqlite" || (ok && src == ""):
		src = filepath.Join(o.DataDir, "acds.db")
	case !ok:
		return nil, fmt.Errorf("%w: store must be empty, \"sqlite\", \"sqlite:PATH\" or a postgres:// DSN", ErrInvalidOptions)
	}
	if ents, err := os.ReadDir(o.Dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("backup: %s is not empty", o.Dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("backup: %w", err)
	}
	parent := filepath.Dir(filepath.Clean(o.Dir))
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(o.Dir)+".partial-*")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(tmp)
		}
	}()
	copied, err := sqlstore.BackupSQLite(ctx, src, filepath.Join(tmp, "acds.db"))
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	rep := &BackupReport{Dir: o.Dir, Seq: copied.Seq, At: copied.At, Bytes: copied.Bytes}
	for _, name := range []string{"replica.id", "deidentify.key.sealed", TPMAKFile, filepath.Join("enclave", tpmdevice.SealedKeyFile)} {
		switch err := copyFile(filepath.Join(o.DataDir, name), filepath.Join(tmp, name)); {
		case err == nil:
			rep.Files = append(rep.Files, name)
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("backup: %w", err)
		}
	}
	if _, err := os.Lstat(filepath.Join(o.DataDir, "notary.key")); err == nil {
		rep.LeftOut = append(rep.LeftOut, LeftOut{"notary.key",
			"the in-process notary's private key, kept unsealed: a restored installation makes a new one, which its bundles name in their signed claims (verifiers that pinned the old key add the new one)"})
	}
	if ents, err := os.ReadDir(filepath.Join(o.DataDir, "enclave")); err == nil {
		for _, e := range ents {
			if e.Name() == tpmdevice.SealedKeyFile {
				continue
			}
			rep.LeftOut = append(rep.LeftOut, LeftOut{filepath.Join("enclave", e.Name()),
				"enclave state kept in the clear (a simulated enclave's keys stand for its chip): not copied; to restore on the same simulated machine copy it from the data directory yourself, " +
					"or let the restored installation make a new one (move deidentify.key.sealed away then: pseudonyms change, queued fetches fail)"})
		}
	}
	rep.Took = time.Since(start)
	if err := os.WriteFile(filepath.Join(tmp, BackupFile), []byte(rep.describe(src)), 0o600); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := syncTree(tmp); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(tmp, o.Dir); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	done = true
	if err := syncPath(parent); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// describe is the text of the BACKUP file.
func (r *BackupReport) describe(src string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ACDS backup of %s, made %s\n", src, time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "store: acds.db, a consistent copy (%d bytes) up to commit %d", r.Bytes, r.Seq)
	if !r.At.IsZero() {
		fmt.Fprintf(&b, " of %s", r.At.UTC().Format(time.RFC3339Nano))
	}
	b.WriteString(", with its high-water mark acds.db-mark\n")
	for _, f := range r.Files {
		fmt.Fprintf(&b, "copied: %s\n", f)
	}
	for _, l := range r.LeftOut {
		fmt.Fprintf(&b, "left out: %s: %s\n", l.Name, l.Why)
	}
	b.WriteString("restore: start acds serve --data-dir on this directory (or a copy of it); restoring only acds.db over a data directory whose mark is newer is refused as a loss\n")
	return b.String()
}

// copyFile copies src to dst (creating dst's directory, 0700), with
// src's mode bits, and syncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncTree syncs dir and the directories below it (their files were
// synced as they were written).
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return syncPath(path)
	})
}

// syncPath flushes a directory, so that the names created in it survive
// a crash.
func syncPath(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

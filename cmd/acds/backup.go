package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/acds-project/acds/service"
)

// runBackup writes a consistent copy of a (running) installation's store
// and the data directory's sealed files into DIR (service.Backup).
//
//	acds backup [--data-dir DIR] [--store SPEC] BACKUP-DIR
//
// Exit 0 written, 1 the backup failed (a PostgreSQL store among them), 2
// usage error.
func runBackup(ctx context.Context, e env) int {
	fs := flag.NewFlagSet("acds backup", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var o service.BackupOptions
	fs.StringVar(&o.DataDir, "data-dir", "./acds-data", "the installation's data directory, as given to acds serve")
	fs.StringVar(&o.Store, "store", "", "its store, as given to acds serve: empty or \"sqlite\" for <data-dir>/acds.db, or \"sqlite:PATH\"")
	setUsage(fs, help{usage: []string{"acds backup [flags] DIR"},
		about: `
Writes a consistent copy of an installation's SQLite store into DIR (which must
not exist yet, or be empty), while acds serve keeps running: one read
transaction of the database, never blocking the server's writes. DIR also gets
the copy's high-water mark and the data directory's files that are safe to
keep anywhere (replica.id, the sealed de-identification key, a TPM's sealed
key); secrets kept unsealed (the in-process notary's key, a simulated
enclave's keys) are left out, and DIR/BACKUP says what is in it.
To restore, run acds serve --data-dir on DIR (or a copy of it).
A PostgreSQL store is backed up with pg_dump or a base backup instead.`,
		exit: "0 written, 1 the backup failed, 2 usage error."})
	args, err := parseArgs(fs, e.args, e.stdout)
	if err != nil {
		return parseExit(err)
	}
	if len(args) != 1 {
		fmt.Fprintf(e.stderr, "acds backup: want one backup directory; got %d arguments\n", len(args))
		fs.Usage()
		return 2
	}
	o.Dir = args[0]
	rep, err := service.Backup(ctx, o)
	if errors.Is(err, service.ErrInvalidOptions) {
		fmt.Fprintf(e.stderr, "acds backup: %v\n", err)
		return 2
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "acds backup: %v\n", err)
		return 1
	}
	fmt.Fprintf(e.stdout, "backed up %s to %s: %d bytes, up to commit %d, in %v\n", o.DataDir, rep.Dir, rep.Bytes, rep.Seq, rep.Took.Round(1e6))
	for _, f := range rep.Files {
		fmt.Fprintf(e.stdout, "  copied %s\n", f)
	}
	for _, l := range rep.LeftOut {
		fmt.Fprintf(e.stdout, "  left out %s: %s\n", l.Name, l.Why)
	}
	return 0
}

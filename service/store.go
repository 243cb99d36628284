package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
)

// OpenStore opens the durable store (a store.Store, the type of
// server.Config.Store) that spec names, applying any missing schema
// migrations:
//
//   - "" or "sqlite": SQLite in dataDir/acds.db (the embedded default);
//   - "sqlite:PATH": SQLite in the file PATH;
//   - "postgres://…" or "postgresql://…": PostgreSQL at that DSN, which
//     several servers may share (each replica processes claimed work).
//
// Anything else is an error wrapping ErrInvalidOptions. Errors never
// contain the DSN (it may hold a password). The caller closes the store.
//
// The store keeps a durable high-water mark outside its database (SQLite:
// beside the database file, PATH-mark; PostgreSQL: this replica's, in
// dataDir/PostgresMarkFile) and refuses to open a database that is
// behind it, or that is new or empty while the mark or dataDir (its keys,
// its replica id) says the installation held data: the error matches
// store.ErrDataLoss and says how to proceed (see Options.AcceptDataLoss).
func OpenStore(ctx context.Context, spec, dataDir string) (store.Store, error) {
	st, _, err := openStore(ctx, spec, dataDir, false, nil)
	return st, err
}

// PostgresMarkFile is the name, in the data directory, of the high-water
// mark a replica keeps of a PostgreSQL store.
const PostgresMarkFile = "postgres-mark"

// openStore is OpenStore, also returning a description of the store for
// logs that never contains a password ("sqlite:PATH" or "postgres"). With
// accept, a database that lost data opens (see Options.AcceptDataLoss)
// and onAccepted gets the loss accepted.
func openStore(ctx context.Context, spec, dataDir string, accept bool, onAccepted func(error)) (store.Store, string, error) {
	mo := sqlstore.MarkOptions{AcceptDataLoss: accept}
	if dataDir != "" {
		mo.Installed = installed(dataDir)
	}
	switch {
	case isPostgres(spec):
		if dataDir != "" {
			replica, err := replicaID(filepath.Join(dataDir, "replica.id"))
			if err != nil {
				return nil, "", err
			}
			mo.Path, mo.Replica = filepath.Join(dataDir, PostgresMarkFile), replica
		}
		st, err := sqlstore.OpenPostgresWith(ctx, spec, mo)
		if err != nil {
			return nil, "", storeError("postgres", err)
		}
		if l := st.AcceptedLoss(); l != nil && onAccepted != nil {
			onAccepted(l)
		}
		return st, "postgres", nil
	case spec == "", spec == "sqlite", strings.HasPrefix(spec, "sqlite:"):
		path, ok := strings.CutPrefix(spec, "sqlite:")
		if !ok || path == "" {
			if dataDir == "" {
				return nil, "", fmt.Errorf("%w: the SQLite store needs a data directory or sqlite:PATH", ErrInvalidOptions)
			}
			path = filepath.Join(dataDir, "acds.db")
		}
		st, err := sqlstore.OpenSQLiteWith(ctx, path, mo)
		if err != nil {
			return nil, "", storeError("", err)
		}
		if l := st.AcceptedLoss(); l != nil && onAccepted != nil {
			onAccepted(l)
		}
		return st, "sqlite:" + path, nil
	default:
		// Not quoted back: a mistyped DSN may carry a password.
		return nil, "", fmt.Errorf("%w: store must be empty, \"sqlite\", \"sqlite:PATH\" or a postgres:// DSN", ErrInvalidOptions)
	}
}

// storeError wraps an error of opening a store; a data loss gets the way
// out appended.
func storeError(kind string, err error) error {
	var loss *sqlstore.DataLossError
	switch {
	case errors.As(err, &loss) && loss.Acceptable():
		return fmt.Errorf("%w; refusing to start: restore the data directory (or database) from a backup (acds backup), "+
			"or start once with --accept-data-loss (Options.AcceptDataLoss) to serve what is left and record the loss", err)
	case errors.As(err, &loss):
		return fmt.Errorf("%w; refusing to start: restore the database from a backup (acds backup), "+
			"or move the damaged file away and start once with --accept-data-loss (Options.AcceptDataLoss) to start with an empty store", err)
	case kind != "":
		return fmt.Errorf("store: %s: %w", kind, err)
	default:
		return fmt.Errorf("store: %w", err)
	}
}

// installedFiles are the files of the data directory that say an
// installation has run in it: made once, after its store was first
// opened. (The enclave's state is the machine's, which a new installation
// may be given; the notary key may be provisioned beforehand.)
var installedFiles = []string{"replica.id", "deidentify.key.sealed"}

// installed reports whether dataDir holds an installation's state, so
// that a new, empty database in it is a loss rather than a first start.
func installed(dataDir string) bool {
	for _, name := range installedFiles {
		if _, err := os.Lstat(filepath.Join(dataDir, name)); err == nil {
			return true
		}
	}
	return false
}

func isPostgres(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}

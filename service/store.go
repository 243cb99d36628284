package service

import (
	"context"
	"fmt"
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
func OpenStore(ctx context.Context, spec, dataDir string) (store.Store, error) {
	st, _, err := openStore(ctx, spec, dataDir)
	return st, err
}

// openStore is OpenStore, also returning a description of the store for
// logs that never contains a password ("sqlite:PATH" or "postgres").
func openStore(ctx context.Context, spec, dataDir string) (store.Store, string, error) {
	switch {
	case isPostgres(spec):
		st, err := sqlstore.OpenPostgres(ctx, spec)
		if err != nil {
			return nil, "", fmt.Errorf("store: postgres: %w", err)
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
		st, err := sqlstore.OpenSQLite(ctx, path)
		if err != nil {
			return nil, "", fmt.Errorf("store: %w", err)
		}
		return st, "sqlite:" + path, nil
	default:
		// Not quoted back: a mistyped DSN may carry a password.
		return nil, "", fmt.Errorf("%w: store must be empty, \"sqlite\", \"sqlite:PATH\" or a postgres:// DSN", ErrInvalidOptions)
	}
}

func isPostgres(spec string) bool {
	return strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://")
}

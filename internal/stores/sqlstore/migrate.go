package sqlstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// The schema of each backend is a sequence of numbered SQL files,
// migrations/<backend>/NNNN_name.sql, embedded in the binary. Opening a store
// applies the ones its database has not recorded in schema_migrations, in
// order, in one transaction, under a lock that keeps two processes opening
// the same database at once from applying them twice.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the backend's migrations sorted by version. The files
// are part of the binary, so an error here is a build defect.
func migrations(backend string) ([]migration, error) {
	dir := path.Join("migrations", backend)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("store: read embedded migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("store: migration %s/%s has no version number", backend, e.Name())
		}
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("store: read migration: %w", err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := range ms {
		if ms[i].version != i+1 {
			return nil, fmt.Errorf("store: %s migrations are not numbered 1..n (found %d at position %d)", backend, ms[i].version, i+1)
		}
	}
	return ms, nil
}

// SchemaVersion is the schema version this build migrates databases to
// (the same for both backends).
func SchemaVersion() int {
	ms, err := migrations("sqlite")
	if err != nil {
		return 0
	}
	return len(ms)
}

// errNewerSchema reports a database migrated by a newer build.
func errNewerSchema(have, want int) error {
	return fmt.Errorf("store: database schema version %d is newer than this build's %d; upgrade acds", have, want)
}

// errOtherBuild reports a database whose recorded migration of a version
// is not this build's migration of that version: another build (a fork,
// or a development branch) migrated it, and applying the rest on top would
// leave a schema neither build expects.
func errOtherBuild(version int, applied, ours string) error {
	return fmt.Errorf("store: database schema version %d was applied as %q, but this build's version %d is %q: the database was migrated by another build of acds", version, applied, version, ours)
}

// checkApplied compares the migrations a database recorded (version →
// name) with this build's.
func checkApplied(applied map[int]string, ms []migration) error {
	for _, m := range ms {
		if name, ok := applied[m.version]; ok && name != m.name {
			return errOtherBuild(m.version, name, m.name)
		}
	}
	return nil
}

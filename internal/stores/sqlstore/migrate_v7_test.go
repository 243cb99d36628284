package sqlstore

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds/internal/testrig/disktest"
	"github.com/acds-project/acds/store"
)

// openV6 creates a database at path at schema version 6, as a build of
// that version would have left it, and returns it open.
func openV6(t *testing.T, path string) *sql.DB {
	t.Helper()
	ms, err := migrations("sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 7 || ms[6].name != "0007_codec_s2" {
		t.Fatalf("migration 7 is %v", ms[6:])
	}
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) { mustExec(t, db, q, args...) }
	exec(`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`)
	for _, m := range ms[:6] {
		exec(m.sql)
		exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, 0)", m.version, m.name)
	}
	return db
}

// mustExec runs q on db, ending the test if it fails.
func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// A database at schema version 6, with DEFLATE values and a pending
// webhook, moves to version 7 (the requests table rebuilt for codec 2)
// with nothing lost: every value reads back as it was, the webhook is
// still there and still goes with its request, the database is sound,
// and new values are stored S2-compressed.
func TestMigrationV7KeepsData(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "acds.db")
	input := bytes.Repeat([]byte(`{"resourceType":"Observation","status":"final"},`), 300)
	result := bytes.Repeat([]byte(`{"output":"x"},`), 500)
	db := openV6(t, path)
	exec := func(q string, args ...any) { mustExec(t, db, q, args...) }
	now := time.Now().UnixMicro()
	exec(`INSERT INTO requests (id, owner, kind, status, input, input_codec, result, result_codec, created_at, updated_at, completed_at, affinity)
		VALUES ('old1', 'anon_v6', 'process', 'completed', ?, 1, ?, 1, ?, ?, ?, 'r1')`, deflated(input), deflated(result), now, now, now)
	exec(`INSERT INTO requests (id, owner, kind, status, input, input_codec, sealed, created_at, updated_at)
		VALUES ('old2', 'anon_v6', 'fetch-and-attest', 'processing', ?, 0, x'0102', ?, ?)`, []byte(`{"a":1}`), now, now)
	exec(`INSERT INTO webhooks (request_id, url, attempts, next_at, last_error, created_at) VALUES ('old1', 'https://hook.example/x', 2, ?, 'refused', ?)`, now, now)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := OpenSQLite(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.GetRequest(ctx, "anon_v6", "old1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.Input, input) || !bytes.Equal(r.Result, result) {
		t.Fatal("old1's DEFLATE input or result changed in the migration")
	}
	r, err = s.GetRequest(ctx, "anon_v6", "old2")
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Input) != `{"a":1}` || !bytes.Equal(r.Sealed, []byte{1, 2}) {
		t.Fatalf("old2 after the migration: input %q sealed %x", r.Input, r.Sealed)
	}
	query := func(q string, args ...any) string {
		t.Helper()
		var v string
		if err := s.rdb.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	if v := query("SELECT url || ' ' || attempts || ' ' || last_error FROM webhooks WHERE request_id = 'old1'"); v != "https://hook.example/x 2 refused" {
		t.Fatalf("webhook after the migration: %q", v)
	}
	if v := query("PRAGMA integrity_check"); v != "ok" {
		t.Fatalf("integrity_check: %s", v)
	}
	if v := query("SELECT count(*) FROM pragma_foreign_key_check"); v != "0" {
		t.Fatalf("%s foreign key violations", v)
	}
	if v := query("SELECT count(*) FROM sqlite_schema WHERE name LIKE '%_v7'"); v != "0" {
		t.Fatalf("%s tables of the migration left behind", v)
	}
	if v := query("SELECT sql FROM sqlite_schema WHERE name = 'requests'"); !strings.Contains(v, "input_codec IN (0, 1, 2)") || !strings.Contains(v, "STRICT") {
		t.Fatalf("requests after the migration: %s", v)
	}
	for _, idx := range []string{"requests_owner_created", "requests_claimable", "requests_sealed", "requests_retained", "webhooks_next_at"} {
		if v := query("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = ?", idx); v != "1" {
			t.Fatalf("index %s missing after the migration", idx)
		}
	}

	// New values are S2.
	n := time.Now()
	if err := s.CreateRequest(ctx, store.Request{ID: "new1", Owner: "anon_v6", Kind: "process", Input: input, CreatedAt: n, UpdatedAt: n}); err != nil {
		t.Fatal(err)
	}
	if v := query("SELECT input_codec FROM requests WHERE id = 'new1'"); v != fmt.Sprint(codecS2) {
		t.Fatalf("a new input is stored with codec %s, want %d", v, codecS2)
	}
	if r, err := s.GetRequest(ctx, "anon_v6", "new1"); err != nil || !bytes.Equal(r.Input, input) {
		t.Fatalf("new1: %v", err)
	}
	// The webhook still goes with its request.
	if err := s.DeleteRequest(ctx, "anon_v6", "old1"); err != nil {
		t.Fatal(err)
	}
	if v := query("SELECT count(*) FROM webhooks"); v != "0" {
		t.Fatalf("%s webhooks left after their request was deleted", v)
	}
}

// On a disk without room for the rebuild, migration 7 fails and changes
// nothing: the database stays at version 6 with every request, and once
// there is room the next open migrates it (docs/deploy.md, Upgrading).
func TestMigrationV7FullDiskChangesNothing(t *testing.T) {
	dir := disktest.Small(t, 16<<20)
	path := filepath.Join(dir, "acds.db")
	db := openV6(t, path)
	const n = 120
	in := make([]byte, 32<<10)
	for i := range n {
		_, _ = rand.Read(in) // incompressible: the rebuild must copy it all
		now := time.Now().UnixMicro()
		mustExec(t, db, `INSERT INTO requests (id, owner, kind, status, input, created_at, updated_at)
			VALUES (?, 'anon_v6', 'process', 'processing', ?, ?, ?)`, fmt.Sprintf("r%03d", i), in, now, now)
	}
	mustExec(t, db, "PRAGMA wal_checkpoint(TRUNCATE)")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	filler := disktest.Fill(t, dir, "filler")
	// Give back less room than the rebuild's log needs (about twice
	// the table, 7.5 MiB: the copy, and the old table zeroed by
	// secure_delete).
	if err := os.Truncate(filler, max(fileSize(filler)-1<<20, 0)); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenSQLite(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("migration 7 went through on a disk without room for it")
	} else {
		t.Logf("on a full disk: %v", err)
	}
	check := func(wantVersion int) {
		t.Helper()
		db, err := sql.Open("sqlite", path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var v, count int
		if err := db.QueryRow("SELECT max(version) FROM schema_migrations").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT count(*) FROM requests WHERE length(input) = ?", len(in)).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if v != wantVersion || count != n {
			t.Fatalf("schema version %d with %d requests, want %d with %d", v, count, wantVersion, n)
		}
	}
	check(6)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("with room again: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	check(SchemaVersion())
}

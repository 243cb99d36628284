// Package pgtest gives tests a PostgreSQL schema of their own in the
// database named by ACDS_TEST_POSTGRES, so that tests, parallel `go test`
// runs and builds of other branches sharing one database never see each
// other's rows or migrations. Without the variable the test is skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env is the variable naming the test database.
const Env = "ACDS_TEST_POSTGRES"

// DSN creates a fresh, empty schema, drops it when the test ends, and
// returns a connection string (URL or key=value, as the variable is)
// whose search_path is that schema. It skips the test when the variable
// is unset.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skip(Env + " is not set; skipping a PostgreSQL test")
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "acds_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to %s: %v", Env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create a test schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop test schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop test schema: %v", err)
		}
	})
	dsn, err := WithSearchPath(base, schema)
	if err != nil {
		t.Fatal(err)
	}
	return dsn
}

// WithSearchPath adds search_path to a URL or key=value connection string.
func WithSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}

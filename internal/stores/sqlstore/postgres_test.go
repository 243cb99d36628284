package sqlstore_test

import (
	"context"
	"github.com/acds-project/acds/internal/testrig/pgtest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

// postgresDSN returns a connection string for a fresh, empty schema
// (package pgtest), skipping the test without ACDS_TEST_POSTGRES.
func postgresDSN(t testing.TB) string { return pgtest.DSN(t) }

// withSearchPath adds search_path to a URL or key=value connection string.
func withSearchPath(t testing.TB, dsn, schema string) string {
	s, err := pgtest.WithSearchPath(dsn, schema)
	require.NoError(t, err)
	return s
}

func openPostgres(t *testing.T, dsn string) *sqlstore.Postgres {
	t.Helper()
	s, err := sqlstore.OpenPostgres(t.Context(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPostgresConformance(t *testing.T) {
	t.Parallel()
	if os.Getenv("ACDS_TEST_POSTGRES") == "" {
		t.Skip("ACDS_TEST_POSTGRES is not set; skipping PostgreSQL tests")
	}
	storetest.Run(t, func(t *testing.T) store.Store { return openPostgres(t, postgresDSN(t)) })
}

// Replicas open the same database at once: the migrations are applied
// exactly once and every replica starts.
func TestPostgresConcurrentMigrations(t *testing.T) {
	t.Parallel()
	dsn := postgresDSN(t)
	const replicas = 6
	var wg sync.WaitGroup
	stores := make([]*sqlstore.Postgres, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = sqlstore.OpenPostgres(t.Context(), dsn) })
	}
	wg.Wait()
	for i := range replicas {
		require.NoError(t, errs[i], "replica %d", i)
		defer stores[i].Close()
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n, maxV int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &maxV))
	require.Equal(t, sqlstore.SchemaVersion(), n)
	require.Equal(t, sqlstore.SchemaVersion(), maxV)

	// Reopening finds the schema current and changes nothing.
	s := openPostgres(t, dsn)
	require.NoError(t, s.CreateRequest(t.Context(), storetest.NewRequest("anon-a", storetest.T0)))

	// A database whose last migration was applied by another build (same
	// number, other name) is refused.
	var name string
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT name FROM schema_migrations WHERE version = $1", maxV).Scan(&name))
	_, err = conn.Exec(t.Context(), "UPDATE schema_migrations SET name = 'from_another_branch' WHERE version = $1", maxV)
	require.NoError(t, err)
	_, err = sqlstore.OpenPostgres(t.Context(), dsn)
	require.ErrorContains(t, err, "migrated by another build")
	_, err = conn.Exec(t.Context(), "UPDATE schema_migrations SET name = $1 WHERE version = $2", name, maxV)
	require.NoError(t, err)

	// A database migrated by a newer build is refused.
	_, err = conn.Exec(t.Context(), "INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')", sqlstore.SchemaVersion()+1)
	require.NoError(t, err)
	_, err = sqlstore.OpenPostgres(t.Context(), dsn)
	require.Error(t, err)
}

// Two replicas share one database: 500 requests, several workers in each,
// every request is claimed once and completed once.
func TestPostgresReplicasClaimExactlyOnce(t *testing.T) {
	t.Parallel()
	dsn := postgresDSN(t)
	a, b := openPostgres(t, dsn), openPostgres(t, dsn)
	storetest.ConcurrentClaim(t, []store.Store{a, b}, 500, 8)
}

func TestPostgresBadDSNKeepsSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-pa55w0rd"
	for _, dsn := range []string{
		"postgres://user:" + secret + "@[::1:5432/db",
		"host=127.0.0.1 password=" + secret + " port=notaport",
	} {
		_, err := sqlstore.OpenPostgres(t.Context(), dsn)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.NotContains(t, err.Error(), secret)
	}
	// A refused connection: the error names no password either. Port 1 on
	// loopback is closed.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := sqlstore.OpenPostgres(ctx, "postgres://acds:"+secret+"@127.0.0.1:1/acds?sslmode=disable&connect_timeout=5")
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)
}

// A search_path naming no existing schema is a clear error, not a
// migration into some other schema.
func TestPostgresMissingSchema(t *testing.T) {
	t.Parallel()
	dsn := postgresDSN(t)
	_, err := sqlstore.OpenPostgres(t.Context(), withSearchPath(t, dsn, "acds_store_test_no_such_schema"))
	require.Error(t, err)
}

func TestPostgresApplicationName(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgresDSN(t))
	require.NoError(t, s.CreateRequest(t.Context(), storetest.NewRequest("anon-a", storetest.T0)))
	conn, err := pgx.Connect(t.Context(), os.Getenv("ACDS_TEST_POSTGRES"))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'acds'").Scan(&n))
	require.Positive(t, n, "the store's connections are named acds")
}

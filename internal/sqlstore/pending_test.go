package sqlstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/store/storetest"
)

type pendingStore interface {
	store.Store
	Pending(ctx context.Context) (int, error)
}

// checkPending: Pending counts the requests still processing, claimed or
// not, and not the ended ones.
func checkPending(t *testing.T, s pendingStore) {
	ctx := t.Context()
	count := func(want int) {
		t.Helper()
		if n, err := s.Pending(ctx); err != nil || n != want {
			t.Fatalf("Pending = %d, %v; want %d", n, err, want)
		}
	}
	count(0)
	for i := 0; i < 3; i++ {
		r := store.Request{ID: uuid.NewString(), Owner: "anon-pending", Kind: acds.KindProcess, Status: acds.StatusProcessing,
			Input: []byte(`{}`), CreatedAt: storetest.T0.Add(time.Duration(i) * time.Second), UpdatedAt: storetest.T0}
		if err := s.CreateRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	count(3)
	c, err := s.Claim(ctx, store.ClaimOptions{Worker: "w1", Lease: time.Minute, MaxAttempts: 3, Now: storetest.T0})
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	count(3)
	if err := s.Complete(ctx, c.ID, "w1", []byte(`{}`), storetest.T0); err != nil {
		t.Fatal(err)
	}
	count(2)
}

func TestSQLitePending(t *testing.T) {
	checkPending(t, openSQLite(t).(pendingStore))
}

func TestPostgresPending(t *testing.T) {
	if os.Getenv("ACDS_TEST_POSTGRES") == "" {
		t.Skip("ACDS_TEST_POSTGRES is not set; skipping PostgreSQL tests")
	}
	checkPending(t, openPostgres(t, postgresDSN(t)))
}

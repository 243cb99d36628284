package sqlstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/stores/sqlstore"
	"github.com/acds-project/acds/store"
)

// A request's life: accepted, claimed by a worker under a lease, completed.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "acds-store-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "acds.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	// Accept: once CreateRequest returns nil the request is on disk.
	err = s.CreateRequest(ctx, store.Request{
		ID:        "2f1b7c44-6f1c-4c7e-9a55-2f0d8e1b3b1d",
		Owner:     "anon-hx4k",
		Kind:      acds.KindProcess,
		Input:     []byte(`{"outputFormat":"fhir_r4","data":{"resourceType":"Bundle"}}`),
		CreatedAt: now,
	})
	if err != nil {
		log.Fatal(err)
	}

	// A worker leases it; it heartbeats while it works and completes it.
	r, err := s.Claim(ctx, store.ClaimOptions{
		Worker: "replica-a/worker-1", Lease: 30 * time.Second, MaxAttempts: 3,
		Exhausted: []byte(`{"type":"urn:acds:problem:internal","detail":"3 attempts failed"}`),
		Now:       now,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("claimed", r.ID, "attempt", r.Attempts)
	if err := s.Heartbeat(ctx, r.ID, "replica-a/worker-1", now.Add(40*time.Second)); err != nil {
		log.Fatal(err)
	}
	if err := s.Complete(ctx, r.ID, "replica-a/worker-1", []byte(`{"outputFormat":"fhir_r4"}`), now.Add(10*time.Second)); err != nil {
		log.Fatal(err)
	}

	got, err := s.GetRequest(ctx, "anon-hx4k", r.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Status, string(got.Result), got.CompletedAt.Sub(got.CreatedAt))

	// Another pseudonym cannot see it.
	_, err = s.GetRequest(ctx, "anon-other", r.ID)
	fmt.Println(err)
	// Output:
	// claimed 2f1b7c44-6f1c-4c7e-9a55-2f0d8e1b3b1d attempt 1
	// completed {"outputFormat":"fhir_r4"} 10s
	// store: not found
}

package main

import (
	"context"
	"encoding/json"
	"github.com/acds-project/acds/internal/testrig/pgtest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
)

// TestServePostgres runs two `acds serve` replicas on one PostgreSQL
// (--store postgres://…): a request accepted by one is readable and
// completed through the other. Skipped without ACDS_TEST_POSTGRES.
func TestServePostgres(t *testing.T) {
	if v := os.Getenv(pgtest.Env); v != "" && !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
		t.Skip("ACDS_TEST_POSTGRES is not a postgres:// URL, which --store needs")
	}
	dsn := pgtest.DSN(t) // a schema of its own
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// One acds serve per data directory (DESIGN §7; the second would be
	// refused): each replica has its own, and they share only the store.
	baseA, logsA, stopA := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--store", dsn)
	baseB, _, stopB := startServe(t, "--addr", "127.0.0.1:0", "--data-dir", t.TempDir(), "--store", dsn)
	a, _ := client.New(baseA, nil)
	sess, err := a.Anon(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	a = a.WithToken(sess.Token)
	b, _ := client.New(baseB, &client.Options{Token: sess.Token, PollInterval: 50 * time.Millisecond})
	in := json.RawMessage(`{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Patient","id":"p1"}}]}`)
	acc, err := a.Process(ctx, acds.ProcessRequest{Data: in, OutputFormat: acds.OutputFHIRR4})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := b.Wait(ctx, acc.RequestID)
	if err != nil || rec.Status != acds.StatusCompleted {
		t.Fatalf("through replica B: %+v %v", rec, err)
	}
	if strings.Contains(logsA.String(), dsn) {
		t.Errorf("the logs contain the store DSN")
	}
	if stopA() != 0 || stopB() != 0 {
		t.Fatal("a replica did not stop cleanly")
	}
}

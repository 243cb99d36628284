package service_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/internal/demo/demoportal/demoportaltest"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/service"
	"github.com/jackc/pgx/v5"
)

// pgSchema is ACDS_TEST_POSTGRES with a fresh schema of its own (dropped
// at the end), so that no other test's requests are in its tables.
func pgSchema(t *testing.T) string {
	t.Helper()
	base := os.Getenv("ACDS_TEST_POSTGRES")
	if base == "" {
		t.Skip("ACDS_TEST_POSTGRES is not set")
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "acds_replicas_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Two replicas on one PostgreSQL, each its own enclave with its own
// sealing key: fetches accepted by either are claimed only by the replica
// that sealed them, so all complete and none ends internal; a fetch whose
// replica is gone is not claimed by the other while its credentials are
// kept (it is freed, and fails as unavailable, once they are erased —
// store.Request.Affinity, tested by the store conformance suite).
func TestReplicasOnePostgres(t *testing.T) {
	dsn := pgSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	demo := demoportaltest.Start(t, demoportal.Options{Patients: 1, Seed: 5})
	req := acds.FetchAndAttestRequest{SystemType: acds.SystemFHIRBasic, PortalURL: "https://localhost:" + demo.Port + "/fhir",
		RecordID: demo.Patients()[0].ID, OutputFormat: acds.OutputFHIRR4,
		Username: demoportal.Username, Password: demoportal.Password}
	opts := func(configure func(*server.Config)) service.Options {
		return service.Options{DataDir: dataDir(t), Store: dsn, PortalCA: demo.CACertPEM(), AllowPrivatePortals: true,
			Server: server.Config{Lease: time.Second}, Configure: configure}
	}
	svc1, c1 := open(t, opts(nil))
	svc2, c2 := open(t, opts(nil))
	if string(svc1.Enclave().SealingKeyID()) == string(svc2.Enclave().SealingKeyID()) {
		t.Fatal("the replicas share a sealing key: the test proves nothing")
	}
	c1, token := session(t, ctx, c1)
	c2 = c2.WithToken(token) // one store: the session is valid on both
	clients := []*client.Client{c1, c2}
	var ids []string
	for i := range 6 {
		acc, err := clients[i%2].FetchAndAttest(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, acc.RequestID)
	}
	for i, id := range ids {
		_, _ = c1.Wait(ctx, id)
		rec, err := c1.Request(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != acds.StatusCompleted {
			t.Errorf("fetch %d (accepted by replica %d): %s %+v", i, i%2+1, rec.Status, rec.Error)
		}
	}

	// Replica 3 accepts a fetch and stops before fetching it; replica 1,
	// alive, must leave it alone.
	bf := blockingFetcher{started: make(chan struct{}, 1)}
	svc3, c3 := open(t, opts(func(c *server.Config) { bf.Fetcher = c.Fetcher; c.Fetcher = bf }))
	acc, err := c3.WithToken(token).FetchAndAttest(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	<-bf.started
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_ = svc3.Close(short)
	time.Sleep(3 * time.Second) // three leases
	rec, err := c1.Request(ctx, acc.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != acds.StatusProcessing {
		t.Fatalf("another replica took a fetch sealed by a replica that is gone: %s %+v", rec.Status, rec.Error)
	}
}

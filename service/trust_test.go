package service_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/client"
	"github.com/acds-project/acds/internal/testrig/pgtest"
	"github.com/acds-project/acds/service"
)

// verifyAt verifies the bundle of rec through POST /v1/verify of c.
func verifyAt(t *testing.T, ctx context.Context, c *client.Client, rec *acds.Request) *acds.VerifyResponse {
	t.Helper()
	v, err := c.Verify(ctx, acds.VerifyRequest{AttestationBundle: rec.Result.AttestationBundle, Output: rec.Result.Output})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func hasReason(v *acds.VerifyResponse, sub string) bool {
	return slices.ContainsFunc(v.Details.Reasons, func(r string) bool { return strings.Contains(r, sub) })
}

// Two replicas on one PostgreSQL store, each with its own data directory
// (its own simulated root), verify each other's bundles as valid through
// POST /v1/verify, saying that the trust rests on the store; a third
// installation with a store of its own is trusted by neither, nor they by
// it. GET /v1/attestation shows the policy: both roots, two replicas.
func TestReplicasVerifyEachOther(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, c1 := open(t, optionsWith(t, dsn))
	// Replica 2 registers after replica 1 read the anchors: replica 1
	// learns of it on the first bundle it cannot verify, once the
	// anchors it read are older than service.MissRefresh.
	_, c2 := open(t, optionsWith(t, dsn))
	time.Sleep(service.MissRefresh)
	_, c3 := open(t, optionsWith(t, "")) // SQLite in its own data directory
	c1, token := session(t, ctx, c1)
	c2 = c2.WithToken(token)
	c3, _ = session(t, ctx, c3)

	rec1 := process(t, ctx, c1, acds.OutputFHIRR4)
	rec2 := process(t, ctx, c2, acds.OutputFHIRR4)
	rec3 := process(t, ctx, c3, acds.OutputFHIRR4)

	for _, tc := range []struct {
		name     string
		at       *client.Client
		rec      *acds.Request
		valid    bool
		viaStore bool
	}{
		{"replica 1's bundle at replica 1", c1, rec1, true, false},
		{"replica 2's bundle at replica 1", c1, rec2, true, true},
		{"replica 1's bundle at replica 2", c2, rec1, true, true},
		{"replica 2's bundle at replica 2", c2, rec2, true, false},
		{"the third installation's bundle at replica 1", c1, rec3, false, false},
		{"the third installation's bundle at replica 2", c2, rec3, false, false},
		{"replica 1's bundle at the third installation", c3, rec1, false, false},
		{"the third installation's bundle at itself", c3, rec3, true, false},
	} {
		v := verifyAt(t, ctx, tc.at, tc.rec)
		if v.Valid != tc.valid {
			t.Errorf("%s: valid %v, want %v; reasons %q", tc.name, v.Valid, tc.valid, v.Details.Reasons)
		}
		if got := hasReason(v, "shared store"); got != tc.viaStore {
			t.Errorf("%s: reason naming the store %v, want %v; reasons %q", tc.name, got, tc.viaStore, v.Details.Reasons)
		}
		if tc.valid && !hasReason(v, "simulated") {
			t.Errorf("%s: valid without saying it is simulated: %q", tc.name, v.Details.Reasons)
		}
	}

	a1, err := c1.Attestation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := c2.Attestation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := a1.VerifyPolicy
	if p == nil || p.Replicas != 2 || len(p.SimulatedRoots) != 2 || len(p.NotaryKeys) != 2 {
		t.Fatalf("replica 1's verify policy: %+v", p)
	}
	if !slices.Equal(p.SimulatedRoots, a2.VerifyPolicy.SimulatedRoots) {
		t.Errorf("the replicas trust different roots: %q and %q", p.SimulatedRoots, a2.VerifyPolicy.SimulatedRoots)
	}
	if !slices.Contains(p.Measurements[a1.Profile], a1.Measurement) {
		t.Errorf("replica 1's policy %v lacks its own measurement %s", p.Measurements, a1.Measurement)
	}
	if !slices.ContainsFunc(p.Relaxations, func(r string) bool { return strings.Contains(r, "whoever can write the database") }) {
		t.Errorf("relaxations %q do not say the store is trusted", p.Relaxations)
	}
}

// A single replica on SQLite registers itself and verifies its own
// bundles; its policy names its own root only.
func TestSingleReplicaVerifyPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, c := open(t, optionsWith(t, ""))
	c, _ = session(t, ctx, c)
	rec := process(t, ctx, c, acds.OutputFHIRR4)
	v := verifyAt(t, ctx, c, rec)
	if !v.Valid || hasReason(v, "shared store") {
		t.Fatalf("own bundle: valid %v, reasons %q", v.Valid, v.Details.Reasons)
	}
	a, err := c.Attestation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := a.VerifyPolicy; p == nil || p.Replicas != 1 || len(p.SimulatedRoots) != 1 || len(p.NotaryKeys) != 1 {
		t.Fatalf("verify policy: %+v", a.VerifyPolicy)
	}
}

// optionsWith is the options of a fresh installation on store (see
// service.Options.Store).
func optionsWith(t *testing.T, store string) service.Options {
	return service.Options{DataDir: dataDir(t), Store: store}
}

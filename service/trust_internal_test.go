package service

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/server/servertest"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/verify"
)

// simAnchor is the trust anchor and own policy of a fresh simulated
// installation.
func simAnchor(t *testing.T) (trustAnchor, verify.Policy) {
	t.Helper()
	b, err := sim.NewBackend(t.TempDir(), sim.Options{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	notary := make(ed25519.PublicKey, ed25519.PublicKeySize)
	a, err := ownAnchor(e.BootEvidence(), e.Measurement(), []ed25519.PublicKey{notary})
	if err != nil {
		t.Fatal(err)
	}
	p, err := verify.TrustEnclave(verify.Policy{NotaryKeys: []ed25519.PublicKey{notary}}, e.BootEvidence(), e.Measurement())
	if err != nil {
		t.Fatal(err)
	}
	return a, p
}

// Anchors that do not decode, or name a measurement of the wrong size or
// a root that is not a certificate, are skipped: they neither break the
// policy nor add to it; the valid ones are trusted, each root once.
func TestTrustAnchorsSkipMalformed(t *testing.T) {
	ctx := context.Background()
	mine, own := simAnchor(t)
	other, _ := simAnchor(t)
	st := servertest.NewMemStore()
	sv, err := newSharedVerifier(own, st, "replica:mine", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.register(ctx, mine); err != nil {
		t.Fatal(err)
	}
	put := func(replica string, v any) {
		b, ok := v.([]byte)
		if !ok {
			b, _ = json.Marshal(v)
		}
		if err := st.PutTrustAnchor(ctx, store.TrustAnchor{Replica: replica, Anchor: b}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	put("replica:other", other)
	put("replica:junk", []byte("not json"))
	short := other
	short.Measurement = short.Measurement[:10]
	put("replica:short", short)
	badRoot := other
	badRoot.SimulatedRoot = []byte("not a certificate")
	put("replica:badroot", badRoot)
	unknown := other
	unknown.Profile = "sgx"
	put("replica:unknown", unknown)
	if err := sv.load(ctx); err != nil {
		t.Fatal(err)
	}
	p := sv.verifyPolicy()
	if p.Replicas != 2 || len(p.SimulatedRoots) != 2 || len(p.NotaryKeys) != 1 {
		t.Fatalf("policy after malformed anchors: %+v", p)
	}
	if len(p.Measurements[attestation.ProfileSEVSNPSim]) != 1 {
		t.Errorf("the same measurement listed more than once: %v", p.Measurements)
	}
}

// A store without a registry leaves the replica trusting only itself;
// one that fails to answer keeps the anchors read before.
func TestTrustAnchorsWithoutRegistry(t *testing.T) {
	ctx := context.Background()
	mine, own := simAnchor(t)
	sv, err := newSharedVerifier(own, nil, "replica:mine", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.register(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if p := sv.verifyPolicy(); p.Replicas != 0 || len(p.SimulatedRoots) != 1 {
		t.Fatalf("policy without a registry: %+v", p)
	}

	st := servertest.NewMemStore()
	sv, err = newSharedVerifier(own, st, "replica:mine", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.register(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	sv.reload(ctx, 0)
	if p := sv.verifyPolicy(); p.Replicas != 1 || len(p.SimulatedRoots) != 1 {
		t.Fatalf("policy after the store failed: %+v", p)
	}
}

package service

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/tpm"
	"github.com/acds-project/acds/server"
	"github.com/acds-project/acds/store"
	"github.com/acds-project/acds/verify"
)

// Replicas sharing a store verify each other's bundles: at Open each
// registers in the store (store.TrustRegistry) the public part of what
// its own verifier trusts — its measurement, its simulated root (the
// installation's ARK) or its TPM attestation key, and its notary keys —
// and POST /v1/verify trusts the union of what the store holds, read at
// Open, every trustRefresh, and again on a bundle the known anchors do
// not verify (at most once per missRefresh). A bundle this replica's own
// policy verifies is answered from it alone; one that only another
// replica's anchor verifies carries storeTrustReason in its reasons, so
// that the result says what it rests on: whoever can write the database
// can add a trusted enclave.

const (
	// trustRefresh is how often the anchors are read again.
	trustRefresh = time.Minute
	// missRefresh is the least time between two reads caused by bundles
	// the known anchors did not verify.
	missRefresh = 2 * time.Second
	// trustTimeout bounds one registry call.
	trustTimeout = 5 * time.Second
)

// storeTrustReason is added to the reasons of a bundle valid only through
// an anchor of the store (another replica's).
const storeTrustReason = "trusted through another replica's trust anchor in the shared store (replicas of this deployment): whoever can write the database can add a trusted enclave"

// storeTrustRelaxation is the relaxation GET /v1/attestation lists for a
// policy that includes the store's anchors.
const storeTrustRelaxation = "trusts the trust anchors of the replicas sharing this server's store: whoever can write the database can add a trusted enclave"

// simulationRelaxation is listed for a policy that accepts simulation.
const simulationRelaxation = "simulated SEV-SNP accepted (UnsafeAllowSimulation) for the pinned simulated roots: proves the code path, not hardware"

// trustAnchor is the JSON of a replica's store.TrustAnchor: public
// material only.
type trustAnchor struct {
	Profile     string `json:"profile"`
	Measurement []byte `json:"measurement"`
	// SimulatedRoot is the DER of the simulated ARK (sev-snp-sim).
	SimulatedRoot []byte `json:"simulatedRoot,omitempty"`
	// TPMAK is the PKIX DER of the TPM attestation key (tpm).
	TPMAK []byte `json:"tpmAk,omitempty"`
	// NotaryKeys are the Ed25519 notary keys the replica trusts for its
	// own outputs (its in-process notary's, or the external one's).
	NotaryKeys [][]byte `json:"notaryKeys,omitempty"`
}

// ownAnchor is the anchor of the enclave whose boot evidence is given.
func ownAnchor(boot attestation.BootEvidence, measurement []byte, notaryKeys []ed25519.PublicKey) (trustAnchor, error) {
	a := trustAnchor{Profile: boot.Profile, Measurement: bytes.Clone(measurement)}
	for _, k := range notaryKeys {
		a.NotaryKeys = append(a.NotaryKeys, bytes.Clone(k))
	}
	switch boot.Profile {
	case attestation.ProfileSEVSNPSim:
		ev, err := sevsnp.ParseEvidence(boot.Evidence)
		if err != nil {
			return a, fmt.Errorf("simulated root: %w", err)
		}
		a.SimulatedRoot = bytes.Clone(ev.ARK)
	case attestation.ProfileTPM:
		ak, _, err := tpm.ParseAK(boot.Evidence)
		if err != nil {
			return a, fmt.Errorf("tpm: %w", err)
		}
		if a.TPMAK, err = x509.MarshalPKIXPublicKey(ak); err != nil {
			return a, fmt.Errorf("tpm: %w", err)
		}
	}
	return a, nil
}

// addTo returns p extended to trust a. It refuses an anchor that is
// malformed (another build's, or written by hand).
func (a trustAnchor) addTo(p verify.Policy) (verify.Policy, error) {
	if !slices.Contains(attestation.Profiles(), a.Profile) {
		return p, fmt.Errorf("unknown profile %q", a.Profile)
	}
	if n := attestation.MeasurementSize(a.Profile); len(a.Measurement) != n {
		return p, fmt.Errorf("measurement of %d bytes, want %d for %s", len(a.Measurement), n, a.Profile)
	}
	ms := make(map[string][][]byte, len(p.Measurements)+1)
	for k, v := range p.Measurements {
		ms[k] = slices.Clone(v)
	}
	if !slices.ContainsFunc(ms[a.Profile], func(m []byte) bool { return bytes.Equal(m, a.Measurement) }) {
		ms[a.Profile] = append(ms[a.Profile], bytes.Clone(a.Measurement))
	}
	p.Measurements = ms
	for _, k := range a.NotaryKeys {
		if len(k) != ed25519.PublicKeySize {
			return p, fmt.Errorf("notary key of %d bytes", len(k))
		}
		if !slices.ContainsFunc(p.NotaryKeys, func(have ed25519.PublicKey) bool { return have.Equal(ed25519.PublicKey(k)) }) {
			p.NotaryKeys = append(slices.Clone(p.NotaryKeys), ed25519.PublicKey(bytes.Clone(k)))
		}
	}
	switch a.Profile {
	case attestation.ProfileSEVSNPSim:
		root, err := x509.ParseCertificate(a.SimulatedRoot)
		if err != nil {
			return p, fmt.Errorf("simulated root: %w", err)
		}
		p.UnsafeAllowSimulation = true
		if !slices.ContainsFunc(p.SimulatedRoots, root.Equal) {
			p.SimulatedRoots = append(slices.Clone(p.SimulatedRoots), root)
		}
	case attestation.ProfileTPM:
		ak, err := x509.ParsePKIXPublicKey(a.TPMAK)
		if err != nil {
			return p, fmt.Errorf("tpm attestation key: %w", err)
		}
		p.TPMTrustedAKs = append(slices.Clone(p.TPMTrustedAKs), ak)
	}
	return p, nil
}

// sharedVerifier is the Verifier of POST /v1/verify for a replica: its
// own policy first, then the union of the store's anchors.
type sharedVerifier struct {
	own     server.Verifier
	base    verify.Policy // the own policy, which every union extends
	reg     store.TrustRegistry
	replica string
	log     *slog.Logger

	refresh sync.Mutex // one read of the registry at a time

	ownV *verify.Verifier // own's verifier, for the report page

	mu      sync.Mutex
	union   server.Verifier  // nil until read, or when the store has none
	unionV  *verify.Verifier // union's verifier
	policy  acds.VerifyPolicy
	fetched time.Time // when the anchors were last read (successfully or not)
}

// newSharedVerifier returns the verifier for a replica whose own policy
// is own; reg nil (a store without a registry) trusts only own.
func newSharedVerifier(own verify.Policy, reg store.TrustRegistry, replica string, log *slog.Logger) (*sharedVerifier, error) {
	v, err := verify.New(own)
	if err != nil {
		return nil, err
	}
	s := &sharedVerifier{own: server.Verify(v), ownV: v, base: own, reg: reg, replica: replica, log: log}
	s.policy = describePolicy(own, 0)
	return s, nil
}

// register stores this replica's anchor, then reads every anchor.
func (s *sharedVerifier) register(ctx context.Context, a trustAnchor) error {
	if s.reg == nil {
		return nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(ctx, trustTimeout)
	defer cancel()
	if err := s.reg.PutTrustAnchor(c, store.TrustAnchor{Replica: s.replica, Anchor: b}, time.Now()); err != nil {
		return fmt.Errorf("register the trust anchor: %w", err)
	}
	return s.load(ctx)
}

// load reads the anchors and builds the union verifier. A malformed
// anchor is skipped and logged; a store that cannot be read keeps the
// last union.
func (s *sharedVerifier) load(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, trustTimeout)
	defer cancel()
	as, err := s.reg.TrustAnchors(c)
	s.mu.Lock()
	s.fetched = time.Now()
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("read the trust anchors: %w", err)
	}
	p, n := s.base, 0
	for _, sa := range as {
		var a trustAnchor
		if err := json.Unmarshal(sa.Anchor, &a); err != nil {
			s.log.Warn("skipping a malformed trust anchor in the store", "replica", sa.Replica, "err", err)
			continue
		}
		q, err := a.addTo(p)
		if err != nil {
			s.log.Warn("skipping a malformed trust anchor in the store", "replica", sa.Replica, "err", err)
			continue
		}
		p, n = q, n+1
	}
	v, err := verify.New(p)
	if err != nil {
		return fmt.Errorf("the trust anchors make no valid policy: %w", err)
	}
	d := describePolicy(p, n)
	s.mu.Lock()
	changed := d.Replicas != s.policy.Replicas || !slices.Equal(d.SimulatedRoots, s.policy.SimulatedRoots) ||
		!slices.Equal(d.TPMAttestationKeys, s.policy.TPMAttestationKeys) || !slices.Equal(d.NotaryKeys, s.policy.NotaryKeys) ||
		!maps.EqualFunc(d.Measurements, s.policy.Measurements, slices.Equal[[]string])
	s.union, s.unionV, s.policy = server.Verify(v), v, d
	s.mu.Unlock()
	if changed {
		s.log.Info("POST /v1/verify trusts the replicas registered in the store", "replicas", d.Replicas,
			"simulatedRoots", d.SimulatedRoots, "tpmAttestationKeys", d.TPMAttestationKeys, "notaryKeys", d.NotaryKeys)
	}
	return nil
}

// reload reads the anchors again unless they were read less than after
// ago (by this call or a concurrent one).
func (s *sharedVerifier) reload(ctx context.Context, after time.Duration) {
	if s.reg == nil {
		return
	}
	s.refresh.Lock()
	defer s.refresh.Unlock()
	s.mu.Lock()
	fresh := time.Since(s.fetched) < after
	s.mu.Unlock()
	if fresh {
		return
	}
	if err := s.load(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("trust anchors not refreshed; keeping the last ones", "err", err)
	}
}

// run refreshes the anchors every trustRefresh until ctx ends.
func (s *sharedVerifier) run(ctx context.Context) {
	if s.reg == nil {
		return
	}
	t := time.NewTicker(trustRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.reload(ctx, trustRefresh/2)
		}
	}
}

// Verify implements server.Verifier: valid under this replica's own
// policy, or else under the union of the store's anchors (read again on
// a miss), with storeTrustReason.
func (s *sharedVerifier) Verify(ctx context.Context, bundle, output []byte) (*acds.VerifyResponse, error) {
	return s.decide(ctx, func(v server.Verifier) (*acds.VerifyResponse, error) { return v.Verify(ctx, bundle, output) })
}

// VerifyDisclosure implements server.DisclosureVerifier the way Verify
// decides: this replica's own policy, else the store's anchors.
func (s *sharedVerifier) VerifyDisclosure(ctx context.Context, data []byte) (*acds.VerifyResponse, error) {
	return s.decide(ctx, func(v server.Verifier) (*acds.VerifyResponse, error) {
		dv, ok := v.(server.DisclosureVerifier)
		if !ok {
			return nil, errors.New("service: the verifier does not check disclosures")
		}
		return dv.VerifyDisclosure(ctx, data)
	})
}

// PageVerifiers implements server.PageVerifiers: the report page decides
// as Verify does, with this replica's own policy, then the store's.
func (s *sharedVerifier) PageVerifiers(ctx context.Context) []*verify.Verifier {
	s.mu.Lock()
	u := s.unionV
	s.mu.Unlock()
	if u == nil {
		return []*verify.Verifier{s.ownV}
	}
	return []*verify.Verifier{s.ownV, u}
}

// decide runs check with this replica's own verifier, then, when that is
// not valid, with the union of the store's anchors (read again on a
// miss), adding storeTrustReason to a result valid only there.
func (s *sharedVerifier) decide(ctx context.Context, check func(server.Verifier) (*acds.VerifyResponse, error)) (*acds.VerifyResponse, error) {
	r, err := check(s.own)
	if err != nil || r.Valid || s.reg == nil {
		return r, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		if attempt == 1 {
			s.reload(ctx, missRefresh)
		}
		s.mu.Lock()
		u := s.union
		s.mu.Unlock()
		if u == nil {
			continue
		}
		ur, err := check(u)
		if err != nil {
			return nil, err
		}
		if ur.Valid {
			ur.Details.Reasons = append(ur.Details.Reasons, storeTrustReason)
			return ur, nil
		}
	}
	return r, nil
}

func (s *sharedVerifier) verifyPolicy() *acds.VerifyPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.policy
	p.Measurements = make(map[string][]string, len(s.policy.Measurements))
	for k, v := range s.policy.Measurements {
		p.Measurements[k] = slices.Clone(v)
	}
	p.SimulatedRoots = slices.Clone(p.SimulatedRoots)
	p.TPMAttestationKeys = slices.Clone(p.TPMAttestationKeys)
	p.NotaryKeys = slices.Clone(p.NotaryKeys)
	p.Relaxations = slices.Clone(p.Relaxations)
	return &p
}

// describePolicy is p as GET /v1/attestation shows it; replicas is the
// number of store anchors it includes.
func describePolicy(p verify.Policy, replicas int) acds.VerifyPolicy {
	fp := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	d := acds.VerifyPolicy{Measurements: map[string][]string{}, Replicas: replicas, Relaxations: []string{}}
	for prof, ms := range p.Measurements {
		for _, m := range ms {
			d.Measurements[prof] = append(d.Measurements[prof], hex.EncodeToString(m))
		}
	}
	for _, r := range p.SimulatedRoots {
		d.SimulatedRoots = append(d.SimulatedRoots, fp(r.Raw))
	}
	for _, k := range p.TPMTrustedAKs {
		if der, err := x509.MarshalPKIXPublicKey(k); err == nil {
			d.TPMAttestationKeys = append(d.TPMAttestationKeys, fp(der))
		}
	}
	for _, k := range p.NotaryKeys {
		d.NotaryKeys = append(d.NotaryKeys, fp(k))
	}
	sort.Strings(d.SimulatedRoots)
	sort.Strings(d.TPMAttestationKeys)
	sort.Strings(d.NotaryKeys)
	if p.UnsafeAllowSimulation {
		d.Relaxations = append(d.Relaxations, simulationRelaxation)
	}
	if replicas > 0 {
		d.Relaxations = append(d.Relaxations, storeTrustRelaxation)
	}
	return d
}

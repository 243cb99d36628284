package verify_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/manifest"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/verify"
)

func TestRawBundleValid(t *testing.T) {
	f := getFixture(t)
	out := []byte(`{"resourceType":"Bundle"}`)
	b := f.rawBundle(t, out)
	res, err := mustNew(t, f.policy()).VerifyOutput(b, out)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || !res.TEEQuoteVerified || !res.EnclaveHashMatch || res.MPCTLSVerified || !res.OutputChecked {
		t.Fatalf("raw bundle: %+v reasons %v", res, res.Reasons())
	}
	if !res.CertificatesValidNow || !bytes.Equal(res.Measurement, simMeasurement) || res.Claims.RequestID != "req-raw-1" {
		t.Fatalf("details: %+v", res)
	}
	if len(res.Relaxations) != 2 {
		t.Fatalf("relaxations (simulation, carried root) not reported: %v", res.Relaxations)
	}
	resp := res.Response()
	if !resp.Valid || resp.Details.Source != "raw" || resp.Details.Profile != "sev-snp-sim" || resp.Details.PortalHost != "" || len(resp.Details.Reasons) != 2 {
		t.Fatalf("response: %+v", resp)
	}
	// Another output is refused.
	res, _ = mustNew(t, f.policy()).VerifyOutput(b, []byte("other"))
	if res.Valid || !errors.Is(res.Err(), verify.ErrOutputDigest) {
		t.Fatalf("other output: %v", res.Err())
	}
}

func TestSimulationRefusedByDefault(t *testing.T) {
	f := getFixture(t)
	b := f.rawBundle(t, []byte("x"))
	p := f.policy()
	p.UnsafeAllowSimulation, p.UnsafeTrustBundleSimulatedRoot = false, false
	res, err := mustNew(t, p).Verify(b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Valid || res.TEEQuoteVerified || res.EnclaveHashMatch || !errors.Is(res.Err(), verify.ErrSimulation) {
		t.Fatalf("simulation accepted without UnsafeAllowSimulation: %+v", res)
	}
	// The zero policy is refused before any bundle is seen.
	var pe *verify.PolicyError
	if _, err := verify.New(verify.Policy{}); !errors.As(err, &pe) || pe.Field != "Measurements" || !errors.Is(err, verify.ErrPolicy) {
		t.Fatalf("zero policy: %v", err)
	}
}

func TestPinnedSimulatedRoot(t *testing.T) {
	f := getFixture(t)
	b := f.rawBundle(t, []byte("x"))
	p, err := verify.TrustEnclave(verify.Policy{Now: f.policy().Now}, f.enclave.BootEvidence(), f.enclave.Measurement())
	if err != nil {
		t.Fatal(err)
	}
	res, _ := mustNew(t, p).Verify(b)
	if !res.Valid || len(res.Relaxations) != 1 {
		t.Fatalf("own root pinned: %v %v", res.Err(), res.Relaxations)
	}
	// A policy that already trusts every carried root stays as it is
	// (pinning as well would contradict it).
	carried, err := verify.TrustEnclave(f.policy(), f.enclave.BootEvidence(), f.enclave.Measurement())
	if err != nil || len(carried.SimulatedRoots) != 0 {
		t.Fatalf("TrustEnclave on a carried-root policy: %v %v", carried.SimulatedRoots, err)
	}
	if res, _ := mustNew(t, carried).Verify(b); !res.Valid {
		t.Fatal(res.Err())
	}
	// Pinned to some other root: the carried one is refused.
	other := selfSigned(t)
	p.SimulatedRoots = []*x509.Certificate{other}
	res, _ = mustNew(t, p).Verify(b)
	if res.Valid || res.TEEQuoteVerified || !errors.Is(res.Err(), sevsnp.ErrChain) {
		t.Fatalf("foreign pin: %v", res.Err())
	}
}

func selfSigned(t *testing.T) *x509.Certificate {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: bigOne(), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func TestMPCTLSBundle(t *testing.T) {
	f := getFixture(t)
	out := []byte("deidentified output")
	b := f.mpcBundle(t, out)
	res, err := mustNew(t, f.policy()).VerifyOutput(b, out)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || !res.MPCTLSVerified || res.Response().Details.PortalHost != "portal.example.org" {
		t.Fatalf("mpc-tls bundle: %v", res.Err())
	}
	// Untrusted notary.
	p := f.policy()
	p.NotaryKeys = nil
	res, _ = mustNew(t, p).Verify(b)
	if res.Valid || res.MPCTLSVerified || !res.TEEQuoteVerified || !errors.Is(res.Err(), verify.ErrNotary) {
		t.Fatalf("untrusted notary: %v", res.Err())
	}
	// ... unless the development relaxation trusts the key the claims name.
	p.UnsafeTrustClaimedNotaryKey = true
	res, _ = mustNew(t, p).Verify(b)
	if !res.Valid || len(res.Relaxations) != 3 {
		t.Fatalf("claimed notary key: %v %v", res.Err(), res.Relaxations)
	}
	// A session for another host.
	other := f.mpcBundle(t, out, f.statement(t, "evil.example.net", f.now.Add(-5*time.Second)))
	res, _ = mustNew(t, f.policy()).Verify(other)
	if res.Valid || res.MPCTLSVerified || !errors.Is(res.Err(), verify.ErrNotary) {
		t.Fatalf("other host: %v", res.Err())
	}
	// A session that ended long before the claims were issued.
	stale := f.mpcBundle(t, out, f.statement(t, "portal.example.org", f.now.Add(-3*time.Hour)))
	res, _ = mustNew(t, f.policy()).Verify(stale)
	if res.Valid || res.MPCTLSVerified {
		t.Fatalf("stale session accepted")
	}
	// A session after the claims were issued.
	future := f.mpcBundle(t, out, f.statement(t, "portal.example.org", f.now.Add(time.Hour)))
	res, _ = mustNew(t, f.policy()).Verify(future)
	if res.Valid || res.MPCTLSVerified {
		t.Fatalf("session after issue accepted")
	}
}

func TestMaxAgeAndManifest(t *testing.T) {
	f := getFixture(t)
	b := f.rawBundle(t, []byte("x"))
	p := f.policy()
	p.MaxAge = 30 * time.Second
	res, _ := mustNew(t, p).Verify(b)
	if res.Valid || !errors.Is(res.Err(), verify.ErrTime) || !res.TEEQuoteVerified {
		t.Fatalf("max age: %v", res.Err())
	}
	// Reference values from a manifest instead of the policy.
	p = f.policy()
	p.Measurements = nil
	p.Manifest = &manifest.Manifest{
		Issuer: "test", NotBefore: f.now.Add(-time.Hour), NotAfter: f.now.Add(time.Hour),
		Profiles: map[string]manifest.Profile{attestation.ProfileSEVSNPSim: {Measurements: [][]byte{simMeasurement}}},
	}
	res, _ = mustNew(t, p).Verify(b)
	if !res.Valid {
		t.Fatalf("manifest: %v", res.Err())
	}
	// A manifest minimum TCB above the simulated chip's.
	p.Manifest.Profiles[attestation.ProfileSEVSNPSim] = manifest.Profile{Measurements: [][]byte{simMeasurement}, MinimumTCB: &manifest.TCB{SNP: 127}}
	res, _ = mustNew(t, p).Verify(b)
	if res.Valid || res.TEEQuoteVerified || !errors.Is(res.Err(), sevsnp.ErrPolicy) {
		t.Fatalf("minimum TCB: %v", res.Err())
	}
	// An expired manifest.
	p.Manifest = &manifest.Manifest{Issuer: "test", NotBefore: f.now.Add(-2 * time.Hour), NotAfter: f.now.Add(-time.Hour),
		Profiles: map[string]manifest.Profile{attestation.ProfileSEVSNPSim: {Measurements: [][]byte{simMeasurement}}}}
	res, _ = mustNew(t, p).Verify(b)
	if res.Valid || !errors.Is(res.Err(), verify.ErrManifest) {
		t.Fatalf("expired manifest: %v", res.Err())
	}
	// Not-yet-valid certificates at issue time are reported; validity "now"
	// is reported separately.
	p = f.policy()
	p.Now = func() time.Time { return f.now.AddDate(30, 0, 0) }
	res, _ = mustNew(t, p).Verify(b)
	if !res.Valid || res.CertificatesValidNow {
		t.Fatalf("chain checked at issue time, reported expired now: valid=%v now=%v %v", res.Valid, res.CertificatesValidNow, res.Err())
	}
	if rs := res.Response().Details.Reasons; rs[len(rs)-1] != verify.NoteCertificatesExpired {
		t.Fatalf("expired-now note missing: %v", rs)
	}
}

func TestVerifyBoot(t *testing.T) {
	f := getFixture(t)
	res, err := mustNew(t, f.policy()).VerifyBoot(f.enclave.MarshalBootEvidence())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid || res.Boot == nil {
		t.Fatalf("boot evidence: %v", res.Err())
	}
	if _, err := mustNew(t, f.policy()).VerifyBoot([]byte("junk")); !errors.Is(err, attestation.ErrMalformed) {
		t.Fatalf("junk boot evidence: %v", err)
	}
}

func TestBundleSizes(t *testing.T) {
	f := getFixture(t)
	b := f.rawBundle(t, []byte("x"))
	t.Logf("sev-snp-sim bundle (carries ARK+ASK+VCEK): %d bytes", len(b))
	// A hardware bundle carries the report and VCEK only: build one with the
	// real Milan evidence and this enclave's keys and statement.
	parsed, err := attestation.ParseBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	ev := milanEvidence(t)
	raw, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	parsed.Boot.Profile = attestation.ProfileSEVSNP
	parsed.Boot.Evidence = raw
	hw, err := parsed.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sev-snp bundle without presentation: %d bytes", len(hw))
	if len(hw) > 4096 {
		t.Fatalf("sev-snp bundle is %d bytes, budget 4096", len(hw))
	}
}

package verify_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/mpctls"
	"github.com/acds-project/acds/verify"
)

// fixture is one simulated installation and enclave shared by the tests
// (RSA-4096 key generation for the simulated ARK/ASK is the slow part).
type fixture struct {
	dir       string
	backend   *sim.Backend
	enclave   *attestation.Enclave
	now       time.Time
	notary    ed25519.PrivateKey
	notaryPub ed25519.PublicKey
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

var simMeasurement = func() []byte { s := sha512.Sum384([]byte("acds verify test build")); return s[:] }()

func TestMain(m *testing.M) {
	code := m.Run()
	if fix != nil {
		os.RemoveAll(fix.dir)
	}
	os.Exit(code)
}

func getFixture(t testing.TB) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		f := &fixture{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
		if f.dir, fixErr = os.MkdirTemp("", "acds-verify-test-"); fixErr != nil {
			return
		}
		// The chain is created "now" (real clock): bundles are issued at a
		// pinned time within its validity.
		f.now = time.Now().UTC().Truncate(time.Second)
		if f.backend, fixErr = sim.NewBackend(f.dir, sim.Options{Measurement: simMeasurement, RSABits: 2048}); fixErr != nil {
			return
		}
		clock := func() time.Time { return f.now }
		if f.enclave, fixErr = attestation.New(context.Background(), f.backend, attestation.Options{Now: clock}); fixErr != nil {
			return
		}
		seed := sha256.Sum256([]byte("test notary"))
		f.notary = ed25519.NewKeyFromSeed(seed[:])
		f.notaryPub = f.notary.Public().(ed25519.PublicKey)
		fix = f
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

// policy trusts the fixture's measurement, notary and (simulated) root
// carried by bundles; the clock is a minute after issue.
func (f *fixture) policy() verify.Policy {
	return verify.Policy{
		UnsafeAllowSimulation:          true,
		UnsafeTrustBundleSimulatedRoot: true,
		Measurements:                   map[string][][]byte{attestation.ProfileSEVSNPSim: {simMeasurement}},
		NotaryKeys:                     []ed25519.PublicKey{f.notaryPub},
		Now:                            func() time.Time { return f.now.Add(time.Minute) },
	}
}

func (f *fixture) rawBundle(t testing.TB, output []byte) []byte {
	t.Helper()
	b, err := f.enclave.Attest(context.Background(), attestation.Claims{
		RequestID:    "req-raw-1",
		OutputFormat: "fhir_r4",
		OutputDigest: attestation.Digest(output),
		Source:       attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("input"))},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) statement(t testing.TB, sni string, end time.Time) []byte {
	t.Helper()
	s := &mpctls.Statement{
		SessionID:       [16]byte{1, 2, 3},
		Start:           end.Add(-2 * time.Second),
		End:             end,
		SNI:             sni,
		Address:         "127.0.0.1:443",
		Version:         mpctls.VersionTLS13,
		CipherSuite:     0x1301,
		CertChainDigest: sha256.Sum256([]byte("chain")),
		Root:            sha256.Sum256([]byte("root")),
		ClientRecords:   3, ClientBytes: 600, ServerRecords: 9, ServerBytes: 40000,
	}
	b, err := s.Sign(f.notary)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) mpcBundle(t testing.TB, output []byte, stmts ...[]byte) []byte {
	t.Helper()
	return f.mpcBundleCovered(t, output, nil, stmts...)
}

// mpcBundleCovered is mpcBundle with the coverage cov in its claims.
func (f *fixture) mpcBundleCovered(t testing.TB, output []byte, cov *acds.Coverage, stmts ...[]byte) []byte {
	t.Helper()
	if stmts == nil {
		stmts = [][]byte{f.statement(t, "portal.example.org", f.now.Add(-5*time.Second))}
	}
	var sessions []attestation.Session
	for range stmts {
		sessions = append(sessions, attestation.Session{RequestLine: "GET /fhir/Patient/7/$everything HTTP/1.1", Host: "portal.example.org"})
	}
	b, err := f.enclave.Attest(context.Background(), attestation.Claims{
		RequestID:    "req-mpc-1",
		OutputFormat: "fhir_r4_deidentified",
		OutputDigest: attestation.Digest(output),
		Source:       attestation.Source{Kind: acds.SourceMPCTLS, Sessions: sessions},
		NotaryKey:    f.notaryPub,
		Coverage:     cov,
	}, stmts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

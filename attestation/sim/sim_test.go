package sim_test

import (
	"bytes"
	"context"
	"crypto/sha512"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sevsnp"
	"github.com/acds-project/acds/attestation/sim"
)

var (
	sharedOnce sync.Once
	sharedDir  string
	sharedErr  error
)

// sharedInstall returns one installation directory for the package's tests:
// RSA-4096 key generation is the slow part, so tests share it.
func sharedInstall(t *testing.T) string {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "acds-sim-test-")
		if sharedErr == nil {
			_, sharedErr = sim.NewBackend(sharedDir, sim.Options{Measurement: testMeasurement, RSABits: 2048})
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedDir
}

var testMeasurement = func() []byte { s := sha512.Sum384([]byte("acds test build")); return s[:] }()

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

func TestQuoteVerifiesWithSimulatedRoot(t *testing.T) {
	dir := sharedInstall(t)
	b, err := sim.NewBackend(dir, sim.Options{Measurement: testMeasurement, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	var rd [64]byte
	copy(rd[:], "report data")
	ev, err := b.Quote(context.Background(), rd)
	if err != nil {
		t.Fatal(err)
	}
	v := sevsnp.NewVerifier(sevsnp.Roots{UnsafeTrustEvidenceChain: true})
	res, err := v.Verify(ev, sevsnp.Check{ReportData: &rd, Measurements: [][]byte{testMeasurement}})
	if err != nil {
		t.Fatalf("simulated evidence does not verify: %v", err)
	}
	if !bytes.Equal(res.Measurement, testMeasurement) || res.ProductLine != sim.ProductLine || !res.SimulatedRoot.Equal(b.Root()) {
		t.Fatalf("unexpected result %+v", res)
	}
	// Pinned to this installation's root: accepted. Pinned elsewhere: refused.
	pinned := sevsnp.NewVerifier(sevsnp.Roots{UnsafeTrustEvidenceChain: true, PinnedSimulatedRoots: []*x509.Certificate{b.Root()}})
	if _, err := pinned.Verify(ev, sevsnp.Check{ReportData: &rd}); err != nil {
		t.Fatalf("pinned root: %v", err)
	}
	// Hardware roots (AMD's): the simulated chain is not AMD's.
	hw := sevsnp.NewVerifier(sevsnp.Roots{})
	if _, err := hw.Verify(ev, sevsnp.Check{ReportData: &rd}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("AMD roots accepted the simulated chain: %v", err)
	}
	// Wrong report data.
	var other [64]byte
	if _, err := v.Verify(ev, sevsnp.Check{ReportData: &other}); !errors.Is(err, sevsnp.ErrReportData) {
		t.Fatalf("report data mismatch: %v", err)
	}
	// Wrong measurement.
	if _, err := v.Verify(ev, sevsnp.Check{Measurements: [][]byte{make([]byte, 48)}}); !errors.Is(err, sevsnp.ErrMeasurement) {
		t.Fatalf("measurement mismatch: %v", err)
	}
	// Certificates not yet valid.
	if _, err := v.Verify(ev, sevsnp.Check{Now: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}); !errors.Is(err, sevsnp.ErrChain) {
		t.Fatalf("chain before its validity: %v", err)
	}
}

func TestInstallationFilesAndPermissions(t *testing.T) {
	dir := sharedInstall(t)
	sub := filepath.Join(dir, "enclave-sim")
	fi, err := os.Stat(sub)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("enclave dir mode %v, want 0700", fi.Mode().Perm())
	}
	for _, name := range []string{"vcek.key", "sealing.key"} {
		fi, err := os.Stat(filepath.Join(sub, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	// A second open reuses the installation: same root.
	b1, err := sim.NewBackend(dir, sim.Options{Measurement: testMeasurement, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := sim.NewBackend(dir, sim.Options{Measurement: testMeasurement, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if !b1.Root().Equal(b2.Root()) {
		t.Fatal("reopening the installation made a new root")
	}
	// Loosened permissions are refused rather than used.
	loose := t.TempDir()
	if err := os.CopyFS(filepath.Join(loose, "enclave-sim"), os.DirFS(sub)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(loose, "enclave-sim", "vcek.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(loose, "enclave-sim"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.NewBackend(loose, sim.Options{Measurement: testMeasurement, RSABits: 2048}); err == nil {
		t.Fatal("a world-readable VCEK key was accepted")
	}
}

func TestEnclaveSealOpen(t *testing.T) {
	dir := sharedInstall(t)
	b, err := sim.NewBackend(dir, sim.Options{Measurement: testMeasurement, RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := e.Seal([]byte("portal password"), []byte("request-1"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("portal password")) {
		t.Fatal("sealed data contains the plaintext")
	}
	pt, err := e.Open(sealed, []byte("request-1"))
	if err != nil || string(pt) != "portal password" {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	if _, err := e.Open(sealed, []byte("request-2")); !errors.Is(err, attestation.ErrSealed) {
		t.Fatalf("other associated data: %v", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := e.Open(sealed, []byte("request-1")); !errors.Is(err, attestation.ErrSealed) {
		t.Fatalf("tampered: %v", err)
	}
	// Another enclave of the same installation (a restart) opens it too.
	e2, err := attestation.New(context.Background(), b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := e2.Open(sealed, []byte("request-1")); err != nil {
		t.Fatalf("restart cannot open: %v", err)
	}
}

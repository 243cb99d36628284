package device_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha512"
	"os"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/attestation/tpm/device"
	"github.com/acds-project/acds/verify"
)

// swtpm is the mssim:// address of a running swtpm (ACDS_TEST_SWTPM, e.g.
// mssim://127.0.0.1:2321, set by .ci/steps/42-swtpm.sh); tests that need
// it skip without it.
func swtpm(t testing.TB) string {
	addr := os.Getenv("ACDS_TEST_SWTPM")
	if addr == "" {
		t.Skip("ACDS_TEST_SWTPM is not set")
	}
	return addr
}

// Over swtpm's TCP command port: the backend's bundle verifies with its
// measurement and AK, the sealing key unseals again on a second Open, and
// a wrong AK is refused.
func TestSWTPM(t *testing.T) {
	ctx := context.Background()
	path, dir := swtpm(t), t.TempDir()
	b, err := device.Open(ctx, device.Options{Path: path, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e, err := attestation.New(ctx, b, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	claims := attestation.Claims{RequestID: "r", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest([]byte("o")),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("i"))}}
	bundle, err := e.Attest(ctx, claims, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := verify.New(verify.Policy{TPMTrustedAKs: []crypto.PublicKey{b.AK()}, Measurements: map[string][][]byte{attestation.ProfileTPM: {b.Measurement()}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := v.Verify(bundle); err != nil || !r.Valid {
		t.Fatalf("swtpm bundle: %+v %v", r, err)
	}
	k1, err := b.SealingKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Close() // swtpm serves one connection at a time
	b2, err := device.Open(ctx, device.Options{Path: path, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if k2, err := b2.SealingKey(ctx); err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second open: %v", err)
	}
}

// Start-up (device.Open and attestation.New) and the TPM's unseal over
// swtpm, against the simulated SEV-SNP enclave in the same run.
func BenchmarkSWTPM(b *testing.B) {
	ctx := context.Background()
	path := swtpm(b)
	m := sha512.Sum384([]byte("bench"))
	simDir := b.TempDir()
	b.Run("startup/sev-snp-sim", func(b *testing.B) {
		for b.Loop() {
			be, err := sim.NewBackend(simDir, sim.Options{Measurement: m[:], RSABits: 2048})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := attestation.New(ctx, be, attestation.Options{TLS: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	dir := b.TempDir()
	b.Run("startup/swtpm", func(b *testing.B) {
		for b.Loop() {
			be, err := device.Open(ctx, device.Options{Path: path, StateDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := attestation.New(ctx, be, attestation.Options{TLS: true}); err != nil {
				b.Fatal(err)
			}
			be.Close()
		}
	})
	b.Run("unseal/swtpm", func(b *testing.B) {
		be, err := device.Open(ctx, device.Options{Path: path, StateDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		for b.Loop() {
			if _, err := be.SealingKey(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("quote/swtpm", func(b *testing.B) {
		be, err := device.Open(ctx, device.Options{Path: path, StateDir: dir})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		for b.Loop() {
			if _, err := be.Quote(ctx, [64]byte{1}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

//go:build tpmsim

// Tests against the TPM 2.0 reference simulator bundled with go-tpm-tools
// (cgo, needs libssl-dev): go test -tags tpmsim ./attestation/tpm/device/

package device_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"errors"
	"io"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation"
	"github.com/acds-project/acds/attestation/sim"
	"github.com/acds-project/acds/attestation/tpm/device"
	"github.com/acds-project/acds/verify"
	"github.com/google/go-tpm-tools/simulator"
	"github.com/google/go-tpm/legacy/tpm2"
)

func newSim(t testing.TB) io.ReadWriteCloser {
	t.Helper()
	s, err := simulator.Get()
	if err != nil {
		t.Fatalf("simulator: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func rawClaims() attestation.Claims {
	return attestation.Claims{RequestID: "req-1", OutputFormat: acds.OutputFHIRR4, OutputDigest: attestation.Digest([]byte("out")),
		Source: attestation.Source{Kind: acds.SourceRaw, InputDigest: attestation.Digest([]byte("in"))}}
}

// The TPM path end to end: the backend quotes with the simulator's AK,
// attestation.New starts an enclave on it, and package verify accepts its
// bundles under a policy naming that measurement and pinning that AK, and
// refuses them under another measurement or another AK.
func TestSimulatorThroughVerify(t *testing.T) {
	ctx := context.Background()
	tpm := newSim(t)
	b, err := device.Open(ctx, device.Options{Transport: tpm, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Profile() != attestation.ProfileTPM || len(b.Measurement()) != 32 {
		t.Fatalf("profile %s, measurement %x", b.Profile(), b.Measurement())
	}
	e, err := attestation.New(ctx, b, attestation.Options{TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := e.Attest(ctx, rawClaims(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		name        string
		measurement []byte
		ak          crypto.PublicKey
		valid       bool
	}{
		{"this TPM", b.Measurement(), b.AK(), true},
		{"another measurement", bytes.Repeat([]byte{1}, 32), b.AK(), false},
		{"another AK", b.Measurement(), other.Public(), false},
	} {
		v, err := verify.New(verify.Policy{TPMTrustedAKs: []crypto.PublicKey{tc.ak},
			Measurements: map[string][][]byte{attestation.ProfileTPM: {tc.measurement}}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := v.Verify(bundle)
		if err != nil {
			t.Fatal(err)
		}
		if res.Valid != tc.valid {
			t.Errorf("%s: valid %v, want %v (%+v)", tc.name, res.Valid, tc.valid, res)
		}
	}
}

// The sealing key survives a restart while the PCRs are unchanged, and
// the TPM refuses it once a measured PCR changed (another boot chain).
func TestSealingFollowsPCRs(t *testing.T) {
	ctx := context.Background()
	tpm := newSim(t)
	dir := t.TempDir()
	open := func() *device.Backend {
		t.Helper()
		b, err := device.Open(ctx, device.Options{Transport: tpm, StateDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	b1 := open()
	k1, err := b1.SealingKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e1, err := attestation.New(ctx, b1, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := e1.Seal([]byte("portal password"), []byte("req-1"))
	if err != nil {
		t.Fatal(err)
	}
	b2 := open()
	if k2, err := b2.SealingKey(ctx); err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("restart: %v", err)
	}
	e2, err := attestation.New(ctx, b2, attestation.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := e2.Open(sealed, []byte("req-1")); err != nil || string(pt) != "portal password" {
		t.Fatalf("restart opens: %q %v", pt, err)
	}
	// Another boot chain: PCR 4 (boot loader) measured something else.
	if err := tpm2.PCRExtend(tpm, 4, tpm2.AlgSHA256, bytes.Repeat([]byte{9}, 32), ""); err != nil {
		t.Fatal(err)
	}
	b3 := open()
	if bytes.Equal(b3.Measurement(), b1.Measurement()) {
		t.Fatal("the measurement did not follow PCR 4")
	}
	if _, err := b3.SealingKey(ctx); !errors.Is(err, attestation.ErrSealed) {
		t.Fatalf("unseal after a PCR change: %v", err)
	}
	// A PCR outside the selection does not matter.
	b4, err := device.Open(ctx, device.Options{Transport: tpm, StateDir: t.TempDir(), PCRs: []int{0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer b4.Close()
	if _, err := b4.SealingKey(ctx); err != nil {
		t.Fatal(err)
	}
}

// Start-up (device.Open and attestation.New: AK, PCRs, boot quote,
// unsealing the key) on the TPM simulator, against the simulated SEV-SNP
// enclave as the baseline of the same run.
func BenchmarkStartup(b *testing.B) {
	ctx := context.Background()
	b.Run("sev-snp-sim", func(b *testing.B) {
		dir := b.TempDir()
		m := sha512.Sum384([]byte("bench"))
		for b.Loop() {
			be, err := sim.NewBackend(dir, sim.Options{Measurement: m[:], RSABits: 2048})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := attestation.New(ctx, be, attestation.Options{TLS: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tpm-simulator", func(b *testing.B) {
		tpm := newSim(b)
		dir := b.TempDir()
		for b.Loop() {
			be, err := device.Open(ctx, device.Options{Transport: tpm, StateDir: dir})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := attestation.New(ctx, be, attestation.Options{TLS: true}); err != nil {
				b.Fatal(err)
			}
			be.Close()
		}
	})
}

// The TPM's part of sealing: unsealing the PCR-bound key (once per start),
// and a quote, against the simulated enclave's sealing key as baseline.
func BenchmarkSealingKey(b *testing.B) {
	ctx := context.Background()
	b.Run("sev-snp-sim", func(b *testing.B) {
		m := sha512.Sum384([]byte("bench"))
		be, err := sim.NewBackend(b.TempDir(), sim.Options{Measurement: m[:], RSABits: 2048})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := be.SealingKey(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tpm-simulator-unseal", func(b *testing.B) {
		be, err := device.Open(ctx, device.Options{Transport: newSim(b), StateDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		if _, err := be.SealingKey(ctx); err != nil { // seals on first use
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := be.SealingKey(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

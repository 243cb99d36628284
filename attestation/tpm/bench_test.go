package tpm

import (
	"crypto"
	"testing"
	"time"

	attestpb "github.com/google/go-tpm-tools/proto/attest"
	"github.com/google/go-tpm-tools/server"
	"github.com/google/go-tpm/legacy/tpm2"
	"google.golang.org/protobuf/proto"
)

// BenchmarkVerify measures Verify of the committed simulator attestation
// (AK pinned) and, interleaved in the same loop so that load on the machine
// affects both alike, go-tpm-tools' server.VerifyAttestation of the same
// attestation (decoding included). ns/op covers both; "verify-ns/op" and
// "baseline-ns/op" split it, and "x-go-tpm-tools" is their ratio. Verify
// runs its own checks and then VerifyAttestation, so the ratio exceeds 1 by
// the cost of its own checks (one ECDSA verification and the decoding).
func BenchmarkVerify(b *testing.B) {
	v := simVectors(b)
	opts := Options{TrustedAKs: []crypto.PublicKey{v.ak}}
	var ours, base time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Verify(v.att, v.nonce, opts); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var a attestpb.Attestation
		if err := proto.Unmarshal(v.att, &a); err != nil {
			b.Fatal(err)
		}
		if _, err := server.VerifyAttestation(&a, server.VerifyOpts{Nonce: v.nonce, TrustedAKs: []crypto.PublicKey{v.ak}, HashAlgo: tpm2.AlgSHA256}); err != nil {
			b.Fatal(err)
		}
		ours += t1.Sub(t0)
		base += time.Since(t1)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "verify-ns/op")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "baseline-ns/op")
	b.ReportMetric(float64(ours)/float64(base), "x-go-tpm-tools")
}

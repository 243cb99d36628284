package ot

import (
	"crypto/rand"
	"testing"
)

// BenchmarkBaseOT runs the 128 base OTs of an extension, both parties.
func BenchmarkBaseOT(b *testing.B) {
	choices := DeltaChoices(Block{0x0123456789abcdef, 0xfedcba9876543210})
	for b.Loop() {
		baseOTs(b, choices)
	}
}

// BenchmarkExtension extends a batch of 16,384 correlated OTs with the KOS
// check, both parties; ns/OT and the matrix bytes per OT are reported.
// The baseline in the same run is BenchmarkPRG: the AES-CTR expansion of
// the 2κ seed streams alone, the least any IKNP receiver computes.
func BenchmarkExtension(b *testing.B) {
	const n = 16384
	s, r := extension(b, Block{0x0123456789abcdef, 0xfedcba9876543210})
	for b.Loop() {
		u, err := r.Extend(n, rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		chal, err := s.Expand(u, n, rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		resp, _, _, err := r.Respond(chal)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Check(resp); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/OT")
	b.ReportMetric(float64(USize(n)+ChallengeSize+ResponseSize)/n, "B/OT")
}

func BenchmarkPRG(b *testing.B) {
	const n = 16384
	out := make([]byte, padded(n)/8)
	for b.Loop() {
		for i := 0; i < 3*Kappa; i++ {
			prg(Seed{byte(i)}, 0, out)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/OT")
}

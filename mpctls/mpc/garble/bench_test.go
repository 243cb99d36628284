package garble

import (
	"crypto/rand"
	"testing"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// The benchmarks report ns per AND gate of one SHA-256 compression. The
// baselines in the same run are the plaintext evaluation of the circuit
// and one call of the fixed-key hash (two AES blocks): half-gates garbling
// costs four hash calls per AND, evaluation two; the privacy-free scheme
// two and one.

func benchCircuit(b *testing.B) (*circuit.Circuit, []Label, []bool) {
	c := sha256Circuit(b)
	return c, randomLabels(b, c.InputBits()), randomBits(b, c.InputBits())
}

func perAND(b *testing.B, c *circuit.Circuit) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.ANDs()), "ns/AND")
}

func BenchmarkBaselinePlaintext(b *testing.B) {
	c, _, x := benchCircuit(b)
	for b.Loop() {
		if _, err := c.EvalWires(x); err != nil {
			b.Fatal(err)
		}
	}
	perAND(b, c)
}

func BenchmarkBaselineHash(b *testing.B) {
	h := NewHash([16]byte{1})
	var x Label
	var i uint64
	for b.Loop() {
		x = h.Sum(x, i)
		i++
	}
}

func BenchmarkGarbleHalfGates(b *testing.B) {
	c, zero, _ := benchCircuit(b)
	g, _ := newPair(b)
	tables := make([]byte, 0, HalfGateSize*c.ANDs())
	for b.Loop() {
		if _, _, err := g.Garble(c, 0, zero, tables[:0]); err != nil {
			b.Fatal(err)
		}
	}
	perAND(b, c)
}

func BenchmarkEvaluateHalfGates(b *testing.B) {
	c, zero, x := benchCircuit(b)
	g, e := newPair(b)
	_, tables, _ := g.Garble(c, 0, zero, nil)
	in := active(zero, x, g.Delta())
	for b.Loop() {
		if _, err := e.Evaluate(c, 0, in, tables); err != nil {
			b.Fatal(err)
		}
	}
	perAND(b, c)
}

func BenchmarkGarblePrivacyFree(b *testing.B) {
	c, zero, _ := benchCircuit(b)
	d, _ := RandomDelta(rand.Reader)
	g := NewProofGarbler(NewHash([16]byte{}), d)
	tables := make([]byte, 0, PrivacyFreeGateSize*c.ANDs())
	for b.Loop() {
		if _, _, err := g.Garble(c, 0, zero, tables[:0]); err != nil {
			b.Fatal(err)
		}
	}
	perAND(b, c)
}

func BenchmarkEvaluatePrivacyFree(b *testing.B) {
	c, zero, x := benchCircuit(b)
	d, _ := RandomDelta(rand.Reader)
	h := NewHash([16]byte{})
	_, tables, _ := NewProofGarbler(h, d).Garble(c, 0, zero, nil)
	e := NewProofEvaluator(h)
	in := active(zero, x, d)
	for b.Loop() {
		if _, _, err := e.Evaluate(c, 0, in, x, tables); err != nil {
			b.Fatal(err)
		}
	}
	perAND(b, c)
}

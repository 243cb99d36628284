package garble

import (
	"crypto/rand"
	"syscall"
	"testing"
	"time"

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

// cpuTime is the process's CPU time, which a loaded machine does not
// inflate as it does wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perAND runs f b.N times and reports wall and CPU ns per AND gate of c.
func perAND(b *testing.B, c *circuit.Circuit, f func()) {
	start := cpuTime()
	for b.Loop() {
		f()
	}
	n := float64(b.N) * float64(c.ANDs())
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/AND")
	b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/n, "cpu-ns/AND")
}

func BenchmarkBaselinePlaintext(b *testing.B) {
	c, _, x := benchCircuit(b)
	perAND(b, c, func() {
		if _, err := c.EvalWires(x); err != nil {
			panic(err)
		}
	})
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
	perAND(b, c, func() {
		if _, _, err := g.Garble(c, 0, zero, tables[:0]); err != nil {
			panic(err)
		}
	})
}

func BenchmarkEvaluateHalfGates(b *testing.B) {
	c, zero, x := benchCircuit(b)
	g, e := newPair(b)
	_, tables, _ := g.Garble(c, 0, zero, nil)
	in := active(zero, x, g.Delta())
	perAND(b, c, func() {
		if _, err := e.Evaluate(c, 0, in, tables); err != nil {
			panic(err)
		}
	})
}

func BenchmarkGarblePrivacyFree(b *testing.B) {
	c, zero, _ := benchCircuit(b)
	d, _ := RandomDelta(rand.Reader)
	g := NewProofGarbler(NewHash([16]byte{}), d)
	tables := make([]byte, 0, PrivacyFreeGateSize*c.ANDs())
	perAND(b, c, func() {
		if _, _, err := g.Garble(c, 0, zero, tables[:0]); err != nil {
			panic(err)
		}
	})
}

func BenchmarkEvaluatePrivacyFree(b *testing.B) {
	c, zero, x := benchCircuit(b)
	d, _ := RandomDelta(rand.Reader)
	h := NewHash([16]byte{})
	_, tables, _ := NewProofGarbler(h, d).Garble(c, 0, zero, nil)
	e := NewProofEvaluator(h)
	in := active(zero, x, d)
	perAND(b, c, func() {
		if _, _, err := e.Evaluate(c, 0, in, x, tables, nil); err != nil {
			panic(err)
		}
	})
}

func BenchmarkGarbleThreeHalves(b *testing.B) {
	c, zero, _ := benchCircuit(b)
	g, _ := newThreeHalves(b)
	tables := make([]byte, 0, ThreeHalvesSize(c.ANDs()))
	perAND(b, c, func() {
		if _, _, err := g.Garble(c, 0, zero, tables[:0]); err != nil {
			panic(err)
		}
	})
}

func BenchmarkEvaluateThreeHalves(b *testing.B) {
	c, zero, x := benchCircuit(b)
	g, e := newThreeHalves(b)
	_, tables, _ := g.Garble(c, 0, zero, nil)
	in := active(zero, x, g.Delta())
	perAND(b, c, func() {
		if _, err := e.Evaluate(c, 0, in, tables); err != nil {
			panic(err)
		}
	})
}

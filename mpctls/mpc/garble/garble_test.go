package garble

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

func sha256Circuit(t testing.TB) *circuit.Circuit {
	b := circuit.NewBuilder()
	st, blk := b.Input(256), b.Input(512)
	b.Output(circuit.SHA256Compress(b, st, blk))
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func aesCircuit(t testing.TB) *circuit.Circuit {
	b := circuit.NewBuilder()
	k, p := b.Input(128), b.Input(128)
	b.Output(circuit.AES128(b, k, p))
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randomBits(t testing.TB, n int) []bool {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	bits := make([]bool, n)
	for i := range bits {
		bits[i] = buf[i]&1 == 1
	}
	return bits
}

func randomLabels(t testing.TB, n int) []Label {
	ls := make([]Label, n)
	for i := range ls {
		var err error
		if ls[i], err = RandomLabel(rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

func active(zero []Label, bits []bool, d Label) []Label {
	out := make([]Label, len(zero))
	for i := range zero {
		b := uint64(0)
		if bits[i] {
			b = 1
		}
		out[i] = zero[i].Select(b, d)
	}
	return out
}

// decode returns the bit an active label carries, or an error if it is
// neither label of the wire.
func decode(zero, act, d Label) (bool, bool) {
	switch act {
	case zero:
		return false, true
	case zero.Xor(d):
		return true, true
	}
	return false, false
}

func plain(t testing.TB, c *circuit.Circuit, in []bool) [][]bool {
	v, err := c.EvalWires(in)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]bool, len(c.Outputs))
	for i, g := range c.Outputs {
		for _, w := range g {
			out[i] = append(out[i], v[w])
		}
	}
	return out
}

func newPair(t testing.TB) (*Garbler, *Evaluator) {
	h := NewHash([16]byte{1, 2, 3})
	d, err := RandomDelta(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGarbler(h, d)
	if err != nil {
		t.Fatal(err)
	}
	return g, NewEvaluator(h)
}

// TestHalfGates garbles SHA-256 and AES-128 several times in a row (the
// calls take consecutive ranges of gate numbers) and checks that evaluation on random
// inputs gives the labels of the plaintext result.
func TestHalfGates(t *testing.T) {
	g, e := newPair(t)
	var base uint64
	for i, c := range []*circuit.Circuit{sha256Circuit(t), aesCircuit(t), sha256Circuit(t), aesCircuit(t)} {
		zero := randomLabels(t, c.InputBits())
		x := randomBits(t, c.InputBits())
		outZero, tables, err := g.Garble(c, base, zero, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) != HalfGateSize*c.ANDs() {
			t.Fatalf("call %d: %d bytes of tables for %d AND", i, len(tables), c.ANDs())
		}
		outAct, err := e.Evaluate(c, base, active(zero, x, g.Delta()), tables)
		base += uint64(c.ANDs())
		if err != nil {
			t.Fatal(err)
		}
		want := plain(t, c, x)
		for k := range want {
			for j := range want[k] {
				bit, ok := decode(outZero[k][j], outAct[k][j], g.Delta())
				if !ok || bit != want[k][j] {
					t.Fatalf("call %d, output %d bit %d: ok=%v bit=%v want %v", i, k, j, ok, bit, want[k][j])
				}
			}
		}
	}
}

// TestHalfGatesAuthenticity flips garbled table entries one at a time: an
// evaluation may not use the entry (its output is then unchanged), but it
// never yields the valid label of a wrong value.
func TestHalfGatesAuthenticity(t *testing.T) {
	c := aesCircuit(t)
	changed := 0
	for trial := 0; trial < 24; trial++ {
		g, e := newPair(t)
		zero := randomLabels(t, c.InputBits())
		x := randomBits(t, c.InputBits())
		outZero, tables, err := g.Garble(c, 0, zero, nil)
		if err != nil {
			t.Fatal(err)
		}
		pos := (trial * 7919 * 16) % len(tables)
		tables[pos] ^= 0x01
		outAct, err := e.Evaluate(c, 0, active(zero, x, g.Delta()), tables)
		if err != nil {
			t.Fatal(err)
		}
		want := plain(t, c, x)
		bad := false
		for j := range want[0] {
			bit, ok := decode(outZero[0][j], outAct[0][j], g.Delta())
			if ok && bit != want[0][j] {
				t.Fatalf("trial %d: a flipped table entry produced the valid label of a wrong bit", trial)
			}
			bad = bad || !ok
		}
		if bad {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no flipped table entry was ever noticed")
	}
}

func TestPrivacyFree(t *testing.T) {
	h := NewHash([16]byte{9})
	d, _ := RandomDelta(rand.Reader)
	g, e := NewProofGarbler(h, d), NewProofEvaluator(h)
	for i, c := range []*circuit.Circuit{sha256Circuit(t), aesCircuit(t)} {
		zero := randomLabels(t, c.InputBits())
		x := randomBits(t, c.InputBits())
		base := uint64(i * 1000000)
		outZero, tables, err := g.Garble(c, base, zero, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) != PrivacyFreeGateSize*c.ANDs() {
			t.Fatalf("call %d: %d bytes of tables", i, len(tables))
		}
		outAct, vals, err := e.Evaluate(c, base, active(zero, x, d), x, tables)
		if err != nil {
			t.Fatal(err)
		}
		want := plain(t, c, x)
		for k := range want {
			for j := range want[k] {
				bit, ok := decode(outZero[k][j], outAct[k][j], d)
				if !ok || bit != want[k][j] || vals[k][j] != want[k][j] {
					t.Fatalf("call %d output %d bit %d", i, k, j)
				}
			}
		}
	}
}

// TestPrivacyFreeAuthenticity flips table entries: the evaluator never
// obtains the valid label of a wrong output value.
func TestPrivacyFreeAuthenticity(t *testing.T) {
	c := aesCircuit(t)
	h := NewHash([16]byte{9})
	changed := 0
	for trial := 0; trial < 16; trial++ {
		d, _ := RandomDelta(rand.Reader)
		g, e := NewProofGarbler(h, d), NewProofEvaluator(h)
		zero := randomLabels(t, c.InputBits())
		x := randomBits(t, c.InputBits())
		outZero, tables, err := g.Garble(c, 0, zero, nil)
		if err != nil {
			t.Fatal(err)
		}
		tables[(trial*104729*16)%len(tables)] ^= 0x80
		outAct, _, err := e.Evaluate(c, 0, active(zero, x, d), x, tables)
		if err != nil {
			t.Fatal(err)
		}
		want := plain(t, c, x)
		bad := false
		for j := range want[0] {
			bit, ok := decode(outZero[0][j], outAct[0][j], d)
			if ok && bit != want[0][j] {
				t.Fatalf("trial %d: the valid label of a wrong bit", trial)
			}
			bad = bad || !ok
		}
		if bad {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no flipped entry was ever noticed")
	}
}

func TestErrors(t *testing.T) {
	c := aesCircuit(t)
	h := NewHash([16]byte{})
	if _, err := NewGarbler(h, Label{2, 0}); !errors.Is(err, ErrDelta) {
		t.Errorf("even Δ: %v", err)
	}
	g, e := newPair(t)
	if _, _, err := g.Garble(c, 0, make([]Label, 3), nil); !errors.Is(err, ErrInputs) {
		t.Errorf("garble with 3 labels: %v", err)
	}
	if _, err := e.Evaluate(c, 0, make([]Label, c.InputBits()), make([]byte, 5)); !errors.Is(err, ErrTables) {
		t.Errorf("short tables: %v", err)
	}
	if _, err := e.Evaluate(c, 0, make([]Label, 1), nil); !errors.Is(err, ErrInputs) {
		t.Errorf("few labels: %v", err)
	}
	pe := NewProofEvaluator(h)
	if _, _, err := pe.Evaluate(c, 0, make([]Label, c.InputBits()), make([]bool, c.InputBits()), nil); !errors.Is(err, ErrTables) {
		t.Errorf("privacy-free, no tables: %v", err)
	}
}

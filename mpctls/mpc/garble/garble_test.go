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
		outAct, vals, err := e.Evaluate(c, base, active(zero, x, d), x, tables, nil)
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
		outAct, _, err := e.Evaluate(c, 0, active(zero, x, d), x, tables, nil)
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
	if _, _, err := pe.Evaluate(c, 0, make([]Label, c.InputBits()), make([]bool, c.InputBits()), nil, nil); !errors.Is(err, ErrTables) {
		t.Errorf("privacy-free, no tables: %v", err)
	}
}

// TestCheckProof: the one-hash-per-gate check accepts an honest proof
// garbling and rejects a flipped table entry or another Δ.
func TestCheckProof(t *testing.T) {
	c := aesCircuit(t)
	h := NewHash([16]byte{5})
	d, _ := RandomDelta(rand.Reader)
	zero := randomLabels(t, c.InputBits())
	x := randomBits(t, c.InputBits())
	_, tables, err := NewProofGarbler(h, d).Garble(c, 7, zero, nil)
	if err != nil {
		t.Fatal(err)
	}
	hashes := make([]Label, c.ANDs())
	in := active(zero, x, d)
	if _, _, err := NewProofEvaluator(h).Evaluate(c, 7, in, x, tables, hashes); err != nil {
		t.Fatal(err)
	}
	if err := CheckProof(h, c, 7, d, in, x, tables, hashes); err != nil {
		t.Fatalf("honest garbling: %v", err)
	}
	other, _ := RandomDelta(rand.Reader)
	if err := CheckProof(h, c, 7, other, in, x, tables, hashes); !errors.Is(err, ErrTables) {
		t.Fatalf("other Δ: %v", err)
	}
	for _, pos := range []int{0, 16 * 1000, len(tables) - 1} {
		bad := append([]byte(nil), tables...)
		bad[pos] ^= 1
		hs := make([]Label, c.ANDs())
		if _, _, err := NewProofEvaluator(h).Evaluate(c, 7, in, x, bad, hs); err != nil {
			t.Fatal(err)
		}
		if err := CheckProof(h, c, 7, d, in, x, bad, hs); !errors.Is(err, ErrTables) {
			t.Fatalf("flipped byte %d: %v", pos, err)
		}
	}
}

func newThreeHalves(t testing.TB) (*ThreeHalvesGarbler, *ThreeHalvesEvaluator) {
	h := NewHash([16]byte{4, 5, 6})
	d, err := RandomDelta(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewThreeHalvesGarbler(h, d, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return g, NewThreeHalvesEvaluator(h)
}

// TestThreeHalves garbles SHA-256 and AES-128 with three-halves garbling
// (random labels cover all four permute-bit combinations of every gate
// many times) and checks evaluation against the plaintext circuit.
func TestThreeHalves(t *testing.T) {
	g, e := newThreeHalves(t)
	var base uint64
	for i, c := range []*circuit.Circuit{sha256Circuit(t), aesCircuit(t), aesCircuit(t)} {
		zero := randomLabels(t, c.InputBits())
		x := randomBits(t, c.InputBits())
		outZero, tables, err := g.Garble(c, base, zero, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) != ThreeHalvesSize(c.ANDs()) {
			t.Fatalf("call %d: %d bytes of tables for %d AND", i, len(tables), c.ANDs())
		}
		outAct, err := e.Evaluate(c, base, active(zero, x, g.Delta()), tables)
		if err != nil {
			t.Fatal(err)
		}
		base += uint64(c.ANDs())
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
	if 8*ThreeHalvesSize(1000) != 1000*(3*64+5) {
		t.Fatalf("size of 1000 gates: %d bytes", ThreeHalvesSize(1000))
	}
}

// TestThreeHalvesAllRows checks one AND gate in every combination of
// permute bits and input values, and the property the scheme's privacy
// rests on: the control pair (r₁, r₂) the evaluator decrypts for its row
// is uniform over its four values whatever the permute bits (hence the
// wire values) are.
func TestThreeHalvesAllRows(t *testing.T) {
	b := circuit.NewBuilder()
	in := b.Input(2)
	b.Output([]circuit.Wire{b.AND(in[0], in[1])})
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for perm := 0; perm < 4; perm++ {
		for v := 0; v < 4; v++ {
			x := []bool{v&1 == 1, v&2 == 2}
			var hist [4]int
			for trial := 0; trial < n; trial++ {
				g, e := newThreeHalves(t)
				zero := randomLabels(t, 2)
				zero[0][0] = zero[0][0]&^1 | uint64(perm>>1)
				zero[1][0] = zero[1][0]&^1 | uint64(perm&1)
				outZero, tables, err := g.Garble(c, uint64(trial), zero, nil)
				if err != nil {
					t.Fatal(err)
				}
				act := active(zero, x, g.Delta())
				outAct, err := e.Evaluate(c, uint64(trial), act, tables)
				if err != nil {
					t.Fatal(err)
				}
				bit, ok := decode(outZero[0][0], outAct[0][0], g.Delta())
				if !ok || bit != (x[0] && x[1]) {
					t.Fatalf("permute bits %02b, inputs %v: ok=%v bit=%v", perm, x, ok, bit)
				}
				// The evaluator's decryption of its control pair.
				j := uint64(trial)
				ha, hb := e.h.Sum(act[0], 3*j), e.h.Sum(act[1], 3*j+1)
				hc := e.h.Sum(act[0].Xor(act[1]), 3*j+2)
				sa, sb := uint8(act[0].LSB()), uint8(act[1].LSB())
				z := tables[24]
				r1 := z&1 ^ sa&(z>>2&1) ^ (sa^sb)&(z>>4&1) ^ uint8(ha[1]&1) ^ uint8(hc[1]&1)
				r2 := z>>1&1 ^ sb&(z>>3&1) ^ (sa^sb)&(z>>4&1) ^ uint8(hb[1]&1) ^ uint8(hc[1]&1)
				hist[2*r1+r2]++
			}
			for r, k := range hist {
				if k < n/4-30 || k > n/4+30 {
					t.Errorf("permute bits %02b, inputs %v: control pair %02b decrypted %d times of %d", perm, x, r, k, n)
				}
			}
		}
	}
}

func TestThreeHalvesAuthenticity(t *testing.T) {
	c := aesCircuit(t)
	changed := 0
	for trial := 0; trial < 24; trial++ {
		g, e := newThreeHalves(t)
		zero := randomLabels(t, c.InputBits())
		x := randomBits(t, c.InputBits())
		outZero, tables, err := g.Garble(c, 0, zero, nil)
		if err != nil {
			t.Fatal(err)
		}
		tables[(trial*7919*8)%len(tables)] ^= 0x01
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

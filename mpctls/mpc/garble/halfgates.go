package garble

import (
	"fmt"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// HalfGateSize is the size of one AND gate's garbled table with
// half-gates: two labels.
const HalfGateSize = 32

// Garbler garbles circuits with half-gates and free-XOR (Zahur, Rosulek,
// Evans: "Two Halves Make a Whole", EUROCRYPT 2015) under one global
// offset Δ: the label of a wire carrying 1 is its zero label ⊕ Δ. Every
// call takes base, the session-wide number of the circuit's first AND
// gate: gate k of the call hashes with tweaks 2(base+k) and 2(base+k)+1,
// so calls given disjoint ranges never share a tweak, and the Evaluator
// must use the same base for the same call. A Garbler is not safe for
// concurrent use.
type Garbler struct {
	h     *Hash
	delta Label
	wires []Label
	buf   *[16]byte
}

// NewGarbler returns a garbler with offset delta, whose least significant
// bit must be 1.
func NewGarbler(h *Hash, delta Label) (*Garbler, error) {
	if delta.LSB() != 1 {
		return nil, ErrDelta
	}
	return &Garbler{h: h, delta: delta, buf: new([16]byte)}, nil
}

// Delta returns the garbler's offset Δ.
func (g *Garbler) Delta() Label { return g.delta }

// Garble garbles c, whose AND gates are numbered from base, given the
// zero labels of its input bits (group after group), appends the AND tables (HalfGateSize bytes each, in gate order)
// to tables, and returns the zero labels of each output group.
func (g *Garbler) Garble(c *circuit.Circuit, base uint64, in []Label, tables []byte) ([][]Label, []byte, error) {
	if len(in) != c.InputBits() {
		return nil, tables, fmt.Errorf("%w: %d input labels for %d input bits", ErrInputs, len(in), c.InputBits())
	}
	if cap(g.wires) < c.NumWires {
		g.wires = make([]Label, c.NumWires)
	}
	w := g.wires[:c.NumWires]
	k := 0
	for _, grp := range c.Inputs {
		for _, x := range grp {
			w[x] = in[k]
			k++
		}
	}
	off := len(tables)
	tables = append(tables, make([]byte, HalfGateSize*c.ANDs())...)
	d := g.delta
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
		case circuit.INV:
			w[gt.Out] = w[gt.A].Xor(d)
		case circuit.AND:
			a0, b0 := w[gt.A], w[gt.B]
			pa, pb := a0.LSB(), b0.LSB()
			j0, j1 := 2*base, 2*base+1
			base++
			ha0, ha1 := g.h.sum(g.buf, a0, j0), g.h.sum(g.buf, a0.Xor(d), j0)
			hb0, hb1 := g.h.sum(g.buf, b0, j1), g.h.sum(g.buf, b0.Xor(d), j1)
			// Garbler half: the evaluator learns a ∧ pb-masked b.
			tg := ha0.Xor(ha1).Select(pb, d)
			wg := ha0.Select(pa, tg)
			// Evaluator half: the evaluator knows b ⊕ pb.
			te := hb0.Xor(hb1).Xor(a0)
			we := hb0.Select(pb, te.Xor(a0))
			w[gt.Out] = wg.Xor(we)
			tg.put(tables[off:])
			te.put(tables[off+16:])
			off += HalfGateSize
		}
	}
	return outputs(c, w), tables, nil
}

// Evaluator evaluates half-gates garbled circuits on the active labels of
// their inputs, with the base the Garbler used for each call. An
// Evaluator is not safe for concurrent use.
type Evaluator struct {
	h     *Hash
	wires []Label
	buf   *[16]byte
}

// NewEvaluator returns an evaluator using hash h (the garbler's).
func NewEvaluator(h *Hash) *Evaluator { return &Evaluator{h: h, buf: new([16]byte)} }

// Evaluate evaluates c on the active labels of its input bits with the
// garbled tables of its AND gates and returns the active labels of each
// output group. Wrong tables give wrong labels, which decoding detects;
// tables of the wrong size are an error (and the gate numbering still
// advances, so that one bad call cannot shift the tweaks of the next).
func (e *Evaluator) Evaluate(c *circuit.Circuit, base uint64, in []Label, tables []byte) ([][]Label, error) {
	if len(in) != c.InputBits() {
		return nil, fmt.Errorf("%w: %d input labels for %d input bits", ErrInputs, len(in), c.InputBits())
	}
	if len(tables) != HalfGateSize*c.ANDs() {
		return nil, fmt.Errorf("%w: %d bytes for %d AND gates", ErrTables, len(tables), c.ANDs())
	}
	if cap(e.wires) < c.NumWires {
		e.wires = make([]Label, c.NumWires)
	}
	w := e.wires[:c.NumWires]
	k := 0
	for _, grp := range c.Inputs {
		for _, x := range grp {
			w[x] = in[k]
			k++
		}
	}
	off := 0
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
		case circuit.INV:
			w[gt.Out] = w[gt.A]
		case circuit.AND:
			a, b := w[gt.A], w[gt.B]
			j0, j1 := 2*base, 2*base+1
			base++
			tg, te := LabelOf(tables[off:]), LabelOf(tables[off+16:])
			off += HalfGateSize
			wg := e.h.sum(e.buf, a, j0).Select(a.LSB(), tg)
			we := e.h.sum(e.buf, b, j1).Select(b.LSB(), te.Xor(a))
			w[gt.Out] = wg.Xor(we)
		}
	}
	return outputs(c, w), nil
}

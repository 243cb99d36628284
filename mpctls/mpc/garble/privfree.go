package garble

import (
	"fmt"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// PrivacyFreeGateSize is the size of one AND gate's table in the
// privacy-free scheme: one label.
const PrivacyFreeGateSize = 16

// ProofGarbler garbles circuits privacy-free for an evaluator who knows
// every wire's value (Frederiksen, Nielsen, Orlandi: "Privacy-Free Garbled
// Circuits with Applications to Efficient Zero-Knowledge", EUROCRYPT 2015;
// the one-ciphertext gate of Zahur, Rosulek, Evans 2015, §5). What it
// keeps is authenticity: an evaluator holding one label per input wire
// obtains exactly one label per output wire, that of the true value, and
// cannot compute the other without Δ. That makes it the verifier's half of
// a zero-knowledge proof (Jawurek, Kerschbaum, Orlandi 2013). For AND gate
// j with input zero labels A₀, B₀:
//
//	C₀ = H(A₀, j),  T = H(A₀ ⊕ Δ, j) ⊕ C₀ ⊕ B₀.
//
// Gates are numbered from each call's base as in Garbler. A ProofGarbler
// is not safe for concurrent use.
type ProofGarbler struct {
	h     *Hash
	delta Label
	wires []Label
	buf   *[16]byte
}

// NewProofGarbler returns a privacy-free garbler with offset delta.
func NewProofGarbler(h *Hash, delta Label) *ProofGarbler {
	return &ProofGarbler{h: h, delta: delta, buf: new([16]byte)}
}

// Garble garbles c given the zero labels of its input bits, appends the
// AND tables (PrivacyFreeGateSize bytes each) to tables and returns the
// zero labels of each output group.
func (g *ProofGarbler) Garble(c *circuit.Circuit, base uint64, in []Label, tables []byte) ([][]Label, []byte, error) {
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
	tables = append(tables, make([]byte, PrivacyFreeGateSize*c.ANDs())...)
	d := g.delta
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
		case circuit.INV:
			w[gt.Out] = w[gt.A].Xor(d)
		case circuit.AND:
			a0, b0 := w[gt.A], w[gt.B]
			j := base
			base++
			c0 := g.h.sum(g.buf, a0, j)
			t := g.h.sum(g.buf, a0.Xor(d), j).Xor(c0).Xor(b0)
			w[gt.Out] = c0
			t.put(tables[off:])
			off += PrivacyFreeGateSize
		}
	}
	return outputs(c, w), tables, nil
}

// ProofEvaluator evaluates privacy-free garbled circuits. It knows the
// value of every wire (it computes them from the input values it is
// given) and uses them to pick each gate's row. Not safe for concurrent
// use.
type ProofEvaluator struct {
	h      *Hash
	wires  []Label
	values []bool
	buf    *[16]byte
}

// NewProofEvaluator returns a privacy-free evaluator using hash h.
func NewProofEvaluator(h *Hash) *ProofEvaluator { return &ProofEvaluator{h: h, buf: new([16]byte)} }

// Evaluate evaluates c on the active labels and the values of its input
// bits, with the garbled tables of its AND gates, and returns the active
// labels and the values of each output group. If hashes is not nil it
// must have one entry per AND gate, and receives each gate's hash of its
// active first input label, which CheckProof needs.
func (e *ProofEvaluator) Evaluate(c *circuit.Circuit, base uint64, in []Label, values []bool, tables []byte, hashes []Label) ([][]Label, [][]bool, error) {
	if len(in) != c.InputBits() || len(values) != len(in) {
		return nil, nil, fmt.Errorf("%w: %d labels and %d values for %d input bits", ErrInputs, len(in), len(values), c.InputBits())
	}
	if hashes != nil && len(hashes) != c.ANDs() {
		return nil, nil, fmt.Errorf("%w: %d hash slots for %d AND gates", ErrInputs, len(hashes), c.ANDs())
	}
	if len(tables) != PrivacyFreeGateSize*c.ANDs() {
		return nil, nil, fmt.Errorf("%w: %d bytes for %d AND gates", ErrTables, len(tables), c.ANDs())
	}
	if cap(e.wires) < c.NumWires {
		e.wires = make([]Label, c.NumWires)
		e.values = make([]bool, c.NumWires)
	}
	w, v := e.wires[:c.NumWires], e.values[:c.NumWires]
	k := 0
	for _, grp := range c.Inputs {
		for _, x := range grp {
			w[x], v[x] = in[k], values[k]
			k++
		}
	}
	off, first := 0, base
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
			v[gt.Out] = v[gt.A] != v[gt.B]
		case circuit.INV:
			w[gt.Out] = w[gt.A]
			v[gt.Out] = !v[gt.A]
		case circuit.AND:
			j := base
			base++
			t := LabelOf(tables[off:])
			off += PrivacyFreeGateSize
			// The evaluator knows a; the row it takes is public to it.
			h := e.h.sum(e.buf, w[gt.A], j)
			if hashes != nil {
				hashes[j-first] = h
			}
			if v[gt.A] {
				h = h.Xor(t).Xor(w[gt.B])
			}
			w[gt.Out] = h
			v[gt.Out] = v[gt.A] && v[gt.B]
		}
	}
	vals := make([][]bool, len(c.Outputs))
	for i, grp := range c.Outputs {
		vals[i] = make([]bool, len(grp))
		for j, x := range grp {
			vals[i][j] = v[x]
		}
	}
	return outputs(c, w), vals, nil
}

func outputs(c *circuit.Circuit, w []Label) [][]Label {
	out := make([][]Label, len(c.Outputs))
	for i, grp := range c.Outputs {
		out[i] = make([]Label, len(grp))
		for j, x := range grp {
			out[i][j] = w[x]
		}
	}
	return out
}

// CheckProof verifies, once Δ is known, that tables are the privacy-free
// garbling of c under Δ for the zero labels the evaluation implies (each
// active label ⊕ value·Δ), given the active labels and values of c's
// inputs and the hashes Evaluate recorded: one hash per AND gate, half
// the work of garbling again. By induction over the gates, if the input
// zero labels are the garbler's and every table passes, the garbling is
// the garbler's honest one; the check stops at the first table that is
// not, so its outcome depends only on the garbler's own view.
func CheckProof(h *Hash, c *circuit.Circuit, base uint64, delta Label, in []Label, values []bool, tables []byte, hashes []Label) error {
	if len(in) != c.InputBits() || len(values) != len(in) || len(hashes) != c.ANDs() {
		return fmt.Errorf("%w: inputs or hashes do not fit the circuit", ErrInputs)
	}
	if len(tables) != PrivacyFreeGateSize*c.ANDs() {
		return fmt.Errorf("%w: %d bytes for %d AND gates", ErrTables, len(tables), c.ANDs())
	}
	buf := new([16]byte)
	w := make([]Label, c.NumWires)
	v := make([]bool, c.NumWires)
	k := 0
	for _, grp := range c.Inputs {
		for _, x := range grp {
			w[x], v[x] = in[k], values[k]
			k++
		}
	}
	off, j := 0, base
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
			v[gt.Out] = v[gt.A] != v[gt.B]
		case circuit.INV:
			w[gt.Out] = w[gt.A]
			v[gt.Out] = !v[gt.A]
		case circuit.AND:
			t := LabelOf(tables[off:])
			active := hashes[j-base]
			other := h.sum(buf, w[gt.A].Xor(delta), j)
			h0, h1 := active, other
			if v[gt.A] {
				h0, h1 = other, active
			}
			b0 := w[gt.B].Select(b2u(v[gt.B]), delta)
			if t != h1.Xor(h0).Xor(b0) {
				return fmt.Errorf("%w: AND gate %d is not garbled under Δ", ErrTables, j)
			}
			out := active
			if v[gt.A] {
				out = out.Xor(t).Xor(w[gt.B])
			}
			w[gt.Out] = out
			v[gt.Out] = v[gt.A] && v[gt.B]
			off += PrivacyFreeGateSize
			j++
		}
	}
	return nil
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

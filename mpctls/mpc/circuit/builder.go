package circuit

import "fmt"

// Wire is a wire of a circuit under construction. Zero and One are the
// constants; every other Wire comes from Builder.Input or a gate.
type Wire uint32

// The constant wires. Gates on constants are folded away as they are
// built, so constants cost nothing in the built circuit.
const (
	Zero Wire = 0
	One  Wire = 1
)

// Builder builds a Circuit gate by gate. It folds constants (x⊕0 = x,
// x∧1 = x, x∧0 = 0, ¬1 = 0, x⊕x = 0, x∧x = x) and Build drops the gates
// no output depends on, so the AND count of the result is what garbling
// pays. A Builder is not safe for concurrent use.
type Builder struct {
	next    Wire
	gates   []Gate
	inputs  [][]Wire
	outputs [][]Wire
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{next: 2} }

func (b *Builder) fresh() Wire {
	w := b.next
	b.next++
	return w
}

// Input adds an input group of n bits and returns its wires, bit 0 first.
func (b *Builder) Input(n int) []Wire {
	ws := make([]Wire, n)
	for i := range ws {
		ws[i] = b.fresh()
	}
	b.inputs = append(b.inputs, ws)
	return ws
}

// Output adds an output group; its bits are ws in order. A constant wire
// is allowed (Build gives it a gate).
func (b *Builder) Output(ws []Wire) {
	b.outputs = append(b.outputs, append([]Wire(nil), ws...))
}

func (b *Builder) gate(op Op, x, y Wire) Wire {
	out := b.fresh()
	b.gates = append(b.gates, Gate{Op: op, A: uint32(x), B: uint32(y), Out: uint32(out)})
	return out
}

// XOR returns x ⊕ y.
func (b *Builder) XOR(x, y Wire) Wire {
	switch {
	case x == Zero:
		return y
	case y == Zero:
		return x
	case x == One:
		return b.NOT(y)
	case y == One:
		return b.NOT(x)
	case x == y:
		return Zero
	}
	return b.gate(XOR, x, y)
}

// AND returns x ∧ y.
func (b *Builder) AND(x, y Wire) Wire {
	switch {
	case x == Zero || y == Zero:
		return Zero
	case x == One:
		return y
	case y == One:
		return x
	case x == y:
		return x
	}
	return b.gate(AND, x, y)
}

// NOT returns ¬x.
func (b *Builder) NOT(x Wire) Wire {
	switch x {
	case Zero:
		return One
	case One:
		return Zero
	}
	return b.gate(INV, x, x)
}

// OR returns x ∨ y (one AND).
func (b *Builder) OR(x, y Wire) Wire { return b.NOT(b.AND(b.NOT(x), b.NOT(y))) }

// Mux returns x1 if s is true, else x0 (one AND).
func (b *Builder) Mux(s, x0, x1 Wire) Wire { return b.XOR(x0, b.AND(s, b.XOR(x0, x1))) }

// XORs returns the bitwise XOR of two vectors of the same length.
func (b *Builder) XORs(x, y []Wire) []Wire {
	mustSameLen(x, y)
	z := make([]Wire, len(x))
	for i := range x {
		z[i] = b.XOR(x[i], y[i])
	}
	return z
}

// ANDs returns the bitwise AND of two vectors of the same length.
func (b *Builder) ANDs(x, y []Wire) []Wire {
	mustSameLen(x, y)
	z := make([]Wire, len(x))
	for i := range x {
		z[i] = b.AND(x[i], y[i])
	}
	return z
}

// NOTs returns the bitwise complement of x.
func (b *Builder) NOTs(x []Wire) []Wire {
	z := make([]Wire, len(x))
	for i := range x {
		z[i] = b.NOT(x[i])
	}
	return z
}

// Muxes returns x1 if s is true, else x0, bit by bit (one AND per bit).
func (b *Builder) Muxes(s Wire, x0, x1 []Wire) []Wire {
	mustSameLen(x0, x1)
	z := make([]Wire, len(x0))
	for i := range x0 {
		z[i] = b.Mux(s, x0[i], x1[i])
	}
	return z
}

// Const returns n constant wires holding the first n bits of data in
// big-endian bit order (bit i is bit 7-(i mod 8) of data[i/8]).
func Const(data []byte, n int) []Wire {
	if n > 8*len(data) {
		panic(fmt.Sprintf("circuit: Const of %d bits from %d bytes", n, len(data)))
	}
	ws := make([]Wire, n)
	for i := range ws {
		if data[i/8]>>(7-i%8)&1 == 1 {
			ws[i] = One
		}
	}
	return ws
}

// Concat returns the concatenation of the vectors.
func Concat(vs ...[]Wire) []Wire {
	var n int
	for _, v := range vs {
		n += len(v)
	}
	out := make([]Wire, 0, n)
	for _, v := range vs {
		out = append(out, v...)
	}
	return out
}

func mustSameLen(x, y []Wire) {
	if len(x) != len(y) {
		panic(fmt.Sprintf("circuit: vectors of %d and %d bits", len(x), len(y)))
	}
}

// Build returns the circuit built so far: input wires numbered first, in
// the order of the Input calls, then the gates every output depends on,
// in the order they were made. The Builder may be used afterwards; later
// gates do not change the returned Circuit.
func (b *Builder) Build() (*Circuit, error) {
	gates := append([]Gate(nil), b.gates...)
	next := b.next
	outputs := make([][]Wire, len(b.outputs))
	// Constant outputs get real wires: 0 = x⊕x and 1 = ¬0 on the first
	// input bit.
	var zero, one Wire
	for i, g := range b.outputs {
		outputs[i] = append([]Wire(nil), g...)
		for j, w := range g {
			if w != Zero && w != One {
				continue
			}
			if zero == 0 {
				first := Wire(0)
				for _, in := range b.inputs {
					if len(in) > 0 {
						first = in[0]
						break
					}
				}
				if first == 0 {
					return nil, fmt.Errorf("%w: a constant output needs at least one input bit", ErrCircuit)
				}
				zero = next
				gates = append(gates, Gate{Op: XOR, A: uint32(first), B: uint32(first), Out: uint32(zero)})
				one = next + 1
				gates = append(gates, Gate{Op: INV, A: uint32(zero), B: uint32(zero), Out: uint32(one)})
				next += 2
			}
			if w == Zero {
				outputs[i][j] = zero
			} else {
				outputs[i][j] = one
			}
		}
	}
	// Liveness: keep the gates some output depends on.
	live := make([]bool, next)
	for _, g := range outputs {
		for _, w := range g {
			live[w] = true
		}
	}
	keep := make([]bool, len(gates))
	for i := len(gates) - 1; i >= 0; i-- {
		g := gates[i]
		if !live[g.Out] {
			continue
		}
		keep[i] = true
		live[g.A] = true
		if g.Op != INV {
			live[g.B] = true
		}
	}
	// Renumber: inputs first, then kept gates.
	id := make([]uint32, next)
	var n uint32
	c := &Circuit{Inputs: make([][]uint32, len(b.inputs))}
	for i, in := range b.inputs {
		c.Inputs[i] = make([]uint32, len(in))
		for j, w := range in {
			id[w] = n
			c.Inputs[i][j] = n
			n++
		}
	}
	for i, g := range gates {
		if !keep[i] {
			continue
		}
		id[g.Out] = n
		ng := Gate{Op: g.Op, A: id[g.A], B: id[g.B], Out: n}
		if g.Op == INV {
			ng.B = ng.A
		}
		c.Gates = append(c.Gates, ng)
		n++
	}
	c.Outputs = make([][]uint32, len(outputs))
	for i, g := range outputs {
		c.Outputs[i] = make([]uint32, len(g))
		for j, w := range g {
			c.Outputs[i][j] = id[w]
		}
	}
	c.NumWires = int(n)
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.computeDigest()
	return c, nil
}

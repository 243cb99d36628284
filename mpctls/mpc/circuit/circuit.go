package circuit

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Op is a gate's operation. XOR and INV are free in a garbled circuit
// (free-XOR); AND is the gate that costs.
type Op uint8

// The gate operations.
const (
	XOR Op = iota + 1 // Out = A ⊕ B
	AND               // Out = A ∧ B
	INV               // Out = ¬A (B unused)
)

// Gate is one gate of a built circuit. A, B and Out index the circuit's
// wires; every gate's Out is a fresh wire, and A and B are inputs or
// outputs of earlier gates (the gates are in topological order).
type Gate struct {
	Op   Op
	A, B uint32
	Out  uint32
}

// Circuit is a boolean circuit built by a Builder: input groups, gates in
// topological order, and output groups. Its zero value is not usable.
type Circuit struct {
	// NumWires is the number of wires; wires are numbered 0..NumWires-1.
	NumWires int
	// Inputs lists the wires of each input group, in the order the
	// Builder's Input calls made them. No wire is in two groups.
	Inputs [][]uint32
	// Gates in evaluation order.
	Gates []Gate
	// Outputs lists the wires of each output group. A wire may appear in
	// several groups, or be an input.
	Outputs [][]uint32

	ands   int
	digest [32]byte
}

// ANDs returns the number of AND gates, the circuit's cost in garbling.
func (c *Circuit) ANDs() int { return c.ands }

// XORs returns the number of XOR and INV gates (free under free-XOR).
func (c *Circuit) XORs() int { return len(c.Gates) - c.ands }

// InputBits returns the total number of input bits.
func (c *Circuit) InputBits() int {
	n := 0
	for _, g := range c.Inputs {
		n += len(g)
	}
	return n
}

// Digest returns a SHA-256 digest of the circuit's structure (wires,
// inputs, gates, outputs): two circuits with the same digest compute the
// same function on the same wiring. Parties use it to check that they are
// running the same circuit.
func (c *Circuit) Digest() [32]byte { return c.digest }

// ErrCircuit reports a circuit that is not well formed or inputs that do
// not fit it.
var ErrCircuit = errors.New("circuit: malformed circuit or inputs")

// validate checks the structural invariants Eval and the garblers rely on:
// every wire index in range, gates in topological order writing fresh
// wires, input groups disjoint.
func (c *Circuit) validate() error {
	if c.NumWires < 0 || c.NumWires > 1<<31 {
		return fmt.Errorf("%w: %d wires", ErrCircuit, c.NumWires)
	}
	defined := make([]bool, c.NumWires)
	for _, g := range c.Inputs {
		for _, w := range g {
			if int(w) >= c.NumWires || defined[w] {
				return fmt.Errorf("%w: input wire %d out of range or repeated", ErrCircuit, w)
			}
			defined[w] = true
		}
	}
	ands := 0
	for i, g := range c.Gates {
		if int(g.A) >= c.NumWires || int(g.B) >= c.NumWires || int(g.Out) >= c.NumWires {
			return fmt.Errorf("%w: gate %d: wire out of range", ErrCircuit, i)
		}
		if !defined[g.A] || (g.Op != INV && !defined[g.B]) {
			return fmt.Errorf("%w: gate %d reads a wire not yet defined", ErrCircuit, i)
		}
		if defined[g.Out] {
			return fmt.Errorf("%w: gate %d writes wire %d twice", ErrCircuit, i, g.Out)
		}
		switch g.Op {
		case XOR, INV:
		case AND:
			ands++
		default:
			return fmt.Errorf("%w: gate %d: unknown op %d", ErrCircuit, i, g.Op)
		}
		defined[g.Out] = true
	}
	for _, g := range c.Outputs {
		for _, w := range g {
			if int(w) >= c.NumWires || !defined[w] {
				return fmt.Errorf("%w: output wire %d undefined", ErrCircuit, w)
			}
		}
	}
	c.ands = ands
	return nil
}

// computeDigest fills c.digest from the circuit's structure.
func (c *Circuit) computeDigest() {
	h := sha256.New()
	var buf [13]byte
	put := func(v uint32) {
		binary.BigEndian.PutUint32(buf[:4], v)
		h.Write(buf[:4])
	}
	h.Write([]byte("acds mpc circuit v1"))
	put(uint32(c.NumWires))
	put(uint32(len(c.Inputs)))
	for _, g := range c.Inputs {
		put(uint32(len(g)))
		for _, w := range g {
			put(w)
		}
	}
	put(uint32(len(c.Gates)))
	for _, g := range c.Gates {
		buf[0] = byte(g.Op)
		binary.BigEndian.PutUint32(buf[1:], g.A)
		binary.BigEndian.PutUint32(buf[5:], g.B)
		binary.BigEndian.PutUint32(buf[9:], g.Out)
		h.Write(buf[:13])
	}
	put(uint32(len(c.Outputs)))
	for _, g := range c.Outputs {
		put(uint32(len(g)))
		for _, w := range g {
			put(w)
		}
	}
	h.Sum(c.digest[:0])
}

// EvalWires evaluates the circuit in the clear on one value per input bit
// (group after group) and returns the value of every wire.
func (c *Circuit) EvalWires(in []bool) ([]bool, error) {
	if len(in) != c.InputBits() {
		return nil, fmt.Errorf("%w: %d input bits for a circuit of %d", ErrCircuit, len(in), c.InputBits())
	}
	v := make([]bool, c.NumWires)
	k := 0
	for _, g := range c.Inputs {
		for _, w := range g {
			v[w] = in[k]
			k++
		}
	}
	for _, g := range c.Gates {
		switch g.Op {
		case XOR:
			v[g.Out] = v[g.A] != v[g.B]
		case AND:
			v[g.Out] = v[g.A] && v[g.B]
		case INV:
			v[g.Out] = !v[g.A]
		}
	}
	return v, nil
}

// Eval evaluates the circuit in the clear. It takes one byte string per
// input group, each holding the group's bits in big-endian bit order (bit
// i is bit 7-(i mod 8) of byte i/8; a group of n bits takes ⌈n/8⌉ bytes,
// the unused low bits of the last byte zero), and returns the output
// groups the same way.
func (c *Circuit) Eval(inputs ...[]byte) ([][]byte, error) {
	if len(inputs) != len(c.Inputs) {
		return nil, fmt.Errorf("%w: %d input groups for a circuit of %d", ErrCircuit, len(inputs), len(c.Inputs))
	}
	in := make([]bool, 0, c.InputBits())
	for i, g := range c.Inputs {
		bits, err := BitsOf(inputs[i], len(g))
		if err != nil {
			return nil, fmt.Errorf("input group %d: %w", i, err)
		}
		in = append(in, bits...)
	}
	v, err := c.EvalWires(in)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(c.Outputs))
	for i, g := range c.Outputs {
		bits := make([]bool, len(g))
		for j, w := range g {
			bits[j] = v[w]
		}
		out[i] = BytesOf(bits)
	}
	return out, nil
}

// BitsOf returns the first n bits of b in big-endian bit order. b must be
// exactly ⌈n/8⌉ bytes long with the unused low bits of its last byte zero,
// so that every bit string has one byte form.
func BitsOf(b []byte, n int) ([]bool, error) {
	if n < 0 || len(b) != (n+7)/8 {
		return nil, fmt.Errorf("%w: %d bytes for %d bits", ErrCircuit, len(b), n)
	}
	if n%8 != 0 && b[len(b)-1]&(0xff>>(n%8)) != 0 {
		return nil, fmt.Errorf("%w: bits set past bit %d", ErrCircuit, n)
	}
	bits := make([]bool, n)
	for i := range bits {
		bits[i] = b[i/8]>>(7-i%8)&1 == 1
	}
	return bits, nil
}

// BytesOf packs bits in big-endian bit order into ⌈len(bits)/8⌉ bytes.
func BytesOf(bits []bool) []byte {
	b := make([]byte, (len(bits)+7)/8)
	for i, x := range bits {
		if x {
			b[i/8] |= 1 << (7 - i%8)
		}
	}
	return b
}

package garble

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"io"

	"github.com/acds-project/acds/mpctls/mpc/circuit"
)

// Three-halves garbling (Rosulek, Roy: "Three Halves Make a Whole?
// Beating the Half-Gates Lower Bound for Garbled Circuits", CRYPTO 2021):
// free-XOR like half-gates, but an AND gate costs three half-labels and
// five control bits, 1.5κ + 5 bits instead of 2κ.
//
// Labels are sliced into halves, X = (X_L, X_R) (the two 64-bit words;
// the point-and-permute bit is the lowest bit of X_L). For the evaluator's
// row (s_a, s_b) — the permute bits of the labels A, B it holds — the
// output label is
//
//	C_L = H(A) ⊕ H(A⊕B) ⊕ s_a·G₀ ⊕ (s_a⊕s_b)·G₂ ⊕ R_{s_a s_b}[L]·(A_L, A_R, B_L, B_R)
//	C_R = H(B) ⊕ H(A⊕B) ⊕ s_b·G₁ ⊕ (s_a⊕s_b)·G₂ ⊕ R_{s_a s_b}[R]·(A_L, A_R, B_L, B_R)
//
// with H the 64-bit half of the TCCR hash, G₀, G₁, G₂ the gate's three
// half-ciphertexts and R a 2×4 binary matrix that mixes halves of the
// input labels into the output. Three ciphertexts cannot satisfy the
// eight half-label equations of the four rows with fixed matrices; the
// garbler picks, per gate, the matrices of all four rows as
// R_ij = P_ij ⊕ r₁·S₁ ⊕ r₂·S₂ with (r₁, r₂) = ρ ⊕ g_ij(p_a, p_b): ρ two
// fresh random bits, g an offset that depends on the row and on the
// secret permute bits, chosen so that the remaining three equations hold.
// The evaluator learns only its own row's (r₁, r₂), decrypted from the
// five control bits with one extra bit of each of its three hashes; since
// ρ is uniform, the matrix it learns is uniform over a coset fixed by its
// row and independent of the permute bits, hence of the wire values.
//
// The constants below are a solution, computed for this package, of the
// linear conditions that the label equations and the control-bit
// equations impose for all four (p_a, p_b) (the same conditions as the
// paper's; its matrices are another solution). Matrices are 8-bit: bit q
// of the low nibble is row L's coefficient of (A_L, A_R, B_L, B_R)[q],
// the high nibble row R's.
const (
	thS1 = 0b01101011
	thS2 = 0b11010110
)

// thP[2·s_a + s_b] is the public part of the row's matrix.
var thP = [4]uint8{0b00000000, 0b00100000, 0b00000100, 0b00100100}

// thG[2·p_a + p_b][2·i + j] is the offset (g₁, g₂) of row (i, j).
var thG = [4][4][2]uint8{
	{{0, 0}, {0, 0}, {0, 0}, {0, 0}},
	{{0, 0}, {1, 1}, {0, 1}, {1, 0}},
	{{0, 0}, {1, 0}, {1, 1}, {0, 1}},
	{{0, 0}, {0, 1}, {1, 0}, {1, 1}},
}

// ThreeHalvesSize returns the size of the garbled tables of n AND gates:
// three 8-byte half-labels per gate, then the five control bits of every
// gate packed together.
func ThreeHalvesSize(n int) int { return 24*n + (5*n+7)/8 }

// mix returns the half-label a row of matrix m (4 bits, nibble) selects
// from x, in constant time.
func mix(m uint8, x *[4]uint64) uint64 {
	return x[0]&-uint64(m&1) ^ x[1]&-uint64(m>>1&1) ^ x[2]&-uint64(m>>2&1) ^ x[3]&-uint64(m>>3&1)
}

// rowMatrix returns P ⊕ r₁·S₁ ⊕ r₂·S₂, in constant time.
func rowMatrix(p, r1, r2 uint8) uint8 {
	return p ^ thS1&-r1 ^ thS2&-r2
}

// ThreeHalvesGarbler garbles circuits with three-halves garbling under
// one global offset Δ; gate k of a call numbered from base hashes with
// tweaks 3(base+k), 3(base+k)+1 and 3(base+k)+2. It draws two secret
// random bits per AND gate from an AES-CTR stream keyed from the
// randomness it was made with. Not safe for concurrent use.
type ThreeHalvesGarbler struct {
	h     *Hash
	delta Label
	buf   *[16]byte
	rnd   cipher.Stream
	bits  [64]byte
	used  int
	wires []Label
}

// NewThreeHalvesGarbler returns a garbler with offset delta (least
// significant bit set), its per-gate random bits seeded from r.
func NewThreeHalvesGarbler(h *Hash, delta Label, r io.Reader) (*ThreeHalvesGarbler, error) {
	if delta.LSB() != 1 {
		return nil, ErrDelta
	}
	var key [16]byte
	if _, err := io.ReadFull(r, key[:]); err != nil {
		return nil, err
	}
	c, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	var iv [16]byte
	return &ThreeHalvesGarbler{h: h, delta: delta, buf: new([16]byte), rnd: cipher.NewCTR(c, iv[:]), used: 64}, nil
}

// rho returns two fresh random bits.
func (g *ThreeHalvesGarbler) rho() (uint8, uint8) {
	if g.used == len(g.bits) {
		clear(g.bits[:])
		g.rnd.XORKeyStream(g.bits[:], g.bits[:])
		g.used = 0
	}
	b := g.bits[g.used]
	g.used++
	return b & 1, b >> 1 & 1
}

// Delta returns the garbler's offset.
func (g *ThreeHalvesGarbler) Delta() Label { return g.delta }

// Garble garbles c, whose AND gates are numbered from base, given the
// zero labels of its input bits, appends the tables (ThreeHalvesSize of
// its AND gates) to tables and returns the zero labels of each output
// group.
func (g *ThreeHalvesGarbler) Garble(c *circuit.Circuit, base uint64, in []Label, tables []byte) ([][]Label, []byte, error) {
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
	n := c.ANDs()
	off := len(tables)
	tables = append(tables, make([]byte, ThreeHalvesSize(n))...)
	ct := tables[off : off+24*n]
	ctrl := tables[off+24*n:]
	d := g.delta
	dh := [2]uint64{d[0], d[1]}
	gate := 0
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
		case circuit.INV:
			w[gt.Out] = w[gt.A].Xor(d)
		case circuit.AND:
			j := base + uint64(gate)
			a0, b0 := w[gt.A], w[gt.B]
			pa, pb := a0.LSB(), b0.LSB()
			// The labels by permute bit: A[i] has permute bit i.
			var A, B [2]Label
			A[pa], A[pa^1] = a0, a0.Xor(d)
			B[pb], B[pb^1] = b0, b0.Xor(d)
			var ha, hb, hc [2]Label
			for i := 0; i < 2; i++ {
				ha[i] = g.h.sum(g.buf, A[i], 3*j)
				hb[i] = g.h.sum(g.buf, B[i], 3*j+1)
			}
			// hc[k] hashes A₀ ⊕ B₀ ⊕ k·Δ, the evaluator's A ⊕ B when the
			// values' XOR is k.
			hc[0] = g.h.sum(g.buf, a0.Xor(b0), 3*j+2)
			hc[1] = g.h.sum(g.buf, a0.Xor(b0).Xor(d), 3*j+2)
			r1, r2 := g.rho()
			perm := 2*pa + pb
			var rL, rR [2][2]uint64 // the rows' mixing terms
			var r [2][2][2]uint8    // the rows' (r₁, r₂)
			for i := 0; i < 2; i++ {
				for jj := 0; jj < 2; jj++ {
					off := thG[perm][2*i+jj]
					r[i][jj] = [2]uint8{r1 ^ off[0], r2 ^ off[1]}
					m := rowMatrix(thP[2*i+jj], r[i][jj][0], r[i][jj][1])
					x := [4]uint64{A[i][0], A[i][1], B[jj][0], B[jj][1]}
					rL[i][jj], rR[i][jj] = mix(m&15, &x), mix(m>>4, &x)
				}
			}
			// t_ij = value of a ∧ b in row (i, j); k_ij = the values' XOR.
			t := func(i, jj uint64) uint64 { return (i ^ pa) & (jj ^ pb) }
			kk := func(i, jj uint64) uint64 { return i ^ pa ^ jj ^ pb }
			mask := func(bit uint64, x uint64) uint64 { return x & -bit }
			t00, t01, t10 := t(0, 0), t(0, 1), t(1, 0)
			c0, c1 := hc[0][0], hc[1][0]
			cL := ha[0][0] ^ hc[kk(0, 0)][0] ^ rL[0][0] ^ mask(t00, dh[0])
			cR := hb[0][0] ^ hc[kk(0, 0)][0] ^ rR[0][0] ^ mask(t00, dh[1])
			g2 := c0 ^ c1 ^ rL[0][0] ^ rL[0][1] ^ mask(t00^t01, dh[0])
			g0 := ha[0][0] ^ ha[1][0] ^ c0 ^ c1 ^ g2 ^ rL[0][0] ^ rL[1][0] ^ mask(t00^t10, dh[0])
			g1 := hb[0][0] ^ hb[1][0] ^ c0 ^ c1 ^ g2 ^ rR[0][0] ^ rR[0][1] ^ mask(t00^t01, dh[1])
			w[gt.Out] = Label{cL, cR}
			putUint64(ct[24*gate:], g0)
			putUint64(ct[24*gate+8:], g1)
			putUint64(ct[24*gate+16:], g2)
			// Control bits: the low bit of each hash's second word.
			bit := func(l Label) uint8 { return uint8(l[1] & 1) }
			d1 := r[0][0][0] ^ r[0][1][0]
			z4 := d1 ^ bit(hc[0]) ^ bit(hc[1])
			z0 := r[0][0][0] ^ bit(ha[0]) ^ bit(hc[kk(0, 0)])
			z1 := r[0][0][1] ^ bit(hb[0]) ^ bit(hc[kk(0, 0)])
			z2 := r[1][0][0] ^ z0 ^ z4 ^ bit(ha[1]) ^ bit(hc[kk(1, 0)])
			z3 := r[0][1][1] ^ z1 ^ z4 ^ bit(hb[1]) ^ bit(hc[kk(0, 1)])
			for q, z := range [5]uint8{z0, z1, z2, z3, z4} {
				p := 5*gate + q
				ctrl[p/8] |= z << (p % 8)
			}
			gate++
		}
	}
	return outputs(c, w), tables, nil
}

func putUint64(b []byte, v uint64) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	b[4], b[5], b[6], b[7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
}

func getUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// ThreeHalvesEvaluator evaluates three-halves garbled circuits. Not safe
// for concurrent use.
type ThreeHalvesEvaluator struct {
	h     *Hash
	buf   *[16]byte
	wires []Label
}

// NewThreeHalvesEvaluator returns an evaluator using hash h.
func NewThreeHalvesEvaluator(h *Hash) *ThreeHalvesEvaluator {
	return &ThreeHalvesEvaluator{h: h, buf: new([16]byte)}
}

// Evaluate evaluates c on the active labels of its inputs with its
// garbled tables and returns the active labels of each output group.
func (e *ThreeHalvesEvaluator) Evaluate(c *circuit.Circuit, base uint64, in []Label, tables []byte) ([][]Label, error) {
	if len(in) != c.InputBits() {
		return nil, fmt.Errorf("%w: %d input labels for %d input bits", ErrInputs, len(in), c.InputBits())
	}
	n := c.ANDs()
	if len(tables) != ThreeHalvesSize(n) {
		return nil, fmt.Errorf("%w: %d bytes for %d AND gates", ErrTables, len(tables), n)
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
	ct, ctrl := tables[:24*n], tables[24*n:]
	gate := 0
	for _, gt := range c.Gates {
		switch gt.Op {
		case circuit.XOR:
			w[gt.Out] = w[gt.A].Xor(w[gt.B])
		case circuit.INV:
			w[gt.Out] = w[gt.A]
		case circuit.AND:
			j := base + uint64(gate)
			a, b := w[gt.A], w[gt.B]
			sa, sb := uint8(a.LSB()), uint8(b.LSB())
			ha := e.h.sum(e.buf, a, 3*j)
			hb := e.h.sum(e.buf, b, 3*j+1)
			hc := e.h.sum(e.buf, a.Xor(b), 3*j+2)
			var z [5]uint8
			for q := range z {
				p := 5*gate + q
				z[q] = ctrl[p/8] >> (p % 8) & 1
			}
			x := uint8(ha[1]&1) ^ uint8(hc[1]&1)
			y := uint8(hb[1]&1) ^ uint8(hc[1]&1)
			r1 := z[0] ^ sa&z[2] ^ (sa^sb)&z[4] ^ x
			r2 := z[1] ^ sb&z[3] ^ (sa^sb)&z[4] ^ y
			m := rowMatrix(thP[2*sa+sb], r1, r2)
			lab := [4]uint64{a[0], a[1], b[0], b[1]}
			g0, g1, g2 := getUint64(ct[24*gate:]), getUint64(ct[24*gate+8:]), getUint64(ct[24*gate+16:])
			s := -uint64(sa ^ sb)
			cL := ha[0] ^ hc[0] ^ g0&-uint64(sa) ^ g2&s ^ mix(m&15, &lab)
			cR := hb[0] ^ hc[0] ^ g1&-uint64(sb) ^ g2&s ^ mix(m>>4, &lab)
			w[gt.Out] = Label{cL, cR}
			gate++
		}
	}
	return outputs(c, w), nil
}

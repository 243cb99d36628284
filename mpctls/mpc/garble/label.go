package garble

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"io"
)

// Label is a 128-bit wire label.
type Label [2]uint64

// Xor returns l ⊕ m.
func (l Label) Xor(m Label) Label { return Label{l[0] ^ m[0], l[1] ^ m[1]} }

// LSB returns the label's least significant bit (the point-and-permute
// bit), 0 or 1.
func (l Label) LSB() uint64 { return l[0] & 1 }

// Select returns l if bit is 0 and l ⊕ d if bit is 1, in constant time.
func (l Label) Select(bit uint64, d Label) Label {
	m := -(bit & 1)
	return Label{l[0] ^ (d[0] & m), l[1] ^ (d[1] & m)}
}

// Bytes returns the label's 16-byte little-endian form.
func (l Label) Bytes() [16]byte {
	var b [16]byte
	l.put(b[:])
	return b
}

func (l Label) put(b []byte) {
	binary.LittleEndian.PutUint64(b, l[0])
	binary.LittleEndian.PutUint64(b[8:], l[1])
}

// LabelOf reads a label from its 16-byte form.
func LabelOf(b []byte) Label {
	return Label{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

// RandomLabel reads a uniformly random label from r.
func RandomLabel(r io.Reader) (Label, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return Label{}, err
	}
	return LabelOf(b[:]), nil
}

// RandomDelta reads a random global offset Δ from r, with its least
// significant bit set as point-and-permute needs.
func RandomDelta(r io.Reader) (Label, error) {
	d, err := RandomLabel(r)
	d[0] |= 1
	return d, err
}

// Hash is the tweakable circular correlation-robust hash of the garbling
// schemes: H(x, i) = π(π(x) ⊕ i) ⊕ π(x) with π an AES-128 permutation
// under a fixed, public key (Guo, Katz, Wang, Yu: "Efficient and Secure
// Multiparty Computation from Fixed-Key Block Ciphers", S&P 2020, §7).
// Using a key per session keeps the instances of different sessions
// apart. A Hash is safe for concurrent use.
type Hash struct {
	pi cipher.Block
}

// NewHash returns the hash with the fixed key k.
func NewHash(k [16]byte) *Hash {
	b, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // a 16-byte key is always valid
	}
	return &Hash{pi: b}
}

// Sum returns H(x, tweak).
func (h *Hash) Sum(x Label, tweak uint64) Label {
	var buf [16]byte
	return h.sum(&buf, x, tweak)
}

// sum is Sum with a caller's scratch block: the block cipher is called
// through an interface, so a local buffer would escape to the heap on
// every call.
func (h *Hash) sum(buf *[16]byte, x Label, tweak uint64) Label {
	x.put(buf[:])
	h.pi.Encrypt(buf[:], buf[:])
	px := LabelOf(buf[:])
	y := Label{px[0] ^ tweak, px[1]}
	y.put(buf[:])
	h.pi.Encrypt(buf[:], buf[:])
	return LabelOf(buf[:]).Xor(px)
}

// Errors of the evaluators.
var (
	// ErrTables reports garbled tables of the wrong size for the circuit.
	ErrTables = errors.New("garble: garbled tables do not fit the circuit")
	// ErrDelta reports a global offset whose least significant bit is
	// clear.
	ErrDelta = errors.New("garble: Δ must have its least significant bit set")
	// ErrInputs reports a number of input labels or values that does not
	// fit the circuit.
	ErrInputs = errors.New("garble: inputs do not fit the circuit")
)

package circuit

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"fmt"
	"hash"
)

// word is a 32-bit word, least significant bit first.
type word [32]Wire

// wordBE reads a 32-bit big-endian word from 32 wires in big-endian bit
// order (the first wire is the most significant bit).
func wordBE(ws []Wire) word {
	var w word
	for i := 0; i < 32; i++ {
		w[i] = ws[31-i]
	}
	return w
}

func (w word) be() []Wire {
	out := make([]Wire, 32)
	for i := 0; i < 32; i++ {
		out[i] = w[31-i]
	}
	return out
}

func constWord(v uint32) word {
	var w word
	for i := 0; i < 32; i++ {
		if v>>i&1 == 1 {
			w[i] = One
		}
	}
	return w
}

func rotr(x word, n int) word {
	var y word
	for i := 0; i < 32; i++ {
		y[i] = x[(i+n)%32]
	}
	return y
}

func shr(x word, n int) word {
	var y word
	for i := 0; i+n < 32; i++ {
		y[i] = x[i+n]
	}
	return y
}

func (b *Builder) xor3(x, y, z word) word {
	var w word
	for i := range w {
		w[i] = b.XOR(b.XOR(x[i], y[i]), z[i])
	}
	return w
}

// add returns x + y mod 2³² with a ripple-carry adder: one AND per bit
// but the last (31 AND, fewer with constants).
func (b *Builder) add(x, y word) word {
	var s word
	c := Zero
	for i := 0; i < 32; i++ {
		xc := b.XOR(x[i], c)
		s[i] = b.XOR(xc, y[i])
		if i < 31 {
			c = b.XOR(c, b.AND(xc, b.XOR(y[i], c)))
		}
	}
	return s
}

var sha256K = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

// SHA256IV is the initial SHA-256 state (FIPS 180-4 §5.3.3), eight
// big-endian words.
var SHA256IV = [32]byte{
	0x6a, 0x09, 0xe6, 0x67, 0xbb, 0x67, 0xae, 0x85, 0x3c, 0x6e, 0xf3, 0x72, 0xa5, 0x4f, 0xf5, 0x3a,
	0x51, 0x0e, 0x52, 0x7f, 0x9b, 0x05, 0x68, 0x8c, 0x1f, 0x83, 0xd9, 0xab, 0x5b, 0xe0, 0xcd, 0x19,
}

// SHA256Compress returns the SHA-256 compression of one 512-bit block
// into a 256-bit chaining state (FIPS 180-4 §6.2.2, including the final
// addition). state is eight big-endian words (the byte form of a midstate
// or digest); block is the 64-byte message block; both in big-endian bit
// order. The result is the new state in the same form. About 22,600 AND
// gates; constant inputs (the IV, padding) make it cheaper.
func SHA256Compress(b *Builder, state, block []Wire) []Wire {
	if len(state) != 256 || len(block) != 512 {
		panic(fmt.Sprintf("circuit: SHA256Compress of a %d-bit state and a %d-bit block", len(state), len(block)))
	}
	var h [8]word
	for i := range h {
		h[i] = wordBE(state[32*i : 32*i+32])
	}
	var w [64]word
	for t := 0; t < 16; t++ {
		w[t] = wordBE(block[32*t : 32*t+32])
	}
	for t := 16; t < 64; t++ {
		s0 := b.xor3(rotr(w[t-15], 7), rotr(w[t-15], 18), shr(w[t-15], 3))
		s1 := b.xor3(rotr(w[t-2], 17), rotr(w[t-2], 19), shr(w[t-2], 10))
		w[t] = b.add(b.add(s1, w[t-7]), b.add(s0, w[t-16]))
	}
	a, bb, c, d, e, f, g, hh := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
	for t := 0; t < 64; t++ {
		S1 := b.xor3(rotr(e, 6), rotr(e, 11), rotr(e, 25))
		var ch, maj word
		for i := 0; i < 32; i++ {
			// Ch = g ⊕ (e ∧ (f ⊕ g)); Maj = b ⊕ ((a ⊕ b) ∧ (b ⊕ c)).
			ch[i] = b.XOR(g[i], b.AND(e[i], b.XOR(f[i], g[i])))
			maj[i] = b.XOR(bb[i], b.AND(b.XOR(a[i], bb[i]), b.XOR(bb[i], c[i])))
		}
		t1 := b.add(b.add(b.add(hh, constWord(sha256K[t])), b.add(S1, ch)), w[t])
		S0 := b.xor3(rotr(a, 2), rotr(a, 13), rotr(a, 22))
		t2 := b.add(S0, maj)
		hh, g, f, e, d, c, bb, a = g, f, e, b.add(d, t1), c, bb, a, b.add(t1, t2)
	}
	out := [8]word{a, bb, c, d, e, f, g, hh}
	res := make([]Wire, 0, 256)
	for i := range out {
		res = append(res, b.add(h[i], out[i]).be()...)
	}
	return res
}

// Midstate returns the chaining state of h, a hash from crypto/sha256,
// and the number of bytes it has absorbed, which must be a whole number of
// blocks (no buffered partial block).
func Midstate(h hash.Hash) (state [32]byte, n uint64, err error) {
	m, ok := h.(encoding.BinaryMarshaler)
	if !ok {
		return state, 0, fmt.Errorf("%w: hash cannot export its state", ErrCircuit)
	}
	raw, err := m.MarshalBinary()
	if err != nil {
		return state, 0, fmt.Errorf("%w: %v", ErrCircuit, err)
	}
	// crypto/sha256's format: "sha\x03", 8 words, the 64-byte buffer, the
	// length in bytes.
	if len(raw) != 4+32+64+8 || string(raw[:4]) != "sha\x03" {
		return state, 0, fmt.Errorf("%w: not a SHA-256 state", ErrCircuit)
	}
	copy(state[:], raw[4:36])
	n = binary.BigEndian.Uint64(raw[100:])
	if n%64 != 0 {
		return state, 0, fmt.Errorf("%w: %d bytes absorbed, not whole blocks", ErrCircuit, n)
	}
	return state, n, nil
}

// ResumeSHA256 returns a crypto/sha256 hash that continues from a
// chaining state after n bytes (a multiple of 64): writing the rest of a
// message to it gives the digest of the whole message. With the inner
// midstate of an HMAC key this computes the HMAC's inner hash without the
// key.
func ResumeSHA256(state [32]byte, n uint64) (hash.Hash, error) {
	if n%64 != 0 {
		return nil, fmt.Errorf("%w: resume after %d bytes, not whole blocks", ErrCircuit, n)
	}
	raw := make([]byte, 0, 108)
	raw = append(raw, "sha\x03"...)
	raw = append(raw, state[:]...)
	raw = append(raw, make([]byte, 64)...)
	raw = binary.BigEndian.AppendUint64(raw, n)
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCircuit, err)
	}
	return h, nil
}

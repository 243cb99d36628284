package ot

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
)

// Block is a 128-bit value: a correlated OT's message, or an element of
// GF(2¹²⁸). Bit i is bit i%64 of word i/64.
type Block [2]uint64

// Xor returns a ⊕ b.
func (a Block) Xor(b Block) Block { return Block{a[0] ^ b[0], a[1] ^ b[1]} }

// mask returns a if bit is 1 and zero if it is 0, in constant time.
func (a Block) mask(bit uint64) Block {
	m := -(bit & 1)
	return Block{a[0] & m, a[1] & m}
}

// Bytes returns the block's 16-byte little-endian form.
func (a Block) Bytes() [16]byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], a[0])
	binary.LittleEndian.PutUint64(b[8:], a[1])
	return b
}

// BlockOf reads a block from its 16-byte form.
func BlockOf(b []byte) Block {
	return Block{binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])}
}

// prg fills out with AES-128-CTR under key seed, starting at counter block
// (nonce, 0).
func prg(seed Seed, nonce uint64, out []byte) {
	c, err := aes.NewCipher(seed[:])
	if err != nil {
		panic(err)
	}
	var iv [16]byte
	binary.BigEndian.PutUint64(iv[:8], nonce)
	clear(out)
	cipher.NewCTR(c, iv[:]).XORKeyStream(out, out)
}

// transpose64 transposes a 64×64 bit matrix in place: afterwards bit j of
// m[i] is what bit i of m[j] was (Hacker's Delight, §7-3).
func transpose64(m *[64]uint64) {
	j := 32
	mask := uint64(0x00000000ffffffff)
	for j != 0 {
		for k := 0; k < 64; k = (k + j + 1) &^ j {
			t := (m[k]>>j ^ m[k+j]) & mask
			m[k] ^= t << j
			m[k+j] ^= t
		}
		j >>= 1
		mask ^= mask << j
	}
}

// transpose turns 128 rows of n bits (row i is rows[i], n/8 bytes, bit j
// in byte j/8 at bit j%8) into n blocks: bit i of block j is bit j of row
// i. n is a multiple of 64.
func transpose(rows *[128][]byte, n int) []Block {
	out := make([]Block, n)
	var m [64]uint64
	for half := 0; half < 2; half++ {
		for j0 := 0; j0 < n; j0 += 64 {
			for r := 0; r < 64; r++ {
				m[r] = binary.LittleEndian.Uint64(rows[64*half+r][j0/8:])
			}
			transpose64(&m)
			for c := 0; c < 64; c++ {
				out[j0+c][half] = m[c]
			}
		}
	}
	return out
}

// gf128 is an unreduced product in GF(2)[x], 256 bits, low word first.
type gf128 [4]uint64

// clmul32 returns the carry-less product of two 32-bit words, in constant
// time: integer multiplications of the operands' bits taken one in four,
// so that no column of a product sums more than eight ones and its carries
// never reach the next kept column (the "multiplication with holes" of
// constant-time GHASH implementations).
func clmul32(x, y uint32) uint64 {
	const m0, m1, m2, m3 = 0x11111111, 0x22222222, 0x44444444, 0x88888888
	x0, x1, x2, x3 := uint64(x&m0), uint64(x&m1), uint64(x&m2), uint64(x&m3)
	y0, y1, y2, y3 := uint64(y&m0), uint64(y&m1), uint64(y&m2), uint64(y&m3)
	z0 := x0*y0 ^ x1*y3 ^ x2*y2 ^ x3*y1
	z1 := x0*y1 ^ x1*y0 ^ x2*y3 ^ x3*y2
	z2 := x0*y2 ^ x1*y1 ^ x2*y0 ^ x3*y3
	z3 := x0*y3 ^ x1*y2 ^ x2*y1 ^ x3*y0
	return z0&0x1111111111111111 | z1&0x2222222222222222 | z2&0x4444444444444444 | z3&0x8888888888888888
}

// clmul returns the carry-less product of two 64-bit words (hi, lo), in
// constant time (Karatsuba over 32-bit halves).
func clmul(a, b uint64) (hi, lo uint64) {
	a0, a1, b0, b1 := uint32(a), uint32(a>>32), uint32(b), uint32(b>>32)
	l := clmul32(a0, b0)
	h := clmul32(a1, b1)
	m := clmul32(a0^a1, b0^b1) ^ l ^ h
	return h ^ m>>32, l ^ m<<32
}

// mulAdd adds a·b (unreduced) to acc.
func (acc *gf128) mulAdd(a, b Block) {
	// Karatsuba over 64-bit halves.
	h1, l1 := clmul(a[1], b[1])
	h0, l0 := clmul(a[0], b[0])
	hm, lm := clmul(a[0]^a[1], b[0]^b[1])
	hm ^= h1 ^ h0
	lm ^= l1 ^ l0
	acc[0] ^= l0
	acc[1] ^= h0 ^ lm
	acc[2] ^= l1 ^ hm
	acc[3] ^= h1
}

// reduce returns acc modulo x¹²⁸ + x⁷ + x² + x + 1.
func (acc gf128) reduce() Block {
	lo0, lo1, hi0, hi1 := acc[0], acc[1], acc[2], acc[3]
	// x^128 = x^7 + x^2 + x + 1: fold the high 128 bits in twice (the
	// first fold leaves at most 7 bits above 128).
	fold := func(h0, h1 uint64) (r0, r1, over uint64) {
		// h·(x^7 + x^2 + x + 1) for h = h1:h0, a 135-bit result.
		r0 = h0 ^ h0<<1 ^ h0<<2 ^ h0<<7
		r1 = h1 ^ h1<<1 ^ h1<<2 ^ h1<<7 ^ h0>>63 ^ h0>>62 ^ h0>>57
		over = h1>>63 ^ h1>>62 ^ h1>>57
		return
	}
	r0, r1, over := fold(hi0, hi1)
	lo0 ^= r0
	lo1 ^= r1
	s0, s1, _ := fold(over, 0)
	return Block{lo0 ^ s0, lo1 ^ s1}
}

// mul returns a·b in GF(2¹²⁸).
func mul(a, b Block) Block {
	var acc gf128
	acc.mulAdd(a, b)
	return acc.reduce()
}

// Pad fills out with a random OT's message derived from a correlated OT's
// block: SHA-256(domain ‖ j ‖ x ‖ counter) in counter mode. With q_j and
// q_j ⊕ Δ on the sender's side and t_j on the receiver's, the two pads of
// OT j are independent and the receiver knows only the one of its choice
// (the hash as a random oracle: correlation robustness).
func Pad(domain []byte, j uint64, x Block, out []byte) {
	var hdr [8 + 16 + 4]byte
	binary.BigEndian.PutUint64(hdr[:8], j)
	xb := x.Bytes()
	copy(hdr[8:24], xb[:])
	for ctr := uint32(0); len(out) > 0; ctr++ {
		binary.BigEndian.PutUint32(hdr[24:], ctr)
		h := sha256.New()
		h.Write(domain)
		h.Write(hdr[:])
		n := copy(out, h.Sum(nil))
		out = out[n:]
	}
}

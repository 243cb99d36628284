package circuit

import "fmt"

// A byte of the AES state, most significant bit first (the big-endian bit
// order of the circuit's inputs).
type aesByte [8]Wire

// sbox returns the AES S-box of x with the straight-line program of
// Boyar and Peralta ("A depth-16 circuit for the AES S-box", 2011): a
// linear top layer, a non-linear middle of 34 AND gates (inversion in
// GF(2⁸) through GF(2⁴)) and a linear bottom layer. U0 and S0 are the
// most significant bits.
func (b *Builder) sbox(x aesByte) aesByte {
	X, A, N := b.XOR, b.AND, b.NOT
	u0, u1, u2, u3, u4, u5, u6, u7 := x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]

	t1 := X(u0, u3)
	t2 := X(u0, u5)
	t3 := X(u0, u6)
	t4 := X(u3, u5)
	t5 := X(u4, u6)
	t6 := X(t1, t5)
	t7 := X(u1, u2)
	t8 := X(u7, t6)
	t9 := X(u7, t7)
	t10 := X(t6, t7)
	t11 := X(u1, u5)
	t12 := X(u2, u5)
	t13 := X(t3, t4)
	t14 := X(t6, t11)
	t15 := X(t5, t11)
	t16 := X(t5, t12)
	t17 := X(t9, t16)
	t18 := X(u3, u7)
	t19 := X(t7, t18)
	t20 := X(t1, t19)
	t21 := X(u6, u7)
	t22 := X(t7, t21)
	t23 := X(t2, t22)
	t24 := X(t2, t10)
	t25 := X(t20, t17)
	t26 := X(t3, t16)
	t27 := X(t1, t12)

	m1 := A(t13, t6)
	m2 := A(t23, t8)
	m3 := X(t14, m1)
	m4 := A(t19, u7)
	m5 := X(m4, m1)
	m6 := A(t3, t16)
	m7 := A(t22, t9)
	m8 := X(t26, m6)
	m9 := A(t20, t17)
	m10 := X(m9, m6)
	m11 := A(t1, t15)
	m12 := A(t4, t27)
	m13 := X(m12, m11)
	m14 := A(t2, t10)
	m15 := X(m14, m11)
	m16 := X(m3, m2)
	m17 := X(m5, t24)
	m18 := X(m8, m7)
	m19 := X(m10, m15)
	m20 := X(m16, m13)
	m21 := X(m17, m15)
	m22 := X(m18, m13)
	m23 := X(m19, t25)
	m24 := X(m22, m23)
	m25 := A(m22, m20)
	m26 := X(m21, m25)
	m27 := X(m20, m21)
	m28 := X(m23, m25)
	m29 := A(m28, m27)
	m30 := A(m26, m24)
	m31 := A(m20, m23)
	m32 := A(m27, m31)
	m33 := X(m27, m25)
	m34 := A(m21, m22)
	m35 := A(m24, m34)
	m36 := X(m24, m25)
	m37 := X(m21, m29)
	m38 := X(m32, m33)
	m39 := X(m23, m30)
	m40 := X(m35, m36)
	m41 := X(m38, m40)
	m42 := X(m37, m39)
	m43 := X(m37, m38)
	m44 := X(m39, m40)
	m45 := X(m42, m41)
	m46 := A(m44, t6)
	m47 := A(m40, t8)
	m48 := A(m39, u7)
	m49 := A(m43, t16)
	m50 := A(m38, t9)
	m51 := A(m37, t17)
	m52 := A(m42, t15)
	m53 := A(m45, t27)
	m54 := A(m41, t10)
	m55 := A(m44, t13)
	m56 := A(m40, t23)
	m57 := A(m39, t19)
	m58 := A(m43, t3)
	m59 := A(m38, t22)
	m60 := A(m37, t20)
	m61 := A(m42, t1)
	m62 := A(m45, t4)
	m63 := A(m41, t2)

	l0 := X(m61, m62)
	l1 := X(m50, m56)
	l2 := X(m46, m48)
	l3 := X(m47, m55)
	l4 := X(m54, m58)
	l5 := X(m49, m61)
	l6 := X(m62, l5)
	l7 := X(m46, l3)
	l8 := X(m51, m59)
	l9 := X(m52, m53)
	l10 := X(m53, l4)
	l11 := X(m60, l2)
	l12 := X(m48, m51)
	l13 := X(m50, l0)
	l14 := X(m52, m61)
	l15 := X(m55, l1)
	l16 := X(m56, l0)
	l17 := X(m57, l1)
	l18 := X(m58, l8)
	l19 := X(m63, l4)
	l20 := X(l0, l1)
	l21 := X(l1, l7)
	l22 := X(l3, l12)
	l23 := X(l18, l2)
	l24 := X(l15, l9)
	l25 := X(l6, l10)
	l26 := X(l7, l9)
	l27 := X(l8, l10)
	l28 := X(l11, l14)
	l29 := X(l11, l17)

	return aesByte{
		X(l6, l24),
		N(X(l16, l26)),
		N(X(l19, l28)),
		X(l6, l21),
		X(l20, l22),
		X(l25, l29),
		N(X(l13, l27)),
		N(X(l6, l23)),
	}
}

// xtime multiplies by x in GF(2⁸) mod x⁸+x⁴+x³+x+1 (free: XORs only).
func (b *Builder) xtime(x aesByte) aesByte {
	// Shift left by one (towards the most significant bit, index 0) and
	// reduce with 0x1b when the top bit falls out.
	return aesByte{x[1], x[2], x[3], b.XOR(x[4], x[0]), b.XOR(x[5], x[0]), x[6], b.XOR(x[7], x[0]), x[0]}
}

func (b *Builder) xorByte(x, y aesByte) aesByte {
	var z aesByte
	for i := range z {
		z[i] = b.XOR(x[i], y[i])
	}
	return z
}

func bytesOf(ws []Wire) []aesByte {
	out := make([]aesByte, len(ws)/8)
	for i := range out {
		copy(out[i][:], ws[8*i:8*i+8])
	}
	return out
}

func wiresOf(bs []aesByte) []Wire {
	out := make([]Wire, 0, 8*len(bs))
	for _, x := range bs {
		out = append(out, x[:]...)
	}
	return out
}

func constByte(v byte) aesByte {
	var x aesByte
	for i := range x {
		if v>>(7-i)&1 == 1 {
			x[i] = One
		}
	}
	return x
}

// AES128KeySchedule returns the eleven 128-bit AES-128 round keys (FIPS
// 197 §5.2), concatenated, from a 128-bit key: forty S-boxes, 1,360 AND
// gates.
func AES128KeySchedule(b *Builder, key []Wire) []Wire {
	if len(key) != 128 {
		panic(fmt.Sprintf("circuit: AES-128 key of %d bits", len(key)))
	}
	rcon := [10]byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36}
	w := make([][4]aesByte, 44)
	kb := bytesOf(key)
	for i := 0; i < 4; i++ {
		copy(w[i][:], kb[4*i:4*i+4])
	}
	for i := 4; i < 44; i++ {
		t := w[i-1]
		if i%4 == 0 {
			t = [4]aesByte{b.sbox(t[1]), b.sbox(t[2]), b.sbox(t[3]), b.sbox(t[0])}
			t[0] = b.xorByte(t[0], constByte(rcon[i/4-1]))
		}
		for j := 0; j < 4; j++ {
			w[i][j] = b.xorByte(w[i-4][j], t[j])
		}
	}
	out := make([]Wire, 0, 11*128)
	for i := range w {
		out = append(out, wiresOf(w[i][:])...)
	}
	return out
}

// AES128Expanded encrypts one 128-bit block under expanded round keys
// (the 1,408 bits AES128KeySchedule returns): 160 S-boxes, 5,440 AND
// gates.
func AES128Expanded(b *Builder, roundKeys, block []Wire) []Wire {
	if len(roundKeys) != 11*128 || len(block) != 128 {
		panic(fmt.Sprintf("circuit: AES-128 with %d bits of round keys and a %d-bit block", len(roundKeys), len(block)))
	}
	rk := func(r int) []aesByte { return bytesOf(roundKeys[128*r : 128*r+128]) }
	s := bytesOf(block)
	addKey := func(k []aesByte) {
		for i := range s {
			s[i] = b.xorByte(s[i], k[i])
		}
	}
	addKey(rk(0))
	for r := 1; r <= 10; r++ {
		// SubBytes and ShiftRows: byte r+4c of the state is row r,
		// column c; row r rotates left by r.
		t := make([]aesByte, 16)
		for c := 0; c < 4; c++ {
			for row := 0; row < 4; row++ {
				t[row+4*c] = b.sbox(s[row+4*((c+row)%4)])
			}
		}
		s = t
		if r < 10 {
			for c := 0; c < 4; c++ {
				a0, a1, a2, a3 := s[4*c], s[4*c+1], s[4*c+2], s[4*c+3]
				d0, d1, d2, d3 := b.xtime(a0), b.xtime(a1), b.xtime(a2), b.xtime(a3)
				x := b.xorByte
				// 2a0⊕3a1⊕a2⊕a3, a0⊕2a1⊕3a2⊕a3, a0⊕a1⊕2a2⊕3a3, 3a0⊕a1⊕a2⊕2a3.
				s[4*c] = x(x(d0, x(d1, a1)), x(a2, a3))
				s[4*c+1] = x(x(a0, d1), x(x(d2, a2), a3))
				s[4*c+2] = x(x(a0, a1), x(d2, x(d3, a3)))
				s[4*c+3] = x(x(x(d0, a0), a1), x(a2, d3))
			}
		}
		addKey(rk(r))
	}
	return wiresOf(s)
}

// AES128 encrypts one 128-bit block under a 128-bit key, the key schedule
// included: 200 S-boxes, 6,800 AND gates.
func AES128(b *Builder, key, block []Wire) []Wire {
	return AES128Expanded(b, AES128KeySchedule(b, key), block)
}

package circuit

import "fmt"

// reversed returns ws in the opposite order (big-endian bit order to
// least significant bit first and back).
func reversed(ws []Wire) []Wire {
	out := make([]Wire, len(ws))
	for i, w := range ws {
		out[len(ws)-1-i] = w
	}
	return out
}

// addLSB adds two vectors of the same length, least significant bit
// first, and returns the sum and the carry out (one AND per bit).
func (b *Builder) addLSB(x, y []Wire) (sum []Wire, carry Wire) {
	mustSameLen(x, y)
	sum = make([]Wire, len(x))
	c := Zero
	for i := range x {
		xc := b.XOR(x[i], c)
		sum[i] = b.XOR(xc, y[i])
		c = b.XOR(c, b.AND(xc, b.XOR(y[i], c)))
	}
	return sum, c
}

// Add returns x + y modulo 2ⁿ for two n-bit unsigned integers in
// big-endian bit order (n-1 AND gates; the carry out is dropped).
func (b *Builder) Add(x, y []Wire) []Wire {
	mustSameLen(x, y)
	if len(x) == 0 {
		return nil
	}
	xl, yl := reversed(x), reversed(y)
	sum := make([]Wire, len(x))
	c := Zero
	for i := range xl {
		xc := b.XOR(xl[i], c)
		sum[i] = b.XOR(xc, yl[i])
		if i < len(xl)-1 {
			c = b.XOR(c, b.AND(xc, b.XOR(yl[i], c)))
		}
	}
	return reversed(sum)
}

// AddMod returns (x + y) mod m for x, y < m, n-bit unsigned integers in
// big-endian bit order, and m an n-bit modulus given as ⌈n/8⌉ big-endian
// bytes (leading zero bits allowed). About 3n AND gates: the sum, its
// difference with m, and a multiplexer on the borrow. For inputs ≥ m the
// result is some n-bit value, not necessarily reduced.
func (b *Builder) AddMod(x, y []Wire, m []byte) []Wire {
	mustSameLen(x, y)
	n := len(x)
	if n == 0 || len(m) != (n+7)/8 {
		panic(fmt.Sprintf("circuit: AddMod of %d bits modulo a %d-byte modulus", n, len(m)))
	}
	// The modulus as n bits, least significant first.
	mBits := make([]bool, n)
	for i := 0; i < n; i++ {
		// Bit i (LSB first) of the big-endian integer m of ⌈n/8⌉ bytes.
		byteIdx := len(m) - 1 - i/8
		mBits[i] = m[byteIdx]>>(i%8)&1 == 1
	}
	for i := n; i < 8*len(m); i++ {
		if m[len(m)-1-i/8]>>(i%8)&1 == 1 {
			panic("circuit: AddMod modulus wider than its operands")
		}
	}
	s, carry := b.addLSB(reversed(x), reversed(y)) // s has n+1 bits with carry
	s = append(s, carry, Zero)                     // n+2 bits
	// d = s + (2^(n+2) - m) over n+2 bits; s ≥ m iff the top bit of d is 0
	// (s-m lies in [-m, m-2] and m < 2^n).
	neg := make([]Wire, n+2)
	borrow := true // two's complement: invert and add one
	for i := 0; i < n+2; i++ {
		bit := i < n && mBits[i]
		inv := !bit
		// adding one to the inverted bits
		v := inv != borrow
		borrow = inv && borrow
		if v {
			neg[i] = One
		} else {
			neg[i] = Zero
		}
	}
	d, _ := b.addLSB(s, neg)
	ge := b.NOT(d[n+1])
	out := make([]Wire, n)
	for i := 0; i < n; i++ {
		out[i] = b.Mux(ge, s[i], d[i])
	}
	return reversed(out)
}

// Equal returns one wire, true if and only if x and y are equal (len-1 AND
// gates in a balanced tree).
func (b *Builder) Equal(x, y []Wire) Wire {
	mustSameLen(x, y)
	if len(x) == 0 {
		return One
	}
	level := make([]Wire, len(x))
	for i := range x {
		level[i] = b.NOT(b.XOR(x[i], y[i]))
	}
	for len(level) > 1 {
		next := make([]Wire, 0, (len(level)+1)/2)
		for i := 0; i+1 < len(level); i += 2 {
			next = append(next, b.AND(level[i], level[i+1]))
		}
		if len(level)%2 == 1 {
			next = append(next, level[len(level)-1])
		}
		level = next
	}
	return level[0]
}

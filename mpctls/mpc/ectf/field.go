package ectf

import (
	"crypto/subtle"
	"fmt"

	"filippo.io/bigmod"
)

// The P-256 base field, p = 2²⁵⁶ - 2²²⁴ + 2¹⁹² + 2⁹⁶ - 1. All arithmetic on
// secrets goes through bigmod, in constant time.
var (
	pBytes = [32]byte{
		0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	}
	// 2²⁵⁶ mod p
	r256 = [32]byte{
		0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	}
	pMinus2 = func() []byte {
		b := pBytes
		b[31] -= 2
		return b[:]
	}()
	pMod = func() *bigmod.Modulus {
		m, err := bigmod.NewModulus(pBytes[:])
		if err != nil {
			panic(err)
		}
		return m
	}()
	r256Nat = mustNat(r256[:])
)

// P returns the P-256 base field prime, big-endian.
func P() [32]byte { return pBytes }

// fe is an element of the field.
type fe = *bigmod.Nat

func mustNat(b []byte) fe {
	x, err := bigmod.NewNat().SetBytes(b, pMod)
	if err != nil {
		panic(err)
	}
	return x
}

// feOf parses a canonical 32-byte big-endian field element.
func feOf(b []byte) (fe, error) {
	if len(b) != 32 {
		return nil, fmt.Errorf("%w: field element of %d bytes", ErrMessage, len(b))
	}
	x, err := bigmod.NewNat().SetBytes(b, pMod)
	if err != nil {
		return nil, fmt.Errorf("%w: field element not reduced", ErrMessage)
	}
	return x, nil
}

func feBytes(x fe) []byte { return x.Bytes(pMod) }

func feZero() fe           { return bigmod.NewNat().ExpandFor(pMod) }
func feCopy(x fe) fe       { return feZero().Add(x, pMod) }
func add(x, y fe) fe       { return feCopy(x).Add(y, pMod) }
func sub(x, y fe) fe       { return feCopy(x).Sub(y, pMod) }
func mul(x, y fe) fe       { return feCopy(x).Mul(y, pMod) }
func neg(x fe) fe          { return feZero().Sub(x, pMod) }
func inv(x fe) fe          { return feZero().Exp(x, pMinus2, pMod) } // x^(p-2); 0 maps to 0
func square(x fe) fe       { return mul(x, x) }
func double(x fe) fe       { return add(x, x) }
func feEqual(x, y fe) bool { return x.Equal(y) == 1 }

// feFromPad maps 64 uniformly random bytes to a field element, (hi·2²⁵⁶ +
// lo) mod p, statistically 2⁻²⁵⁶-close to uniform.
func feFromPad(b []byte) fe {
	hi, err := bigmod.NewNat().SetOverflowingBytes(b[:32], pMod)
	if err != nil {
		panic(err) // 32 bytes never exceed 2^256
	}
	lo, err := bigmod.NewNat().SetOverflowingBytes(b[32:64], pMod)
	if err != nil {
		panic(err)
	}
	return add(mul(hi, r256Nat), lo)
}

// bit returns bit i (least significant first) of the canonical form of
// x, as 0 or 1.
func bit(xb []byte, i int) int { return int(xb[31-i/8] >> (i % 8) & 1) }

// selectFe returns b if c == 1 and a if c == 0, in constant time.
func selectFe(c int, a, b fe) fe {
	ab, bb := feBytes(a), feBytes(b)
	subtle.ConstantTimeCopy(c, ab, bb)
	return mustNat(ab)
}

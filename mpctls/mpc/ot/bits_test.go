package ot

import (
	"math/rand/v2"
	"testing"
)

func TestTranspose64(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var m, orig [64]uint64
	for i := range m {
		m[i] = rng.Uint64()
	}
	orig = m
	transpose64(&m)
	for i := 0; i < 64; i++ {
		for j := 0; j < 64; j++ {
			if m[i]>>j&1 != orig[j]>>i&1 {
				t.Fatalf("bit (%d,%d)", i, j)
			}
		}
	}
}

func TestTranspose(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	const n = 192
	var rows [128][]byte
	for i := range rows {
		rows[i] = make([]byte, n/8)
		for j := range rows[i] {
			rows[i][j] = byte(rng.Uint32())
		}
	}
	cols := transpose(&rows, n)
	for j := 0; j < n; j++ {
		for i := 0; i < 128; i++ {
			if cols[j][i/64]>>(i%64)&1 != uint64(rows[i][j/8]>>(j%8)&1) {
				t.Fatalf("bit %d of column %d", i, j)
			}
		}
	}
}

// refMul multiplies in GF(2^128) bit by bit.
func refMul(a, b Block) Block {
	var r Block
	for i := 0; i < 128; i++ {
		if b[i/64]>>(i%64)&1 == 1 {
			r = r.Xor(a)
		}
		// a *= x
		carry := a[1] >> 63
		a[1] = a[1]<<1 | a[0]>>63
		a[0] <<= 1
		if carry == 1 {
			a[0] ^= 0x87
		}
	}
	return r
}

func TestGF128(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 200; i++ {
		a := Block{rng.Uint64(), rng.Uint64()}
		b := Block{rng.Uint64(), rng.Uint64()}
		if i == 0 {
			a, b = Block{^uint64(0), ^uint64(0)}, Block{^uint64(0), ^uint64(0)}
		}
		if got, want := mul(a, b), refMul(a, b); got != want {
			t.Fatalf("%x · %x = %x, want %x", a, b, got, want)
		}
	}
	// Linearity of accumulation.
	var acc gf128
	var want Block
	for i := 0; i < 10; i++ {
		a := Block{rng.Uint64(), rng.Uint64()}
		b := Block{rng.Uint64(), rng.Uint64()}
		acc.mulAdd(a, b)
		want = want.Xor(refMul(a, b))
	}
	if acc.reduce() != want {
		t.Fatal("accumulated products differ")
	}
}

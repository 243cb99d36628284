package tdx

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestVerifyRandomMutations changes, truncates and extends the real quote at
// random (deterministically seeded) and requires a classified error, never a
// panic: go-tdx-guest's ABI parser slices by length fields without bounds
// checks, so Verify must check every length first.
func TestVerifyRandomMutations(t *testing.T) {
	spr := sprQuote(t)
	r := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		b := bytes.Clone(spr)
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		switch r.IntN(4) {
		case 0:
			b = b[:r.IntN(len(b))]
		case 1:
			// Corrupt one of the length fields the parser trusts.
			for _, off := range []int{632, 636 + 130, 636 + 134 + 448} {
				if r.IntN(2) == 0 {
					b[off], b[off+1] = byte(r.IntN(256)), byte(r.IntN(256))
				}
			}
		}
		_, err := Verify(b, Options{Now: at(pinned)})
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("mutation %d: unclassified error %v", i, err)
		}
	}
}

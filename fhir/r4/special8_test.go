package r4

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// TestSpecial8: the lowest flag of special8 is the first byte strSpecial
// marks, for every byte at every position of a word of plain bytes, and
// for pairs of special bytes.
func TestSpecial8(t *testing.T) {
	first := func(w [8]byte) int {
		for k, c := range w {
			if strSpecial[c] {
				return k
			}
		}
		return 8
	}
	check := func(w [8]byte) {
		m := special8(binary.LittleEndian.Uint64(w[:]))
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := first(w); got != want {
			t.Fatalf("special8(%q): first special byte %d, want %d", w, got, want)
		}
	}
	plain := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
	check(plain)
	for pos := range 8 {
		for c := range 256 {
			w := plain
			w[pos] = byte(c)
			check(w)
			for pos2 := pos + 1; pos2 < 8; pos2++ {
				for _, c2 := range []byte{0, 0x1f, '"', '\\', 0x7f, 0x80, 0xff, ' ', '!', '#', '[', ']'} {
					w2 := w
					w2[pos2] = c2
					check(w2)
				}
			}
		}
	}
}

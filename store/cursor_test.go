package store

import (
	"errors"
	"strings"
	"testing"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, c := range []cursor{
		{createdAt: 1772600767891234, id: "6f1c2a9e-3b1d-4c7e-9a55-2f0d8e1b7c44"},
		{createdAt: 0, id: "x"},
		{createdAt: -1, id: "before.the.epoch"},
		{createdAt: 1<<63 - 1, id: strings.Repeat("z", MaxIDLen)},
	} {
		got, err := decodeCursor(c.encode())
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", c, err)
		}
		if got != c {
			t.Fatalf("round trip: got %+v, want %+v", got, c)
		}
		if len(c.encode()) > maxCursorLen {
			t.Fatalf("encoded cursor of %d bytes exceeds maxCursorLen %d", len(c.encode()), maxCursorLen)
		}
	}
}

func TestCursorRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"====",
		"djEu",                                   // "v1."
		"djEuMTIz",                               // "v1.123"
		"djEuMTIzLg",                             // "v1.123."
		"djIuMTIzLmlk",                           // "v2.123.id"
		"djEuKzEyMy5pZA",                         // "v1.+123.id": not canonical
		"djEuMDEyMy5pZA",                         // "v1.0123.id": not canonical
		"djEuOTk5OTk5OTk5OTk5OTk5OTk5OTk5LmlkCg", // overflow
		strings.Repeat("A", maxCursorLen+1),
	} {
		if _, err := decodeCursor(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("decodeCursor(%.40q) = %v, want ErrInvalid", s, err)
		}
	}
}

// FuzzDecodeCursor feeds untrusted cursors (they come from the query string
// of GET /v1/requests). The seed corpus in testdata/fuzz is replayed by
// plain `go test`.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(cursor{createdAt: 1772600767891234, id: "6f1c2a9e-3b1d-4c7e-9a55-2f0d8e1b7c44"}.encode())
	f.Add("djEuMTIzLg")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := decodeCursor(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if len(s) > maxCursorLen {
			t.Fatalf("accepted a cursor of %d bytes", len(s))
		}
		if c.id == "" || len(c.id) > MaxIDLen {
			t.Fatalf("accepted id of %d bytes", len(c.id))
		}
		again, err := decodeCursor(c.encode())
		if err != nil || again != c {
			t.Fatalf("re-encoding %+v gave %+v, %v", c, again, err)
		}
	})
}

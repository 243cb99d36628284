package tdx

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzVerify feeds arbitrary bytes to Verify. Seeds are the real quotes in
// testdata plus truncated and changed copies; testdata/fuzz/FuzzVerify holds
// further saved inputs that plain `go test` replays.
func FuzzVerify(f *testing.F) {
	spr := sprQuote(f)
	cos := readTestdata(f, "cos-113-tdx-quote.dat")
	f.Add(spr)
	f.Add(cos)
	f.Add(spr[:signedLen+4])
	f.Add(spr[:1300])
	flipped := bytes.Clone(spr)
	flipped[700] ^= 0xff
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, quote []byte) {
		ev, err := Verify(quote, Options{Now: at(pinned)})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Class == nil {
				t.Fatalf("error %v is not a classified *Error", err)
			}
			return
		}
		// Anything that verifies carries a genuine Intel-signed body: it
		// must be one of the seeds' bodies.
		if !bytes.Equal(quote[:signedLen], spr[:signedLen]) && !bytes.Equal(quote[:signedLen], cos[:signedLen]) {
			t.Fatalf("a quote with a new signed body verified: %x", quote[:signedLen])
		}
		if len(ev.Measurement) != 48 {
			t.Fatalf("measurement %x", ev.Measurement)
		}
	})
}

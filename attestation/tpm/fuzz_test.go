package tpm

import (
	"bytes"
	"crypto"
	"errors"
	"testing"
)

// FuzzVerify feeds arbitrary attestation bytes to Verify with the committed
// simulator AK pinned. Seeds: the real simulator attestation, truncations and
// flipped copies. Nothing but the seed itself may verify.
func FuzzVerify(f *testing.F) {
	v := simVectors(f)
	f.Add(v.att)
	f.Add(v.att[:len(v.att)/3])
	f.Add(v.att[:200])
	flipped := bytes.Clone(v.att)
	flipped[100] ^= 0xff
	f.Add(flipped)
	f.Add([]byte{})
	opts := Options{TrustedAKs: []crypto.PublicKey{v.ak}}
	want, err := Verify(v.att, v.nonce, opts)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, att []byte) {
		ev, err := Verify(att, v.nonce, opts)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Class == nil {
				t.Fatalf("error %v is not a classified *Error", err)
			}
			return
		}
		// Protobuf encodings are not unique, so a re-encoding may verify;
		// it must then attest exactly the same measurement.
		if !bytes.Equal(ev.Measurement, want.Measurement) {
			t.Fatalf("forged measurement %s verified", ev.Measurement)
		}
	})
}

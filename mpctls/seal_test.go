package mpctls

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// TestSealOpen: what Sealer protects, Opener opens, for every suite of
// both versions, with the content type and sequence number it was sealed
// with and nothing else.
func TestSealOpen(t *testing.T) {
	for _, s := range Suites() {
		t.Run(s.Name, func(t *testing.T) {
			var seal *Sealer
			var open *Opener
			var err error
			if s.Version == VersionTLS13 {
				secret := make([]byte, s.Hash.Size())
				rand.Read(secret)
				seal, err = NewSealer13(s, secret)
				if err == nil {
					open, err = NewOpener13(s, secret)
				}
			} else {
				key, iv := make([]byte, s.KeyLen), make([]byte, s.IVLen)
				rand.Read(key)
				rand.Read(iv)
				seal, err = NewSealer12(s, key, iv)
				if err == nil {
					open, err = NewOpener12(s, key, iv)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{0, 1, 100, MaxPlaintext} {
				pt := make([]byte, n)
				rand.Read(pt)
				for _, ct := range []uint8{RecordApplicationData, RecordHandshake, RecordAlert} {
					if n == 0 && s.Version == VersionTLS12 && ct != RecordApplicationData {
						continue
					}
					raw, err := seal.Seal(nil, 7, ct, pt)
					if err != nil {
						t.Fatal(err)
					}
					if len(raw)-HeaderLen > len(pt)+open.Overhead() {
						t.Fatalf("record of %d bytes for %d of plaintext", len(raw), n)
					}
					rec, err := recordFromRaw(ServerToClient, 0, raw)
					if err != nil {
						t.Fatal(err)
					}
					gotType, got, err := open.Open(nil, 7, rec)
					if err != nil {
						t.Fatalf("open: %v", err)
					}
					if gotType != ct || !bytes.Equal(got, pt) {
						t.Fatalf("opened type %d, %d bytes; sealed type %d, %d bytes", gotType, len(got), ct, n)
					}
					if _, _, err := open.Open(nil, 8, rec); err == nil {
						t.Fatal("record opened under another sequence number")
					}
				}
			}
			if _, err := seal.Seal(nil, 0, RecordApplicationData, make([]byte, MaxPlaintext+1)); err == nil {
				t.Fatal("sealed more than one record's plaintext")
			}
		})
	}
}

package sevsnp_test

import (
	"bytes"
	"testing"

	"github.com/acds-project/acds/attestation/sevsnp"
)

// FuzzVerify feeds arbitrary evidence to the parser and to verification
// against AMD's roots (seeded with real Milan evidence). Nothing may panic,
// and nothing but the unmodified real evidence may verify.
func FuzzVerify(f *testing.F) {
	ev := milanEvidence(f)
	seed, err := ev.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	v := sevsnp.NewVerifier(sevsnp.Roots{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := v.Verify(data, sevsnp.Check{Now: milanNow, AllowDebug: true})
		if err == nil && !bytes.Equal(data, seed) {
			t.Fatalf("modified evidence verified: %x", data)
		}
	})
}

package manifest_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/acds-project/acds/attestation/manifest"
)

// A publisher signs the code hashes of a release; a verifier checks the
// manifest with the publisher's public key before trusting its values.
func Example() {
	seed := sha256.Sum256([]byte("example publisher key"))
	key := ed25519.NewKeyFromSeed(seed[:]) // in practice: manifest.LoadOrCreateKey
	m, err := manifest.ParseDescription([]byte(`{
	  "issuer": "ACDS release team",
	  "notBefore": "2026-01-01T00:00:00Z",
	  "notAfter": "2027-01-01T00:00:00Z",
	  "profiles": {"sev-snp-sim": {"measurements": ["` + fmt.Sprintf("%096x", 42) + `"]}}
	}`))
	if err != nil {
		panic(err)
	}
	signed, err := manifest.Sign(nil, m, key)
	if err != nil {
		panic(err)
	}

	pub := key.Public().(ed25519.PublicKey)
	got, err := manifest.Verify(signed, pub, time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(got.Issuer, err)
	_, err = manifest.Verify(signed, pub, time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC))
	fmt.Println(err)
	// Output:
	// ACDS release team <nil>
	// manifest: expired: expired 2027-01-01T00:00:00Z
}

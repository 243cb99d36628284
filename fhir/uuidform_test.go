package fhir

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// uuidForm agrees with the regular expressions of the two forms it
// accepts, on listed cases and on random strings that are one byte away
// from a UUID.
func TestUUIDForm(t *testing.T) {
	lower := regexp.MustCompile(`^(urn:uuid:)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	either := regexp.MustCompile(`^(urn:uuid:)?[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	check := func(s string) {
		t.Helper()
		if got, want := uuidForm(s, false), lower.MatchString(s); got != want {
			t.Errorf("uuidForm(%q, false) = %v, want %v", s, got, want)
		}
		if got, want := uuidForm(s, true), either.MatchString(s); got != want {
			t.Errorf("uuidForm(%q, true) = %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{
		"", "urn:uuid:", "00000000-0000-4000-8000-000000000001", "urn:uuid:00000000-0000-4000-8000-000000000001",
		"urn:uuid:0000000A-0000-4000-8000-000000000001", "urn:uuid:00000000-0000-4000-8000-00000000000g",
		"urn:uuid:00000000-0000-4000-8000-0000000000010", "urn:uuid:00000000+0000-4000-8000-000000000001",
		"urn:uuid:000000000-000-4000-8000-000000000001", "urn:uuid:00000000-0000-4000-8000-00000000000-",
		"URN:UUID:00000000-0000-4000-8000-000000000001", "urn:uuid:00000000-0000-4000-8000-00000000000\x00",
	} {
		check(s)
	}
	const alphabet = "0123456789abcdefABCDEFgG-:\x00\xff "
	rng := rand.New(rand.NewPCG(1, 2))
	base := []byte("urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301")
	for range 20000 {
		b := append([]byte(nil), base...)
		b[rng.IntN(len(b))] = alphabet[rng.IntN(len(alphabet))]
		check(string(b))
		check(string(b[9:]))
	}
}

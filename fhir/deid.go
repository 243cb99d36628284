package fhir

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// pseudonymID returns the keyed pseudonym of a resource identity, usable
// as a FHIR id (32 lowercase hex digits).
func pseudonymID(key []byte, identity string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("acds/v1/id\x00"))
	m.Write([]byte(identity))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// deidentify is filled in by the Safe Harbor implementation.
func deidentify(res *node, key []byte) {}

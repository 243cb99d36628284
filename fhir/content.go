package fhir

import "github.com/acds-project/acds/fhir/r4"

// canonicalResource returns the canonical JSON of r, as the package doc
// defines it (Canonical output): RFC 8785 member order, minimal string
// escapes, numbers as written.
func canonicalResource(r r4.Resource) ([]byte, error) {
	return r4.MarshalCanonical(r)
}

package fhir

import (
	"strings"
	"testing"
)

// TestRefType: the resource type of a RESTful reference, or "" for what
// is not one (a query, a fragment, a URN, a bad id, an unknown type).
func TestRefType(t *testing.T) {
	for ref, want := range map[string]string{
		"Patient/p1":                        "Patient",
		"https://x.example/fhir/Patient/p1": "Patient",
		"Observation/o.1/_history/2":        "Observation",
		"Patient/p1?x=1":                    "",
		"Patient/p1#c":                      "",
		"Patient?identifier=1":              "",
		"#contained":                        "",
		"urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5f": "",
		"Patient/":       "",
		"Patient/bad id": "",
		"Nonsense/p1":    "",
		"/p1":            "",
	} {
		if got := refType(ref); got != want {
			t.Errorf("refType(%q) = %q, want %q", ref, got, want)
		}
	}
}

// TestURIUUIDCase: a urn:uuid URI may use upper-case hex digits (as the
// check on the lower-cased text allowed), a uuid typed value may not.
func TestURIUUIDCase(t *testing.T) {
	lower := "urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5f"
	upper := "urn:uuid:" + strings.ToUpper(lower[len("urn:uuid:"):])
	for _, c := range []struct {
		typ, s string
		ok     bool
	}{
		{"uri", lower, true}, {"uri", upper, true}, {"uuid", lower, true}, {"uuid", upper, false},
		{"uri", "urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5g", false},
		{"uri", "urn:uuid:7f8a4e1e-2b1c-4c55-9f2e-0a1b2c3d4e5", false},
		{"uri", "urn:uuid:7f8a4e1e+2b1c-4c55-9f2e-0a1b2c3d4e5f", false},
		{"uri", "urn:uuid:7F8A4E1E-2B1C-4C55-9F2E-0A1B2C3D4E5Ｆ", false},
	} {
		if got := primitiveFormat(c.typ, c.s) == ""; got != c.ok {
			t.Errorf("%s %q: valid %v, want %v", c.typ, c.s, got, c.ok)
		}
	}
}

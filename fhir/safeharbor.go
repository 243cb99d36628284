package fhir

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"
)

// The pure Safe Harbor helpers shared by the de-identification code: the
// rules themselves are documented in the package doc (doc.go).

// darURL is the data-absent-reason extension used for masked data.
const darURL = "http://hl7.org/fhir/StructureDefinition/data-absent-reason"

// restrictedZIP3 reports the three-digit ZIP prefixes whose areas held 20,000
// or fewer people in the 2000 Census (HHS guidance on Safe Harbor).
func restrictedZIP3(z string) bool {
	switch z {
	case "036", "059", "063", "102", "203", "556", "692", "790", "821", "823", "830", "831", "878", "879", "884", "890", "893":
		return true
	}
	return false
}

// pseudonymID returns the keyed pseudonym of a resource identity, usable
// as a FHIR id (32 lowercase hex digits).
func pseudonymID(key []byte, identity string) string {
	return keyed(key, "id", identity)
}

func keyed(key []byte, domain, value string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("acds/v1/"))
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(value))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// keptText reports the free-text string elements that carry terminology or
// institutional names rather than facts about the individual.
func keptText(path string) bool {
	switch path {
	case "Coding.display", "CodeableConcept.text", "Quantity.unit", "Age.unit", "Duration.unit", "Distance.unit", "Count.unit", "Address.state", "Address.country", "Extension.url", "Narrative.status",
		"Reference.reference": // kept here, then dropped by reference() unless it resolves in the output
		return true
	}
	return false
}

func digitsOnly(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// hasIP reports whether s contains an IPv4 or IPv6 address.
func hasIP(s string) bool {
	if !strings.ContainsAny(s, ".:") {
		return false
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '.' || r == ':')
	}) {
		if len(f) < 7 {
			continue
		}
		if a, err := netip.ParseAddr(strings.Trim(f, ".:")); err == nil && (a.Is4() || strings.Count(f, ":") >= 2) {
			return true
		}
	}
	return false
}

package fhir

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strings"

	"github.com/acds-project/acds/fhir/spec"
)

// The pure Safe Harbor helpers shared by the de-identification code: the
// rules themselves are documented in the package doc (doc.go).

// darURL is the data-absent-reason extension used for masked data.
const darURL = "http://hl7.org/fhir/StructureDefinition/data-absent-reason"

// geolocationURL is the core extension holding the latitude and longitude
// of an address.
const geolocationURL = "http://hl7.org/fhir/StructureDefinition/geolocation"

// birthSexURL is the US Core birth sex extension (a code of F, M, UNK…).
const birthSexURL = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-birthsex"

// extensionCode reports whether code is a valueCode that extension url
// takes from a value set (so it names a concept, not a person): the
// data-absent-reason codes and the US Core birth sex codes.
func extensionCode(url, code string) bool {
	switch url {
	case darURL:
		vs := spec.LookupValueSet("http://hl7.org/fhir/ValueSet/data-absent-reason")
		return vs != nil && vs.Contains("", code)
	case birthSexURL:
		switch code {
		case "F", "M", "UNK", "OTH", "ASKU":
			return true
		}
	}
	return false
}

// definitionalResource reports the knowledge and conformance resources,
// whose URIs name definitions (profiles, value sets, questionnaires,
// protocols) rather than anything of an individual.
func definitionalResource(name string) bool {
	switch name {
	case "ActivityDefinition", "CapabilityStatement", "ChargeItemDefinition", "CodeSystem",
		"CompartmentDefinition", "ConceptMap", "EffectEvidenceSynthesis", "EventDefinition",
		"Evidence", "EvidenceVariable", "ExampleScenario", "GraphDefinition", "ImplementationGuide",
		"Library", "Measure", "MessageDefinition", "NamingSystem", "OperationDefinition",
		"PlanDefinition", "Questionnaire", "ResearchDefinition", "ResearchElementDefinition",
		"RiskEvidenceSynthesis", "SearchParameter", "StructureDefinition", "StructureMap",
		"TerminologyCapabilities", "TestScript", "ValueSet":
		return true
	}
	return false
}

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

// hasIP reports whether s contains an IPv4 or IPv6 address, alone or
// within a URL, with or without a port ("10.1.2.3:8080",
// "http://10.1.2.3:8080/x", "[fe80::1]:443"), with a zone ("fe80::1%eth0")
// or mapped into IPv6 ("::ffff:10.1.2.3").
//
// An IPv4 address is a maximal run of digits and dots that is exactly four
// numbers of at most three digits, each at most 255 (leading zeros
// allowed), so longer dotted runs such as OIDs ("2.16.840.1.113883.6.96")
// and version numbers ("1.2.3") do not match. An IPv6 address is a run of
// hexadecimal digits, colons and dots, seven characters or more, that
// parses as one and has at least two colons, so times ("10:11:12") do not
// match.
func hasIP(s string) bool {
	if !strings.ContainsAny(s, ".:") {
		return false
	}
	// IPv4, on its own or inside a longer address (port, mapped IPv6).
	for i := 0; i < len(s); {
		if !isDigitOrDot(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isDigitOrDot(s[j]) {
			j++
		}
		if isIPv4(strings.Trim(s[i:j], ".")) {
			return true
		}
		i = j
	}
	// IPv6: brackets, zones, ports and path separators end the run. A run
	// may start with hex letters or a ':' that belong to what precedes the
	// address ("ip:fe80::1", "tcp:fe80::1"), so every start after a colon
	// within the longest textual IPv6 form (45 characters) is tried too.
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '.' || r == ':')
	}) {
		if len(f) < 3 || strings.Count(f, ":") < 2 {
			continue
		}
		if isIPv6(f) {
			return true
		}
		for k := max(0, len(f)-46); k < len(f)-2; k++ {
			if f[k] == ':' && (isIPv6(f[k+1:]) || isIPv6(f[k:])) {
				return true
			}
		}
	}
	return false
}

// isIPv6 reports whether f, without trailing dots or colons (sentence
// punctuation, a port separator), is an IPv6 address.
func isIPv6(f string) bool {
	for _, c := range [...]string{f, strings.TrimRight(f, ".:"), strings.TrimLeft(strings.TrimRight(f, ".:"), ".")} {
		if strings.Count(c, ":") < 2 {
			continue
		}
		if a, err := netip.ParseAddr(c); err == nil && a.Is6() {
			return true
		}
	}
	return false
}

func isDigitOrDot(c byte) bool { return c >= '0' && c <= '9' || c == '.' }

// isIPv4 reports whether s is a dotted quad: four numbers of one to three
// digits, each at most 255.
func isIPv4(s string) bool {
	parts := 0
	for _, p := range strings.Split(s, ".") {
		if len(p) == 0 || len(p) > 3 {
			return false
		}
		n := 0
		for i := 0; i < len(p); i++ {
			n = n*10 + int(p[i]-'0')
		}
		if n > 255 {
			return false
		}
		parts++
	}
	return parts == 4
}

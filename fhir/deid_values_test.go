package fhir

import (
	"encoding/json"
	"strings"
	"testing"
)

// deidValues de-identifies in, checks that the output is valid R4 and
// returns the output JSON.
func deidValues(t *testing.T, in string) string {
	t.Helper()
	out, err := Process([]byte(in), testOpts(FormatR4Deidentified))
	if err != nil {
		t.Fatal(err)
	}
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("invalid output: %v\n%s", o.Issues, out.JSON)
	}
	return string(out.JSON)
}

// collection wraps resources (JSON objects with resourceType and id) into
// a collection Bundle whose fullUrls are http://example.org/fhir/Type/id.
func collection(t *testing.T, resources ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, r := range resources {
		var h struct{ ResourceType, ID string }
		if err := json.Unmarshal([]byte(r), &h); err != nil {
			t.Fatalf("%v: %s", err, r)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"fullUrl":"http://example.org/fhir/` + h.ResourceType + "/" + h.ID + `","resource":` + r + "}")
	}
	b.WriteString("]}")
	return b.String()
}

// wantGoneKept reports every bad string found in s and every good string
// missing from it.
func wantGoneKept(t *testing.T, s string, bad, good []string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(s, b) {
			t.Errorf("%q survived: %s", b, s)
		}
	}
	for _, g := range good {
		if !strings.Contains(s, g) {
			t.Errorf("want %s in %s", g, s)
		}
	}
}

// TestDeidentifyIPInSystemAndState: an Identifier.system, Address.state or
// Address.country holding an IP address is removed.
func TestDeidentifyIPInSystemAndState(t *testing.T) {
	s := deidValues(t, `{"resourceType":"Patient","id":"p1","identifier":[{"system":"http://10.1.2.3/mrn","value":"1"},{"system":"http://hospital.example.org/mrn","value":"2"}],
	 "address":[{"state":"MA 192.168.7.7","postalCode":"02139"},{"state":"MA","country":"US [fe80::1]:443"}]}`)
	wantGoneKept(t, s, []string{"10.1.2.3", "192.168", "fe80"},
		[]string{`"system":"http://hospital.example.org/mrn"`, `"postalCode":"021"`, `"state":"MA"`})
}

func TestHasIP(t *testing.T) {
	for _, c := range []struct {
		s  string
		ip bool
	}{
		{"10.1.2.3", true},
		{"host 192.168.0.1 here", true},
		{"10.1.2.3:8080", true},
		{"http://10.1.2.3:8080/x", true},
		{"http://10.1.2.3/", true},
		{"255.255.255.255.", true},
		{"010.001.002.003", true},
		{"::ffff:10.1.2.3", true},
		{"::FFFF:10.1.2.3", true},
		{"2001:db8::1", true},
		{"2001:0db8:0000:0000:0000:ff00:0042:8329", true},
		{"fe80::1%eth0", true},
		{"[fe80::1]:443", true},
		{"http://[2001:db8::7]/path", true},
		{"fe80::1", true},
		{"1.2.3", false},
		{"version 1.2.3", false},
		{"256.1.2.3", false},
		{"1.2.3.4.5", false},
		{"urn:oid:2.16.840.1.113883.6.96", false},
		{"urn:oid:1.2.840.99999999.1.32695277.1559319188055", false},
		{"1.2.840.10008.5.1.4.1.1.1.1", false},
		{"2019-05-31", false},
		{"2019-05-31T10:11:12+02:00", false},
		{"10:11:12", false},
		{"10:11:12.345", false},
		{"3.14159", false},
		{"http://hl7.org/fhir/StructureDefinition/geolocation", false},
		{"urn:uuid:4c6f8a2e-0d43-4b5e-9f7a-1d2e3f405162", false},
		{"", false},
	} {
		if got := hasIP(c.s); got != c.ip {
			t.Errorf("hasIP(%q) = %v, want %v", c.s, got, c.ip)
		}
	}
}

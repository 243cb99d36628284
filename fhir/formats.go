package fhir

// Pure checks on the lexical forms of FHIR values and on reference and
// version strings. They work on plain strings, for the validator
// (validate.go) and whatever else needs one rule.

import (
	"encoding/base64"
	"strings"

	"github.com/acds-project/acds/fhir/spec"
)

func isIDChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.'
}

func isPrimitive(typ string) bool {
	return len(typ) > 0 && typ[0] >= 'a' && typ[0] <= 'z'
}

// refType returns the resource type named by a relative or absolute
// RESTful reference ([base/]Type/id[/_history/v]), or "".
func refType(ref string) string {
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		ref = ref[:i]
	}
	if strings.IndexByte(ref, '?') >= 0 || strings.IndexByte(ref, '#') >= 0 {
		return "" // two byte searches cost less than ContainsAny's set
	}
	j := strings.LastIndexByte(ref, '/')
	if j <= 0 || j == len(ref)-1 {
		return ""
	}
	id := ref[j+1:]
	for k := 0; k < len(id); k++ {
		if !isIDChar(id[k]) {
			return ""
		}
	}
	typ := ref[strings.LastIndexByte(ref[:j], '/')+1 : j]
	if !spec.IsResource(typ) {
		return ""
	}
	return typ
}

// decodeBase64 decodes standard base64, ignoring the whitespace the
// base64Binary lexical form allows.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, " \t\r\n") {
		s = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, s)
	}
	return base64.StdEncoding.DecodeString(s)
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func looksLikeHTML(s string) bool {
	i := strings.IndexByte(s, '<')
	if i < 0 {
		return false
	}
	l := strings.ToLower(s[i:])
	for _, t := range []string{"<script", "<iframe", "<img ", "<object", "<embed", "<a href", "<form", "<style", "<svg", "<link ", "<meta ", "javascript:"} {
		if strings.Contains(l, t) {
			return true
		}
	}
	return false
}

func validCode(s string) bool {
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\t' || c == '\n' || c == '\r' {
			return false
		}
		if c == ' ' && s[i+1] == ' ' {
			return false
		}
	}
	return true
}

func validOID(s string) bool {
	s = strings.TrimPrefix(s, "urn:oid:")
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts[0]) != 1 || parts[0][0] < '0' || parts[0][0] > '2' {
		return false
	}
	for _, p := range parts[1:] {
		if p == "" || (len(p) > 1 && p[0] == '0') {
			return false
		}
		for i := 0; i < len(p); i++ {
			if p[i] < '0' || p[i] > '9' {
				return false
			}
		}
	}
	return true
}

func validUUID(s string) bool {
	return uuidForm(s, false)
}

// uuidForm reports whether s, less a "urn:uuid:" prefix, is a UUID in
// the 8-4-4-4-12 form: hex digits in lower case, or in either case with
// anyCase (as strings.ToLower before validUUID, without the copy).
func uuidForm(s string, anyCase bool) bool {
	s = strings.TrimPrefix(s, "urn:uuid:")
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	want := uuidLower
	if anyCase {
		want |= uuidUpper
	}
	// OR the classes of the hex groups' bytes: a byte of another class
	// (a dash or any other) sets a bit outside want.
	var got uint8
	for _, g := range [...]string{s[:8], s[9:13], s[14:18], s[19:23], s[24:]} {
		for i := 0; i < len(g); i++ {
			got |= uuidClass[g[i]]
		}
	}
	return got&^want == 0
}

// Byte classes for uuidForm: a lower-case hex digit (0-9, a-f), an
// upper-case one (A-F), anything else.
const (
	uuidLower uint8 = 1 << iota
	uuidUpper
	uuidOther
)

var uuidClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			t[c] = uuidLower
		case c >= 'A' && c <= 'F':
			t[c] = uuidUpper
		default:
			t[c] = uuidOther
		}
	}
	return t
}()

func digits(s string, n int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	x := 0
	for i := 0; i < n; i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		x = x*10 + int(s[i]-'0')
	}
	return x, true
}

// dateLen returns the length of the date prefix of s (YYYY, YYYY-MM or
// YYYY-MM-DD) and whether it is a valid calendar date.
func dateLen(s string) (int, bool) {
	y, ok := digits(s, 4)
	if !ok || y == 0 {
		return 0, false
	}
	if len(s) == 4 || s[4] != '-' {
		return 4, true
	}
	m, ok := digits(s[5:], 2)
	if !ok || m < 1 || m > 12 {
		return 0, false
	}
	if len(s) == 7 || s[7] != '-' {
		return 7, true
	}
	d, ok := digits(s[8:], 2)
	if !ok || d < 1 || d > daysIn(y, m) {
		return 0, false
	}
	return 10, true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func validDate(s string) bool {
	n, ok := dateLen(s)
	return ok && n == len(s)
}

// timeLen validates hh:mm:ss(.f+)? at the start of s and returns its length.
func timeLen(s string) (int, bool) {
	h, ok1 := digits(s, 2)
	if !ok1 || len(s) < 8 || s[2] != ':' || s[5] != ':' {
		return 0, false
	}
	m, ok2 := digits(s[3:], 2)
	sec, ok3 := digits(s[6:], 2)
	if !ok2 || !ok3 || h > 23 || m > 59 || sec > 60 {
		return 0, false
	}
	n := 8
	if n < len(s) && s[n] == '.' {
		j := n + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == n+1 {
			return 0, false
		}
		n = j
	}
	return n, true
}

func validTime(s string) bool {
	n, ok := timeLen(s)
	return ok && n == len(s)
}

func checkDateTime(s string, instant bool) string {
	n, ok := dateLen(s)
	if !ok {
		return "not a valid date/time format"
	}
	if n == len(s) {
		if instant {
			return "an instant needs a full date, time and timezone"
		}
		return ""
	}
	if n != 10 || s[10] != 'T' {
		return "not a valid date/time format"
	}
	tl, ok := timeLen(s[11:])
	if !ok {
		return "not a valid date/time format"
	}
	z := s[11+tl:]
	switch {
	case z == "Z":
	case len(z) == 6 && (z[0] == '+' || z[0] == '-') && z[3] == ':':
		h, ok1 := digits(z[1:], 2)
		m, ok2 := digits(z[4:], 2)
		if !ok1 || !ok2 || h > 14 || m > 59 {
			return "not a valid timezone"
		}
	case z == "":
		return "if a date has a time, it must have a timezone"
	default:
		return "not a valid date/time format"
	}
	return ""
}

func checkXHTML(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "<div") || !strings.HasSuffix(t, "</div>") {
		return "the narrative must be an XHTML div element"
	}
	head := t[:strings.IndexByte(t, '>')+1]
	if !strings.Contains(head, `xmlns="http://www.w3.org/1999/xhtml"`) && !strings.Contains(head, `xmlns='http://www.w3.org/1999/xhtml'`) {
		return "the narrative div must declare the XHTML namespace"
	}
	l := strings.ToLower(t)
	for _, bad := range []string{"<script", "<iframe", "<object", "<embed", "<form", "javascript:"} {
		if strings.Contains(l, bad) {
			return "the narrative contains active content, which is not allowed"
		}
	}
	return xhtmlEntities(t)
}

// xhtmlEntities checks the entity references of a narrative: FHIR
// narrative is XML, which defines only amp, lt, gt, quot and apos besides
// numeric character references, so an HTML entity such as &reg; or
// &nbsp; is malformed XHTML (write &#174; or the character itself).
func xhtmlEntities(s string) string {
	for i := strings.IndexByte(s, '&'); i >= 0; {
		rest := s[i+1:]
		end := strings.IndexByte(rest, ';')
		name := rest
		if end >= 0 {
			name = rest[:end]
		}
		switch {
		case end < 0 || end > 32:
			return "malformed XHTML: an & that does not start an entity reference (write &amp;)"
		case name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "apos":
		case len(name) > 1 && name[0] == '#' && validCharRef(name[1:]):
		default:
			return "malformed XHTML: the entity &" + clip(name) + "; is not defined in XML (FHIR narrative allows only &amp; &lt; &gt; &quot; &apos; and numeric references)"
		}
		j := strings.IndexByte(rest, '&')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return ""
}

// validCharRef reports whether s (after "&#") is a decimal or x-prefixed
// hexadecimal character number.
func validCharRef(s string) bool {
	hex := false
	if s[0] == 'x' {
		hex, s = true, s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
			return false
		}
	}
	return true
}

// laterThan reports whether per-1 fails for a Period from a to b: a is
// later than b, or (for dates of different precision) not certainly
// before. Dates with times are compared only at the same precision and in
// the same timezone, where string order is time order.
func laterThan(a, b string) bool {
	if len(a) != len(b) {
		if len(a) > 10 && len(b) > 10 {
			return false // times of different precision: not judged
		}
		// Dates of different precision (2020-01 and 2020-01-15) compare on
		// the common part; equal there, FHIRPath's start <= end is empty,
		// which fails per-1 as the HL7 validator reads it.
		n := min(len(a), len(b), 10)
		return a[:n] >= b[:n]
	}
	if len(a) > 10 {
		za, zb := zone(a), zone(b)
		if za == "" || za != zb {
			return false
		}
	}
	return a > b
}

// zone returns the timezone suffix of a dateTime ("Z", "+01:00"), or "".
func zone(s string) string {
	if strings.HasSuffix(s, "Z") {
		return "Z"
	}
	if len(s) >= 6 && (s[len(s)-6] == '+' || s[len(s)-6] == '-') {
		return s[len(s)-6:]
	}
	return ""
}

func lastID(ref string) string {
	if j := strings.Index(ref, "/_history/"); j >= 0 {
		ref = ref[:j]
	}
	return ref[strings.LastIndexByte(ref, '/')+1:]
}

// preR4Resource describes resource types of DSTU2 or STU3 that R4 dropped or
// renamed, so such content is reported as "not R4" rather than unknown.
func preR4Resource(name string) string {
	switch name {
	case "Order", "OrderResponse", "DiagnosticOrder", "DeviceUseRequest", "MedicationOrder", "Conformance", "Supply", "ImagingObjectSelection":
		return "a DSTU2 resource"
	case "EligibilityRequest", "EligibilityResponse", "ProcessRequest", "ProcessResponse":
		return "a DSTU2/STU3 resource"
	case "DeviceComponent", "ProcedureRequest", "ReferralRequest", "Sequence", "DataElement", "ImagingManifest", "BodySite", "ExpansionProfile", "ServiceDefinition":
		return "an STU3 resource"
	}
	return ""
}

// primitiveFormat checks the lexical form of a non-empty value s of the
// string-based primitive type typ ("date", "code", "uri"…) and returns
// what is wrong with it, or "" when it is well formed.
func primitiveFormat(typ, s string) string {
	switch typ {
	case "string", "markdown":
		if len(s) > 1<<20 {
			return "value is longer than 1 MiB"
		}

	case "code":
		if !validCode(s) {
			return "not a valid code (no leading, trailing or repeated whitespace)"
		}
	case "id":
		if len(s) > 64 {
			return "id is longer than 64 characters"
		}
		for i := 0; i < len(s); i++ {
			if !isIDChar(s[i]) {
				return "not a valid id"
			}
		}
	case "uri", "url", "canonical":
		switch {
		case hasSpace(s):
			return "URIs must not contain whitespace"
		case strings.HasPrefix(s, "urn:oid:") && !validOID(s):
			return "not a valid OID"
		case strings.HasPrefix(s, "urn:uuid:") && !uuidForm(s, true):
			return "not a valid UUID"
		}
	case "oid":
		if !validOID(s) {
			return "not a valid OID (urn:oid:…)"
		}
	case "uuid":
		if !validUUID(s) {
			return "not a valid UUID (urn:uuid:…, lowercase)"
		}
	case "date":
		if !validDate(s) {
			return "not a valid date format"
		}
	case "dateTime":
		return checkDateTime(s, false)
	case "instant":
		return checkDateTime(s, true)
	case "time":
		if !validTime(s) {
			return "not a valid time format (hh:mm:ss)"
		}
	case "base64Binary":
		if _, err := decodeBase64(s); err != nil {
			return "not valid base64 content"
		}
	case "xhtml":
		return checkXHTML(s)
	}
	return ""
}

// hasSpace reports whether s holds a space, tab, CR or LF.
func hasSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			return true
		}
	}
	return false
}

package portal

import (
	"bytes"
	"encoding/json"
	"errors"
)

// scan.go is a hand-written JSON walker, kept where the standard library
// could serve because it is the fetch's hot path: BenchmarkScanPage reads
// a 1 MB Synthea page with it, with json.Unmarshal into the page's fields,
// and with a json.Decoder token stream (streamPage), in the same run; on
// the 2-core CI machine scanPage took ~2–4 ms, json.Unmarshal ~10–23 ms
// (without reading each resource's type and id) and json.Decoder ~20–35
// ms. It is fuzzed against encoding/json (FuzzScanPage, FuzzScanValue,
// FuzzResourceHeader).

// errScan is returned for bytes that are not JSON (or not a JSON object
// where one is needed).
var errScan = errors.New("not a JSON object")

// errHeader is returned for a resource whose "resourceType" or "id" is
// not a string.
var errHeader = errors.New("resourceType or id is not a string")

// resourceHeader returns the top-level "resourceType" and "id" strings of
// a JSON object without decoding the rest of it, checking the JSON as far
// as it reads; on anything else it returns an error, never a panic. It
// is the connector's hot path: decoding every resource to read two fields
// dominated the fetch.
func resourceHeader(raw []byte) (typ, id string, err error) {
	typ, id, _, err = resourceHeaderAt(raw, skipWS(raw, 0))
	return typ, id, err
}

// resourceHeaderAt is resourceHeader for the object at raw[i]; it also
// returns the index after the object, so that a page walk reads each
// resource once. An error other than errHeader means raw is not JSON.
func resourceHeaderAt(raw []byte, i int) (typ, id string, end int, err error) {
	end, err = members(raw, i, func(key []byte, b []byte, i int) (int, error) {
		vEnd, err := scanValue(b, i)
		if err != nil {
			return 0, err
		}
		switch string(key) {
		case "resourceType":
			if json.Unmarshal(b[i:vEnd], &typ) != nil {
				return 0, errHeader
			}
		case "id":
			if json.Unmarshal(b[i:vEnd], &id) != nil {
				return 0, errHeader
			}
		}
		return vEnd, nil
	})
	if err != nil {
		return "", "", 0, err
	}
	return typ, id, end, nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// maxDepth bounds the nesting of arrays and objects, as encoding/json's.
const maxDepth = 10000

// scanString returns the index after the JSON string starting at b[i],
// checking its escapes and that it has no control characters.
func scanString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errScan
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c < 0x20:
			return 0, errScan
		case c == '\\':
			i++
			if i >= len(b) {
				return 0, errScan
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return 0, errScan
				}
				i += 4
			default:
				return 0, errScan
			}
		}
	}
	return 0, errScan
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// scanNumber returns the index after the JSON number starting at b[i].
func scanNumber(b []byte, i int) (int, error) {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, errScan
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, errScan
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, errScan
		}
		i = j
	}
	return i, nil
}

// scanValue returns the index after the JSON value starting at b[i],
// checking it completely (as json.Valid does, UTF-8 aside).
func scanValue(b []byte, i int) (int, error) { return scanDepth(b, i, 0) }

func scanDepth(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, errScan
	}
	switch c := b[i]; c {
	case '"':
		return scanString(b, i)
	case '{':
		if depth >= maxDepth {
			return 0, errScan
		}
		return members(b, i, func(_ []byte, b []byte, i int) (int, error) { return scanDepth(b, i, depth+1) })
	case '[':
		if depth >= maxDepth {
			return 0, errScan
		}
		return elements(b, i, func(b []byte, i int) (int, error) { return scanDepth(b, i, depth+1) })
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if lit[0] == c {
				if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
					return 0, errScan
				}
				return i + len(lit), nil
			}
		}
		return 0, errScan
	default:
		return scanNumber(b, i)
	}
}

// page is a search page as the connector reads it. Resources are
// sub-slices of the page's bytes, not copies.
type page struct {
	resourceType string
	next         string // the URL of the last link with relation "next"
	entries      []pageEntry
}

// pageEntry is one entry of a page.
type pageEntry struct {
	resource []byte // the resource's JSON; nil when the entry has none
	outcome  bool   // search.mode is "outcome": an OperationOutcome, not data
	// typ and id are the resource's, read in the same walk; headerErr
	// says the resource is not an object with string ones.
	typ, id   string
	headerErr error
}

// scanPage reads a search page in one pass that checks the JSON (as
// json.Valid does, UTF-8 aside) and takes what the connector needs
// without decoding the resources, which it returns as sub-slices of b
// with their type and id. Keys match exactly, as FHIR JSON has them
// (case-sensitive), after unescaping; for a repeated key the last one
// counts. A member of the wrong JSON type is an error, as it is for
// encoding/json.
func scanPage(b []byte) (*page, error) {
	var p page
	end, err := members(b, skipWS(b, 0), func(key []byte, b []byte, i int) (int, error) {
		switch string(key) {
		case "resourceType":
			end, err := scanValue(b, i)
			if err != nil {
				return 0, err
			}
			p.resourceType = ""
			return end, unmarshalString(b[i:end], &p.resourceType)
		case "link":
			end, err := scanValue(b, i)
			if err != nil {
				return 0, err
			}
			var links []struct {
				Relation string `json:"relation"`
				URL      string `json:"url"`
			}
			if err := json.Unmarshal(b[i:end], &links); err != nil {
				return 0, err
			}
			p.next = ""
			for _, l := range links {
				if l.Relation == "next" {
					p.next = l.URL
				}
			}
			return end, nil
		case "entry":
			p.entries = p.entries[:0]
			if b[i] != '[' {
				end, err := scanValue(b, i)
				if err == nil && string(b[i:end]) != "null" {
					err = errScan // not an array
				}
				return end, err
			}
			return elements(b, i, func(b []byte, i int) (int, error) {
				var pe pageEntry
				if b[i] != '{' {
					end, err := scanValue(b, i)
					if err == nil && string(b[i:end]) != "null" {
						err = errScan // not an object
					}
					p.entries = append(p.entries, pe)
					return end, err
				}
				end, err := members(b, i, func(key []byte, b []byte, i int) (int, error) {
					switch string(key) {
					case "resource":
						pe.resource, pe.typ, pe.id, pe.headerErr = nil, "", "", nil
						if b[i] != '{' {
							end, err := scanValue(b, i)
							if err == nil && string(b[i:end]) != "null" {
								pe.resource, pe.headerErr = b[i:end], errScan
							}
							return end, err
						}
						typ, id, end, err := resourceHeaderAt(b, i)
						if err == errHeader {
							// JSON, perhaps, but "resourceType" or "id" is
							// not a string: the entry is refused later.
							end, err = scanValue(b, i)
							pe.headerErr = errHeader
						}
						if err != nil {
							return 0, err
						}
						pe.resource, pe.typ, pe.id = b[i:end], typ, id
						return end, nil
					case "search":
						end, err := scanValue(b, i)
						if err != nil {
							return 0, err
						}
						var s *struct {
							Mode string `json:"mode"`
						}
						if err := json.Unmarshal(b[i:end], &s); err != nil {
							return 0, err
						}
						pe.outcome = s != nil && s.Mode == "outcome"
						return end, nil
					}
					return scanValue(b, i)
				})
				p.entries = append(p.entries, pe)
				return end, err
			})
		}
		return scanValue(b, i)
	})
	if err == nil && skipWS(b, end) != len(b) {
		err = errScan // something after the page
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// unmarshalString decodes the JSON string (or null, which leaves *s) v.
func unmarshalString(v []byte, s *string) error {
	if len(v) > 1 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		*s = string(v[1 : len(v)-1])
		return nil
	}
	return json.Unmarshal(v, s)
}

// members calls fn for each member of the JSON object at b[i] with its
// key (unescaped; valid only during the call) and the index of its value;
// fn returns the index after the value, which it checks. members checks
// the object's syntax and returns the index after it.
func members(b []byte, i int, fn func(key []byte, b []byte, i int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return 0, errScan
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		kEnd, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(b[i:kEnd], &k) != nil {
				return 0, errScan
			}
			key = []byte(k)
		}
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return 0, errScan
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return 0, errScan
		}
		if i, err = fn(key, b, i); err != nil {
			return 0, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, errScan
		}
		switch b[i] {
		case '}':
			return i + 1, nil
		case ',':
			i = skipWS(b, i+1)
		default:
			return 0, errScan
		}
	}
}

// elements calls fn for each element of the JSON array at b[i] with the
// element's index; fn returns the index after the element, which it
// checks. elements checks the array's syntax and returns the index after
// it.
func elements(b []byte, i int, fn func(b []byte, i int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '[' {
		return 0, errScan
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return 0, errScan
		}
		var err error
		if i, err = fn(b, i); err != nil {
			return 0, err
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, errScan
		}
		switch b[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = skipWS(b, i+1)
		default:
			return 0, errScan
		}
	}
}

package portal

import (
	"bytes"
	"encoding/json"
	"errors"
)

// errScan is returned for bytes that are not a JSON object.
var errScan = errors.New("not a JSON object")

// resourceHeader returns the top-level "resourceType" and "id" strings of
// a JSON object without decoding the rest of it. raw must be valid JSON
// (the page it came from was checked by encoding/json); on anything else
// it returns an error, never a panic. It is the connector's hot path:
// decoding every resource to read two fields dominated the fetch.
func resourceHeader(raw []byte) (typ, id string, err error) {
	typ, id, _, err = resourceHeaderAt(raw, skipWS(raw, 0))
	return typ, id, err
}

// resourceHeaderAt is resourceHeader for the object at raw[i]; it also
// returns the index after the object, so that a page walk reads each
// resource once.
func resourceHeaderAt(raw []byte, i int) (typ, id string, end int, err error) {
	end, err = members(raw, i, func(key string, b []byte, i int) (int, error) {
		vEnd, err := skipValue(b, i)
		if err != nil {
			return 0, err
		}
		switch key {
		case "resourceType":
			if json.Unmarshal(b[i:vEnd], &typ) != nil {
				return 0, errScan
			}
		case "id":
			if json.Unmarshal(b[i:vEnd], &id) != nil {
				return 0, errScan
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

// skipString returns the index after the string starting at b[i].
func skipString(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errScan
	}
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errScan
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errScan
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errScan
	default: // number, true, false, null
		start := i
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\n' && b[i] != '\r' && b[i] != '\t' {
			i++
		}
		if i == start {
			return 0, errScan
		}
		return i, nil
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

// scanPage reads a search page: it checks that b is JSON (one validating
// pass) and then walks the members it needs once, without decoding the
// resources, which it returns as sub-slices of b with their type and id.
// Keys match exactly, as FHIR JSON has them (case-sensitive), after
// unescaping; for a repeated key the last one counts. A member of the
// wrong JSON type is an error, as it is for encoding/json.
func scanPage(b []byte) (*page, error) {
	if !json.Valid(b) {
		return nil, errScan
	}
	var p page
	_, err := members(b, skipWS(b, 0), func(key string, b []byte, i int) (int, error) {
		switch key {
		case "resourceType":
			end, err := skipValue(b, i)
			if err != nil {
				return 0, err
			}
			p.resourceType = ""
			return end, unmarshalString(b[i:end], &p.resourceType)
		case "link":
			end, err := skipValue(b, i)
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
			if b[i] == 'n' {
				return i + len("null"), nil
			}
			return elements(b, i, func(b []byte, i int) (int, error) {
				var pe pageEntry
				if b[i] == 'n' {
					p.entries = append(p.entries, pe)
					return i + len("null"), nil
				}
				end, err := members(b, i, func(key string, b []byte, i int) (int, error) {
					switch key {
					case "resource":
						pe.resource, pe.typ, pe.id, pe.headerErr = nil, "", "", nil
						if b[i] == 'n' {
							return i + len("null"), nil
						}
						if b[i] != '{' {
							end, err := skipValue(b, i)
							pe.resource, pe.headerErr = b[i:end], errScan
							return end, err
						}
						typ, id, end, err := resourceHeaderAt(b, i)
						if err == errScan {
							// Valid JSON, but "resourceType" or "id" is
							// not a string: the entry is refused later.
							end, err = skipValue(b, i)
							pe.headerErr = errScan
						}
						pe.resource, pe.typ, pe.id = b[i:end], typ, id
						return end, err
					case "search":
						end, err := skipValue(b, i)
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
					return skipValue(b, i)
				})
				p.entries = append(p.entries, pe)
				return end, err
			})
		}
		return skipValue(b, i)
	})
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
// key (unescaped) and the index of its value; fn returns the index after
// the value. members returns the index after the object. b must be valid
// JSON (else errScan, never a panic).
func members(b []byte, i int, fn func(key string, b []byte, i int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return 0, errScan
	}
	for i = skipWS(b, i+1); ; i = skipWS(b, i) {
		if i >= len(b) {
			return 0, errScan
		}
		switch b[i] {
		case '}':
			return i + 1, nil
		case ',':
			i = skipWS(b, i+1)
		}
		kEnd, err := skipString(b, i)
		if err != nil {
			return 0, err
		}
		var key string
		if err := unmarshalString(b[i:kEnd], &key); err != nil {
			return 0, errScan
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
	}
}

// elements calls fn for each element of the JSON array at b[i] with the
// element's index; fn returns the index after the element. elements
// returns the index after the array. b must be valid JSON.
func elements(b []byte, i int, fn func(b []byte, i int) (int, error)) (int, error) {
	if i >= len(b) || b[i] != '[' {
		return 0, errScan
	}
	for i = skipWS(b, i+1); ; i = skipWS(b, i) {
		if i >= len(b) {
			return 0, errScan
		}
		switch b[i] {
		case ']':
			return i + 1, nil
		case ',':
			i = skipWS(b, i+1)
		}
		if i >= len(b) {
			return 0, errScan
		}
		var err error
		if i, err = fn(b, i); err != nil {
			return 0, err
		}
	}
}

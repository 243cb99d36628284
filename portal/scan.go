package portal

import (
	"encoding/json"
	"errors"

	"github.com/acds-project/acds/internal/base/jsonscan"
)

// scan.go reads search pages with the house's hand-written JSON scanner
// (internal/base/jsonscan), kept where the standard library could serve
// because it is the fetch's hot path: BenchmarkScanPage reads a 1 MB
// Synthea page with it, with json.Unmarshal into the page's fields, and
// with a json.Decoder token stream (streamPage), in the same run, and
// reports the ratios. It is fuzzed against encoding/json (FuzzScanPage,
// FuzzResourceHeader; jsonscan.FuzzValid for the scanner).

// errScan is returned for JSON of the wrong shape: not an object or array
// where one is needed.
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
	typ, id, _, err = resourceHeaderAt(raw, jsonscan.SkipSpace(raw, 0), 0)
	return typ, id, err
}

// resourceHeaderAt is resourceHeader for the object at raw[i], depth
// arrays and objects deep; it also returns the index after the object, so
// that a page walk reads each resource once. An error other than
// errHeader means raw is not JSON.
func resourceHeaderAt(raw []byte, i, depth int) (typ, id string, end int, err error) {
	end, err = jsonscan.Object(raw, i, depth, func(key []byte, i int) (int, error) {
		vEnd, err := jsonscan.Value(raw, i, depth+1)
		if err != nil {
			return 0, err
		}
		switch string(key) {
		case "resourceType":
			if jsonscan.DecodeString(raw[i:vEnd], &typ) != nil {
				return 0, errHeader
			}
		case "id":
			if jsonscan.DecodeString(raw[i:vEnd], &id) != nil {
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

// page is a search page as the connector reads it. Resources are
// sub-slices of the page's bytes, not copies.
type page struct {
	resourceType string
	next         string // the URL of the last link with relation "next"
	total        int    // Bundle.total, the matches over all pages; -1 when absent
	entries      []pageEntry
}

// pageEntry is one entry of a page.
type pageEntry struct {
	resource []byte // the resource's JSON; nil when the entry has none
	outcome  bool   // search.mode is "outcome": an OperationOutcome, not data
	include  bool   // search.mode is "include": not a match of the search
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
	// Depths: the page 0, its members 1, the entries 2, an entry's
	// members 3, a resource's members 4.
	p := page{total: -1}
	end, err := jsonscan.Object(b, jsonscan.SkipSpace(b, 0), 0, func(key []byte, i int) (int, error) {
		switch string(key) {
		case "total":
			end, err := jsonscan.Value(b, i, 1)
			if err != nil {
				return 0, err
			}
			var n *int
			if err := json.Unmarshal(b[i:end], &n); err != nil {
				return 0, err
			}
			p.total = -1
			if n != nil && *n >= 0 {
				p.total = *n
			}
			return end, nil
		case "resourceType":
			end, err := jsonscan.Value(b, i, 1)
			if err != nil {
				return 0, err
			}
			p.resourceType = ""
			return end, jsonscan.DecodeString(b[i:end], &p.resourceType)
		case "link":
			end, err := jsonscan.Value(b, i, 1)
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
				end, err := jsonscan.Value(b, i, 1)
				if err == nil && string(b[i:end]) != "null" {
					err = errScan // not an array
				}
				return end, err
			}
			return jsonscan.Array(b, i, 1, func(i int) (int, error) {
				var pe pageEntry
				if b[i] != '{' {
					end, err := jsonscan.Value(b, i, 2)
					if err == nil && string(b[i:end]) != "null" {
						err = errScan // not an object
					}
					p.entries = append(p.entries, pe)
					return end, err
				}
				end, err := jsonscan.Object(b, i, 2, func(key []byte, i int) (int, error) {
					switch string(key) {
					case "resource":
						pe.resource, pe.typ, pe.id, pe.headerErr = nil, "", "", nil
						if b[i] != '{' {
							end, err := jsonscan.Value(b, i, 3)
							if err == nil && string(b[i:end]) != "null" {
								pe.resource, pe.headerErr = b[i:end], errScan
							}
							return end, err
						}
						typ, id, end, err := resourceHeaderAt(b, i, 3)
						if err == errHeader {
							// JSON, perhaps, but "resourceType" or "id" is
							// not a string: the entry is refused later.
							end, err = jsonscan.Value(b, i, 3)
							pe.headerErr = errHeader
						}
						if err != nil {
							return 0, err
						}
						pe.resource, pe.typ, pe.id = b[i:end], typ, id
						return end, nil
					case "search":
						end, err := jsonscan.Value(b, i, 3)
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
						pe.include = s != nil && s.Mode == "include"
						return end, nil
					}
					return jsonscan.Value(b, i, 3)
				})
				p.entries = append(p.entries, pe)
				return end, err
			})
		}
		return jsonscan.Value(b, i, 1)
	})
	if err == nil && jsonscan.SkipSpace(b, end) != len(b) {
		err = errScan // something after the page
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}

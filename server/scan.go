package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/internal/base/jsonscan"
)

// A one-pass strict decoder for the POST /v1/process body. encoding/json
// scans a json.RawMessage field twice (once to find the value, once to
// skip it while decoding); a 32 MiB bundle makes that the largest cost of
// accepting a request. The body is validated by package jsonscan exactly
// as encoding/json's scanner does (FuzzScanMatchesEncodingJSON checks the
// decoder against encoding/json) and its top-level members found in a
// single pass — or, where the FHIR check will decode the data strictly,
// all but the data, which is only delimited (decodeProcessRequestWith).

// member is one top-level member of the body.
type member struct {
	name  string // the key, unescaped
	value []byte // the raw value
}

// decodeProcessRequest strictly decodes a POST /v1/process body in one
// pass: exactly one JSON object with the members "data" and
// "outputFormat" (a string); any other member is an unknown field, and
// keys match exactly (encoding/json would also match them case-
// insensitively). A member named twice is refused (duplicateProblem):
// encoding/json would keep the last value, and a proxy or a firewall in
// front of the server may read the first.
func decodeProcessRequest(body []byte, dst *acds.ProcessRequest) *acds.Problem {
	return decodeProcessRequestWith(body, dst, false)
}

// decodeProcessRequestWith is decodeProcessRequest; with delimitData, a
// "data" member that is an object or an array is only delimited
// (jsonscan.Delimit), its syntax not checked. The caller then owes that
// check: by a decoder of the data that refuses all malformed JSON (a
// syntaxChecker), and, wherever the request is refused, by answering
// with decodeProcessRequest's problem when it has one (handleProcess).
// The POST /v1/process body is almost all data, which the check of the
// FHIR input decodes strictly anyway; delimiting it costs about half of
// checking it (jsonscan's BenchmarkDelimit).
func decodeProcessRequestWith(body []byte, dst *acds.ProcessRequest, delimitData bool) *acds.Problem {
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) {
		return acds.NewProblem(acds.ProblemInvalidJSON, "the body is empty; a JSON object is required")
	}
	if body[i] != '{' {
		if _, err := jsonscan.Value(body, i, 0); err != nil {
			return syntaxProblem(err)
		}
		p := acds.NewProblem(acds.ProblemInvalidRequest, "the body must be a JSON object")
		p.Errors = []acds.FieldError{{Field: "", Message: "must be a JSON object"}}
		return p
	}
	members := make([]member, 0, 2)
	end, err := jsonscan.Object(body, i, 0, func(key []byte, i int) (int, error) {
		var end int
		var err error
		if delimitData && string(key) == "data" {
			end, err = jsonscan.Delimit(body, i)
		} else {
			end, err = jsonscan.Value(body, i, 1)
		}
		if err == nil {
			members = append(members, member{name: string(key), value: body[i:end]})
		}
		return end, err
	})
	if err != nil {
		return syntaxProblem(err)
	}
	for j, m := range members {
		for _, earlier := range members[:j] {
			if earlier.name == m.name {
				return duplicateProblem(m.name)
			}
		}
	}
	if rest := jsonscan.SkipSpace(body, end); rest != len(body) {
		if _, err := jsonscan.Value(body, rest, 0); err != nil {
			return syntaxProblem(err)
		}
		p := acds.NewProblem(acds.ProblemInvalidRequest, "the body must hold exactly one JSON object; trailing data after it")
		p.Errors = []acds.FieldError{{Field: "", Message: "trailing data after the JSON object"}}
		return p
	}
	for _, m := range members {
		switch name := m.name; name {
		case "data":
			dst.Data = json.RawMessage(m.value) // "null" included, as encoding/json does
		case "outputFormat":
			if m.value[0] != '"' {
				if string(m.value) == "null" {
					continue // encoding/json leaves the field unchanged
				}
				return fieldProblem("outputFormat", "must be a string, not "+jsonKindOf(m.value[0]))
			}
			var s string
			if err := jsonscan.DecodeString(m.value, &s); err != nil {
				return fieldProblem("outputFormat", "must be a string")
			}
			dst.OutputFormat = s
		case "query": // extension (DESIGN §9)
			if m.value[0] != '"' {
				if string(m.value) == "null" {
					continue
				}
				return fieldProblem("query", "must be a string, not "+jsonKindOf(m.value[0]))
			}
			var s string
			if err := jsonscan.DecodeString(m.value, &s); err != nil {
				return fieldProblem("query", "must be a string")
			}
			dst.Query = s
		case "callbackUrl":
			if string(m.value) == "null" {
				continue
			}
			var s string
			if m.value[0] != '"' || jsonscan.DecodeString(m.value, &s) != nil {
				return fieldProblem("callbackUrl", "must be a string")
			}
			dst.CallbackURL = s
		default:
			return fieldProblem(name, "unknown field")
		}
	}
	return nil
}

func jsonKindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	default:
		return "number"
	}
}

func syntaxProblem(err error) *acds.Problem {
	var se *jsonscan.SyntaxError
	if errors.As(err, &se) {
		if se.Msg == jsonscan.ErrEnd {
			return acds.NewProblem(acds.ProblemInvalidJSON, "the JSON body ends early")
		}
		return acds.NewProblem(acds.ProblemInvalidJSON, fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, se.Msg))
	}
	return acds.NewProblem(acds.ProblemInvalidJSON, "the body is not valid JSON")
}

// duplicateProblem is the answer to a body that names a member twice.
func duplicateProblem(name string) *acds.Problem {
	return fieldProblem(name, "named twice; a JSON object must name each member once")
}

// duplicateMember returns the first member name of the top-level JSON
// object body that an earlier member already used, compared as
// encoding/json matches names to fields (unescaped, case-insensitively),
// or "" when there is none or body is not an object.
func duplicateMember(body []byte) string {
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return ""
	}
	var names []string
	dup := ""
	_, _ = jsonscan.Object(body, i, 0, func(key []byte, i int) (int, error) {
		name := string(key)
		for _, n := range names {
			if strings.EqualFold(n, name) {
				dup = name
				return i, errDuplicate // the rest need not be read
			}
		}
		names = append(names, name)
		return jsonscan.Value(body, i, 1)
	})
	return dup
}

// hasMember reports whether the JSON object body has a member named name,
// compared as encoding/json matches names to fields (case-insensitively),
// so that a field present but empty is told from one left out.
func hasMember(body []byte, name string) bool {
	i := jsonscan.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	found := false
	_, _ = jsonscan.Object(body, i, 0, func(key []byte, i int) (int, error) {
		if strings.EqualFold(string(key), name) {
			found = true
			return i, errDuplicate // the rest need not be read
		}
		return jsonscan.Value(body, i, 1)
	})
	return found
}

// errDuplicate stops duplicateMember's scan at the first repeated name.
var errDuplicate = errors.New("duplicate member")

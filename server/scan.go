package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/acds-project/acds"
)

// A one-pass strict decoder for the POST /v1/process body. encoding/json
// scans a json.RawMessage field twice (once to find the value, once to
// skip it while decoding); a 32 MiB bundle makes that the largest cost of
// accepting a request. This scanner validates the body exactly as
// encoding/json's scanner does (FuzzScanMatchesEncodingJSON checks it)
// and finds the top-level members in a single pass.

// maxDepth bounds nesting like encoding/json does.
const maxDepth = 10000

// errSyntax reports malformed JSON at an offset.
type errSyntax struct {
	off int
	msg string
}

func (e *errSyntax) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// scanValue returns the end of the JSON value starting at b[i] (no
// leading space).
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, &errSyntax{i, "unexpected end of JSON input"}
	}
	switch c := b[i]; {
	case c == '{':
		return scanObject(b, i, depth+1)
	case c == '[':
		return scanArray(b, i, depth+1)
	case c == '"':
		return scanString(b, i)
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	default:
		return i, &errSyntax{i, fmt.Sprintf("invalid character %q looking for beginning of value", c)}
	}
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) {
			return i + k, &errSyntax{i + k, "unexpected end of JSON input"}
		}
		if b[i+k] != lit[k] {
			return i + k, &errSyntax{i + k, "invalid character in literal"}
		}
	}
	return i + len(lit), nil
}

func scanNumber(b []byte, i int) (int, error) {
	digits := func(j int) int {
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i + 1)
	case i >= len(b):
		return i, &errSyntax{i, "unexpected end of JSON input"}
	default:
		return i, &errSyntax{i, "invalid character in numeric literal"}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		if b[i] < '0' || b[i] > '9' {
			return i, &errSyntax{i, "invalid character after decimal point in numeric literal"}
		}
		i = digits(i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		if b[i] < '0' || b[i] > '9' {
			return i, &errSyntax{i, "invalid character in exponent of numeric literal"}
		}
		i = digits(i)
	}
	return i, nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// plain reports whether a JSON string may hold c without a closer look:
// everything but the quote, the backslash and control characters.
func plain(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain8 reports whether all 8 bytes packed in x are plain. Each term
// below is the classic "some byte is zero / below n" test: a byte's flag
// may be wrong only above a byte that is truly flagged, so whether any
// flag is set is exact.
func plain8(x uint64) bool {
	ctl := (x - 0x20*lsb) & ^x
	q := x ^ ('"' * lsb)
	bs := x ^ ('\\' * lsb)
	return ((ctl | (q-lsb)&^q | (bs-lsb)&^bs) & msb) == 0
}

// scanString returns the end of the string starting at b[i] == '"'. Runs
// of plain bytes are skipped 8 at a time, then byte by byte by table.
func scanString(b []byte, i int) (int, error) {
	i++
	for {
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plain(b[i]) {
			i++
		}
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i + 1, &errSyntax{i + 1, "unexpected end of JSON input"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := 2; k < 6; k++ {
					if i+k >= len(b) {
						return i + k, &errSyntax{i + k, "unexpected end of JSON input"}
					}
					if !isHex(b[i+k]) {
						return i + k, &errSyntax{i + k, "invalid character in \\u hexadecimal character escape"}
					}
				}
				i += 6
			default:
				return i + 1, &errSyntax{i + 1, "invalid character in string escape code"}
			}
		default: // c < 0x20
			return i, &errSyntax{i, "invalid character in string literal"}
		}
	}
}

func scanArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, &errSyntax{i, "exceeded max depth"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, &errSyntax{i, "invalid character after array element"}
		}
	}
}

// member is one top-level member found by scanMembers.
type member struct {
	key   []byte // the raw key, quotes included
	value []byte // the raw value
}

// scanObject returns the end of the object starting at b[i] == '{'; when
// members is not nil it receives each member.
func scanObjectMembers(b []byte, i, depth int, members *[]member) (int, error) {
	if depth > maxDepth {
		return i, &errSyntax{i, "exceeded max depth"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		if b[i] != '"' {
			return i, &errSyntax{i, "invalid character looking for beginning of object key string"}
		}
		ks := i
		var err error
		if i, err = scanString(b, i); err != nil {
			return i, err
		}
		ke := i
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		if b[i] != ':' {
			return i, &errSyntax{i, "invalid character after object key"}
		}
		i = skipSpace(b, i+1)
		vs := i
		if i, err = scanValue(b, i, depth); err != nil {
			return i, err
		}
		if members != nil {
			*members = append(*members, member{key: b[ks:ke], value: b[vs:i]})
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, &errSyntax{i, "unexpected end of JSON input"}
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, &errSyntax{i, "invalid character after object key:value pair"}
		}
	}
}

func scanObject(b []byte, i, depth int) (int, error) { return scanObjectMembers(b, i, depth, nil) }

// validJSON reports whether b is exactly one JSON value with optional
// surrounding space, as json.Valid does.
func validJSON(b []byte) bool {
	i := skipSpace(b, 0)
	end, err := scanValue(b, i, 0)
	return err == nil && skipSpace(b, end) == len(b)
}

// keyString decodes a raw key (with quotes).
func keyString(raw []byte) string {
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				return s
			}
			break
		}
	}
	return string(raw[1 : len(raw)-1])
}

// decodeProcessRequest strictly decodes a POST /v1/process body in one
// pass: exactly one JSON object with the members "data" and
// "outputFormat" (a string); any other member is an unknown field, and
// keys match exactly (encoding/json would also match them case-
// insensitively). As with encoding/json, a repeated member's last value
// wins.
func decodeProcessRequest(body []byte, dst *acds.ProcessRequest) *acds.Problem {
	i := skipSpace(body, 0)
	if i >= len(body) {
		return acds.NewProblem(acds.ProblemInvalidJSON, "the body is empty; a JSON object is required")
	}
	if body[i] != '{' {
		if _, err := scanValue(body, i, 0); err != nil {
			return syntaxProblem(err)
		}
		p := acds.NewProblem(acds.ProblemInvalidRequest, "the body must be a JSON object")
		p.Errors = []acds.FieldError{{Field: "", Message: "must be a JSON object"}}
		return p
	}
	members := make([]member, 0, 2)
	end, err := scanObjectMembers(body, i, 1, &members)
	if err != nil {
		return syntaxProblem(err)
	}
	if skipSpace(body, end) != len(body) {
		if _, err := scanValue(body, skipSpace(body, end), 0); err != nil {
			return syntaxProblem(err)
		}
		p := acds.NewProblem(acds.ProblemInvalidRequest, "the body must hold exactly one JSON object; trailing data after it")
		p.Errors = []acds.FieldError{{Field: "", Message: "trailing data after the JSON object"}}
		return p
	}
	for _, m := range members {
		switch name := keyString(m.key); name {
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
			if err := json.Unmarshal(m.value, &s); err != nil {
				return fieldProblem("outputFormat", "must be a string")
			}
			dst.OutputFormat = s
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
	var se *errSyntax
	if errors.As(err, &se) {
		if se.msg == "unexpected end of JSON input" {
			return acds.NewProblem(acds.ProblemInvalidJSON, "the JSON body ends early")
		}
		return acds.NewProblem(acds.ProblemInvalidJSON, fmt.Sprintf("malformed JSON at byte %d: %s", se.off, se.msg))
	}
	return acds.NewProblem(acds.ProblemInvalidJSON, "the body is not valid JSON")
}

package portal

import (
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
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return "", "", errScan
	}
	i++
	for {
		i = skipWS(raw, i)
		if i >= len(raw) {
			return "", "", errScan
		}
		if raw[i] == '}' {
			return typ, id, nil
		}
		if raw[i] == ',' {
			i = skipWS(raw, i+1)
		}
		kEnd, err := skipString(raw, i)
		if err != nil {
			return "", "", err
		}
		key := raw[i:kEnd]
		i = skipWS(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return "", "", errScan
		}
		i = skipWS(raw, i+1)
		vEnd, err := skipValue(raw, i)
		if err != nil {
			return "", "", err
		}
		switch string(key) {
		case `"resourceType"`:
			if json.Unmarshal(raw[i:vEnd], &typ) != nil {
				return "", "", errScan
			}
		case `"id"`:
			if json.Unmarshal(raw[i:vEnd], &id) != nil {
				return "", "", errScan
			}
		}
		i = vEnd
	}
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

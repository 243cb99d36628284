package fhirpath

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"regexp"
	"strings"
	"unicode/utf8"
)

// stringFn wraps a function of a single string input: empty input gives
// empty, anything but a string is an error.
func stringFn(min, max int, f func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error)) *funcDef {
	return &funcDef{min, max, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		v, ok, err := singleton(t, n.at)
		if err != nil || !ok {
			return nil, err
		}
		s, isS := v.(String)
		if !isS {
			return nil, evalErr(ErrEvaluation, n.at, "%s() needs a string, not %s", n.name, typeName(v))
		}
		return f(e, n, string(s), sc)
	}}
}

func (e *evaluator) regexp(n *callNode, pattern string, full bool) (*regexp.Regexp, error) {
	key := pattern
	if full {
		key = "^(?:" + pattern + ")$"
	}
	if re, ok := e.regexps[key]; ok {
		return re, nil
	}
	if len(pattern) > 4096 {
		return nil, evalErr(ErrLimit, n.at, "regular expression longer than 4096 bytes")
	}
	re, err := regexp.Compile("(?s)" + key)
	if err != nil {
		return nil, &EvalError{Class: ErrNotSupported, Offset: n.at, Msg: "regular expression not supported", Err: err}
	}
	if e.regexps == nil {
		e.regexps = map[string]*regexp.Regexp{}
	}
	e.regexps[key] = re
	return re, nil
}

func stringFuncs() map[string]*funcDef {
	str := func(s string) Collection { return Collection{String(s)} }
	withArg := func(f func(s, a string) Collection) *funcDef {
		return stringFn(1, 1, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			a, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			return f(s, a), nil
		})
	}
	return map[string]*funcDef{
		"indexOf": withArg(func(s, a string) Collection {
			i := strings.Index(s, a)
			if i > 0 {
				i = utf8.RuneCountInString(s[:i])
			}
			return Collection{Integer(i)}
		}),
		"lastIndexOf": withArg(func(s, a string) Collection {
			i := strings.LastIndex(s, a)
			if i > 0 {
				i = utf8.RuneCountInString(s[:i])
			}
			return Collection{Integer(i)}
		}),
		"startsWith": withArg(func(s, a string) Collection { return boolColl(strings.HasPrefix(s, a)) }),
		"endsWith":   withArg(func(s, a string) Collection { return boolColl(strings.HasSuffix(s, a)) }),
		"contains":   withArg(func(s, a string) Collection { return boolColl(strings.Contains(s, a)) }),
		"split": withArg(func(s, a string) Collection {
			var out Collection
			for _, p := range strings.Split(s, a) {
				out = append(out, String(p))
			}
			return out
		}),
		"substring": stringFn(1, 2, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			start, ok, err := e.argInt(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			rs := []rune(s)
			if start < 0 || start >= int64(len(rs)) {
				return nil, nil
			}
			end := int64(len(rs))
			if len(n.args) > 1 {
				l, ok, err := e.argInt(n, 1, sc)
				if err != nil {
					return nil, err
				}
				if ok {
					if l <= 0 {
						return str(""), nil
					}
					if l < end-start {
						end = start + l
					}
				}
			}
			return str(string(rs[start:end])), nil
		}),
		"upper": stringFn(0, 0, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			return str(strings.ToUpper(s)), nil
		}),
		"lower": stringFn(0, 0, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			return str(strings.ToLower(s)), nil
		}),
		"trim": stringFn(0, 0, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			return str(strings.TrimSpace(s)), nil
		}),
		"length": stringFn(0, 0, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			return Collection{Integer(utf8.RuneCountInString(s))}, nil
		}),
		"toChars": stringFn(0, 0, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			var out Collection
			for _, r := range s {
				out = append(out, String(string(r)))
			}
			return out, nil
		}),
		"replace": stringFn(2, 2, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			pat, ok1, err := e.argString(n, 0, sc)
			if err != nil {
				return nil, err
			}
			sub, ok2, err := e.argString(n, 1, sc)
			if err != nil || !ok1 || !ok2 {
				return nil, err
			}
			if err := e.step(len(s), n.at); err != nil {
				return nil, err
			}
			count := utf8.RuneCountInString(s) + 1
			if pat != "" {
				count = strings.Count(s, pat)
			}
			if len(s)+count*(len(sub)-len(pat)) > maxString {
				return nil, evalErr(ErrLimit, n.at, "replace() result longer than %d bytes", maxString)
			}
			return str(strings.ReplaceAll(s, pat, sub)), nil
		}),
		"matches":     stringFn(1, 1, matchFn(false)),
		"matchesFull": stringFn(1, 1, matchFn(true)),
		"replaceMatches": stringFn(2, 2, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			pat, ok1, err := e.argString(n, 0, sc)
			if err != nil {
				return nil, err
			}
			sub, ok2, err := e.argString(n, 1, sc)
			if err != nil || !ok1 || !ok2 {
				return nil, err
			}
			if pat == "" {
				return str(s), nil
			}
			re, err := e.regexp(n, pat, false)
			if err != nil {
				return nil, err
			}
			if err := e.step(len(s), n.at); err != nil {
				return nil, err
			}
			out := re.ReplaceAllString(s, sub)
			if len(out) > maxString {
				return nil, evalErr(ErrLimit, n.at, "replaceMatches() result longer than %d bytes", maxString)
			}
			return str(out), nil
		}),
		"join": {0, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			sep := ""
			if len(n.args) == 1 {
				s, _, err := e.argString(n, 0, sc)
				if err != nil {
					return nil, err
				}
				sep = s
			}
			parts := make([]string, 0, len(t))
			total := 0
			for _, v := range t {
				s, _ := toSystem(v)
				x, ok := s.(String)
				if !ok {
					return nil, evalErr(ErrEvaluation, n.at, "join() needs strings, not %s", typeName(s))
				}
				total += len(x) + len(sep)
				if total > maxString {
					return nil, evalErr(ErrLimit, n.at, "join() result longer than %d bytes", maxString)
				}
				parts = append(parts, string(x))
			}
			return str(strings.Join(parts, sep)), nil
		}},
		"encode": stringFn(1, 1, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			f, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			switch f {
			case "base64":
				return str(base64.StdEncoding.EncodeToString([]byte(s))), nil
			case "urlbase64":
				return str(base64.URLEncoding.EncodeToString([]byte(s))), nil
			case "hex":
				return str(hex.EncodeToString([]byte(s))), nil
			}
			return nil, evalErr(ErrEvaluation, n.at, "unknown encoding %q", f)
		}),
		"decode": stringFn(1, 1, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			f, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			var b []byte
			switch f {
			case "base64":
				b, err = base64.StdEncoding.DecodeString(s)
			case "urlbase64":
				b, err = base64.URLEncoding.DecodeString(s)
			case "hex":
				b, err = hex.DecodeString(s)
			default:
				return nil, evalErr(ErrEvaluation, n.at, "unknown encoding %q", f)
			}
			if err != nil {
				return nil, nil
			}
			return str(string(b)), nil
		}),
		"escape": stringFn(1, 1, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			f, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			switch f {
			case "html":
				return str(htmlEscaper.Replace(s)), nil
			case "json":
				var b strings.Builder
				enc := json.NewEncoder(&b)
				enc.SetEscapeHTML(false)
				_ = enc.Encode(s)
				j := strings.TrimSuffix(b.String(), "\n")
				return str(j[1 : len(j)-1]), nil
			}
			return nil, evalErr(ErrEvaluation, n.at, "unknown escape %q", f)
		}),
		"unescape": stringFn(1, 1, func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
			f, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			switch f {
			case "html":
				return str(html.UnescapeString(s)), nil
			case "json":
				out, ok := unescapeJSON(s)
				if !ok {
					return nil, nil
				}
				return str(out), nil
			}
			return nil, evalErr(ErrEvaluation, n.at, "unknown escape %q", f)
		}),
	}
}

func matchFn(full bool) func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
	return func(e *evaluator, n *callNode, s string, sc *scope) (Collection, error) {
		pat, ok, err := e.argString(n, 0, sc)
		if err != nil || !ok {
			return nil, err
		}
		re, err := e.regexp(n, pat, full)
		if err != nil {
			return nil, err
		}
		if err := e.step(len(s), n.at); err != nil {
			return nil, err
		}
		return boolColl(re.MatchString(s)), nil
	}
}

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// unescapeJSON undoes the escapes of a JSON string body (without quotes).
func unescapeJSON(s string) (string, bool) {
	var out string
	// Quote bare double quotes so the body is a valid JSON string.
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			b.WriteByte(s[i])
			b.WriteByte(s[i+1])
			i++
		case s[i] == '"':
			b.WriteString(`\"`)
		default:
			b.WriteByte(s[i])
		}
	}
	if err := json.Unmarshal([]byte(`"`+b.String()+`"`), &out); err != nil {
		return "", false
	}
	return out, true
}

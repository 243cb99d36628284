package fhirpath

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tIdent          // identifier or keyword
	tDelim          // `delimited identifier`
	tString         // 'string'
	tNumber         // 12, 1.5
	tLong           // 12L
	tDate           // @2012-04-15, @2012-04-15T10:00, @T10:00
	tOp             // punctuation and symbolic operators
	tVar            // $this, $index, $total
	tEnv            // %name
)

type token struct {
	kind tokKind
	text string // the value: identifier name, unescaped string, operator, literal text
	off  int    // byte offset of the token
}

var (
	dateTimeRe = regexp.MustCompile(`^@[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?(T([0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?)?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?`)
	timeRe     = regexp.MustCompile(`^@T[0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?)?`)
)

// lex splits src into tokens, ending with tEOF.
func lex(src string, maxTokens int) ([]token, error) {
	var toks []token
	i := 0
	for {
		// White space and comments.
		for i < len(src) {
			c := src[i]
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' {
				i++
				continue
			}
			if strings.HasPrefix(src[i:], "//") {
				j := strings.IndexByte(src[i:], '\n')
				if j < 0 {
					i = len(src)
				} else {
					i += j + 1
				}
				continue
			}
			if strings.HasPrefix(src[i:], "/*") {
				j := strings.Index(src[i+2:], "*/")
				if j < 0 {
					return nil, newSyntaxError(src, i, "unterminated comment")
				}
				i += j + 4
				continue
			}
			break
		}
		if len(toks) >= maxTokens {
			e := newSyntaxError(src, i, "expression has more than %d tokens", maxTokens)
			e.class = ErrLimit
			return nil, e
		}
		if i >= len(src) {
			toks = append(toks, token{kind: tEOF, off: i})
			return toks, nil
		}
		start := i
		c := src[i]
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tIdent, text: src[start:i], off: start})
		case c >= '0' && c <= '9':
			for i < len(src) && isDigit(src[i]) {
				i++
			}
			if i+1 < len(src) && src[i] == '.' && isDigit(src[i+1]) {
				i++
				for i < len(src) && isDigit(src[i]) {
					i++
				}
			}
			if i < len(src) && src[i] == 'L' && (i+1 >= len(src) || !isIdentPart(src[i+1])) {
				toks = append(toks, token{kind: tLong, text: src[start:i], off: start})
				i++
				break
			}
			toks = append(toks, token{kind: tNumber, text: src[start:i], off: start})
		case c == '\'' || c == '`':
			s, n, err := unquote(src, i)
			if err != nil {
				return nil, err
			}
			i += n
			k := tString
			if c == '`' {
				k = tDelim
			}
			toks = append(toks, token{kind: k, text: s, off: start})
		case c == '@':
			m := timeRe.FindString(src[i:])
			if m == "" {
				m = dateTimeRe.FindString(src[i:])
			}
			if m == "" {
				return nil, newSyntaxError(src, i, "invalid date/time literal")
			}
			i += len(m)
			if i < len(src) && (isIdentPart(src[i]) || src[i] == '-' && i+1 < len(src) && isDigit(src[i+1])) {
				return nil, newSyntaxError(src, start, "invalid date/time literal")
			}
			toks = append(toks, token{kind: tDate, text: m[1:], off: start})
		case c == '$':
			i++
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tVar, text: src[start:i], off: start})
		case c == '%':
			i++
			if i < len(src) && (src[i] == '`' || src[i] == '\'') {
				s, n, err := unquote(src, i)
				if err != nil {
					return nil, err
				}
				i += n
				toks = append(toks, token{kind: tEnv, text: s, off: start})
				break
			}
			if i >= len(src) || !isIdentStart(src[i]) {
				return nil, newSyntaxError(src, start, "expected a name after %%")
			}
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			toks = append(toks, token{kind: tEnv, text: src[start+1 : i], off: start})
		default:
			op := ""
			for _, o := range [...]string{"<=", ">=", "!=", "!~"} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" && strings.IndexByte(".[](),+-*/&|<>=~{}", c) >= 0 {
				op = src[i : i+1]
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, newSyntaxError(src, i, "unexpected character %q", r)
			}
			i += len(op)
			toks = append(toks, token{kind: tOp, text: op, off: start})
		}
	}
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

// unquote reads the quoted string or delimited identifier at src[i],
// returning its value and the number of bytes it takes.
func unquote(src string, i int) (string, int, error) {
	q := src[i]
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		c := src[j]
		if c == q {
			return b.String(), j + 1 - i, nil
		}
		if c != '\\' {
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(src) {
			break
		}
		e := src[j+1]
		j += 2
		switch e {
		case '\'', '"', '`', '\\', '/':
			b.WriteByte(e)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if j+4 > len(src) {
				return "", 0, newSyntaxError(src, j-2, "invalid \\u escape")
			}
			n, err := strconv.ParseUint(src[j:j+4], 16, 32)
			if err != nil {
				return "", 0, newSyntaxError(src, j-2, "invalid \\u escape")
			}
			b.WriteRune(rune(n))
			j += 4
		default:
			return "", 0, newSyntaxError(src, j-2, "invalid escape \\%c", e)
		}
	}
	return "", 0, newSyntaxError(src, i, "unterminated %s", map[byte]string{'\'': "string", '`': "delimited identifier"}[q])
}

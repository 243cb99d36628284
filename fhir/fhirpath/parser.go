package fhirpath

import (
	"strings"
)

// node is a node of the syntax tree. pos is the byte offset in the
// expression of the token that starts it (for operators, the operator).
type node interface{ pos() int }

type (
	// literalNode is a literal: one value, or {} (val nil).
	literalNode struct {
		at   int
		val  Value
		coll Collection // val alone, made once
	}
	// identNode is an identifier at the start of a path, evaluated
	// against $this.
	identNode struct {
		at    int
		name  string
		cache stepCache
	}
	// memberNode is target.name.
	memberNode struct {
		at     int
		target node
		name   string
		cache  stepCache
		fused  *chain // set when the member ends a path evaluated as a chain
	}
	// callNode is [target.]name(args).
	callNode struct {
		at     int
		target node // nil: a function at the start of a path
		name   string
		args   []node
		fn     *funcDef
		fused  *chain // set when the call ends a path evaluated as a chain
	}
	// indexNode is target[index].
	indexNode struct {
		at            int
		target, index node
	}
	// unaryNode is +x or -x.
	unaryNode struct {
		at int
		op string
		x  node
	}
	// binaryNode is l op r.
	binaryNode struct {
		at   int
		op   string
		l, r node
		// eqName is set by fuse for name = 'text' and name != 'text',
		// where name is an element name (not id or url): l is then
		// that identifier and eqWant the text (see stepEqualsString).
		eqName *identNode
		eqWant string
	}
	// typeOpNode is x is T or x as T.
	typeOpNode struct {
		at  int
		op  string
		x   node
		typ typeSpec
	}
	// varNode is $this, $index or $total.
	varNode struct {
		at   int
		name string
	}
	// envNode is %name.
	envNode struct {
		at   int
		name string
	}
)

func (n *literalNode) pos() int { return n.at }
func (n *identNode) pos() int   { return n.at }
func (n *memberNode) pos() int  { return n.at }
func (n *callNode) pos() int    { return n.at }
func (n *indexNode) pos() int   { return n.at }
func (n *unaryNode) pos() int   { return n.at }
func (n *binaryNode) pos() int  { return n.at }
func (n *typeOpNode) pos() int  { return n.at }
func (n *varNode) pos() int     { return n.at }
func (n *envNode) pos() int     { return n.at }

// typeSpec is a type name as written: namespace ("FHIR", "System" or "")
// and name.
type typeSpec struct {
	ns, name string
}

func (t typeSpec) String() string {
	if t.ns == "" {
		return t.name
	}
	return t.ns + "." + t.name
}

type parser struct {
	src      string
	toks     []token
	i        int
	depth    int
	maxDepth int
	envs     []*envNode // the %names met, in the order of the text
}

// parse turns src into a syntax tree, and lists its environment
// variables (%name) in the order of the text.
func parse(src string, maxTokens, maxDepth int) (node, []*envNode, error) {
	toks, err := lex(src, maxTokens)
	if err != nil {
		return nil, nil, err
	}
	p := &parser{src: src, toks: toks, maxDepth: maxDepth}
	n, err := p.expr(0)
	if err != nil {
		return nil, nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, nil, p.errAt(t, "unexpected %s", describe(t))
	}
	return n, p.envs, nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tString:
		return "string '" + t.text + "'"
	default:
		return "'" + t.text + "'"
	}
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(t token, format string, args ...any) error {
	return newSyntaxError(p.src, t.off, format, args...)
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tOp && t.text == s
}

func (p *parser) expect(s string) (token, error) {
	t := p.next()
	if t.kind != tOp || t.text != s {
		return t, p.errAt(t, "expected '%s', found %s", s, describe(t))
	}
	return t, nil
}

// Binary operator precedence levels, lowest first.
var levels = [][]string{
	{"implies"},
	{"or", "xor"},
	{"and"},
	{"in", "contains"},
	{"=", "~", "!=", "!~"},
	{"<", ">", "<=", ">="},
	{"|"},
	{"is", "as"},
	{"+", "-", "&"},
	{"*", "/", "div", "mod"},
}

func (p *parser) binaryOp(level int) (token, bool) {
	t := p.peek()
	if t.kind != tOp && t.kind != tIdent {
		return t, false
	}
	for _, op := range levels[level] {
		if t.text == op {
			return t, true
		}
	}
	return t, false
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		e := newSyntaxError(p.src, p.peek().off, "expression nested more than %d levels", p.maxDepth)
		e.class = ErrLimit
		return e
	}
	return nil
}

func (p *parser) expr(level int) (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if level == len(levels) {
		return p.unary()
	}
	l, err := p.expr(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		t, ok := p.binaryOp(level)
		if !ok {
			return l, nil
		}
		p.next()
		if t.text == "is" || t.text == "as" {
			ts, err := p.typeSpec()
			if err != nil {
				return nil, err
			}
			l = &typeOpNode{at: t.off, op: t.text, x: l, typ: ts}
			continue
		}
		r, err := p.expr(level + 1)
		if err != nil {
			return nil, err
		}
		l = &binaryNode{at: t.off, op: t.text, l: l, r: r}
	}
}

func (p *parser) typeSpec() (typeSpec, error) {
	t := p.next()
	if t.kind != tIdent && t.kind != tDelim {
		return typeSpec{}, p.errAt(t, "expected a type name, found %s", describe(t))
	}
	if p.isOp(".") {
		p.next()
		u := p.next()
		if u.kind != tIdent && u.kind != tDelim {
			return typeSpec{}, p.errAt(u, "expected a type name, found %s", describe(u))
		}
		return typeSpec{ns: t.text, name: u.text}, nil
	}
	return typeSpec{name: t.text}, nil
}

func (p *parser) unary() (node, error) {
	if t := p.peek(); t.kind == tOp && (t.text == "+" || t.text == "-") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		p.depth--
		if err != nil {
			return nil, err
		}
		// Fold the sign into a numeric literal so that -1 is a literal.
		if lit, ok := x.(*literalNode); ok && t.text == "-" {
			switch v := lit.val.(type) {
			case Integer:
				return newLiteral(t.off, -v), nil
			case Decimal:
				return newLiteral(t.off, v.neg()), nil
			case Quantity:
				return newLiteral(t.off, Quantity{Value: v.Value.neg(), Unit: v.Unit}), nil
			}
		}
		return &unaryNode{at: t.off, op: t.text, x: x}, nil
	}
	return p.postfix()
}

func (p *parser) postfix() (node, error) {
	n, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			if t.kind != tIdent && t.kind != tDelim {
				return nil, p.errAt(t, "expected a name after '.', found %s", describe(t))
			}
			if t.kind == tIdent && p.isOp("(") {
				c, err := p.call(t, n)
				if err != nil {
					return nil, err
				}
				n = c
				continue
			}
			n = &memberNode{at: t.off, target: n, name: t.text}
		case p.isOp("["):
			t := p.next()
			idx, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			n = &indexNode{at: t.off, target: n, index: idx}
		default:
			return n, nil
		}
	}
}

func (p *parser) call(name token, target node) (node, error) {
	p.next() // (
	c := &callNode{at: name.off, target: target, name: name.text}
	if !p.isOp(")") {
		for {
			a, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			c.args = append(c.args, a)
			if p.isOp(",") {
				p.next()
				continue
			}
			break
		}
	}
	if _, err := p.expect(")"); err != nil {
		return nil, err
	}
	fd := functions[c.name]
	if fd == nil {
		return nil, evalErr(ErrSemantic, c.at, "unknown function %s()", c.name)
	}
	if len(c.args) < fd.min || fd.max >= 0 && len(c.args) > fd.max {
		return nil, evalErr(ErrSemantic, c.at, "%s() takes %s, not %d", c.name, fd.arity(), len(c.args))
	}
	c.fn = fd
	return c, nil
}

var calendarUnits = map[string]string{
	"year": "year", "years": "year", "month": "month", "months": "month",
	"week": "week", "weeks": "week", "day": "day", "days": "day",
	"hour": "hour", "hours": "hour", "minute": "minute", "minutes": "minute",
	"second": "second", "seconds": "second", "millisecond": "millisecond", "milliseconds": "millisecond",
}

func (p *parser) term() (node, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		var num Value
		if strings.IndexByte(t.text, '.') >= 0 {
			d, ok := parseDecimal(t.text)
			if !ok {
				return nil, p.errAt(t, "invalid number %s", t.text)
			}
			num = d
		} else {
			n, ok := parseInteger(t.text)
			if !ok {
				return nil, p.errAt(t, "integer %s out of range", t.text)
			}
			num = n
		}
		// A quantity: a number followed by a unit string or calendar unit.
		if u := p.peek(); u.kind == tString || u.kind == tIdent && calendarUnits[u.text] != "" {
			p.next()
			unit := u.text
			if u.kind == tIdent {
				unit = calendarUnits[u.text]
			}
			return newLiteral(t.off, Quantity{Value: toDecimal(num), Unit: unit}), nil
		}
		return newLiteral(t.off, num), nil
	case tLong:
		n, ok := parseInteger(t.text)
		if !ok {
			return nil, p.errAt(t, "long %s out of range", t.text)
		}
		return newLiteral(t.off, n), nil
	case tString:
		return newLiteral(t.off, String(t.text)), nil
	case tDate:
		v, err := parseDateTimeLiteral(t.text)
		if err != nil {
			return nil, p.errAt(t, "invalid date/time literal @%s", t.text)
		}
		return newLiteral(t.off, v), nil
	case tVar:
		switch t.text {
		case "$this", "$index", "$total":
			return &varNode{at: t.off, name: t.text}, nil
		}
		return nil, p.errAt(t, "unknown variable %s", t.text)
	case tEnv:
		n := &envNode{at: t.off, name: t.text}
		p.envs = append(p.envs, n)
		return n, nil
	case tDelim:
		return &identNode{at: t.off, name: t.text}, nil
	case tIdent:
		switch t.text {
		case "true":
			return newLiteral(t.off, Boolean(true)), nil
		case "false":
			return newLiteral(t.off, Boolean(false)), nil
		}
		if p.isOp("(") {
			return p.call(t, nil)
		}
		return &identNode{at: t.off, name: t.text}, nil
	case tOp:
		switch t.text {
		case "(":
			n, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if _, err := p.expect(")"); err != nil {
				return nil, err
			}
			return n, nil
		case "{":
			if _, err := p.expect("}"); err != nil {
				return nil, err
			}
			return &literalNode{at: t.off}, nil
		}
	}
	return nil, p.errAt(t, "unexpected %s", describe(t))
}

// newLiteral returns the literal node of v.
func newLiteral(at int, v Value) *literalNode {
	return &literalNode{at: at, val: v, coll: Collection{v}}
}

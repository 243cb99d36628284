package fhirpath

import (
	"fmt"
	"sort"
	"strconv"
)

// funcDef is a function of the language: its arity and implementation.
type funcDef struct {
	min, max int // number of arguments; max -1 means any
	impl     func(e *evaluator, n *callNode, target Collection, sc *scope) (Collection, error)
}

func (f *funcDef) arity() string {
	switch {
	case f.min == f.max && f.min == 1:
		return "1 argument"
	case f.min == f.max:
		return fmt.Sprintf("%d arguments", f.min)
	case f.max < 0:
		return fmt.Sprintf("at least %d arguments", f.min)
	}
	return fmt.Sprintf("%d to %d arguments", f.min, f.max)
}

// functions is filled in init-free style: a map literal built from the
// tables of each group, read-only after package initialisation.
var functions = buildFunctions()

func buildFunctions() map[string]*funcDef {
	m := map[string]*funcDef{}
	for _, t := range []map[string]*funcDef{existenceFuncs(), filterFuncs(), conversionFuncs(), stringFuncs(), mathFuncs(), utilityFuncs(), fhirFuncs()} {
		for k, v := range t {
			m[k] = v
		}
	}
	return m
}

// arg evaluates argument i in the caller's scope.
func (e *evaluator) arg(n *callNode, i int, sc *scope) (Collection, error) {
	return e.eval(n.args[i], sc)
}

// lambdaScope returns the scope in which an iterating function evaluates
// its argument for its items: made once per call, and set to each item in
// turn by lambdaAt. No evaluation keeps its scope, so the function gives
// it back with releaseScope when it is done.
func (e *evaluator) lambdaScope(sc *scope) *scope {
	if n := len(e.freeScopes); n > 0 {
		s := e.freeScopes[n-1]
		e.freeScopes = e.freeScopes[:n-1]
		*s = scope{hasIndex: true, total: sc.total, hasTotal: sc.hasTotal}
		return s
	}
	if len(e.scopes) == cap(e.scopes) {
		e.scopes = make([]scope, 0, min(max(2*cap(e.scopes), 2), 32))
	}
	e.scopes = append(e.scopes, scope{hasIndex: true, total: sc.total, hasTotal: sc.hasTotal})
	return &e.scopes[len(e.scopes)-1]
}

// releaseScope gives back a scope from lambdaScope once its function is
// done with it, for the next lambdaScope.
func (e *evaluator) releaseScope(s *scope) {
	*s = scope{}
	e.freeScopes = append(e.freeScopes, s)
}

// lambdaAt evaluates argument arg in inner, from lambdaScope, with $this
// the item v and $index index.
func (e *evaluator) lambdaAt(inner *scope, n *callNode, arg int, v Value, index int) (Collection, error) {
	inner.this, inner.index = e.single(v), index
	return e.eval(n.args[arg], inner)
}

// lambdaBool is lambdaAt for a criterion: its result as evalBool gives
// it.
func (e *evaluator) lambdaBool(inner *scope, n *callNode, arg int, v Value, index int) (b, ok bool, err error) {
	inner.this, inner.index = e.single(v), index
	return e.evalBool(n.args[arg], inner)
}

// lambda evaluates argument i with $this the item v and $index i.
func (e *evaluator) lambda(n *callNode, arg int, v Value, index int, sc *scope) (Collection, error) {
	inner := scope{this: e.single(v), index: index, hasIndex: true, total: sc.total, hasTotal: sc.hasTotal}
	return e.eval(n.args[arg], &inner)
}

// argSingle evaluates argument i and returns its single System value.
func (e *evaluator) argSingle(n *callNode, i int, sc *scope) (Value, bool, error) {
	c, err := e.arg(n, i, sc)
	if err != nil {
		return nil, false, err
	}
	return singleton(c, n.args[i].pos())
}

func (e *evaluator) argString(n *callNode, i int, sc *scope) (string, bool, error) {
	v, ok, err := e.argSingle(n, i, sc)
	if err != nil || !ok {
		return "", ok, err
	}
	s, isS := v.(String)
	if !isS {
		return "", false, evalErr(ErrEvaluation, n.args[i].pos(), "%s() expects a string argument, not %s", n.name, typeName(v))
	}
	return string(s), true, nil
}

func (e *evaluator) argInt(n *callNode, i int, sc *scope) (int64, bool, error) {
	c, err := e.arg(n, i, sc)
	if err != nil {
		return 0, false, err
	}
	return e.singleInteger(c, n.args[i].pos())
}

// argType reads a type argument: an identifier or qualified name as
// written, not evaluated.
func argType(n *callNode, i int) (typeSpec, error) {
	switch a := n.args[i].(type) {
	case *identNode:
		return typeSpec{name: a.name}, nil
	case *memberNode:
		if id, ok := a.target.(*identNode); ok {
			return typeSpec{ns: id.name, name: a.name}, nil
		}
	}
	return typeSpec{}, evalErr(ErrSemantic, n.args[i].pos(), "%s() expects a type name", n.name)
}

func (e *evaluator) focusSingle(n *callNode, target Collection) (Value, bool, error) {
	return singleton(target, n.at)
}

func existenceFuncs() map[string]*funcDef {
	return map[string]*funcDef{
		"empty": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			return boolColl(len(t) == 0), nil
		}},
		"exists": {0, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(n.args) == 0 {
				return boolColl(len(t) > 0), nil
			}
			inner := e.lambdaScope(sc)
			defer e.releaseScope(inner)
			for i, v := range t {
				if b, ok, err := e.lambdaBool(inner, n, 0, v, i); err != nil {
					return nil, err
				} else if ok && b {
					return boolColl(true), nil
				}
			}
			return boolColl(false), nil
		}},
		"all": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			inner := e.lambdaScope(sc)
			defer e.releaseScope(inner)
			for i, v := range t {
				if b, ok, err := e.lambdaBool(inner, n, 0, v, i); err != nil {
					return nil, err
				} else if !ok || !b {
					return boolColl(false), nil
				}
			}
			return boolColl(true), nil
		}},
		"allTrue":  {0, 0, boolAgg(func(b bool) bool { return !b }, false)},
		"anyTrue":  {0, 0, boolAgg(func(b bool) bool { return b }, true)},
		"allFalse": {0, 0, boolAgg(func(b bool) bool { return b }, false)},
		"anyFalse": {0, 0, boolAgg(func(b bool) bool { return !b }, true)},
		"subsetOf": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			o, err := e.arg(n, 0, sc)
			if err != nil {
				return nil, err
			}
			return boolColl(subset(t, o)), nil
		}},
		"supersetOf": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			o, err := e.arg(n, 0, sc)
			if err != nil {
				return nil, err
			}
			return boolColl(subset(o, t)), nil
		}},
		"count": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			return Collection{Integer(len(t))}, nil
		}},
		"distinct": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if err := e.step(len(t), n.at); err != nil {
				return nil, err
			}
			return union(t, nil), nil
		}},
		"isDistinct": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if err := e.step(len(t), n.at); err != nil {
				return nil, err
			}
			return boolColl(len(union(t, nil)) == len(t)), nil
		}},
	}
}

// boolAgg builds allTrue/anyTrue/allFalse/anyFalse: stop is the value
// that decides, result what is returned then.
func boolAgg(decides func(bool) bool, result bool) func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
	return func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		for _, v := range t {
			s, _ := toSystem(v)
			b, ok := s.(Boolean)
			if !ok {
				return nil, evalErr(ErrEvaluation, n.at, "%s() needs booleans, not %s", n.name, typeName(s))
			}
			if decides(bool(b)) {
				return boolColl(result), nil
			}
		}
		return boolColl(!result), nil
	}
}

func subset(a, b Collection) bool {
	k := keysOf(b)
	for _, v := range a {
		if !k.has(v) {
			return false
		}
	}
	return true
}

func filterFuncs() map[string]*funcDef {
	return map[string]*funcDef{
		"where": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			var out Collection
			inner := e.lambdaScope(sc)
			defer e.releaseScope(inner)
			for i, v := range t {
				b, ok, err := e.lambdaBool(inner, n, 0, v, i)
				if err != nil {
					return nil, err
				}
				if ok && b {
					out = append(out, v)
				}
			}
			return out, nil
		}},
		"select": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			var out Collection
			inner := e.lambdaScope(sc)
			defer e.releaseScope(inner)
			for i, v := range t {
				r, err := e.lambdaAt(inner, n, 0, v, i)
				if err != nil {
					return nil, err
				}
				out = append(out, r...)
				if err := e.checkSize(out, n.at); err != nil {
					return nil, err
				}
			}
			return out, nil
		}},
		"repeat": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			var out Collection
			seen := keyed{}
			queue := t
			for len(queue) > 0 {
				var next Collection
				for i, v := range queue {
					r, err := e.lambda(n, 0, v, i, sc)
					if err != nil {
						return nil, err
					}
					for _, x := range r {
						if err := e.step(1, n.at); err != nil {
							return nil, err
						}
						if seen.add(x) {
							out = append(out, x)
							next = append(next, x)
						}
					}
					if err := e.checkSize(out, n.at); err != nil {
						return nil, err
					}
				}
				queue = next
			}
			return out, nil
		}},
		"ofType": {1, 1, ofTypeFunc},
		"is": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			ts, err := argType(n, 0)
			if err != nil {
				return nil, err
			}
			if len(t) == 0 {
				return nil, nil
			}
			if len(t) > 1 {
				return nil, evalErr(ErrEvaluation, n.at, "is() needs a single item, not %d", len(t))
			}
			ok, err := isType(t[0], ts, n.at)
			if err != nil {
				return nil, err
			}
			return boolColl(ok), nil
		}},
		"as": {1, 1, ofTypeFunc}, // as R4 uses it: filters, like ofType (see the package doc)
		"single": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(t) > 1 {
				return nil, evalErr(ErrEvaluation, n.at, "single() on %d items", len(t))
			}
			return t, nil
		}},
		"first": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(t) == 0 {
				return nil, nil
			}
			return t[:1:1], nil
		}},
		"last": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(t) == 0 {
				return nil, nil
			}
			return t[len(t)-1:], nil
		}},
		"tail": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(t) == 0 {
				return nil, nil
			}
			return t[1:], nil
		}},
		"skip": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			k, ok, err := e.argInt(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			if k <= 0 {
				return t, nil
			}
			if k >= int64(len(t)) {
				return nil, nil
			}
			return t[k:], nil
		}},
		"take": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			k, ok, err := e.argInt(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			if k <= 0 {
				return nil, nil
			}
			if k >= int64(len(t)) {
				return t, nil
			}
			return t[:k:k], nil
		}},
		"intersect": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			o, err := e.arg(n, 0, sc)
			if err != nil {
				return nil, err
			}
			var out Collection
			k, seen := keysOf(o), keyed{}
			for _, v := range t {
				if k.has(v) && seen.add(v) {
					out = append(out, v)
				}
			}
			return out, nil
		}},
		"exclude": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			o, err := e.arg(n, 0, sc)
			if err != nil {
				return nil, err
			}
			var out Collection
			k := keysOf(o)
			for _, v := range t {
				if !k.has(v) {
					out = append(out, v)
				}
			}
			return out, nil
		}},
		"union": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			o, err := e.arg(n, 0, sc)
			if err != nil {
				return nil, err
			}
			return union(t, o), nil
		}},
		"combine": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			o, err := e.arg(n, 0, sc)
			if err != nil {
				return nil, err
			}
			out := make(Collection, 0, len(t)+len(o))
			return append(append(out, t...), o...), nil
		}},
		"children": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			var out Collection
			for _, v := range t {
				if nd, ok := v.(*Node); ok {
					out = children(nd, out, e)
				}
			}
			return out, e.step(len(out), n.at)
		}},
		"descendants": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			return e.descendants(t, n.at)
		}},
		"aggregate": {1, 2, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			var total Collection
			if len(n.args) > 1 {
				var err error
				if total, err = e.arg(n, 1, sc); err != nil {
					return nil, err
				}
			}
			for i, v := range t {
				inner := scope{this: Collection{v}, index: i, hasIndex: true, total: total, hasTotal: true}
				r, err := e.eval(n.args[0], &inner)
				if err != nil {
					return nil, err
				}
				total = r
			}
			return total, nil
		}},
		"sort": {0, -1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			return e.sortColl(n, t, sc)
		}},
	}
}

// sortColl implements sort(): by the items, or by each key expression in
// turn (a key written -expr sorts descending).
func (e *evaluator) sortColl(n *callNode, t Collection, sc *scope) (Collection, error) {
	type keyed struct {
		v    Value
		keys []Value
	}
	items := make([]keyed, len(t))
	desc := make([]bool, len(n.args))
	exprs := make([]node, len(n.args))
	for k, a := range n.args {
		if u, ok := a.(*unaryNode); ok && u.op == "-" {
			desc[k], exprs[k] = true, u.x
		} else {
			exprs[k] = a
		}
	}
	for i, v := range t {
		items[i].v = v
		if len(exprs) == 0 {
			s, _ := toSystem(v)
			items[i].keys = []Value{s}
			continue
		}
		for _, x := range exprs {
			inner := scope{this: Collection{v}, index: i, hasIndex: true}
			r, err := e.eval(x, &inner)
			if err != nil {
				return nil, err
			}
			k, _, err := singleton(r, x.pos())
			if err != nil {
				return nil, err
			}
			items[i].keys = append(items[i].keys, k)
		}
	}
	if len(desc) == 0 {
		desc = []bool{false}
	}
	var sortErr error
	sort.SliceStable(items, func(a, b int) bool {
		for k := range items[a].keys {
			x, y := items[a].keys[k], items[b].keys[k]
			if x == nil || y == nil {
				// Empty keys sort first, whatever the direction.
				if x == nil && y != nil {
					return true
				}
				if y == nil && x != nil {
					return false
				}
				continue
			}
			c, _, err := compare(x, y, n.at)
			if err != nil {
				sortErr = err
				return false
			}
			if c != 0 {
				return (c < 0) != desc[k]
			}
		}
		return false
	})
	if sortErr != nil {
		return nil, sortErr
	}
	out := make(Collection, len(items))
	for i := range items {
		out[i] = items[i].v
	}
	return out, nil
}

func utilityFuncs() map[string]*funcDef {
	return map[string]*funcDef{
		"iif": {2, 3, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			isc := sc
			if n.target != nil {
				if len(t) > 1 {
					return nil, evalErr(ErrEvaluation, n.at, "iif() on %d items", len(t))
				}
				isc = &scope{this: t, index: sc.index, hasIndex: sc.hasIndex, total: sc.total, hasTotal: sc.hasTotal}
			}
			c, err := e.eval(n.args[0], isc)
			if err != nil {
				return nil, err
			}
			if len(c) > 1 {
				return nil, evalErr(ErrSemantic, n.args[0].pos(), "iif() criterion has %d items", len(c))
			}
			b, ok := false, false
			if len(c) == 1 {
				v, _ := toSystem(c[0])
				bv, isB := v.(Boolean)
				if !isB {
					return nil, evalErr(ErrSemantic, n.args[0].pos(), "iif() criterion is %s, not a boolean", typeName(v))
				}
				b, ok = bool(bv), true
			}
			if ok && b {
				return e.eval(n.args[1], isc)
			}
			if len(n.args) > 2 {
				return e.eval(n.args[2], isc)
			}
			return nil, nil
		}},
		"trace": {1, 2, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			name, _, err := e.argString(n, 0, sc)
			if err != nil {
				return nil, err
			}
			if e.env.Trace == nil {
				return t, nil
			}
			shown := t
			if len(n.args) > 1 {
				shown = nil
				for i, v := range t {
					r, err := e.lambda(n, 1, v, i, sc)
					if err != nil {
						return nil, err
					}
					shown = append(shown, r...)
				}
			}
			e.env.Trace(name, shown)
			return t, nil
		}},
		"now": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			return Collection{dateTimeOf(e.clock(), Millisecond)}, nil
		}},
		"today": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			dt := dateTimeOf(e.clock(), Day)
			return Collection{Date{dt.temporal}}, nil
		}},
		"timeOfDay": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			dt := dateTimeOf(e.clock(), Millisecond)
			tt := dt.temporal
			tt.Year, tt.Month, tt.Day, tt.HasZone, tt.ZoneOffset = 0, 0, 0, false, 0
			return Collection{Time{tt}}, nil
		}},
		"not": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			b, ok, err := toBool(t, n.at)
			if err != nil || !ok {
				return nil, err
			}
			return boolColl(!b), nil
		}},
		"type": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			out := make(Collection, 0, len(t))
			for _, v := range t {
				out = append(out, typeInfoOf(v))
			}
			return out, nil
		}},
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// ofTypeFunc keeps the items of the argument's type: ofType(), and as()
// on a collection as R4's invariants and search parameters use it.
func ofTypeFunc(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
	ts, err := argType(n, 0)
	if err != nil {
		return nil, err
	}
	var out Collection
	for _, v := range t {
		ok, err := asType(v, ts, n.at)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, v)
		}
	}
	return out, nil
}

// descendants returns the descendants of the items of t, breadth first.
func (e *evaluator) descendants(t Collection, at int) (Collection, error) {
	var out Collection
	queue := t
	for len(queue) > 0 {
		start := len(out)
		for _, v := range queue {
			if nd, ok := v.(*Node); ok {
				out = children(nd, out, e)
			}
		}
		if err := e.step(len(out)-start, at); err != nil {
			return nil, err
		}
		if err := e.checkSize(out, at); err != nil {
			return nil, err
		}
		queue = out[start:]
	}
	return out, nil
}

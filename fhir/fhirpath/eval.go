package fhirpath

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// Limits bound an evaluation. The zero value of each field selects its
// default.
type Limits struct {
	// MaxSteps bounds the work of one evaluation: every node of the
	// expression evaluated and every item a function or operator visits
	// counts one step. Zero means 10,000,000.
	MaxSteps int
	// MaxItems bounds the size of every collection an evaluation builds,
	// the result included. Zero means 1,000,000.
	MaxItems int
	// Budget, when set, is a step budget shared by the evaluations given
	// the same Limits: each takes at most what remains (and at most
	// MaxSteps), and its steps are subtracted when it ends, so many small
	// evaluations over one input are bounded together. It is not safe for
	// evaluations running at once.
	Budget *int
}

// Env is what an evaluation sees besides its input. The zero value (or a
// nil *Env) is a plain evaluation: %resource and %rootResource are the
// input's resource, %context the input, %bundle unset, the clock the
// system clock, trace() output discarded.
type Env struct {
	// Vars are further environment variables (%name), by name without %.
	Vars map[string]Collection
	// Resource is %resource, the resource that holds the input. Nil means
	// the input when it is a single resource.
	Resource r4.Resource
	// RootResource is %rootResource, the resource that holds Resource when
	// that is a contained resource; resolve() looks up #id references
	// among its contained resources. Nil means Resource.
	RootResource r4.Resource
	// Bundle is %bundle; resolve() also finds references among its
	// entries. Nil means the input when it is a single Bundle, or
	// %resource when that is one.
	Bundle *r4.Bundle
	// BundleIndex, when it indexes the Bundle resolve() searches, is used
	// instead of a scan of its entries (which counts one step per entry).
	BundleIndex *BundleIndex
	// Now is the time now(), today() and timeOfDay() report, fixed for
	// the evaluation. Zero means the system clock, read once per
	// evaluation.
	Now time.Time
	// Trace receives the collections trace() passes through. Nil
	// discards them.
	Trace func(name string, c Collection)
	// Limits bound the evaluation.
	Limits Limits
	// SkipEmpty makes navigation leave out elements without content (a
	// primitive with neither value, id nor extension, a data type or
	// backbone element none of whose children has content), which the
	// r4 encoder leaves out too: for evaluating a model edited in place,
	// where a cleared element is still reachable.
	SkipEmpty bool
}

// evaluator is the state of one evaluation.
type evaluator struct {
	ctx      context.Context
	src      string
	env      *Env
	steps    int
	maxSteps int
	// stepMark is the most steps step counts before it looks at the
	// limit and the context again (see step).
	stepMark   int
	maxItems   int
	now        time.Time
	input      Collection
	resource   Collection
	root       Collection // %rootResource
	bundle     *r4.Bundle
	vars       map[string]Collection
	regexps    map[string]*regexp.Regexp
	skipEmpty  bool
	nodes      []Node       // the current block of box
	kids       []r4.Child   // navigation's reused buffer
	ids        []r4.ID      // the current block of newID
	vals       []Value      // the current block of single and coll
	scopes     []scope      // the current block of lambdaScope
	freeScopes []*scope     // scopes given back, kept from one evaluation to the next
	elems      *elemCache   // kept from one evaluation to the next
	kidStack   [][]r4.Child // chains' child buffers by depth, kept too
	kidsHeld   []int        // the most each of kidStack held, to clear
	kidDepth   int          // the depth of kidStack in use (chains nest through where())
	walk       *descWalk    // walkDescendants' state and callback, kept too
}

// evaluators recycles evaluators: an evaluation of an invariant on one
// element is short, and allocating the evaluator showed in its cost.
var evaluators = sync.Pool{New: func() any { return new(evaluator) }}

// release returns e to the pool. The nodes of its current block may be in
// the result, so the block is kept only past them: later evaluations box
// into what remains of it.
func (e *evaluator) release() {
	clear(e.kids)
	for d, n := range e.kidsHeld {
		clear(e.kidStack[d][:n])
	}
	clear(e.kidsHeld)
	*e = evaluator{nodes: e.nodes[len(e.nodes):], kids: e.kids[:0], ids: e.ids[len(e.ids):], vals: e.vals[len(e.vals):], scopes: e.scopes[len(e.scopes):], elems: e.elems, freeScopes: e.freeScopes, kidStack: e.kidStack, kidsHeld: e.kidsHeld, walk: e.walk}
	evaluators.Put(e)
}

// blockMark is where the evaluator's node, id and value blocks stood, for
// rewindBlocks.
type blockMark struct {
	nodes []Node
	ids   []r4.ID
	vals  []Value
}

// markBlocks returns where the blocks stand now.
func (e *evaluator) markBlocks() blockMark {
	return blockMark{nodes: e.nodes, ids: e.ids, vals: e.vals}
}

// rewindBlocks gives back what was boxed since m, to be boxed into again.
// It is only for values nothing refers to any more: a where() criteria's
// result once read (chainWhere), whose nodes, ids and collections no scope,
// cache or result keeps. The room given back is cleared, so that it keeps
// no part of the model alive once the evaluator is back in its pool.
func (e *evaluator) rewindBlocks(m blockMark) {
	// Written out for each block: a generic rewind costs a dictionary
	// look and a typed clear per call, and where() rewinds per item.
	if sameBlock(e.nodes, m.nodes) {
		for i := len(m.nodes); i < len(e.nodes); i++ {
			e.nodes[i] = Node{}
		}
		e.nodes = m.nodes
	} else {
		clear(e.nodes)
		e.nodes = e.nodes[:0]
	}
	if sameBlock(e.ids, m.ids) {
		for i := len(m.ids); i < len(e.ids); i++ {
			e.ids[i] = r4.ID{}
		}
		e.ids = m.ids
	} else {
		clear(e.ids)
		e.ids = e.ids[:0]
	}
	if sameBlock(e.vals, m.vals) {
		for i := len(m.vals); i < len(e.vals); i++ {
			e.vals[i] = nil
		}
		e.vals = m.vals
	} else {
		clear(e.vals)
		e.vals = e.vals[:0]
	}
}

// sameBlock reports whether the block cur is the block mark was taken
// in, rather than a newer one (made after mark, so holding only what is
// given back; the rest of mark's block is then left unused).
func sameBlock[T any](cur, mark []T) bool {
	return cap(mark) > 0 && cap(cur) > 0 && &cur[:1][0] == &mark[:1][0]
}

// clock returns the time now() and today() report: Env.Now, or the system
// clock read once per evaluation, when first needed.
func (e *evaluator) clock() time.Time {
	if e.now.IsZero() {
		e.now = time.Now()
	}
	return e.now
}

// resourceColl returns %resource, made on first use.
func (e *evaluator) resourceColl() Collection {
	if e.resource == nil && e.env.Resource != nil {
		e.resource = Collection{NodeOf(e.env.Resource)}
	}
	return e.resource
}

// rootColl returns %rootResource, made on first use.
func (e *evaluator) rootColl() Collection {
	if e.root == nil {
		if e.env.RootResource != nil {
			e.root = Collection{NodeOf(e.env.RootResource)}
		} else {
			e.root = e.resourceColl()
		}
	}
	return e.root
}

// scope is what $this, $index and $total refer to.
type scope struct {
	this     Collection
	index    int
	hasIndex bool
	total    Collection
	hasTotal bool
}

// step counts n steps of the evaluation at offset at against MaxSteps,
// and looks at the context every 4096 steps. The common case, no limit
// reached and no look due (steps within stepMark), is inlined.
func (e *evaluator) step(n int, at int) error {
	e.steps += n
	if e.steps > e.stepMark {
		return e.stepLimits(at)
	}
	return nil
}

// stepLimits is step's less common case, once the steps counted pass
// stepMark: the limit is passed, or the count reached a multiple of 4096.
// It sets the next mark.
func (e *evaluator) stepLimits(at int) error {
	if e.steps > e.maxSteps {
		return evalErr(ErrLimit, at, "evaluation took more than %d steps", e.maxSteps)
	}
	if err := e.ctx.Err(); err != nil {
		return &EvalError{Class: ErrLimit, Offset: at, Msg: "evaluation stopped", Err: err}
	}
	e.stepMark = min(e.maxSteps, e.steps|0xfff)
	return nil
}

func (e *evaluator) checkSize(c Collection, at int) error {
	if len(c) > e.maxItems {
		return evalErr(ErrLimit, at, "collection of more than %d items", e.maxItems)
	}
	return nil
}

func (e *evaluator) eval(n node, sc *scope) (Collection, error) {
	if err := e.step(1, n.pos()); err != nil {
		return nil, err
	}
	switch n := n.(type) {
	case *literalNode:
		if n.val == nil {
			return nil, nil
		}
		if n.coll != nil {
			return n.coll[:1:1], nil
		}
		return Collection{n.val}, nil
	case *identNode:
		return e.member(sc.this, n.name, n.at, true, &n.cache)
	case *memberNode:
		if n.fused != nil {
			return e.evalChain(n.fused, sc)
		}
		t, err := e.eval(n.target, sc)
		if err != nil {
			return nil, err
		}
		return e.member(t, n.name, n.at, false, &n.cache)
	case *callNode:
		if n.fused != nil {
			return e.evalChain(n.fused, sc)
		}
		var target Collection
		if n.target == nil {
			target = sc.this
		} else {
			var err error
			if target, err = e.eval(n.target, sc); err != nil {
				return nil, err
			}
		}
		out, err := n.fn.impl(e, n, target, sc)
		if err != nil {
			return nil, err
		}
		return out, e.checkSize(out, n.at)
	case *indexNode:
		t, err := e.eval(n.target, sc)
		if err != nil {
			return nil, err
		}
		ic, err := e.eval(n.index, sc)
		if err != nil {
			return nil, err
		}
		i, ok, err := e.singleInteger(ic, n.index.pos())
		if err != nil || !ok {
			return nil, err
		}
		if i < 0 || int(i) >= len(t) {
			return nil, nil
		}
		return Collection{t[i]}, nil
	case *unaryNode:
		x, err := e.eval(n.x, sc)
		if err != nil {
			return nil, err
		}
		if n.op == "+" {
			if len(x) == 1 {
				if v, _ := toSystem(x[0]); isNumeric(v) {
					return Collection{v}, nil
				}
			}
			if len(x) == 0 {
				return nil, nil
			}
			return nil, evalErr(ErrEvaluation, n.at, "unary + needs a number")
		}
		return e.negate(x, n.at)
	case *binaryNode:
		return e.binary(n, sc)
	case *typeOpNode:
		x, err := e.eval(n.x, sc)
		if err != nil {
			return nil, err
		}
		if n.op == "is" {
			if len(x) == 0 {
				return nil, nil
			}
			if len(x) > 1 {
				return nil, evalErr(ErrEvaluation, n.at, "'is' needs a single item, not %d", len(x))
			}
			ok, err := isType(x[0], n.typ, n.at)
			if err != nil {
				return nil, err
			}
			return Collection{Boolean(ok)}, nil
		}
		// R4's own search parameters and invariants apply as to
		// collections ((Observation.component.value as Quantity)): like
		// the function, the operator keeps the items of the type.
		var out Collection
		for _, v := range x {
			ok, err := asType(v, n.typ, n.at)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, v)
			}
		}
		return out, nil
	case *varNode:
		switch n.name {
		case "$this":
			return sc.this, nil
		case "$index":
			if !sc.hasIndex {
				return nil, evalErr(ErrSemantic, n.at, "$index outside an iterating function")
			}
			return Collection{Integer(sc.index)}, nil
		case "$total":
			if !sc.hasTotal {
				return nil, evalErr(ErrSemantic, n.at, "$total outside aggregate()")
			}
			return sc.total, nil
		}
	case *envNode:
		return e.envVar(n)
	}
	return nil, evalErr(ErrEvaluation, n.pos(), "cannot evaluate")
}

func (e *evaluator) envVar(n *envNode) (Collection, error) {
	switch n.name {
	case "context":
		return e.input, nil
	case "resource":
		return e.resourceColl(), nil
	case "rootResource":
		return e.rootColl(), nil
	case "ucum":
		return Collection{String(ucumSystem)}, nil
	case "sct":
		return Collection{String("http://snomed.info/sct")}, nil
	case "loinc":
		return Collection{String("http://loinc.org")}, nil
	case "bundle":
		if e.bundle != nil {
			return Collection{NodeOf(e.bundle)}, nil
		}
	}
	if v, ok := e.vars[n.name]; ok {
		return v, nil
	}
	if strings.HasPrefix(n.name, "vs-") {
		return Collection{String("http://hl7.org/fhir/ValueSet/" + n.name[3:])}, nil
	}
	if strings.HasPrefix(n.name, "ext-") {
		return Collection{String("http://hl7.org/fhir/StructureDefinition/" + n.name[4:])}, nil
	}
	if n.name == "bundle" {
		return nil, nil
	}
	return nil, unknownEnv(n) // Evaluate's CheckEnv refused it already
}

// builtinEnv reports whether every evaluation provides %name, whatever
// its Env: the variables envVar answers without Env.Vars.
func builtinEnv(name string) bool {
	switch name {
	case "context", "resource", "rootResource", "ucum", "sct", "loinc", "bundle":
		return true
	}
	return strings.HasPrefix(name, "vs-") || strings.HasPrefix(name, "ext-")
}

// Provides reports whether an evaluation with env resolves the
// environment variable %name (name without the %): the ones every
// evaluation has — %context, %resource, %rootResource, %ucum, %sct,
// %loinc, %bundle (empty when there is none), %vs-name and %ext-name —
// and those of env.Vars. A nil env provides the built-in ones. It is the
// rule of Expression.CheckEnv, which Evaluate applies first.
func (env *Env) Provides(name string) bool {
	if builtinEnv(name) {
		return true
	}
	if env == nil {
		return false
	}
	_, ok := env.Vars[name]
	return ok
}

// unknownEnv is the error of an environment variable no Env provides.
func unknownEnv(n *envNode) error {
	return evalErr(ErrSemantic, n.at, "unknown environment variable %%%s", n.name)
}

// member navigates from every item of c to its children called name. At
// the start of a path (first), a type name selects the items of that type.
func (e *evaluator) member(c Collection, name string, at int, first bool, cache *stepCache) (Collection, error) {
	var out Collection
	if first && name != "" && name[0] >= 'A' && name[0] <= 'Z' {
		matched := false
		for _, v := range c {
			if n, ok := v.(*Node); ok {
				if _, isRes := n.Value.(r4.Resource); isRes && nodeIs(n, name) {
					out = append(out, v)
					matched = true
				}
			}
		}
		if matched || r4.IsResourceType(name) || name == "Resource" || name == "DomainResource" {
			return out, nil
		}
	}
	for _, v := range c {
		n, ok := v.(*Node)
		if !ok {
			if ti, ok := v.(TypeInfo); ok {
				switch name {
				case "name":
					out = append(out, String(ti.Name))
				case "namespace":
					out = append(out, String(ti.Namespace))
				}
			}
			continue
		}
		before := len(out)
		out = navigate(n, name, out, e, cache)
		if err := e.step(len(out)-before, at); err != nil {
			return nil, err
		}
	}
	return out, e.checkSize(out, at)
}

func (e *evaluator) singleInteger(c Collection, at int) (int64, bool, error) {
	if len(c) == 0 {
		return 0, false, nil
	}
	if len(c) > 1 {
		return 0, false, evalErr(ErrEvaluation, at, "expected a single integer, got %d items", len(c))
	}
	v, _ := toSystem(c[0])
	if i, ok := v.(Integer); ok {
		return int64(i), true, nil
	}
	return 0, false, evalErr(ErrEvaluation, at, "expected an integer, got %s", typeName(v))
}

func typeName(v Value) string {
	if v == nil {
		return "nothing"
	}
	return v.TypeName()
}

// singleton returns the single item of c as a System value where it
// converts; ok is false for an empty collection.
func singleton(c Collection, at int) (Value, bool, error) {
	if len(c) == 0 {
		return nil, false, nil
	}
	if len(c) > 1 {
		return nil, false, evalErr(ErrEvaluation, at, "expected a single item, got %d", len(c))
	}
	v, ok := toSystem(c[0])
	if !ok {
		return nil, false, nil
	}
	return v, true, nil
}

// toBool applies singleton evaluation for a Boolean: empty is unknown
// (ok false), a single Boolean its value, any other single item true.
func toBool(c Collection, at int) (b, ok bool, err error) {
	v, ok, err := singleton(c, at)
	if err != nil || !ok {
		return false, false, err
	}
	if x, isB := v.(Boolean); isB {
		return bool(x), true, nil
	}
	return true, true, nil
}

func isNumeric(v Value) bool {
	switch v.(type) {
	case Integer, Decimal:
		return true
	}
	return false
}

func (e *evaluator) negate(x Collection, at int) (Collection, error) {
	v, ok, err := singleton(x, at)
	if err != nil || !ok {
		return nil, err
	}
	switch v := v.(type) {
	case Integer:
		return Collection{-v}, nil
	case Decimal:
		return Collection{v.neg()}, nil
	case Quantity:
		return Collection{Quantity{Value: v.Value.neg(), Unit: v.Unit}}, nil
	}
	return nil, evalErr(ErrEvaluation, at, "cannot negate %s", typeName(v))
}

// trueColl and falseColl are the results of boolean operators and
// functions, shared: a result is never changed in place.
var (
	trueColl  = Collection{Boolean(true)}
	falseColl = Collection{Boolean(false)}
)

func boolColl(b bool) Collection {
	if b {
		return trueColl[:1:1]
	}
	return falseColl[:1:1]
}

// coll returns an empty collection with room for n items (at most 128),
// from the evaluator's blocks.
func (e *evaluator) coll(n int) Collection {
	if e == nil {
		return make(Collection, 0, n)
	}
	if cap(e.vals)-len(e.vals) < n {
		e.vals = make([]Value, 0, min(max(2*cap(e.vals), 4, n), 128))
	}
	m := len(e.vals)
	e.vals = e.vals[:m+n]
	return e.vals[m : m : m+n]
}

// single returns the collection of v alone, from the evaluator's blocks.
func (e *evaluator) single(v Value) Collection {
	if len(e.vals) == cap(e.vals) {
		e.vals = make([]Value, 0, min(max(2*cap(e.vals), 4), 128))
	}
	e.vals = append(e.vals, v)
	n := len(e.vals)
	return e.vals[n-1 : n : n]
}

func (e *evaluator) binary(n *binaryNode, sc *scope) (Collection, error) {
	switch n.op {
	case "and", "or", "xor", "implies":
		return e.logic(n, sc)
	case "=", "!=":
		if res, done, err := e.stepEqualsString(n, sc); done || err != nil {
			return res, err
		}
	}
	l, err := e.eval(n.l, sc)
	if err != nil {
		return nil, err
	}
	r, err := e.eval(n.r, sc)
	if err != nil {
		return nil, err
	}
	if err := e.step(len(l)+len(r), n.at); err != nil {
		return nil, err
	}
	switch n.op {
	case "|":
		out := union(l, r)
		return out, e.checkSize(out, n.at)
	case "=", "!=":
		res, known, err := collEqual(l, r)
		if err != nil || !known {
			return nil, err
		}
		return boolColl(res == (n.op == "=")), nil
	case "~", "!~":
		res := collEquivalent(l, r)
		return boolColl(res == (n.op == "~")), nil
	case "<", ">", "<=", ">=":
		if len(l) == 1 && len(r) == 1 {
			// Dates and times compare without converting a node
			// to a Value first.
			ta, timeA, emptyA, okA := nodeOrValueTemporal(l[0])
			tb, timeB, emptyB, okB := nodeOrValueTemporal(r[0])
			if okA && okB {
				if emptyA || emptyB {
					return nil, nil
				}
				if c, known, ok := compareTemporals(ta, tb, timeA, timeB); ok {
					if !known {
						return nil, nil
					}
					return boolColl(compared(n.op, c)), nil
				}
			}
		}
		a, ok1, err := singleton(l, n.l.pos())
		if err != nil {
			return nil, err
		}
		b, ok2, err := singleton(r, n.r.pos())
		if err != nil || !ok1 || !ok2 {
			return nil, err
		}
		c, known, err := compare(a, b, n.at)
		if err != nil || !known {
			return nil, err
		}
		return boolColl(compared(n.op, c)), nil
	case "in", "contains":
		item, coll := l, r
		if n.op == "contains" {
			item, coll = r, l
		}
		if len(item) == 0 {
			return nil, nil
		}
		if len(item) > 1 {
			return nil, evalErr(ErrEvaluation, n.at, "'%s' needs a single item, not %d", n.op, len(item))
		}
		for _, v := range coll {
			if eq, known, _ := valueEqual(item[0], v); known && eq {
				return boolColl(true), nil
			}
		}
		return boolColl(false), nil
	case "&":
		a, _, err := singleton(l, n.l.pos())
		if err != nil {
			return nil, err
		}
		b, _, err := singleton(r, n.r.pos())
		if err != nil {
			return nil, err
		}
		sa, oka := a.(String)
		sb, okb := b.(String)
		if a != nil && !oka || b != nil && !okb {
			return nil, evalErr(ErrEvaluation, n.at, "'&' needs strings")
		}
		if len(sa)+len(sb) > maxString {
			return nil, evalErr(ErrLimit, n.at, "string longer than %d bytes", maxString)
		}
		return Collection{sa + sb}, nil
	}
	a, ok1, err := singleton(l, n.l.pos())
	if err != nil {
		return nil, err
	}
	b, ok2, err := singleton(r, n.r.pos())
	if err != nil || !ok1 || !ok2 {
		return nil, err
	}
	v, err := arith(n.op, a, b, n.at)
	if err != nil || v == nil {
		return nil, err
	}
	if d, ok := v.(Decimal); ok && d.outOfRange() || func() bool { q, ok := v.(Quantity); return ok && q.Value.outOfRange() }() {
		return nil, nil // beyond the range of System.Decimal
	}
	return Collection{v}, nil
}

// compared applies a comparison operator to the result of a comparison.
func compared(op string, c int) bool {
	switch op {
	case "<":
		return c < 0
	case ">":
		return c > 0
	case "<=":
		return c <= 0
	}
	return c >= 0
}

func (e *evaluator) logic(n *binaryNode, sc *scope) (Collection, error) {
	b, ok, err := e.logicBool(n, sc)
	if err != nil || !ok {
		return nil, err
	}
	return boolColl(b), nil
}

// logicBool is logic's result as evalBool gives it: ok is false for an
// empty one.
func (e *evaluator) logicBool(n *binaryNode, sc *scope) (b, ok bool, err error) {
	a, aok, err := e.evalBool(n.l, sc)
	if err != nil {
		return false, false, err
	}
	// Short cuts that need not evaluate the right operand.
	switch {
	case n.op == "and" && aok && !a:
		return false, true, nil
	case n.op == "or" && aok && a:
		return true, true, nil
	case n.op == "implies" && aok && !a:
		return true, true, nil
	}
	c, cok, err := e.evalBool(n.r, sc)
	if err != nil {
		return false, false, err
	}
	switch n.op {
	case "and":
		if cok && !c {
			return false, true, nil
		}
		if aok && cok {
			return true, true, nil
		}
	case "or":
		if cok && c {
			return true, true, nil
		}
		if aok && cok {
			return false, true, nil
		}
	case "xor":
		if aok && cok {
			return a != c, true, nil
		}
	case "implies":
		if cok && c {
			return true, true, nil
		}
		if aok && cok {
			return !a || c, true, nil
		}
	}
	return false, false, nil
}

// evalBool evaluates n and returns its result as toBool reads it: b its
// value, ok false for an empty result. It is eval followed by toBool,
// with the same steps, results and errors, but the logical operators and
// name = 'text' (the common forms of a criterion) give their result
// without making a collection for it.
func (e *evaluator) evalBool(n node, sc *scope) (b, ok bool, err error) {
	if x, isBin := n.(*binaryNode); isBin {
		switch x.op {
		case "and", "or", "xor", "implies":
			if err := e.step(1, x.at); err != nil {
				return false, false, err
			}
			return e.logicBool(x, sc)
		case "=", "!=":
			if x.eqName != nil {
				if err := e.step(1, x.at); err != nil {
					return false, false, err
				}
				if b, ok, done, err := e.stepEqualsBool(x, sc); done || err != nil {
					return b, ok, err
				}
				c, err := e.binary(x, sc)
				if err != nil {
					return false, false, err
				}
				return toBool(c, x.pos())
			}
		}
	}
	c, err := e.eval(n, sc)
	if err != nil {
		return false, false, err
	}
	return toBool(c, n.pos())
}

// union merges two collections without duplicates.
func union(l, r Collection) Collection {
	out := make(Collection, 0, len(l)+len(r))
	seen := make(keyed, len(l)+len(r))
	for _, src := range [2]Collection{l, r} {
		for _, v := range src {
			if seen.add(v) {
				out = append(out, v)
			}
		}
	}
	return out
}

func containsValue(c Collection, v Value) bool {
	for _, w := range c {
		if eq, known, _ := valueEqual(v, w); known && eq {
			return true
		}
	}
	return false
}

// stepEqualsString evaluates name = 'text' (or !=), a path of one step
// from a single node compared with a string literal, the common form of a
// criterion (system = 'http://loinc.org', use = 'official'), without
// making the child a node: done is false when n is not of that form, or
// the child not a string-valued primitive, for the general evaluation.
// Steps are counted as the general evaluation counts them.
func (e *evaluator) stepEqualsString(n *binaryNode, sc *scope) (res Collection, done bool, err error) {
	b, ok, done, err := e.stepEqualsBool(n, sc)
	if err != nil || !done || !ok {
		return nil, done, err
	}
	return boolColl(b), true, nil
}

// stepEqualsBool is stepEqualsString's result as evalBool gives it.
func (e *evaluator) stepEqualsBool(n *binaryNode, sc *scope) (b, ok, done bool, err error) {
	id := n.eqName
	if id == nil || len(sc.this) != 1 || e.skipEmpty {
		return false, false, false, nil
	}
	nd, isNode := sc.this[0].(*Node)
	if !isNode {
		return false, false, false, nil
	}
	def := nd.childDef()
	l := id.cache.get(def, id.name)
	var kids []r4.Child
	if !l.none {
		kids = r4.AppendChildren(e.kids[:0], nd.Value, id.name, l.choice)
	}
	var text string
	has, isStr := false, true
	if len(kids) == 1 {
		var kn Node
		switch {
		case l.typed1:
			kn = Node{Value: kids[0].Node, Type: l.elem.Type, def: l.elemDef}
		case l.choice:
			kn = l.typedNode(kids[0].Name, kids[0].Node)
		default:
			kn = e.childNode(def, kids[0].Name, kids[0].Node)
		}
		text, isStr, has = nodeText(&kn)
	}
	nkids := len(kids)
	if kids != nil {
		clear(kids)
		e.kids = kids[:0]
	}
	if !isStr {
		return false, false, false, nil
	}
	// As eval: the identifier and its items, the literal, then the
	// operator's items.
	if err := e.step(2+2*nkids+1, n.at); err != nil {
		return false, false, true, err
	}
	switch {
	case nkids == 0 || nkids == 1 && !has:
		return false, false, true, nil // empty, or a value unknown
	case nkids > 1:
		return n.op == "!=", true, true, nil
	}
	return (text == n.eqWant) == (n.op == "="), true, true, nil
}

package fhirpath

import (
	"errors"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// A chain is a path fused for evaluation item by item: navigation steps
// (name), type filters (ofType(T), as(T)), where(criteria) and, as the
// first step, descendants(), optionally ended by count(), exists(),
// exists(criteria), all(criteria), empty() or first(). Each step is a
// flat map over its input, so taking every item through all the steps in
// turn gives the items, in the order, of evaluating step after step; but
// the items between the steps are neither boxed nor gathered into
// collections, and with an ending other than first() the result's items
// are not either. Steps and MaxItems are counted as step-by-step
// evaluation counts them, up to where the chain stops: exists(),
// exists(criteria), all(criteria), empty() and first() stop at the first
// item that comes through every step (for all(), the first the criteria
// do not hold for), so errors
// (limits included) that only the items after it would raise are not
// raised, and the steps they would take are not counted (see the package
// doc).
type chain struct {
	base  node // evaluated as usual for the input; nil means $this
	steps []chainStep
	term  string // "", "count", "exists", "all", "empty" or "first"
	// critTerm is set for exists(criteria) and all(criteria), whose
	// criteria are the last step: that step and the ending are one node
	// of the expression.
	critTerm bool
	at       int // offset of the chain's last node
	// walkIs is set for descendants().ofType(T) ended by count(),
	// exists() or empty(), where T is a complex type whose items are
	// those of one Go type: it tells them from what r4.Walk visits, so
	// that the descendants of a resource are walked without making
	// nodes (see walkDescendants).
	walkIs func(any) bool
}

// maxChain is the most steps a chain has; longer paths are evaluated step
// by step.
const maxChain = 8

type stepKind uint8

const (
	stepMember      stepKind = iota // navigation to name
	stepOfType                      // ofType(ts) or as(ts)
	stepDescendants                 // descendants(), first step only
	stepWhere                       // where(criteria)
)

type chainStep struct {
	kind  stepKind
	name  string
	cache *stepCache
	ts    typeSpec
	at    int
	// resourceType is ts.name for ofType() of a resource type, which
	// only resources of that type pass, and resourceDef its definition.
	resourceType string
	resourceDef  *spec.Type
	call         *callNode // where()
	// negate turns the sense of a where() step's criteria: it lets an
	// item through when they are false or empty (all(criteria)).
	negate bool
}

// fuse sets the chain of every node of the tree under n that is the end
// of a path worth fusing: two steps or more, or a step ended by count(),
// exists() or empty().
func fuse(n node) {
	switch x := n.(type) {
	case *memberNode:
		fuse(x.target)
		x.fused = chainOf(x)
	case *callNode:
		if x.target != nil {
			fuse(x.target)
		}
		for _, a := range x.args {
			fuse(a)
		}
		x.fused = chainOf(x)
	case *indexNode:
		fuse(x.target)
		fuse(x.index)
	case *unaryNode:
		fuse(x.x)
	case *binaryNode:
		fuse(x.l)
		fuse(x.r)
		if x.op == "=" || x.op == "!=" {
			id, ok := x.l.(*identNode)
			lit, ok2 := x.r.(*literalNode)
			if ok && ok2 && id.name != "" && id.name[0] >= 'a' && id.name[0] <= 'z' && id.name != "id" && id.name != "url" {
				if want, ok := lit.val.(String); ok {
					x.eqName, x.eqWant = id, string(want)
				}
			}
		}
	case *typeOpNode:
		fuse(x.x)
	}
}

// chainOf returns the chain n ends, or nil.
func chainOf(n node) *chain {
	c := &chain{at: n.pos()}
	if x, ok := n.(*callNode); ok && (x.name == "exists" || x.name == "all") && len(x.args) == 1 && x.target != nil {
		// exists(criteria) is where(criteria).exists(): the criteria
		// are a where() step of the chain, which stops at the first
		// item they hold for. all(criteria) is the same with the
		// criteria's sense turned: its step lets through the items they
		// do not hold for (false or empty), and the chain stops at the
		// first one, which makes the result false.
		c.term, c.critTerm = x.name, true
		c.base, c.steps = chainSteps(x.target)
		if len(c.steps) == 0 || len(c.steps)+1 > maxChain {
			return nil
		}
		c.steps = append(c.steps, chainStep{kind: stepWhere, call: x, at: x.at, negate: x.name == "all"})
		return c
	}
	if x, ok := n.(*callNode); ok && len(x.args) == 0 && x.target != nil {
		switch x.name {
		case "count", "exists", "empty", "first":
			c.term = x.name
			c.base, c.steps = chainSteps(x.target)
			if len(c.steps) == 0 || len(c.steps) > maxChain {
				return nil
			}
			if len(c.steps) == 2 && c.steps[0].kind == stepDescendants && c.steps[1].kind == stepOfType && !c.keeps() && c.steps[1].ts.ns != "System" {
				c.walkIs = walkTypes[c.steps[1].ts.name]
			}
			return c
		}
	}
	c.base, c.steps = chainSteps(n)
	if len(c.steps) < 2 || len(c.steps) > maxChain {
		return nil
	}
	return c
}

// chainSteps splits n into the steps of a chain and what they start from.
func chainSteps(n node) (base node, steps []chainStep) {
	switch x := n.(type) {
	case *identNode:
		if x.name != "" && x.name[0] >= 'A' && x.name[0] <= 'Z' {
			return n, nil // a type name at the start of a path
		}
		return nil, []chainStep{{kind: stepMember, name: x.name, cache: &x.cache, at: x.at}}
	case *memberNode:
		base, steps = chainSteps(x.target)
		return base, append(steps, chainStep{kind: stepMember, name: x.name, cache: &x.cache, at: x.at})
	case *callNode:
		switch {
		case (x.name == "ofType" || x.name == "as") && len(x.args) == 1:
			ts, err := argType(x, 0)
			if err != nil {
				return n, nil
			}
			if x.target != nil {
				base, steps = chainSteps(x.target)
			}
			s := chainStep{kind: stepOfType, ts: ts, at: x.at}
			if ts.ns != "System" && r4.IsResourceType(ts.name) {
				s.resourceType, s.resourceDef = ts.name, resourceDef(ts.name)
			}
			return base, append(steps, s)
		case x.name == "where" && len(x.args) == 1 && x.target != nil:
			base, steps = chainSteps(x.target)
			if len(steps) == 0 {
				return n, nil
			}
			return base, append(steps, chainStep{kind: stepWhere, call: x, at: x.at})
		case x.name == "descendants" && len(x.args) == 0:
			return x.target, []chainStep{{kind: stepDescendants, at: x.at}}
		}
	}
	return n, nil
}

// chainRun is the state of one evaluation of a chain.
type chainRun struct {
	c     *chain
	out   Collection
	n     int           // items at the end, for count(), exists() and empty()
	done  bool          // exists() or empty() knows its answer
	sizes [maxChain]int // items made by each step
	sc    *scope        // the scope the chain is evaluated in
	inner *scope        // the scope of where(), made on first use
	index int           // the position of the current input item
	first int           // the step the input items start at
}

// evalChain evaluates c, which stands for the node n eval was called with.
func (e *evaluator) evalChain(c *chain, sc *scope) (Collection, error) {
	// eval counted the last node; the steps and the ending stand for one
	// node each.
	nodes := len(c.steps) - 1
	if c.term != "" && !c.critTerm {
		nodes++
	}
	if err := e.step(nodes, c.at); err != nil {
		return nil, err
	}
	in := sc.this
	if c.base != nil {
		var err error
		if in, err = e.eval(c.base, sc); err != nil {
			return nil, err
		}
	}
	r := chainRun{c: c, sc: sc}
	first := 0
	if c.steps[0].kind == stepDescendants && c.keeps() {
		// The items of descendants() are in breadth-first order over
		// the whole input: gather them as the function does (the
		// order matters for the items kept).
		var err error
		if in, err = e.descendants(in, c.steps[0].at); err != nil {
			return nil, err
		}
		first = 1
	}
	r.first = first
	for idx, v := range in {
		r.index = idx
		if err := e.chainValue(&r, v, first); err != nil {
			return nil, err
		}
		if r.done {
			break
		}
	}
	if r.inner != nil {
		e.releaseScope(r.inner)
	}
	switch c.term {
	case "count":
		return e.single(Integer(r.n)), nil
	case "exists":
		return boolColl(r.n > 0), nil
	case "all":
		return boolColl(r.n == 0), nil
	case "empty":
		return boolColl(r.n == 0), nil
	}
	return r.out, e.checkSize(r.out, c.at)
}

// keeps reports whether the chain's result holds the items that come
// through its steps (no ending, or first()), rather than an answer about
// them.
func (c *chain) keeps() bool { return c.term == "" || c.term == "first" }

// grow counts an item made by step i against MaxItems.
func (e *evaluator) grow(r *chainRun, i int) error {
	r.sizes[i]++
	if r.sizes[i] > e.maxItems {
		return e.tooMany(r, i)
	}
	return nil
}

// tooMany is the error of grow when step i made too many items.
func (e *evaluator) tooMany(r *chainRun, i int) error {
	return evalErr(ErrLimit, r.c.steps[i].at, "collection of more than %d items", e.maxItems)
}

// emit takes an item that went through every step.
func (e *evaluator) emit(r *chainRun, v Value) {
	if r.c.keeps() {
		if r.out == nil {
			r.out = e.coll(4)
		}
		r.out = append(r.out, v)
		r.done = r.c.term == "first"
		return
	}
	r.n++
	r.done = r.c.term != "count"
}

// chainValue takes v through the steps from i on.
func (e *evaluator) chainValue(r *chainRun, v Value, i int) error {
	if n, ok := v.(*Node); ok {
		return e.chainNode(r, n, n, i)
	}
	if i == len(r.c.steps) {
		e.emit(r, v)
		return nil
	}
	s := &r.c.steps[i]
	switch s.kind {
	case stepMember:
		// As member: a TypeInfo has a name and a namespace, other
		// System values nothing.
		ti, ok := v.(TypeInfo)
		if !ok || s.name != "name" && s.name != "namespace" {
			return nil
		}
		// (member counts no step for them)
		if err := e.grow(r, i); err != nil {
			return err
		}
		if s.name == "name" {
			return e.chainValue(r, String(ti.Name), i+1)
		}
		return e.chainValue(r, String(ti.Namespace), i+1)
	case stepOfType:
		if ok, err := asType(v, s.ts, s.at); err != nil || !ok {
			return err
		}
		if err := e.grow(r, i); err != nil {
			return err
		}
		return e.chainValue(r, v, i+1)
	case stepWhere:
		if ok, err := e.chainWhere(r, v, i); err != nil || !ok {
			return err
		}
		return e.chainValue(r, v, i+1)
	}
	return nil
}

// chainWhere evaluates the criteria of the where() at step i for v, with
// $index its position among the items of the step before, and counts v
// when they hold (for all(), when they do not).
func (e *evaluator) chainWhere(r *chainRun, v Value, i int) (bool, error) {
	m := e.markBlocks()
	pass, err := e.chainCriteria(r, v, i)
	// The criteria's result is read: what it boxed is dead, and the next
	// item's criteria box into the same room.
	e.rewindBlocks(m)
	return pass, err
}

// chainCriteria is chainWhere without giving back what the criteria
// boxed, for a caller that gives it back itself.
func (e *evaluator) chainCriteria(r *chainRun, v Value, i int) (bool, error) {
	s := &r.c.steps[i]
	if r.inner == nil {
		r.inner = e.lambdaScope(r.sc)
	}
	index := r.index
	if i > r.first {
		index = r.sizes[i-1] - 1
	}
	b, ok, err := e.lambdaBool(r.inner, s.call, 0, v, index)
	if err != nil || (ok && b) == s.negate {
		return false, err
	}
	return true, e.grow(r, i)
}

// chainNode takes n through the steps from i on. n is not kept: it may
// be a Node of the caller's; boxed, when not nil, is n boxed, kept as it
// is, where n is copied into a box.
func (e *evaluator) chainNode(r *chainRun, n, boxed *Node, i int) error {
	if i == len(r.c.steps) {
		if !r.c.keeps() {
			e.emit(r, nil)
			return nil
		}
		if boxed == nil {
			boxed = e.box(*n)
		}
		e.emit(r, boxed)
		return nil
	}
	s := &r.c.steps[i]
	switch s.kind {
	case stepOfType:
		if !asTypeNode(n, s.ts) {
			return nil
		}
		if err := e.grow(r, i); err != nil {
			return err
		}
		return e.chainNode(r, n, boxed, i+1)
	case stepDescendants:
		if res, ok := n.Value.(r4.Resource); ok && r.c.walkIs != nil {
			return e.walkDescendants(r, res, i)
		}
		return e.chainDescendants(r, n, i)
	case stepWhere:
		return e.chainWhereNode(r, n, boxed, i)
	}
	return e.chainMember(r, n, i)
}

// chainWhereNode is chainNode for the where() at step i. The item is
// boxed to be the criteria's $this. The box is given back with the
// criteria's room when they do not hold, and also when they do but the
// chain keeps no item (count(), exists(), empty()): only the criteria
// referred to it. Later steps then box n again if they need to.
func (e *evaluator) chainWhereNode(r *chainRun, n, boxed *Node, i int) error {
	m := e.markBlocks()
	b, kept := boxed, m
	if b == nil {
		b = e.box(*n)
		kept = e.markBlocks() // the box, kept if the item is
	}
	pass, err := e.chainCriteria(r, b, i)
	if err != nil || !pass || boxed == nil && !r.c.keeps() {
		e.rewindBlocks(m)
		if err != nil || !pass {
			return err
		}
		b = nil
	} else {
		e.rewindBlocks(kept)
	}
	return e.chainNode(r, n, b, i+1)
}

// chainMember is chainNode for the navigation to a name at step i, kept
// out of chainNode so that the other steps' calls have a small frame.
func (e *evaluator) chainMember(r *chainRun, n *Node, i int) error {
	s := &r.c.steps[i]
	if s.name == "id" || s.name == "url" {
		if _, isExt := n.Value.(*r4.Extension); i+1 == len(r.c.steps) && !r.c.keeps() && (s.name == "id" || isExt) {
			// Only counted: the id or url need not be made a node.
			if hasIDOrURL(n, s.name) {
				if err := e.step(1, s.at); err != nil {
					return err
				}
				if err := e.grow(r, i); err != nil {
					return err
				}
				e.emit(r, nil)
			}
			return nil
		}
		var buf [2]Value
		kids := navigate(n, s.name, buf[:0], e, s.cache)
		if err := e.step(len(kids), s.at); err != nil {
			return err
		}
		for _, k := range kids {
			if err := e.grow(r, i); err != nil {
				return err
			}
			if err := e.chainValue(r, k, i+1); err != nil || r.done {
				return err
			}
		}
		return nil
	}
	def := n.childDef()
	l := s.cache.get(def, s.name)
	if l.none {
		return nil
	}
	kids := e.kidsAt(e.kidDepth)
	kids = r4.AppendChildren(kids, n.Value, s.name, l.choice)
	e.kidDepth++
	var err error
	// kn is declared out of the loop: a variable of the loop whose
	// address is passed on would be moved to the heap.
	var kn Node
	for j := 0; err == nil && j < len(kids) && !r.done; j++ {
		k := &kids[j]
		if e.skipEmpty && !hasContent(k.Node, 0) {
			continue
		}
		if err = e.step(1, s.at); err != nil {
			break
		}
		switch {
		case l.typed1:
			// Field by field: the copy of a whole literal goes through
			// a temporary.
			kn.Value, kn.Type, kn.def = k.Node, l.elem.Type, l.elemDef
		case l.choice:
			kn = l.typedNode(k.Name, k.Node)
		default:
			if i+1 < len(r.c.steps) && r.c.steps[i+1].resourceType != "" {
				if res, ok := k.Node.(r4.Resource); ok {
					// ofType(Patient) next: a resource of another type
					// need not be made a node, and one of that type has
					// the step's definition.
					next := &r.c.steps[i+1]
					if err = e.grow(r, i); err == nil && res.ResourceType() == next.resourceType {
						kn.Value, kn.Type, kn.def = res, next.resourceType, next.resourceDef
						err = e.chainNode(r, &kn, nil, i+1)
					}
					continue
				}
			}
			kn = e.childNode(def, k.Name, k.Node)
		}
		if err = e.grow(r, i); err == nil {
			err = e.chainNode(r, &kn, nil, i+1)
		}
	}
	e.kidDepth--
	e.putKids(e.kidDepth, kids)
	return err
}

// chainDescendants takes every descendant of n through the steps after
// i, depth first: only a count(), exists() or empty() follows, for which
// the order does not matter.
func (e *evaluator) chainDescendants(r *chainRun, n *Node, i int) error {
	// The children of n, as children() finds them: its id (and url),
	// then its elements.
	def := n.childDef()
	kids, id := r4.AppendAllChildren(e.kidsAt(e.kidDepth), n.Value)
	e.kidDepth++ // kids is this depth's buffer, from here on
	var buf [2]Value
	ids := buf[:0]
	if id != "" {
		if _, isRes := n.Value.(r4.Resource); isRes {
			ids = append(ids, e.box(Node{Value: e.newID(id), Type: "id", def: idDef}))
		} else {
			ids = append(ids, e.box(Node{Value: &r4.String{Value: id, Present: true}, Type: "string", def: stringDef}))
		}
	}
	if _, ok := n.Value.(*r4.Extension); ok {
		ids = navigate(n, "url", ids, e, nil)
	}
	var err error
	for _, v := range ids {
		if err = e.step(1, r.c.steps[i].at); err != nil {
			break
		}
		if err = e.grow(r, i); err != nil {
			break
		}
		nd := v.(*Node)
		if err = e.chainNode(r, nd, nd, i+1); err != nil || r.done {
			break
		}
	}
	var kn Node // out of the loop, as in chainNode
	for j := 0; err == nil && j < len(kids) && !r.done; j++ {
		k := &kids[j]
		if e.skipEmpty && !hasContent(k.Node, 0) {
			continue
		}
		if err = e.step(1, r.c.steps[i].at); err != nil {
			break
		}
		if err = e.grow(r, i); err != nil {
			break
		}
		kn = e.childNode(def, k.Name, k.Node)
		if err = e.chainNode(r, &kn, nil, i+1); err == nil && !r.done {
			err = e.chainDescendants(r, &kn, i)
		}
	}
	e.kidDepth--
	e.putKids(e.kidDepth, kids)
	return err
}

// kidsAt returns the empty child buffer of recursion depth d.
func (e *evaluator) kidsAt(d int) []r4.Child {
	for len(e.kidStack) <= d {
		e.kidStack = append(e.kidStack, nil)
	}
	return e.kidStack[d][:0]
}

// putKids gives back the child buffer of depth d. It is cleared when the
// evaluation ends, up to the most it held (kidsHeld), not each time.
func (e *evaluator) putKids(d int, kids []r4.Child) {
	for len(e.kidsHeld) <= d {
		e.kidsHeld = append(e.kidsHeld, 0)
	}
	e.kidsHeld[d] = max(e.kidsHeld[d], len(kids))
	e.kidStack[d] = kids[:0]
}

// asTypeNode is asType for a node.
func asTypeNode(n *Node, ts typeSpec) bool {
	if ts.ns == "System" {
		return false
	}
	if n.Type == ts.name {
		return true
	}
	if n.def != nil {
		if n.def.Kind == spec.Primitive {
			return false
		}
	} else if _, isPrim := n.primitive(); isPrim {
		return n.Type == ts.name
	}
	return nodeIs(n, ts.name)
}

// hasIDOrURL reports whether navigate(n, name) gives an item, for name id,
// or url on an Extension, without making it.
func hasIDOrURL(n *Node, name string) bool {
	if x, ok := n.Value.(*r4.Extension); ok && name == "url" {
		return x.URL != ""
	}
	if r, ok := n.Value.(r4.Resource); ok {
		return r.ResourceID() != ""
	}
	if idp, _ := r4.ElementOf(n.Value); idp != nil {
		return *idp != ""
	}
	return false
}

// walkTypes tells, for the complex types ofType() after descendants() is
// walked for (see walkDescendants), the items of the type by their Go
// type: an element is of one of these FHIR types exactly when it is of
// the Go type, since they have no specialisations, no other FHIR type
// shares their Go type, and no id or url (a string, as a node) is one.
var walkTypes = map[string]func(any) bool{
	"Reference":       func(x any) bool { _, ok := x.(*r4.Reference); return ok },
	"Coding":          func(x any) bool { _, ok := x.(*r4.Coding); return ok },
	"CodeableConcept": func(x any) bool { _, ok := x.(*r4.CodeableConcept); return ok },
	"Identifier":      func(x any) bool { _, ok := x.(*r4.Identifier); return ok },
	"Extension":       func(x any) bool { _, ok := x.(*r4.Extension); return ok },
	"HumanName":       func(x any) bool { _, ok := x.(*r4.HumanName); return ok },
	"Period":          func(x any) bool { _, ok := x.(*r4.Period); return ok },
	"Meta":            func(x any) bool { _, ok := x.(*r4.Meta); return ok },
}

// errChainDone stops walkDescendants' walk when the chain knows its
// answer.
var errChainDone = errors.New("fhirpath: chain done")

// walkDescendants is chainDescendants for descendants().ofType(T) and an
// ending that only counts (r.c.walkIs is set), over the resource root:
// r4.WalkIDs visits every element under it, and each is told to be of T
// by its Go type, with no node made. It counts the steps and items that
// chainDescendants counts: one for each element visited but root, and
// for each id (of a resource or an element, which WalkIDs gives with
// the element) and each Extension.url, which the walk does not visit; with SkipEmpty an element without content
// is skipped with all under it, as in chainDescendants. The order of the
// visits is depth first, which the ending does not see.
func (e *evaluator) walkDescendants(run *chainRun, root r4.Resource, i int) error {
	// The walk's state and callback are the evaluator's, made once:
	// a walk does not nest (its callback evaluates nothing). It works
	// on a copy of the run, given back at the end: were the callback to
	// capture run, every chainRun, a local of evalChain, would be moved
	// to the heap, which costs all chains.
	w := e.walk
	if w == nil {
		w = &descWalk{e: e}
		w.fn = w.visit
		e.walk = w
	}
	w.r, w.i, w.at, w.is, w.top = *run, i, run.c.steps[i].at, run.c.walkIs, true
	err := r4.WalkIDs(root, w.fn)
	*run = w.r
	w.r, w.is = chainRun{}, nil // keep nothing of this evaluation
	if err == errChainDone {
		return nil
	}
	return err
}

// descWalk is the state of walkDescendants: the run it counts in, the
// step of descendants() and its offset, T's test, whether the walk is at its root,
// and visit as a WalkIDFunc.
type descWalk struct {
	e   *evaluator
	r   chainRun
	i   int
	at  int
	is  func(any) bool
	top bool
	fn  r4.WalkIDFunc
}

// visit is walkDescendants' callback for the element x, whose id is id.
func (w *descWalk) visit(_ *r4.Path, x any, id string) error {
	e, r, i, at := w.e, &w.r, w.i, w.at
	if !w.top {
		if e.skipEmpty && !hasContent(x, 0) {
			return r4.SkipChildren
		}
		if err := e.step(1, at); err != nil {
			return err
		}
		if err := e.grow(r, i); err != nil {
			return err
		}
		if w.is(x) {
			if err := e.grow(r, i+1); err != nil {
				return err
			}
			if e.emit(r, nil); r.done {
				return errChainDone
			}
		}
	}
	w.top = false
	// The element's id and an Extension's url are its children too;
	// they are not of T.
	if id != "" {
		if err := e.step(1, at); err != nil {
			return err
		}
		if err := e.grow(r, i); err != nil {
			return err
		}
	}
	if ext, ok := x.(*r4.Extension); ok && ext.URL != "" {
		if err := e.step(1, at); err != nil {
			return err
		}
		if err := e.grow(r, i); err != nil {
			return err
		}
	}
	return nil
}

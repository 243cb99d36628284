package fhirpath

import (
	"container/list"
	"context"
	"sync"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// Expression is a compiled FHIRPath expression. It is immutable and safe
// for concurrent use.
type Expression struct {
	src  string
	root node
	// envs are the environment variables (%name) the expression uses
	// that are not built in, in the order of the text: those CheckEnv
	// looks for in Env.Vars (none, for R4's invariants, so that the check
	// costs their evaluations nothing).
	envs []*envNode
	// checked records, per input resource type, the result of checking
	// the expression against that type (nil or a semantic error).
	checked sync.Map
}

// String returns the expression's source text.
func (x *Expression) String() string { return x.src }

// Limits on the text of an expression.
const (
	// MaxLength is the longest expression Compile accepts, in bytes.
	MaxLength = 64 << 10
	// maxTokens and maxDepth bound parsing work and recursion.
	maxTokens = 16 << 10
	maxDepth  = 200
)

// Parse compiles expr without the cache. The error is a *SyntaxError
// (ErrSyntax, or ErrLimit when expr exceeds MaxLength or nests too deeply)
// or an *EvalError of class ErrSemantic (an unknown function, a wrong
// number of arguments). Which environment variables exist depends on the
// Env of an evaluation: CheckEnv checks them for a given Env, and Evaluate
// does so first.
func Parse(expr string) (*Expression, error) {
	if len(expr) > MaxLength {
		e := newSyntaxError(expr, MaxLength, "expression longer than %d bytes", MaxLength)
		e.class = ErrLimit
		return nil, e
	}
	root, envs, err := parse(expr, maxTokens, maxDepth)
	if err != nil {
		return nil, err
	}
	if err := check(root, nil); err != nil {
		return nil, err
	}
	fuse(root)
	var free []*envNode
	for _, n := range envs {
		if !builtinEnv(n.name) {
			free = append(free, n)
		}
	}
	return &Expression{src: expr, root: root, envs: free}, nil
}

// CheckEnv reports, before any evaluation, the first environment variable
// (%name) of the expression that an evaluation with env would not provide
// (see Env.Provides): an *EvalError of class ErrSemantic, "unknown
// environment variable %name", at its offset. A nil env is the zero Env.
// Evaluate checks this first, whether or not the evaluation would reach
// the variable, so a caller that will evaluate later with a known Env
// (a server accepting a query) can refuse such an expression at once,
// with the very error the evaluation would give, as it refuses an unknown
// function.
func (x *Expression) CheckEnv(env *Env) error {
	for _, n := range x.envs {
		if !env.Provides(n.name) {
			return unknownEnv(n)
		}
	}
	return nil
}

// Cache is a bounded, concurrency-safe cache of compiled expressions keyed
// by their text, evicting the least recently used. Errors are not cached.
type Cache struct {
	mu    sync.Mutex
	size  int
	ll    *list.List
	items map[string]*list.Element
}

type cacheEntry struct {
	src string
	x   *Expression
}

// NewCache returns a cache holding at most size expressions (1024 if size
// is not positive).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = 1024
	}
	return &Cache{size: size, ll: list.New(), items: map[string]*list.Element{}}
}

// Compile returns the compiled expression for expr, compiling it on first
// use. Errors are those of Parse.
func (c *Cache) Compile(expr string) (*Expression, error) {
	c.mu.Lock()
	if el, ok := c.items[expr]; ok {
		c.ll.MoveToFront(el)
		x := el.Value.(*cacheEntry).x
		c.mu.Unlock()
		return x, nil
	}
	c.mu.Unlock()
	x, err := Parse(expr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[expr]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cacheEntry).x, nil
	}
	c.items[expr] = c.ll.PushFront(&cacheEntry{src: expr, x: x})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).src)
	}
	return x, nil
}

// Len returns the number of cached expressions.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// defaultCache backs Compile. It holds only immutable compiled
// expressions, so sharing it changes no behaviour, only speed.
var defaultCache = NewCache(1024)

// Compile compiles expr, or returns it from a process-wide cache of the
// 1024 most recently used expressions. Errors are those of Parse.
func Compile(expr string) (*Expression, error) { return defaultCache.Compile(expr) }

// MustCompile is Compile for expressions known to be valid; it panics on
// an error.
func MustCompile(expr string) *Expression {
	x, err := Compile(expr)
	if err != nil {
		panic(err)
	}
	return x
}

// noEnv is the Env of an evaluation given none: it is only read, so one
// serves all, and an evaluation allocates none.
var noEnv Env

// Evaluate evaluates the expression over input with env (which may be
// nil). It stops with an *EvalError of class ErrLimit when ctx ends or
// the limits in env are exceeded; other errors are *EvalError of class
// ErrSemantic (first of all an environment variable env does not provide,
// see CheckEnv), ErrEvaluation or ErrNotSupported. The result may share its
// storage with the input, with other results and with the compiled
// expression (a boolean result, a literal): it must not be changed in
// place.
func (x *Expression) Evaluate(ctx context.Context, input Collection, env *Env) (Collection, error) {
	if env == nil {
		env = &noEnv
	}
	if err := x.CheckEnv(env); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, &EvalError{Class: ErrLimit, Offset: -1, Msg: "evaluation not started", Err: err}
	}
	e := evaluators.Get().(*evaluator)
	defer e.release()
	e.ctx, e.src, e.env, e.input, e.vars, e.skipEmpty = ctx, x.src, env, input, env.Vars, env.SkipEmpty
	e.maxSteps = env.Limits.MaxSteps
	if e.maxSteps <= 0 {
		e.maxSteps = 10_000_000
	}
	if b := env.Limits.Budget; b != nil {
		if *b <= 0 {
			return nil, &EvalError{Class: ErrLimit, Offset: -1, Msg: "the step budget is spent"}
		}
		e.maxSteps = min(e.maxSteps, *b)
		defer func(e *evaluator) { *b -= min(e.steps, *b) }(e)
	}
	e.stepMark = min(e.maxSteps, 0xfff)
	e.maxItems = env.Limits.MaxItems
	if e.maxItems <= 0 {
		e.maxItems = 1_000_000
	}
	e.now = env.Now // the system clock is read on first use (clock)
	// %resource and %rootResource are made when first used.
	if env.Resource == nil && len(input) == 1 {
		if n, ok := input[0].(*Node); ok {
			if _, ok := n.Value.(r4.Resource); ok {
				e.resource = input
			}
		}
	}
	e.bundle = env.Bundle
	if e.bundle == nil {
		if b, ok := env.Resource.(*r4.Bundle); ok {
			e.bundle = b
		} else if len(input) == 1 {
			if n, ok := input[0].(*Node); ok {
				if b, ok := n.Value.(*r4.Bundle); ok {
					e.bundle = b
				}
			}
		}
		if e.bundle == nil && env.Resource == nil && len(e.resource) == 1 {
			if b, ok := e.resource[0].(*Node).Value.(*r4.Bundle); ok {
				e.bundle = b
			}
		}
	}
	if err := x.checkInput(input); err != nil {
		return nil, err
	}
	sc := scope{this: input}
	out, err := e.eval(x.root, &sc)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// EvaluateResource evaluates the expression with a resource as input,
// %resource and %context.
func (x *Expression) EvaluateResource(ctx context.Context, r r4.Resource, env *Env) (Collection, error) {
	return x.Evaluate(ctx, Collection{NodeOf(r)}, env)
}

// checkFor checks the expression against an input of type def, once per
// type.
func (x *Expression) checkFor(def *spec.Type) error {
	if v, ok := x.checked.Load(def.Name); ok {
		if v == nil {
			return nil
		}
		return v.(error)
	}
	err := check(x.root, []*spec.Type{def})
	if err != nil {
		x.checked.Store(def.Name, err)
	} else {
		x.checked.Store(def.Name, nil)
	}
	return err
}

// checkInput checks the expression against the types of the input items:
// it is a semantic error when it names an element that none of them has
// (name.given1 on a Patient; name on Observations only). Inputs of many
// types, or with items other than Nodes, are not checked.
func (x *Expression) checkInput(input Collection) error {
	var defs [8]*spec.Type
	n := 0
	for _, v := range input {
		nd, ok := v.(*Node)
		if !ok || nd.def == nil {
			return nil
		}
		seen := false
		for _, d := range defs[:n] {
			if d == nd.def {
				seen = true
				break
			}
		}
		if seen {
			continue
		}
		if n == len(defs) {
			return nil
		}
		defs[n] = nd.def
		n++
	}
	var first error
	for _, d := range defs[:n] {
		err := x.checkFor(d)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

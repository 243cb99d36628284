// Package fhirpath evaluates FHIRPath expressions (normative FHIRPath 2.0,
// as FHIR R4 uses it) over the typed FHIR R4 model of package r4: the
// language of FHIR invariants, search parameters and ACDS attested
// queries.
//
//	x, err := fhirpath.Compile("Observation.where(code.coding.code = '4548-4').value.ofType(Quantity)")
//	if err != nil { … }                  // a *SyntaxError (with line:col) or a semantic *EvalError
//	out, err := x.EvaluateResource(ctx, obs, nil)
//	js, err := fhirpath.MarshalJSON(out) // [{"value":6.1,"unit":"%",…}]
//
// # Compiling
//
// Compile parses an expression into a syntax tree, checks what can be
// checked without data (function names and arities; the environment
// variables, which depend on the Env, with CheckEnv), and keeps the result
// in a bounded, concurrency-safe cache keyed by the text; Parse does the
// same without the cache and NewCache gives a private one. A parse error
// is a *SyntaxError naming the byte offset, line and column; an expression
// longer than MaxLength or nested deeper than 200 levels fails with
// ErrLimit. On evaluation the paths are also checked against the types of
// the input items (each type once per expression): a name that none of
// them defines (name.given1 on a Patient, Encounter.name on any input) or
// a choice element by its JSON name (valueQuantity, where FHIRPath says
// value.ofType(Quantity)) is an ErrSemantic error rather than an empty
// result; a name that some input type defines gives nothing for the
// others.
//
// # Evaluating
//
// Evaluate takes the input collection and an Env holding the environment
// variables: %resource and %rootResource (Env.Resource and
// Env.RootResource, by default the input's resource), %context (the input), %bundle (Env.Bundle, or the input when
// it is a Bundle), %ucum, %sct, %loinc, %vs-name and %ext-name, and any
// others in Env.Vars; any other %name is an ErrSemantic error before
// evaluation starts, wherever it is (Env.Provides, Expression.CheckEnv),
// so it can be refused as soon as the Env is known. Evaluation is
// bounded by the context (a cancelled or expired ctx ends it) and by
// Env.Limits (steps and collection size, with
// defaults of ten million steps and a million items); exceeding them is an
// *EvalError of class ErrLimit. Errors are typed: test the class with
// errors.Is (ErrSyntax, ErrSemantic, ErrEvaluation, ErrLimit,
// ErrNotSupported) and read the detail with errors.As.
// A path ended by exists(), exists(criteria), all(criteria), empty() or
// first() stops at the first item that decides the result: an error that only later items of the path would raise,
// such as a limit or a failing where() criterion, is not raised then,
// and their steps are not counted.
//
// # Values
//
// A Collection holds System values (Boolean, Integer, Decimal, String,
// Date, DateTime, Time, Quantity) and *Node items of the model: an
// r4.Resource or a pointer to an r4 element (*r4.HumanName, *r4.Code…)
// with its FHIR type. Navigation goes through the generated walkers
// (r4.AppendChildren, which visits only the members asked for) and the
// definitions in package spec, without reflection; nodes are allocated in
// growing blocks per evaluation, and evaluators are recycled, so that
// evaluating a small invariant on one element costs little. FHIR primitives
// stay Nodes, so their ids and extensions remain reachable, and convert to
// System values where an operator or function needs one. Decimals are
// exact (a rational and the number of decimal places), so 0.1 + 0.2 = 0.3;
// quantities compare across UCUM units built from metric prefixes and the
// common atoms (g, m, L, s, min, h, d, wk, mo, a, mol, eq, %, [iU]…) with
// products, quotients and exponents; dates and times keep their precision
// and compare to an empty result where precisions differ.
//
// The FHIR additions are supported: extension(url), hasValue(), getValue(),
// resolve() (contained #id, and Bundle entries by fullUrl or Type/id),
// conformsTo() for the base R4 definitions, memberOf() over the value
// sets package spec expands, and the type hierarchy (Resource,
// DomainResource, Element, BackboneElement, code ⊂ string, Age ⊂
// Quantity…) for is, as and ofType. What the engine cannot answer fails
// with ErrNotSupported rather than a guess: profiles in conformsTo, value
// sets package spec does not hold, htmlChecks(), subsumes(), subsumedBy(),
// elementDefinition(), slice(), checkModifiers().
//
// R4 compatibility: as (operator and function) keeps the items of the type
// from a collection of several, as R4's own invariants (dom-3) and search
// parameters ((Observation.component.value as Quantity)) need, where
// FHIRPath 2.0 would fail; hasExtension(url), which R4 search parameters
// use, is extension(url).exists().
//
// Conformance: the official FHIRPath suite for R4 (tests-fhir-r4.xml)
// runs in CI over the official R4 examples in JSON (see TestConformance);
// every constraint and search parameter expression of the R4 definitions
// compiles and evaluates on the examples (TestR4Invariants,
// TestR4SearchParameters).
package fhirpath

package fhirpath

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// parseUnfused compiles expr as Parse does but without fusing paths into
// chains, so that every node is evaluated step by step.
func parseUnfused(t testing.TB, expr string) *Expression {
	t.Helper()
	root, envs, err := parse(expr, maxTokens, maxDepth)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(root, nil); err != nil {
		t.Fatal(err)
	}
	return &Expression{src: expr, root: root, envs: envs}
}

// sameItems describes the first difference between two results: nodes
// must be the same element of the model with the same type, other values
// equal.
func sameItems(a, b Collection) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d items, not %d", len(a), len(b))
	}
	for i := range a {
		na, okA := a[i].(*Node)
		nb, okB := b[i].(*Node)
		switch {
		case okA != okB:
			return fmt.Sprintf("item %d: %T, not %T", i, a[i], b[i])
		case okA:
			// Ids and Extension.url are made for each evaluation.
			pa, primA := na.Value.(r4.Primitive)
			pb, primB := nb.Value.(r4.Primitive)
			sameValue := na.Value == nb.Value || primA && primB && fmt.Sprintf("%T", pa) == fmt.Sprintf("%T", pb) && pa.Text() == pb.Text()
			if !sameValue || na.Type != nb.Type || na.def != nb.def {
				return fmt.Sprintf("item %d: %s %v, not %s %v", i, na.Type, na.Value, nb.Type, nb.Value)
			}
		case a[i] != b[i]:
			return fmt.Sprintf("item %d: %v, not %v", i, a[i], b[i])
		}
	}
	return ""
}

// TestChains checks that the paths evaluated as chains give what step by
// step evaluation gives (the same items in the same order, the same
// errors under limits), and that the expressions are indeed chains.
func TestChains(t *testing.T) {
	_, bundle := loadSynthea(t)
	obs := mustDecode(t, obsJSON)
	exprs := []string{
		"entry.resource.ofType(Patient).name.given",
		"Bundle.entry.resource.ofType(Observation).code.coding.code",
		"entry.resource.ofType(Observation).value.ofType(Quantity).value",
		"entry.resource.as(Encounter).subject.reference",
		"entry.resource.id",
		"entry.resource.meta.exists()",
		"entry.resource.meta.lastUpdated.empty()",
		"entry.resource.ofType(Observation).effective.count()",
		"entry.resource.ofType(Claim).count()",
		"entry.resource.ofType(DiagnosticReport).result.exists()",
		"entry.resource.ofType(Patient).extension.url",
		"entry.resource.ofType(Patient).extension.value",
		"entry.resource.ofType(Patient).extension.extension.url.count()",
		"entry.fullUrl.id",
		"entry.resource.nosuch.exists()",
		"descendants().count()",
		"descendants().ofType(Reference).count()",
		"descendants().ofType(string).exists()",
		"descendants().ofType(Coding).code",
		"descendants().ofType(Quantity).value",
		"descendants().id.count()",
		"descendants().url.count()",
		"descendants().ofType(Extension).url.exists()",
		"descendants().ofType(Attachment).url.exists()",
		"entry.resource.id.exists()",
		"entry.resource.code.coding.id.empty()",
		"descendants().extension.url.count()",
		"descendants().extension.exists()",
		"descendants().value.count()",
		"descendants().url",
		"entry.resource.descendants().ofType(Reference).reference.count()",
		"entry.first().resource.descendants().ofType(Reference).reference",
		"entry.type().name.count()",
		"entry.resource.type().namespace.count()",
		"entry.resource.type().name.ofType(String).exists()",
		"children().entry.resource.ofType(FHIR.Organization).name",
		"entry.resource.ofType(System.String).count()",
		"entry.request.method.ofType(code)",
		"entry.request.method.ofType(string).count()",
		"entry.resource.ofType(Resource).count()",
		"entry.resource.ofType(DomainResource).count()",
		"entry.resource.ofType(Observation).component.value.ofType(Quantity).unit",
		"Bundle.entry.resource.ofType(Observation).where(code.coding.exists(system = 'http://loinc.org' and code = '29463-7')).value.ofType(Quantity).value",
		"entry.resource.ofType(Observation).where(effective.ofType(dateTime) > @2015-01-01).count()",
		"entry.resource.where($index < 10).id",
		"entry.resource.where($index > 150).exists()",
		"entry.where($index = 3).resource.where(id.exists()).id",
		"entry.resource.ofType(Claim).item.where($index = 0).sequence",
		"entry.resource.where(descendants().ofType(Reference).count() > 3).count()",
		"entry.resource.where(meta.profile.exists() and $this.id.exists()).meta.profile.count()",
		"descendants().where($index < 5)",
		"descendants().ofType(Coding).where(system = 'http://loinc.org').code.count()",
		"entry.resource.ofType(Patient).name.where(use = 'official').given",
		"entry.resource.ofType(Observation).code.coding.exists(system = 'http://loinc.org')",
		"entry.resource.ofType(Observation).code.coding.exists(code = 'nosuch')",
		"entry.resource.exists($index = 163)",
		"entry.resource.exists($index = 164)",
		"entry.resource.ofType(Observation).where(code.coding.exists(code = '29463-7' and $index = 0)).id",
		"descendants().exists($this is Reference)",
		"entry.resource.ofType(Patient).name.where(use = 'official').given.first()",
		"entry.resource.ofType(Patient).name.where(use = 'nosuch').given.first()",
		"entry.resource.ofType(Claim).first()",
		"entry.resource.first()",
		"entry.first()",
		"entry.resource.id.first()",
		"entry.resource.where($index > 150).id.first()",
		"entry.resource.where($index = 163).id.first()",
		"entry.resource.where($index = 164).id.first()",
		"entry.resource.ofType(Patient).extension.url.first()",
		"entry.resource.ofType(Patient).extension.extension.url.first()",
		"entry.resource.ofType(Observation).value.ofType(Quantity).value.first()",
		"entry.resource.ofType(Observation).code.coding.where(code = '29463-7').first()",
		"entry.resource.type().name.first()",
		"descendants().first()",
		"descendants().ofType(Reference).first()",
		"descendants().ofType(Reference).reference.first()",
		"descendants().id.first()",
		"descendants().url.first()",
		"descendants().where($index > 1000).first()",
		"entry.resource.descendants().ofType(Coding).first()",
		// Criteria that box many nodes and collections, nested, with
		// results made after the criteria ran (their room is rewound for
		// the next item).
		"entry.resource.where(descendants().ofType(Coding).where(system = 'http://loinc.org').exists()).id",
		"entry.resource.ofType(Observation).where(code.coding.where(code.exists()).code.count() > 0).code.coding.code",
		"entry.resource.where(id.exists()).where(meta.exists().not() or id.length() > 3).id",
		"entry.resource.ofType(Encounter).where(period.start < period.end or period.end.empty()).period.start",
		"entry.resource.ofType(Patient).name.where(given.where($this.length() > 2).exists()).given",
		// all(criteria): true, false at the first item, false at the
		// last, over nothing, and with criteria that are empty.
		"entry.resource.all(id.exists())",
		"entry.resource.all(id.exists() and (meta.empty() or meta.lastUpdated.exists().not() or meta.lastUpdated <= now()))",
		"entry.resource.all($index < 100)",
		"entry.resource.all($index < 163)",
		"entry.resource.all($index < 164)",
		"entry.resource.ofType(Observation).all(status = 'final')",
		"entry.resource.ofType(Observation).code.coding.all(system = 'http://loinc.org')",
		"entry.resource.ofType(Library).all(false)",
		"entry.resource.ofType(Patient).all(multipleBirth)",
		"entry.resource.ofType(Patient).name.all(given.exists())",
		"descendants().ofType(Coding).all(code.exists())",
	}
	for _, expr := range exprs {
		fused, err := Parse(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if c, ok := fused.root.(*callNode); (!ok || c.fused == nil) && !isFusedMember(fused.root) {
			t.Errorf("%s: not a chain", expr)
		}
		plain := parseUnfused(t, expr)
		for _, env := range []*Env{nil, {SkipEmpty: true}} {
			want, err1 := plain.Evaluate(context.Background(), Collection{NodeOf(bundle)}, env)
			got, err2 := fused.Evaluate(context.Background(), Collection{NodeOf(bundle)}, env)
			if err1 != nil || err2 != nil {
				t.Errorf("%s: step by step %v, chain %v", expr, err1, err2)
				continue
			}
			if d := sameItems(got, want); d != "" {
				t.Errorf("%s: chain %s", expr, d)
			}
		}
		// The same steps, but where exists(), empty() or first() stops
		// early: then no more.
		b1, b2 := 1<<40, 1<<40
		plain.Evaluate(context.Background(), Collection{NodeOf(bundle)}, &Env{Limits: Limits{Budget: &b1}})
		fused.Evaluate(context.Background(), Collection{NodeOf(bundle)}, &Env{Limits: Limits{Budget: &b2}})
		stops := strings.HasSuffix(expr, "exists()") || strings.HasSuffix(expr, "empty()") || strings.Contains(expr, ".exists(") || strings.Contains(expr, ".first()") || strings.Contains(expr, ".all(")
		if stops && b2 < b1 || !stops && b1 != b2 {
			t.Errorf("%s: chain took %d steps, step by step %d", expr, 1<<40-b2, 1<<40-b1)
		}
	}
	// first() stops at the first item; when that is the last one, or
	// there is none, it takes every step.
	for _, c := range []struct {
		expr  string
		fewer bool
	}{
		{"entry.resource.ofType(Patient).name.where(use = 'official').given.first()", true},
		{"entry.resource.id.first()", true},
		{"descendants().where($index > 1000).first()", true},
		// descendants() is gathered whole, as its order is
		// breadth first; the steps after it take no steps.
		{"descendants().ofType(Reference).first()", false},
		{"entry.resource.where($index = 163).id.first()", false},
		{"entry.resource.where($index = 164).id.first()", false},
		{"entry.resource.ofType(Patient).name.where(use = 'nosuch').given.first()", false},
	} {
		b1, b2 := 1<<40, 1<<40
		parseUnfused(t, c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, &Env{Limits: Limits{Budget: &b1}})
		MustCompile(c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, &Env{Limits: Limits{Budget: &b2}})
		if c.fewer && b2 <= b1 || !c.fewer && b1 != b2 {
			t.Errorf("%s: chain took %d steps, step by step %d", c.expr, 1<<40-b2, 1<<40-b1)
		}
	}
	// Limits that only the items after the first would exceed: step by
	// step fails, the chain gives the first item.
	for _, c := range []struct {
		expr   string
		limits Limits
	}{
		{"entry.resource.ofType(Observation).code.coding.first()", Limits{MaxItems: 50}},
		{"entry.resource.ofType(Observation).where(code.coding.code.exists()).id.first()", Limits{MaxSteps: 500}},
		{"entry.resource.ofType(Observation).code.coding.first()", Limits{MaxSteps: 20}},
	} {
		env := &Env{Limits: c.limits}
		if _, err := parseUnfused(t, c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, env); !sameLimitError(err, evalErr(ErrLimit, 0, "")) {
			t.Errorf("%s with %+v: step by step %v, want a limit error", c.expr, c.limits, err)
		}
		want, _ := parseUnfused(t, c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, nil)
		got, err := MustCompile(c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, env)
		if err != nil || len(want) != 1 {
			t.Errorf("%s with %+v: %v (%d items without limits)", c.expr, c.limits, err, len(want))
		} else if d := sameItems(got, want); d != "" {
			t.Errorf("%s with %+v: chain %s", c.expr, c.limits, d)
		}
	}
	// Limits: the same errors, or none.
	for _, c := range []struct {
		expr   string
		limits Limits
	}{
		{"descendants().ofType(Reference).count()", Limits{MaxItems: 100}},
		{"descendants().ofType(Reference).count()", Limits{MaxSteps: 1000}},
		{"descendants().ofType(Reference)", Limits{MaxItems: 100}},
		{"entry.resource.ofType(Observation).code.coding", Limits{MaxItems: 50}},
		{"entry.resource.ofType(Observation).code.coding.count()", Limits{MaxItems: 50}},
		{"entry.resource.ofType(Observation).code.coding", Limits{MaxSteps: 300}},
		{"entry.resource.ofType(Observation).code.coding", Limits{MaxItems: 100000}},
		{"entry.resource.exists(id = 'nosuch')", Limits{MaxSteps: 400}},
		{"entry.resource.exists(id = 'nosuch')", Limits{MaxSteps: 4000}},
		{"descendants().ofType(Reference).first()", Limits{MaxItems: 100}},
		{"entry.resource.ofType(Observation).code.coding.first()", Limits{MaxSteps: 10}},
		{"entry.resource.ofType(Observation).code.coding.first()", Limits{MaxItems: 100000}},
		{"entry.resource.where($index = 163).id.first()", Limits{MaxSteps: 400}},
		{"entry.resource.all(id.exists())", Limits{MaxSteps: 400}},
		{"entry.resource.all(id.exists())", Limits{MaxItems: 100}},
	} {
		env := &Env{Limits: c.limits}
		_, err1 := parseUnfused(t, c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, env)
		_, err2 := MustCompile(c.expr).Evaluate(context.Background(), Collection{NodeOf(bundle)}, env)
		if !sameLimitError(err1, err2) {
			t.Errorf("%s with %+v: step by step %v, chain %v", c.expr, c.limits, err1, err2)
		}
	}
	// A small resource, with a contained resource and extensions on a
	// primitive.
	pat := mustDecode(t, `{"resourceType":"Patient","id":"p","photo":[{"id":"ph","url":"http://x/photo"}],
	 "extension":[{"url":"http://e","valueString":"v"}],"_gender":{"id":"g"},"gender":"other"}`)
	for _, c := range []struct {
		r    r4.Resource
		expr string
	}{
		{obs, "descendants().ofType(Extension).url"}, {obs, "status.extension.value.count()"},
		{obs, "contained.name.family"}, {obs, "descendants().ofType(Practitioner).exists()"},
		{pat, "photo.url.exists()"}, {pat, "photo.url.count()"}, {pat, "photo.id.count()"},
		{pat, "extension.url.count()"}, {pat, "gender.id.exists()"}, {pat, "descendants().id.count()"},
		{pat, "descendants().url.count()"}, {pat, "descendants().ofType(string)"},
	} {
		expr := c.expr
		want, _ := parseUnfused(t, expr).Evaluate(context.Background(), Collection{NodeOf(c.r)}, nil)
		got, err := MustCompile(expr).Evaluate(context.Background(), Collection{NodeOf(c.r)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 {
			t.Errorf("%s: nothing: not a useful case", expr)
		}
		if d := sameItems(got, want); d != "" {
			t.Errorf("%s: chain %s", expr, d)
		}
	}
}

func isFusedMember(n node) bool {
	m, ok := n.(*memberNode)
	return ok && m.fused != nil
}

// sameLimitError reports whether both errors are nil or both limit errors.
func sameLimitError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ea, eb *EvalError
	return errors.As(a, &ea) && errors.As(b, &eb) && ea.Class == ErrLimit && eb.Class == ErrLimit
}

// TestConcurrentEvaluate evaluates the bench expressions, freshly
// compiled, from several goroutines at once, so that their step caches
// fill concurrently (run with -race), and checks every result against a
// sequential evaluation.
func TestConcurrentEvaluate(t *testing.T) {
	_, bundle := loadSynthea(t)
	in := Collection{NodeOf(bundle)}
	type job struct {
		x    *Expression
		want Collection
	}
	var jobs []job
	for _, c := range benchExpressions {
		x, err := Parse(c.expr) // not from the cache: cold step caches
		if err != nil {
			t.Fatal(err)
		}
		want, err := parseUnfused(t, c.expr).Evaluate(context.Background(), in, nil)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job{x, want})
	}
	errs := make(chan string, 64)
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := 0; k < 5; k++ {
				for i, j := range jobs {
					got, err := j.x.Evaluate(context.Background(), in, nil)
					if err != nil {
						errs <- err.Error()
						return
					}
					if d := sameItems(got, j.want); d != "" {
						errs <- benchExpressions[i].name + ": " + d
						return
					}
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestStepEqualsString checks name = 'text' (and !=), evaluated without
// making the child a node, against $this.name = 'text', which takes the
// general way, on every element of the Synthea bundle.
func TestStepEqualsString(t *testing.T) {
	_, bundle := loadSynthea(t)
	ctx := context.Background()
	all, err := MustCompile("descendants()").Evaluate(ctx, Collection{NodeOf(bundle)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, c := range []struct{ name, text string }{
		{"system", "http://loinc.org"}, {"code", "29463-7"}, {"use", "official"}, {"status", "final"},
		{"given", "Mary"}, {"value", "1"}, {"display", "Body Weight"}, {"reference", "x"}, {"family", "Lind"},
		{"valueString", "x"}, {"nosuch", "x"}, {"gender", "female"}, {"unit", "kg"}, {"text", "x"},
	} {
		for _, op := range []string{"=", "!="} {
			fast := MustCompile(c.name + " " + op + " '" + c.text + "'")
			general := MustCompile("$this." + c.name + " " + op + " '" + c.text + "'")
			for _, v := range all {
				in := Collection{v}
				want, err1 := general.Evaluate(ctx, in, nil)
				got, err2 := fast.Evaluate(ctx, in, nil)
				if (err1 == nil) != (err2 == nil) {
					t.Fatalf("%s %s on %s: general %v, fast %v", c.name, op, v.(*Node).Type, err1, err2)
				}
				if d := sameItems(got, want); d != "" {
					t.Fatalf("%s %s on %s: %s", c.name, op, v.(*Node).Type, d)
				}
				if len(want) == 1 && want[0] == Boolean(op == "=") {
					checked[c.name]++
				}
			}
		}
	}
	for _, name := range []string{"system", "code", "use", "status", "display", "family"} {
		if checked[name] == 0 {
			t.Errorf("%s: never equal: not a useful case", name)
		}
	}
}

// TestWalkDescendants checks descendants().ofType(T).count(), exists()
// and empty(), which walk the descendants of a resource with r4.WalkIDs
// (walkDescendants), against step-by-step evaluation on the official R4
// examples and the Synthea bundle, with and without SkipEmpty: the same
// results and the same steps, for every T the walk is taken for.
func TestWalkDescendants(t *testing.T) {
	_, bundle := loadSynthea(t)
	files, _ := filepath.Glob(filepath.Join(repoRoot(t), ".fhir-defs", "package", "*.json"))
	if len(files) == 0 {
		t.Skip("official R4 examples not present: run scripts/fetch-fhir-defs.sh")
	}
	inputs := []r4.Resource{bundle}
	for i, f := range files {
		// One in five (the StructureDefinitions, large and alike, one
		// in fifty), for time.
		if i%5 != 0 || strings.HasPrefix(filepath.Base(f), "StructureDefinition-") && i%50 != 0 {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := r4.Unmarshal(data); err == nil {
			inputs = append(inputs, r)
		}
	}
	type pair struct{ fused, plain *Expression }
	var exprs []pair
	for name := range walkTypes {
		ends := []string{"count()"}
		if name == "Reference" || name == "Extension" {
			ends = append(ends, "exists()", "empty()")
		}
		for _, end := range ends {
			expr := "descendants().ofType(" + name + ")." + end
			fused, err := Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := fused.root.(*callNode); !ok || c.fused == nil || c.fused.walkIs == nil {
				t.Fatalf("%s: not walked", expr)
			}
			exprs = append(exprs, pair{fused, parseUnfused(t, expr)})
		}
	}
	found := map[string]int{}
	ctx := context.Background()
	for _, r := range inputs {
		in := Collection{NodeOf(r)}
		for _, x := range exprs {
			for _, skip := range []bool{false, true} {
				b1, b2 := 1<<40, 1<<40
				want, err1 := x.plain.Evaluate(ctx, in, &Env{SkipEmpty: skip, Limits: Limits{Budget: &b1}})
				got, err2 := x.fused.Evaluate(ctx, in, &Env{SkipEmpty: skip, Limits: Limits{Budget: &b2}})
				if err1 != nil || err2 != nil {
					t.Fatalf("%s on %s/%s: step by step %v, walked %v", x.fused.src, r.ResourceType(), r.ResourceID(), err1, err2)
				}
				if d := sameItems(got, want); d != "" {
					t.Fatalf("%s on %s/%s (SkipEmpty %v): walked %s", x.fused.src, r.ResourceType(), r.ResourceID(), skip, d)
				}
				stops := !strings.HasSuffix(x.fused.src, "count()")
				if stops && b2 < b1 || !stops && b1 != b2 {
					t.Fatalf("%s on %s/%s: walked took %d steps, step by step %d", x.fused.src, r.ResourceType(), r.ResourceID(), 1<<40-b2, 1<<40-b1)
				}
				if n, ok := want[0].(Integer); ok {
					found[x.fused.src] += int(n)
				}
			}
		}
	}
	for name := range walkTypes {
		if expr := "descendants().ofType(" + name + ").count()"; found[expr] == 0 {
			t.Errorf("%s: always 0: not a useful case", expr)
		}
	}
	t.Logf("%d resources", len(inputs))
	// Limits: the same errors, or none (count() takes every step).
	for _, limits := range []Limits{{MaxItems: 100}, {MaxItems: 3000}, {MaxSteps: 1000}, {MaxSteps: 20000}} {
		for _, expr := range []string{"descendants().ofType(Reference).count()", "descendants().ofType(Extension).count()"} {
			env := &Env{Limits: limits}
			_, err1 := parseUnfused(t, expr).Evaluate(ctx, Collection{NodeOf(bundle)}, env)
			_, err2 := MustCompile(expr).Evaluate(ctx, Collection{NodeOf(bundle)}, env)
			if !sameLimitError(err1, err2) {
				t.Errorf("%s with %+v: step by step %v, walked %v", expr, limits, err1, err2)
			}
		}
	}
}

// TestChainAllocs checks that chains allocate nothing of their own once
// the evaluator is warm: their run state stays on the stack (a callback
// capturing it, as walkDescendants's could, would move it to the heap for
// every chain). Each expression evaluates a chain per entry (164), against
// some tens of allocations per evaluation besides.
func TestChainAllocs(t *testing.T) {
	_, bundle := loadSynthea(t)
	in := Collection{NodeOf(bundle)}
	ctx := context.Background()
	for _, expr := range []string{
		"entry.resource.all(id.exists())",
		"entry.resource.all(meta.lastUpdated.empty().not())",
		"entry.resource.where(name.given.exists()).count()",
	} {
		x := MustCompile(expr)
		x.Evaluate(ctx, in, nil)
		if n := testing.AllocsPerRun(20, func() { x.Evaluate(ctx, in, nil) }); n > 50 {
			t.Errorf("%s: %v allocations", expr, n)
		}
	}
}

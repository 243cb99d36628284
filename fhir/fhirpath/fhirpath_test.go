package fhirpath

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/stretchr/testify/require"
)

func mustDecode(t testing.TB, js string) r4.Resource {
	t.Helper()
	r, err := r4.Unmarshal([]byte(js))
	require.NoError(t, err)
	return r
}

func evalJSON(t testing.TB, expr string, r r4.Resource, env *Env) string {
	t.Helper()
	x, err := Compile(expr)
	require.NoError(t, err, expr)
	var in Collection
	if r != nil {
		in = Collection{NodeOf(r)}
	}
	out, err := x.Evaluate(context.Background(), in, env)
	require.NoError(t, err, expr)
	b, err := MarshalJSON(out)
	require.NoError(t, err)
	return string(b)
}

const obsJSON = `{"resourceType":"Observation","id":"o1","status":"final",
 "code":{"coding":[{"system":"http://loinc.org","code":"4548-4"}],"text":"HbA1c"},
 "subject":{"reference":"Patient/p1"},
 "effectiveDateTime":"2024-03-01",
 "valueQuantity":{"value":6.10,"unit":"%","system":"http://unitsofmeasure.org","code":"%"},
 "_status":{"extension":[{"url":"http://example.org/x","valueString":"checked"}]},
 "contained":[{"resourceType":"Practitioner","id":"pr","name":[{"family":"Who"}]}],
 "performer":[{"reference":"#pr"}]}`

func TestNavigationAndOutput(t *testing.T) {
	obs := mustDecode(t, obsJSON)
	for _, c := range []struct{ expr, want string }{
		{"Observation.value", `[{"value":6.10,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}]`},
		{"value.ofType(Quantity).value", `[6.10]`},
		{"value is Quantity", `[true]`},
		{"value.as(Quantity) > 6 '%'", `[true]`},
		{"value > 0.05 '1'", `[true]`},
		{"effective", `["2024-03-01"]`},
		{"effective.toString()", `["2024-03-01"]`},
		{"effective > @2024-02", `[true]`},
		{"status", `["final"]`},
		{"status.extension('http://example.org/x').value", `["checked"]`},
		{"status.hasValue()", `[true]`},
		{"status.getValue() = 'final'", `[true]`},
		{"code.coding.where(system = %loinc).code", `["4548-4"]`},
		{"id", `["o1"]`},
		{"performer.resolve().name.family", `["Who"]`},
		{"%resource.contained.ofType(Practitioner).id", `["pr"]`},
		{"Observation.value.toQuantity()", `[{"value":6.10,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}]`},
		{"Observation.subject", `[{"reference":"Patient/p1"}]`},
		{"(1 | 2 | 3).aggregate($this + $total, 0)", `[6]`},
		{"1.0 / 3", `[0.33333333]`},
		{"7 days", `[{"value":7,"unit":"day","system":"http://unitsofmeasure.org","code":"d"}]`},
		{"@2024-01-31 + 1 month", `["2024-02-29"]`},
		{"children().count() > 5", `[true]`},
		{"descendants().ofType(Reference).count()", `[2]`},
		{"Patient.name", `[]`},
		{"{} = 1", `[]`},
		{"(true and {}) or true", `[true]`},
	} {
		require.Equal(t, c.want, evalJSON(t, c.expr, obs, nil), c.expr)
	}
}

func TestBundleResolveAndVariables(t *testing.T) {
	b := mustDecode(t, `{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient","id":"p1","gender":"female"}},
	 {"fullUrl":"http://example.org/fhir/Observation/o1","resource":`+obsJSON+`}]}`).(*r4.Bundle)
	// The input is the entries, %bundle the Bundle (DESIGN §9).
	var entries Collection
	for _, e := range b.Entry {
		entries = append(entries, NodeOf(e.Resource))
	}
	x := MustCompile("Observation.where(value.ofType(Quantity) > 6 '%').subject.resolve().gender")
	out, err := x.Evaluate(context.Background(), entries, &Env{Bundle: b})
	require.NoError(t, err)
	js, _ := MarshalJSON(out)
	require.Equal(t, `["female"]`, string(js))

	require.Equal(t, `[2]`, evalJSON(t, "%bundle.entry.count()", nil, &Env{Bundle: b}))
	require.Equal(t, `["p1"]`, evalJSON(t, "entry.resource.ofType(Observation).subject.resolve().id", b, nil))
	require.Equal(t, `["v"]`, evalJSON(t, "%x", nil, &Env{Vars: map[string]Collection{"x": {String("v")}}}))
	// Inside a contained resource, #id resolves among the container's
	// contained resources and # is the container.
	obs := mustDecode(t, obsJSON)
	pr := obs.(*r4.Observation).Contained[0]
	require.Equal(t, `["o1"]`, evalJSON(t, "'#'.resolve().id", pr, &Env{RootResource: obs}))
	require.Equal(t, `["Who"]`, evalJSON(t, "'#pr'.resolve().name.family", pr, &Env{RootResource: obs}))
	require.Equal(t, `["Practitioner"]`, evalJSON(t, "%resource.type().name | %rootResource.type().name.where(false)", pr, &Env{RootResource: obs}))
	// An unresolvable reference resolves to nothing.
	require.Equal(t, `[]`, evalJSON(t, "'Patient/none'.resolve()", nil, &Env{Bundle: b}))
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, err := Compile("name.where(\n  given = 'x' +)")
	var se *SyntaxError
	require.ErrorAs(t, err, &se)
	require.ErrorIs(t, err, ErrSyntax)
	require.Equal(t, 2, se.Line)
	require.Equal(t, 16, se.Column)
	require.Equal(t, 27, se.Offset)
	require.Contains(t, err.Error(), "2:16")

	_, err = Compile("name.nosuch()")
	require.ErrorIs(t, err, ErrSemantic)
	_, err = Compile("Encounter.name")
	require.ErrorIs(t, err, ErrSemantic)
	_, err = Compile(strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500))
	require.ErrorIs(t, err, ErrLimit)
	_, err = Compile(strings.Repeat("1+", MaxLength))
	require.ErrorIs(t, err, ErrLimit)
}

func TestEvaluationErrors(t *testing.T) {
	p := mustDecode(t, `{"resourceType":"Patient","name":[{"given":["a","b"]}]}`)
	in := Collection{NodeOf(p)}
	cases := []struct {
		expr  string
		class error
	}{
		{"name.given.single()", ErrEvaluation},
		{"name.given + 1", ErrEvaluation},
		{"name.given1", ErrSemantic},
		{"'x'.memberOf('http://example.org/unknown-vs')", ErrNotSupported},
		{"conformsTo('http://example.org/profile')", ErrNotSupported},
		{"%nosuch", ErrSemantic},
	}
	for _, c := range cases {
		x, err := Parse(c.expr)
		if err == nil {
			_, err = x.Evaluate(context.Background(), in, nil)
		}
		require.ErrorIs(t, err, c.class, c.expr)
		var ee *EvalError
		require.ErrorAs(t, err, &ee, c.expr)
	}
}

func TestCheckAgainstInputTypes(t *testing.T) {
	p := NodeOf(mustDecode(t, `{"resourceType":"Patient","name":[{"family":"F"}]}`))
	o := NodeOf(mustDecode(t, obsJSON))
	x := MustCompile("name.family")
	// A name some input type has is fine: the others give nothing.
	out, err := x.Evaluate(context.Background(), Collection{o, p, o}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
	// A name no input type has is a typo.
	_, err = x.Evaluate(context.Background(), Collection{o, o}, nil)
	require.ErrorIs(t, err, ErrSemantic)
	// A type name selects: Observation.where(…) over mixed entries is fine.
	out, err = MustCompile("Observation.where(status = 'final').id").Evaluate(context.Background(), Collection{p, o}, nil)
	require.NoError(t, err)
	require.Len(t, out, 1)
}

func TestLimits(t *testing.T) {
	x := MustCompile("(1|2|3|4|5|6|7|8|9|10).select((1|2|3|4|5|6|7|8|9|10).select((1|2|3|4|5|6|7|8|9|10).combine((1|2|3|4|5|6|7|8|9|10))))")
	_, err := x.Evaluate(context.Background(), nil, &Env{Limits: Limits{MaxSteps: 1000}})
	require.ErrorIs(t, err, ErrLimit)
	_, err = x.Evaluate(context.Background(), nil, &Env{Limits: Limits{MaxItems: 100}})
	require.ErrorIs(t, err, ErrLimit)
	out, err := x.Evaluate(context.Background(), nil, nil)
	require.NoError(t, err)
	require.Len(t, out, 2000)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = x.Evaluate(ctx, nil, nil)
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorIs(t, err, context.Canceled)

	// A deadline stops a long evaluation.
	slow := MustCompile("1.repeat($this + 1).count()")
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = slow.Evaluate(ctx, nil, &Env{Limits: Limits{MaxSteps: 1 << 40, MaxItems: 1 << 40}})
	require.ErrorIs(t, err, ErrLimit)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestGrowthLimits(t *testing.T) {
	for _, expr := range []string{
		"(1|2|3|4|5|6|7|8|9|10|11|12|13|14|15|16|17|18|19|20|21|22|23|24|25).aggregate($total & $total, 'abcdefgh')",
		"(1|2|3|4|5|6|7|8|9|10|11|12|13|14|15|16|17|18|19|20|21|22|23|24|25).aggregate($total + $total, 'abcdefgh')",
		"'abcdefgh'.replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh')",
	} {
		_, err := MustCompile(expr).Evaluate(context.Background(), nil, nil)
		require.ErrorIs(t, err, ErrLimit, expr)
	}
	// Numbers past the range of their type are empty, not huge.
	for _, expr := range []string{
		"2.power(1000000000)",
		"(1|2|3|4|5|6|7|8|9|10|11|12|13|14|15|16|17|18|19|20|21|22|23|24|25|26|27|28|29|30).aggregate($total * 1000.0, 1.0)",
		"9223372036854775807 + 1",
		"'abc'.substring(1, 9223372036854775807).length() = 2 and {}",
	} {
		require.Equal(t, "[]", evalJSON(t, expr, nil, nil), expr)
	}
	require.Equal(t, "[0.3333333300]", evalJSON(t, "(1.0/3).aggregate($total * 1.0, 1.0) * (1.0 / 3)", nil, nil))
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a, err := c.Compile("1 + 1")
	require.NoError(t, err)
	b, _ := c.Compile("1 + 1")
	require.Same(t, a, b)
	_, _ = c.Compile("2")
	_, _ = c.Compile("3")
	require.Equal(t, 2, c.Len())
	d, _ := c.Compile("1 + 1")
	require.NotSame(t, a, d, "evicted")
	_, err = c.Compile("1 +")
	require.ErrorIs(t, err, ErrSyntax)

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				x, err := c.Compile(fmt.Sprintf("%d + %d", i%3, j%5))
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := x.Evaluate(context.Background(), nil, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestNowAndTrace(t *testing.T) {
	now := time.Date(2024, 3, 1, 10, 30, 0, 0, time.UTC)
	var traced []string
	env := &Env{Now: now, Trace: func(name string, c Collection) { traced = append(traced, fmt.Sprintf("%s:%d", name, len(c))) }}
	require.Equal(t, `["2024-03-01"]`, evalJSON(t, "today()", nil, env))
	require.Equal(t, `["2024-03-01T10:30:00.000Z"]`, evalJSON(t, "now()", nil, env))
	require.Equal(t, `[3]`, evalJSON(t, "(1|2|3).trace('n').count()", nil, env))
	require.Equal(t, []string{"n:3"}, traced)
}

func TestMemberOf(t *testing.T) {
	p := mustDecode(t, `{"resourceType":"Patient","gender":"female","maritalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/v3-MaritalStatus","code":"M"}]}}`)
	require.Equal(t, `[true]`, evalJSON(t, "gender.memberOf('http://hl7.org/fhir/ValueSet/administrative-gender')", p, nil))
	require.Equal(t, `[false]`, evalJSON(t, "'nope'.memberOf('http://hl7.org/fhir/ValueSet/administrative-gender')", p, nil))
	require.Equal(t, `[true]`, evalJSON(t, "maritalStatus.memberOf('http://hl7.org/fhir/ValueSet/marital-status')", p, nil))
}

func TestTypes(t *testing.T) {
	p := mustDecode(t, `{"resourceType":"Patient","gender":"female","birthDate":"1980"}`)
	x := MustCompile("gender.combine(birthDate).combine(1).combine(1.5).combine('a').combine(@2020).combine(@2020T).combine(@T10).combine(1 'mg').combine(true)")
	out, err := x.Evaluate(context.Background(), Collection{NodeOf(p)}, nil)
	require.NoError(t, err)
	var names []string
	for _, v := range out {
		names = append(names, v.TypeName())
	}
	require.Equal(t, []string{"FHIR.code", "FHIR.date", "System.Integer", "System.Decimal", "System.String", "System.Date", "System.DateTime", "System.Time", "System.Quantity", "System.Boolean"}, names)
	n := out[0].(*Node)
	require.IsType(t, &r4.Code{}, n.Value)
	require.Equal(t, `[true]`, evalJSON(t, "Patient.is(DomainResource) and Patient.is(Resource) and gender.is(string)", p, nil))
}

// TestBundleIndex: resolve() with Env.BundleIndex finds what the scan of
// the entries finds (the first match in entry order, by fullUrl or by
// Type/id, an absolute reference only where the fullUrl ends the same
// way), and without an index the scan counts its steps.
func TestBundleIndex(t *testing.T) {
	b := mustDecode(t, `{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"http://a.org/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"male"}},
	 {"fullUrl":"urn:uuid:0d3a1b8e-4b5e-4c9a-9f7e-3c2b1a0d9e8f","resource":{"resourceType":"Patient","id":"1","gender":"female"}},
	 {"fullUrl":"http://b.org/Patient/2","resource":{"resourceType":"Patient","id":"2","gender":"other"}},
	 {"resource":{"resourceType":"Patient","id":"3","gender":"unknown"}}]}`).(*r4.Bundle)
	ix := NewBundleIndex(b)
	for _, ref := range []string{"Patient/1", "http://a.org/Patient/1", "urn:uuid:0d3a1b8e-4b5e-4c9a-9f7e-3c2b1a0d9e8f",
		"http://c.org/Patient/2", "http://b.org/Patient/2", "Patient/2", "Patient/3", "Patient/1/_history/2", "Patient/9", "Observation/1"} {
		want, got := scanEntries(b, ref), ix.find(ref)
		if want != got {
			t.Errorf("%s: index finds %v, the scan %v", ref, got, want)
		}
	}
	x := MustCompile("'Patient/2'.resolve().gender")
	for _, env := range []*Env{{Bundle: b}, {Bundle: b, BundleIndex: ix}} {
		out, err := x.Evaluate(context.Background(), nil, env)
		require.NoError(t, err)
		js, _ := MarshalJSON(out)
		require.Equal(t, `["other"]`, string(js))
	}
	// The scan of the four entries counts four steps; the index none.
	steps := 1
	for ; steps < 100; steps++ {
		if _, err := x.Evaluate(context.Background(), nil, &Env{Bundle: b, BundleIndex: ix, Limits: Limits{MaxSteps: steps}}); err == nil {
			break
		}
	}
	_, err := x.Evaluate(context.Background(), nil, &Env{Bundle: b, Limits: Limits{MaxSteps: steps}})
	require.ErrorIs(t, err, ErrLimit)
	_, err = x.Evaluate(context.Background(), nil, &Env{Bundle: b, Limits: Limits{MaxSteps: steps + 4}})
	require.NoError(t, err)
}

// TestStepBudget: evaluations sharing Limits.Budget spend it together;
// once it is spent they fail with ErrLimit before starting.
func TestStepBudget(t *testing.T) {
	x := MustCompile("(1 | 2 | 3).where($this > 1).count()")
	budget := 1000
	env := &Env{Limits: Limits{Budget: &budget}}
	_, err := x.Evaluate(context.Background(), nil, env)
	require.NoError(t, err)
	used := 1000 - budget
	require.Greater(t, used, 0)
	budget = used + used/2 // enough for one more, not two
	_, err = x.Evaluate(context.Background(), nil, env)
	require.NoError(t, err)
	_, err = x.Evaluate(context.Background(), nil, env)
	require.ErrorIs(t, err, ErrLimit)
	require.Equal(t, 0, budget)
	_, err = x.Evaluate(context.Background(), nil, env)
	require.ErrorIs(t, err, ErrLimit)
}

// TestCheckEnv: an environment variable the Env does not provide is a
// static error, found by CheckEnv before any evaluation (at the offset of
// the variable, wherever it is in the expression), and Evaluate refuses
// it with the same error even where evaluation would not reach it.
func TestCheckEnv(t *testing.T) {
	vars := &Env{Vars: map[string]Collection{"x": {String("v")}}}
	for _, expr := range []string{"%context", "%resource", "%rootResource", "%ucum", "%sct", "%loinc", "%bundle",
		"%`vs-administrative-gender`", "%`ext-patient-birthTime`", "%'vs-x'", "1 + 2"} {
		x := MustCompile(expr)
		require.NoError(t, x.CheckEnv(nil), expr)
		require.NoError(t, x.CheckEnv(vars), expr)
		_, err := x.Evaluate(context.Background(), nil, nil)
		require.NoError(t, err, expr)
	}
	x := MustCompile("iif(true, 1, %x)")
	err := x.CheckEnv(nil)
	var ee *EvalError
	require.ErrorAs(t, err, &ee)
	require.ErrorIs(t, err, ErrSemantic)
	require.Equal(t, 13, ee.Offset)
	require.Equal(t, "fhirpath: semantic error at offset 13: unknown environment variable %x", err.Error())
	_, evalErr := x.Evaluate(context.Background(), nil, nil)
	require.Equal(t, err, evalErr, "Evaluate refuses what CheckEnv refuses, with the same error")
	require.NoError(t, x.CheckEnv(vars))
	out, err := x.Evaluate(context.Background(), nil, vars)
	require.NoError(t, err)
	require.Equal(t, Collection{Integer(1)}, out)
	// The first unknown variable, in the order of the text.
	err = MustCompile("%x.where(%resource.exists() and %y)").CheckEnv(nil)
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 0, ee.Offset)
	err = MustCompile("%x.where(%resource.exists() and %y)").CheckEnv(vars)
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 32, ee.Offset)
	require.True(t, (*Env)(nil).Provides("resource"))
	require.False(t, (*Env)(nil).Provides("x"))
	require.True(t, vars.Provides("x"))
}

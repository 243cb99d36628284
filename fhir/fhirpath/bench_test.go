package fhirpath

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// benchExpressions are typical queries over a patient's record: an
// attested query (DESIGN §9), navigation, a whole-tree walk, date
// comparison, reference resolution and an invariant-style check.
var benchExpressions = []struct{ name, expr string }{
	{"weight", "Bundle.entry.resource.ofType(Observation).where(code.coding.exists(system = 'http://loinc.org' and code = '29463-7')).value.ofType(Quantity).value"},
	{"given", "entry.resource.ofType(Patient).name.where(use = 'official').given.first()"},
	{"references", "descendants().ofType(Reference).count()"},
	{"dates", "entry.resource.ofType(Observation).where(effective.ofType(dateTime) > @2015-01-01).count()"},
	{"resolve", "entry.resource.ofType(Encounter).subject.resolve().ofType(Patient).id.distinct()"},
	{"invariant", "entry.resource.all(id.exists() and (meta.empty() or meta.lastUpdated.exists().not() or meta.lastUpdated <= now()))"},
}

func loadSynthea(b testing.TB) ([]byte, *r4.Bundle) {
	data := corpus.Read(b, corpus.MaryLind)
	r, err := r4.Unmarshal(data)
	if err != nil {
		b.Fatal(err)
	}
	return data, r.(*r4.Bundle)
}

// BenchmarkEvaluate measures compile (from the cache) and evaluation of
// each expression over one Synthea bundle, reported per byte of the
// bundle's JSON; Baseline/decode, decoding the same bytes into the model,
// is measured in the same run to relate the two, and so is Floor/<name>,
// the least work any correct implementation must do for each expression
// (see floors).
func BenchmarkEvaluate(b *testing.B) {
	data, bundle := loadSynthea(b)
	in := Collection{NodeOf(bundle)}
	ctx := context.Background()
	b.Run("Baseline/decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := r4.Unmarshal(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchFloors(b, bundle)
	for _, c := range benchExpressions {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				x, err := Compile(c.expr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := x.Evaluate(ctx, in, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTinyInvariants evaluates ele-1 on every element of the Synthea
// bundle and ext-1 on every extension, one node in and a boolean out, as
// the validator does for every element: the cost of many tiny evaluations
// rather than of one over the whole bundle.
func BenchmarkTinyInvariants(b *testing.B) {
	_, bundle := loadSynthea(b)
	all, err := MustCompile("descendants()").Evaluate(context.Background(), Collection{NodeOf(bundle)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var nodes []Collection
	for _, v := range all {
		if n := v.(*Node); n.Type != "id" {
			nodes = append(nodes, Collection{n})
		}
	}
	ele1 := MustCompile("hasValue() or (children().count() > id.count())")
	ext1 := MustCompile("extension.exists() != value.exists()")
	ctx := context.Background()
	env := &Env{}
	b.ReportMetric(float64(len(nodes)), "nodes")
	for b.Loop() {
		for _, in := range nodes {
			if _, err := ele1.Evaluate(ctx, in, env); err != nil {
				b.Fatal(err)
			}
			if in[0].(*Node).Type != "Extension" {
				continue
			}
			if _, err := ext1.Evaluate(ctx, in, env); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCompile measures parsing and checking without the cache.
func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		for _, c := range benchExpressions {
			if _, err := Parse(c.expr); err != nil {
				b.Fatal(err)
			}
		}
	}
}

var exprsOut = flag.String("fhirpath.exprs", "", "write the benchmark expressions as JSON to this file (for testdata/fhirpathjs/run.sh)")

// TestBenchExpressionsJSON writes benchExpressions for the fhirpath.js
// comparison when -fhirpath.exprs is given.
func TestBenchExpressionsJSON(t *testing.T) {
	if *exprsOut == "" {
		t.Skip("no -fhirpath.exprs")
	}
	type item struct {
		Name string `json:"name"`
		Expr string `json:"expr"`
	}
	var items []item
	for _, c := range benchExpressions {
		items = append(items, item{c.name, c.expr})
	}
	data, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*exprsOut, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

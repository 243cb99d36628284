package fhirpath

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/acds-project/acds/fhir/r4"
)

// floors are hand-written Go equivalents of benchExpressions: the least
// work any correct implementation must do over the typed model to produce
// the same result, so that BenchmarkEvaluate/Floor/<name> shows how close
// the engine is to what is possible. Each appends its result to out (a
// buffer the benchmark reuses) in the normal form of floorForm: element
// pointers as they are in the model, counts as int64, booleans as bool and
// ids as strings. TestFloors checks that each gives the engine's result.
var floors = map[string]func(b *r4.Bundle, now time.Time, out []any) []any{
	// Bundle.entry.resource.ofType(Observation).where(code.coding.exists(
	// system = 'http://loinc.org' and code = '29463-7')).value.ofType(
	// Quantity).value
	"weight": func(b *r4.Bundle, _ time.Time, out []any) []any {
		for i := range b.Entry {
			o, ok := b.Entry[i].Resource.(*r4.Observation)
			if !ok || o.Code == nil {
				continue
			}
			match := false
			for j := range o.Code.Coding {
				c := &o.Code.Coding[j]
				if c.System != nil && c.System.Present && c.System.Value == "http://loinc.org" &&
					c.Code != nil && c.Code.Present && c.Code.Value == "29463-7" {
					match = true
					break
				}
			}
			if match && o.ValueQuantity != nil && o.ValueQuantity.Value != nil {
				out = append(out, o.ValueQuantity.Value)
			}
		}
		return out
	},
	// entry.resource.ofType(Patient).name.where(use = 'official').given.first()
	"given": func(b *r4.Bundle, _ time.Time, out []any) []any {
		for i := range b.Entry {
			p, ok := b.Entry[i].Resource.(*r4.Patient)
			if !ok {
				continue
			}
			for j := range p.Name {
				n := &p.Name[j]
				if n.Use != nil && n.Use.Present && n.Use.Value == "official" && len(n.Given) > 0 {
					return append(out, &n.Given[0])
				}
			}
		}
		return out
	},
	// descendants().ofType(Reference).count(): every element is visited,
	// by the generated walker.
	"references": func(b *r4.Bundle, _ time.Time, out []any) []any {
		n := int64(0)
		r4.Walk(b, func(_ *r4.Path, x any) error {
			if _, ok := x.(*r4.Reference); ok {
				n++
			}
			return nil
		})
		return append(out, n)
	},
	// entry.resource.ofType(Observation).where(effective.ofType(dateTime) >
	// @2015-01-01).count(): the day of an ISO dateTime compares as text;
	// one on that day is neither before nor after it (empty, not true).
	"dates": func(b *r4.Bundle, _ time.Time, out []any) []any {
		n := int64(0)
		for i := range b.Entry {
			o, ok := b.Entry[i].Resource.(*r4.Observation)
			if !ok || o.EffectiveDateTime == nil || len(o.EffectiveDateTime.Value) < 10 {
				continue
			}
			if o.EffectiveDateTime.Value[:10] > "2015-01-01" {
				n++
			}
		}
		return append(out, n)
	},
	// entry.resource.ofType(Encounter).subject.resolve().ofType(Patient).id.distinct():
	// each reference is looked up among the entries by fullUrl.
	"resolve": func(b *r4.Bundle, _ time.Time, out []any) []any {
		start := len(out)
		for i := range b.Entry {
			enc, ok := b.Entry[i].Resource.(*r4.Encounter)
			if !ok || enc.Subject == nil || enc.Subject.Reference == nil {
				continue
			}
			ref := enc.Subject.Reference.Value
			for j := range b.Entry {
				en := &b.Entry[j]
				if en.FullURL == nil || en.FullURL.Value != ref {
					continue
				}
				if p, ok := en.Resource.(*r4.Patient); ok && p.ID != "" {
					seen := false
					for _, x := range out[start:] {
						if x == p.ID {
							seen = true
						}
					}
					if !seen {
						out = append(out, p.ID)
					}
				}
				break
			}
		}
		return out
	},
	// entry.resource.all(id.exists() and (meta.empty() or
	// meta.lastUpdated.exists().not() or meta.lastUpdated <= now()))
	"invariant": func(b *r4.Bundle, now time.Time, out []any) []any {
		for i := range b.Entry {
			r := b.Entry[i].Resource
			if r == nil {
				continue
			}
			if r.ResourceID() == "" {
				return append(out, false)
			}
			m := metaOf(r)
			if m == nil || m.LastUpdated == nil || !m.LastUpdated.Present {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, m.LastUpdated.Value)
			if err != nil || t.After(now) {
				return append(out, false)
			}
		}
		return append(out, true)
	},
}

// metaOf returns the meta of the resource types in the Synthea bundles.
func metaOf(r r4.Resource) *r4.Meta {
	switch r := r.(type) {
	case *r4.Observation:
		return r.Meta
	case *r4.Immunization:
		return r.Meta
	case *r4.Claim:
		return r.Meta
	case *r4.Encounter:
		return r.Meta
	case *r4.ExplanationOfBenefit:
		return r.Meta
	case *r4.Procedure:
		return r.Meta
	case *r4.MedicationRequest:
		return r.Meta
	case *r4.Patient:
		return r.Meta
	case *r4.Organization:
		return r.Meta
	case *r4.Practitioner:
		return r.Meta
	case *r4.DiagnosticReport:
		return r.Meta
	case *r4.Condition:
		return r.Meta
	}
	panic(fmt.Sprintf("metaOf: %s is not in the Synthea bundles", r.ResourceType()))
}

// floorForm puts an engine result in the form the floors give.
func floorForm(c Collection) []any {
	var out []any
	for _, v := range c {
		switch v := v.(type) {
		case *Node:
			if id, ok := v.Value.(*r4.ID); ok {
				out = append(out, id.Value)
			} else {
				out = append(out, v.Value)
			}
		case Integer:
			out = append(out, int64(v))
		case Boolean:
			out = append(out, bool(v))
		default:
			out = append(out, v)
		}
	}
	return out
}

// TestFloors checks that every bench expression has a floor and that it
// gives the engine's result on the Synthea bundle (the same pointers into
// the model, not only equal values).
func TestFloors(t *testing.T) {
	_, b := loadSynthea(t)
	now := time.Now()
	for _, c := range benchExpressions {
		f := floors[c.name]
		if f == nil {
			t.Errorf("%s: no floor", c.name)
			continue
		}
		got, err := MustCompile(c.expr).Evaluate(context.Background(), Collection{NodeOf(b)}, &Env{Now: now})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want := f(b, now, nil)
		if len(want) == 0 {
			t.Errorf("%s: the floor finds nothing: not a useful benchmark", c.name)
		}
		if g := floorForm(got); !reflect.DeepEqual(g, want) {
			t.Errorf("%s: engine %v, floor %v", c.name, g, want)
		}
	}
	if len(floors) != len(benchExpressions) {
		t.Errorf("%d floors for %d expressions", len(floors), len(benchExpressions))
	}
}

// benchFloors measures the floors, as BenchmarkEvaluate/Floor/<name>.
func benchFloors(b *testing.B, bundle *r4.Bundle) {
	for _, c := range benchExpressions {
		f := floors[c.name]
		if f == nil {
			continue
		}
		b.Run("Floor/"+c.name, func(b *testing.B) {
			var out []any
			for b.Loop() {
				out = f(bundle, time.Now(), out[:0])
				if len(out) == 0 {
					b.Fatal("no result")
				}
			}
		})
	}
}

package report

import (
	"fmt"
	"sort"

	"github.com/acds-project/acds/fhir/r4"
)

// maxObservations bounds the observations a page lists.
const maxObservations = 50

// latestObservations returns, for each observation code of the output
// Bundle, the latest observation (by effective time, else issued time),
// sorted by name, at most maxObservations of them, and how many more codes
// there were. An output that is not a Bundle has none.
func latestObservations(out []byte) ([]obs, int) {
	res, err := r4.Unmarshal(out)
	if err != nil {
		return nil, 0
	}
	b, ok := res.(*r4.Bundle)
	if !ok {
		return nil, 0
	}
	type cand struct {
		o   obs
		key string
	}
	latest := map[string]cand{}
	for _, e := range b.Entry {
		o, ok := e.Resource.(*r4.Observation)
		if !ok {
			continue
		}
		key, name := codeOf(o.Code)
		if key == "" {
			continue
		}
		when := effective(o)
		if c, seen := latest[key]; seen && c.o.When >= when {
			continue
		}
		latest[key] = cand{o: obs{Name: name, Value: valueOf(o), When: when}, key: key}
	}
	list := make([]obs, 0, len(latest))
	for _, c := range latest {
		list = append(list, c.o)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Name != list[j].Name {
			return list[i].Name < list[j].Name
		}
		return list[i].When > list[j].When
	})
	more := 0
	if len(list) > maxObservations {
		more = len(list) - maxObservations
		list = list[:maxObservations]
	}
	return list, more
}

func str(s *r4.String) string {
	if s == nil {
		return ""
	}
	return s.Value
}

// codeOf returns the grouping key (first coding's system|code, else the
// text) and the display name of an observation code.
func codeOf(cc *r4.CodeableConcept) (key, name string) {
	if cc == nil {
		return "", ""
	}
	name = str(cc.Text)
	for _, c := range cc.Coding {
		if c.Code == nil {
			continue
		}
		sys := ""
		if c.System != nil {
			sys = c.System.Value
		}
		if key == "" {
			key = sys + "|" + c.Code.Value
		}
		if name == "" {
			name = str(c.Display)
		}
		if name == "" {
			name = c.Code.Value
		}
	}
	if key == "" {
		key = "text|" + name
	}
	if name == "" {
		return "", ""
	}
	return key, name
}

func effective(o *r4.Observation) string {
	switch {
	case o.EffectiveDateTime != nil:
		return o.EffectiveDateTime.Value
	case o.EffectiveInstant != nil:
		return o.EffectiveInstant.Value
	case o.EffectivePeriod != nil && o.EffectivePeriod.Start != nil:
		return o.EffectivePeriod.Start.Value
	case o.Issued != nil:
		return o.Issued.Value
	}
	return ""
}

func quantity(q *r4.Quantity) string {
	if q == nil || q.Value == nil {
		return ""
	}
	unit := str(q.Unit)
	if unit == "" && q.Code != nil {
		unit = q.Code.Value
	}
	return joinNonEmpty(" ", q.Value.Value, unit)
}

func valueOf(o *r4.Observation) string {
	switch {
	case o.ValueQuantity != nil:
		return quantity(o.ValueQuantity)
	case o.ValueString != nil:
		return o.ValueString.Value
	case o.ValueCodeableConcept != nil:
		_, n := codeOf(o.ValueCodeableConcept)
		return n
	case o.ValueBoolean != nil:
		return fmt.Sprint(o.ValueBoolean.Value)
	case o.ValueInteger != nil:
		return fmt.Sprint(o.ValueInteger.Value)
	case o.ValueDateTime != nil:
		return o.ValueDateTime.Value
	case o.ValueRange != nil:
		return joinNonEmpty(" – ", quantity(o.ValueRange.Low), quantity(o.ValueRange.High))
	case o.ValueRatio != nil:
		return joinNonEmpty(" / ", quantity(o.ValueRatio.Numerator), quantity(o.ValueRatio.Denominator))
	}
	var parts []string
	for _, c := range o.Component {
		_, n := codeOf(c.Code)
		if v := quantity(c.ValueQuantity); v != "" {
			parts = append(parts, n+" "+v)
		}
	}
	return joinNonEmpty("; ", parts...)
}

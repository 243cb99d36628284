package fhir

import (
	"strconv"
	"strings"
	"time"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// The Safe Harbor rules for dates and ages (package doc, De-identification):
// every date is reduced to its year, no year may show that the individual
// is over 89, and every age of 90 years or more, however it is expressed,
// falls into the single "90 or older" category.

const (
	ucumSystem = "http://unitsofmeasure.org"
	// birthTimeURL is the extension on Patient.birthDate giving the time of
	// birth: nothing of it survives reduction to a year, so it is removed.
	birthTimeURL = "http://hl7.org/fhir/StructureDefinition/patient-birthTime"
	// ageGroupYears is the Safe Harbor age category: ages over 89.
	ageGroupYears = 90
)

// keepDate reduces the value of a date, dateTime or instant to its year
// (see dateYear), January 1 00:00:00Z of that year for an instant, and
// reports whether it is kept: a value whose year cannot be read is removed.
func (d *safeHarbor) keepDate(p r4.Primitive, instant bool) bool {
	y, ok := d.dateYear(p.Text())
	if !ok {
		return false
	}
	s := fourDigits(y)
	if instant {
		s += "-01-01T00:00:00Z"
	}
	_ = p.SetText(s)
	return true
}

// dateYear returns the year of a FHIR date, dateTime or instant. A value
// with a time (and so a zone) is taken in UTC, so that the years of two
// values keep their order (a Period's start is not after its end). A year
// more than 89 years before d.now becomes the year 90 years before it:
// such a year would show that the individual is over 89, whether it is a
// birth date or any other date of their life.
func (d *safeHarbor) dateYear(s string) (int, bool) {
	if len(s) < 4 || digitsOnly(s[:4]) != s[:4] {
		return 0, false
	}
	y, _ := strconv.Atoi(s[:4])
	if len(s) > 10 && s[10] == 'T' {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			if u := t.UTC().Year(); u >= 1 && u <= 9999 {
				y = u
			}
		}
	}
	if floor := d.now.UTC().Year() - ageGroupYears; floor >= 1 && y < floor {
		y = floor
	}
	return y, true
}

// fourDigits formats a year 1..9999 as FHIR writes it, with four digits.
func fourDigits(y int) string {
	s := strconv.Itoa(y)
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}

// enterDates applies, before the generic rules, the date and age rules
// that need the node's context: the node is the top of stack.
//   - an Observation (or component) coded as an age has its value grouped;
//   - a Range in a choice that also allows an Age (onset[x], abatement[x],
//     age[x], deceased[x], performed[x]…) is an age range and is grouped;
//   - the patient-birthTime extension is removed.
//
// Age values themselves are grouped by age, at their own enter.
func (d *safeHarbor) enterDates(stack []specFrame) {
	f := &stack[len(stack)-1]
	switch n := f.Node.(type) {
	case *r4.Observation:
		groupAgeValue(n.Code, &n.ValueQuantity, n.ValueRange, &n.ValueInteger)
	case *r4.ObservationComponent:
		groupAgeValue(n.Code, &n.ValueQuantity, n.ValueRange, &n.ValueInteger)
	case *r4.Range:
		if len(stack) < 2 || f.Elem == nil || !ageChoice(stack[len(stack)-2].Type, f.Elem) {
			return
		}
		switch f.Elem.Name {
		case "valueRange", "defaultValueRange", "fixedRange", "patternRange":
			// A generic value (an extension's, a parameter's): an age
			// only when its unit is a unit of time.
			groupAgeRange(n, false)
		default:
			groupAgeRange(n, true)
		}
	case *r4.Extension:
		if n.URL == birthTimeURL {
			zeroElement(n)
		}
	}
}

// age puts an Age of 90 years or more into the single ">= 90" years
// category, and removes one that gives an upper bound of 90 years or more
// (see groupAge).
func (d *safeHarbor) age(a *r4.Age) {
	groupAge((*r4.Quantity)(a), true)
}

// ageChoice reports whether element e of type pt belongs to a choice that
// allows an Age: the other types of such a choice express an age too.
func ageChoice(pt *spec.Type, e *spec.Element) bool {
	if pt == nil {
		return false
	}
	for i := range pt.Elements {
		if x := &pt.Elements[i]; x.Path == e.Path && x.Type == "Age" {
			return true
		}
	}
	return false
}

// ageCodes are the LOINC codes of observations whose value is the age of
// the patient.
var ageCodes = map[string]bool{
	"30525-0": true, // Age
	"21612-7": true, // Age - Reported
	"29553-5": true, // Age calculated
	"21611-9": true, // Age - Estimated
	"30972-4": true, // Age at onset of adverse event
	"39016-1": true, // Age at death
	"63900-5": true, // Current age or age at death
}

// isAgeCode reports whether c holds a LOINC age code.
func isAgeCode(c *r4.CodeableConcept) bool {
	if c == nil {
		return false
	}
	for i := range c.Coding {
		x := &c.Coding[i]
		if x.System != nil && x.System.Value == "http://loinc.org" && x.Code != nil && ageCodes[x.Code.Value] {
			return true
		}
	}
	return false
}

// groupAgeValue groups the value of an observation coded as an age: a
// Quantity or Range as any age, an integer (years) of 90 or more by
// becoming the Quantity ">= 90" years.
func groupAgeValue(code *r4.CodeableConcept, q **r4.Quantity, r *r4.Range, i **r4.Integer) {
	if !isAgeCode(code) {
		return
	}
	if *q != nil {
		groupAge(*q, true)
	}
	if r != nil {
		groupAgeRange(r, true)
	}
	if *i != nil && (*i).Present && (*i).Value >= ageGroupYears {
		*i = nil
		*q = &r4.Quantity{}
		setAgeGroup(*q, true)
	}
}

// groupAge applies the 90-or-older rule to an age with a comparator (an
// Age, or a Quantity known to be an age), in place:
//   - no comparator, ">=" or ">" with a value of 90 years or more: the
//     value becomes ">= 90" years;
//   - "<" above 90 years or "<=" from 90 years: removed (zeroed). Such an
//     upper bound splits the 90-or-older category, and no smaller bound
//     would be true ("< 95" cannot become "< 90"), so only removal is safe.
//
// anyUnit makes a unit that is not a unit of time count as years (for an
// Age, whose unit must be one of time); a Quantity without unit counts as
// years either way.
func groupAge(q *r4.Quantity, anyUnit bool) {
	y, ok := ageYears(q, anyUnit)
	if !ok {
		return
	}
	cmp := ""
	if q.Comparator != nil {
		cmp = q.Comparator.Value
	}
	switch cmp {
	case "", ">=", ">":
		if y >= ageGroupYears {
			setAgeGroup(q, true)
		}
	case "<":
		if y > ageGroupYears {
			zeroElement(q)
		}
	default: // "<=", or a comparator validation does not know
		if y >= ageGroupYears {
			zeroElement(q)
		}
	}
}

// groupAgeRange applies the 90-or-older rule to an age Range, in place: a
// low of 90 years or more becomes 90 years, a high of 90 years or more is
// removed (it would split the category), so a Range of 95 to 96 years
// becomes "90 years or more". Bounds are SimpleQuantities: comparators,
// which they may not have, are not read.
func groupAgeRange(r *r4.Range, anyUnit bool) {
	if r.Low != nil {
		if y, ok := ageYears(r.Low, anyUnit); ok && y >= ageGroupYears {
			setAgeGroup(r.Low, false)
		}
	}
	if r.High != nil {
		if y, ok := ageYears(r.High, anyUnit); ok && y >= ageGroupYears {
			zeroElement(r.High)
		}
	}
}

// setAgeGroup rewrites age q, in place, as 90 years, with the comparator
// ">=" when comparator is set (a SimpleQuantity, such as a Range bound, may
// not have one). A unit text already in years is kept; its extensions and
// those of the value go.
func setAgeGroup(q *r4.Quantity, comparator bool) {
	unit := "years"
	if q.Unit != nil && timeUnitWords[strings.ToLower(strings.TrimSpace(q.Unit.Value))] == 1 {
		unit = q.Unit.Value
	}
	q.Value = r4.NewDecimal(strconv.Itoa(ageGroupYears))
	q.Comparator = nil
	if comparator {
		q.Comparator = r4.NewCode(">=")
	}
	q.Unit = r4.NewString(unit)
	q.System = r4.NewURI(ucumSystem)
	q.Code = r4.NewCode("a")
}

// ageYears returns the value of age q in years and whether q is an age
// with a value. The unit is the UCUM code (when the system is UCUM or
// absent) or else the unit text, converted with a year of 365 days, which
// slightly overstates an age given in days, weeks or smaller units, so that
// a borderline age is grouped rather than kept. A Quantity without any unit
// counts as years; one whose unit is not a unit of time counts as years
// when anyUnit is set and is otherwise not an age.
func ageYears(q *r4.Quantity, anyUnit bool) (float64, bool) {
	if q == nil || q.Value == nil || !q.Value.HasValue() {
		return 0, false
	}
	v, err := strconv.ParseFloat(q.Value.Value, 64)
	if err != nil {
		return 0, false
	}
	per, ok := unitPerYear(q)
	if !ok {
		if !anyUnit && hasUnit(q) {
			return 0, false
		}
		per = 1
	}
	return v / per, true
}

// hasUnit reports whether q names a unit, by code or text.
func hasUnit(q *r4.Quantity) bool {
	return q.Code != nil && q.Code.HasValue() || q.Unit != nil && strings.TrimSpace(q.Unit.Value) != ""
}

// unitPerYear returns how many of q's unit of time make a 365-day year,
// from its UCUM code (exact case, system UCUM or absent) or else its unit
// text (any case); ok is false when neither is a unit of time.
func unitPerYear(q *r4.Quantity) (per float64, ok bool) {
	if q.Code != nil && q.Code.HasValue() && (q.System == nil || !q.System.HasValue() || q.System.Value == ucumSystem) {
		if per, ok := ucumTimeUnits[q.Code.Value]; ok {
			return per, true
		}
	}
	if q.Unit != nil {
		if per, ok := timeUnitWords[strings.ToLower(strings.TrimSpace(q.Unit.Value))]; ok {
			return per, true
		}
	}
	return 0, false
}

const (
	daysPerYear    = 365
	minutesPerYear = daysPerYear * 24 * 60
)

// ucumTimeUnits are the UCUM units of time, by how many make a year.
var ucumTimeUnits = map[string]float64{
	"a": 1, "a_j": 1, "a_t": 1, "a_g": 1,
	"mo": 12, "mo_j": 12, "mo_g": 12, "mo_s": 12,
	"wk":  daysPerYear / 7.0,
	"d":   daysPerYear,
	"h":   daysPerYear * 24,
	"min": minutesPerYear,
	"s":   minutesPerYear * 60,
}

// timeUnitWords are unit texts (lower case) of time, by how many make a
// year; UCUM codes in their case-insensitive form (ANN, MO, WK…) included.
var timeUnitWords = map[string]float64{
	"a": 1, "ann": 1, "y": 1, "yr": 1, "yrs": 1, "year": 1, "years": 1,
	"mo": 12, "mos": 12, "month": 12, "months": 12,
	"wk": daysPerYear / 7.0, "wks": daysPerYear / 7.0, "week": daysPerYear / 7.0, "weeks": daysPerYear / 7.0,
	"d": daysPerYear, "day": daysPerYear, "days": daysPerYear,
	"h": daysPerYear * 24, "hr": daysPerYear * 24, "hrs": daysPerYear * 24, "hour": daysPerYear * 24, "hours": daysPerYear * 24,
	"min": minutesPerYear, "mins": minutesPerYear, "minute": minutesPerYear, "minutes": minutesPerYear,
	"s": minutesPerYear * 60, "sec": minutesPerYear * 60, "secs": minutesPerYear * 60, "second": minutesPerYear * 60, "seconds": minutesPerYear * 60,
}

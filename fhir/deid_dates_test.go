package fhir

import (
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
)

// deidDates de-identifies one resource (or Bundle) with opts, requires the
// output to be valid R4 and returns it.
func deidDates(t *testing.T, in string, opts Options) string {
	t.Helper()
	out, err := Process([]byte(in), opts)
	if err != nil {
		t.Fatalf("Process: %v\ninput: %s", err, in)
	}
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("output does not validate: %v\n%s", o.Issues, out.JSON)
	}
	return string(out.JSON)
}

// dateCase is one de-identification case: every want fragment must be in
// the canonical output, no bad fragment may be.
type dateCase struct {
	name      string
	in        string
	want, bad []string
}

func runDateCases(t *testing.T, cases []dateCase, opts Options) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := deidDates(t, c.in, opts)
			for _, w := range c.want {
				if !strings.Contains(s, w) {
					t.Errorf("want %s in\n%s", w, s)
				}
			}
			for _, b := range c.bad {
				if strings.Contains(s, b) {
					t.Errorf("%s survived in\n%s", b, s)
				}
			}
		})
	}
}

const (
	ucumYears = `"system":"http://unitsofmeasure.org"`
	subjectP  = `"subject":{"reference":"Patient/p"}`
)

// TestDeidentifyBirthDates (L4): the 90-or-older rule holds for every birth
// date, of patients, relatives and practitioners, and for dates inside a
// birth date's extensions; the birth time is removed. testNow is in 2026,
// so 1936 is the earliest year kept.
func TestDeidentifyBirthDates(t *testing.T) {
	fmh := `{"resourceType":"FamilyMemberHistory","id":"f","status":"completed","patient":{"reference":"Patient/p"},"relationship":{"text":"mother"},`
	runDateCases(t, []dateCase{
		{
			name: "birthTime",
			in: `{"resourceType":"Patient","id":"p1","birthDate":"1920-05-06","_birthDate":{"extension":[
				{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1920-05-06T10:11:12Z"},
				{"url":"http://example.org/fhir/StructureDefinition/baptised","valueDateTime":"1920-06-07T10:00:00Z"}]}}`,
			want: []string{`"birthDate":"1936"`, `"valueDateTime":"1936"`},
			bad:  []string{`"1920"`, "birthTime", "05-06", "06-07"},
		},
		{
			name: "birthTime only",
			in: `{"resourceType":"Patient","id":"p1","_birthDate":{"extension":[
				{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1990-05-06T10:11:12+02:00"}]}}`,
			bad: []string{"birthTime", "birthDate", `"1990"`},
		},
		{name: "bornDate", in: fmh + `"bornDate":"1920-01-02"}`, want: []string{`"bornDate":"1936"`}, bad: []string{`"1920"`}},
		{name: "bornPeriod", in: fmh + `"bornPeriod":{"start":"1919-12-30","end":"1920-01-02"}}`, want: []string{`"bornPeriod":{"end":"1936","start":"1936"}`}, bad: []string{`"1919"`, `"1920"`}},
		{name: "bornString", in: fmh + `"bornString":"2 January 1920"}`, bad: []string{`"1920"`, "born"}},
		{name: "RelatedPerson", in: `{"resourceType":"RelatedPerson","id":"r","patient":{"reference":"Patient/p"},"birthDate":"1920-01-02"}`, want: []string{`"birthDate":"1936"`}, bad: []string{`"1920"`}},
		{name: "Practitioner", in: `{"resourceType":"Practitioner","id":"r","birthDate":"1901"}`, want: []string{`"birthDate":"1936"`}, bad: []string{`"1901"`}},
		{name: "Person", in: `{"resourceType":"Person","id":"r","birthDate":"1925-12"}`, want: []string{`"birthDate":"1936"`}, bad: []string{`"1925"`}},
		{name: "89 years", in: `{"resourceType":"Patient","id":"p1","birthDate":"1937-01-01"}`, want: []string{`"birthDate":"1937"`}},
		{name: "young", in: `{"resourceType":"Patient","id":"p1","birthDate":"2001-07-08"}`, want: []string{`"birthDate":"2001"`}},
		{
			// A date of the individual's life before 1936 shows they are
			// over 89 as surely as the birth date does.
			name: "other dates",
			in:   `{"resourceType":"Condition","id":"c",` + subjectP + `,"onsetDateTime":"1925-03-04","recordedDate":"1950-01-02"}`,
			want: []string{`"onsetDateTime":"1936"`, `"recordedDate":"1950"`},
			bad:  []string{`"1925"`},
		},
	}, testOpts(acds.OutputFHIRR4Deidentified))

	// The floor follows Options.Now.
	opts := testOpts(acds.OutputFHIRR4Deidentified)
	opts.Now = time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	runDateCases(t, []dateCase{
		{name: "Now 2040", in: `{"resourceType":"Patient","id":"p1","birthDate":"1945-01-01"}`, want: []string{`"birthDate":"1950"`}},
	}, opts)
}

// TestDeidentifyAgeForms (L5): ages of 90 or more are grouped however they
// are expressed — Age, Ranges in age choices, Observations coded as ages.
func TestDeidentifyAgeForms(t *testing.T) {
	q := func(v, code string) string {
		return `{"value":` + v + `,"unit":"` + code + `",` + ucumYears + `,"code":"` + code + `"}`
	}
	obs := func(code, value string) string {
		return `{"resourceType":"Observation","id":"o","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"` + code + `"}]},` + subjectP + `,` + value + `}`
	}
	group := `{"code":"a","comparator":">=",` + ucumYears + `,"unit":"a","value":90}`
	groupYears := `{"code":"a","comparator":">=",` + ucumYears + `,"unit":"years","value":90}`
	low90 := `{"low":{"code":"a",` + ucumYears + `,"unit":"a","value":90}}`
	low90Years := `{"low":{"code":"a",` + ucumYears + `,"unit":"years","value":90}}`
	runDateCases(t, []dateCase{
		{
			name: "Condition.onsetRange",
			in:   `{"resourceType":"Condition","id":"c",` + subjectP + `,"onsetRange":{"low":` + q("95", "a") + `,"high":` + q("96", "a") + `}}`,
			want: []string{`"onsetRange":` + low90},
			bad:  []string{`"value":95`, `"value":96`, "high"},
		},
		{
			name: "Condition.abatementRange across 90",
			in:   `{"resourceType":"Condition","id":"c",` + subjectP + `,"clinicalStatus":{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/condition-clinical","code":"resolved"}]},"abatementRange":{"low":` + q("85", "a") + `,"high":` + q("92", "a") + `}}`,
			want: []string{`"abatementRange":{"low":{"code":"a",` + ucumYears + `,"unit":"a","value":85}}`},
			bad:  []string{`"value":92`, "high"},
		},
		{
			name: "Condition.onsetRange young",
			in:   `{"resourceType":"Condition","id":"c",` + subjectP + `,"onsetRange":{"low":` + q("45", "a") + `,"high":` + q("50", "a") + `}}`,
			want: []string{`"high":{"code":"a",` + ucumYears + `,"unit":"a","value":50}`, `"value":45`},
		},
		{
			name: "FamilyMemberHistory ageRange, deceasedRange, condition.onsetRange",
			in: `{"resourceType":"FamilyMemberHistory","id":"f","status":"completed","patient":{"reference":"Patient/p"},"relationship":{"text":"father"},
				"ageRange":{"low":` + q("97", "a") + `},"deceasedRange":{"low":` + q("1200", "mo") + `},
				"condition":[{"code":{"text":"stroke"},"onsetRange":{"low":` + q("34000", "d") + `}}]}`,
			want: []string{`"ageRange":` + low90, `"deceasedRange":` + low90Years, `"onsetRange":` + low90Years},
			bad:  []string{`"value":97`, `"value":1200`, `"value":34000`},
		},
		{
			name: "Procedure.performedRange",
			in:   `{"resourceType":"Procedure","id":"x","status":"completed",` + subjectP + `,"performedRange":{"low":` + q("91", "a") + `}}`,
			want: []string{`"performedRange":` + low90},
			bad:  []string{`"value":91`},
		},
		{
			name: "Observation 30525-0",
			in:   obs("30525-0", `"valueQuantity":`+q("97", "a")),
			want: []string{`"valueQuantity":` + group},
			bad:  []string{`"value":97`},
		},
		{
			name: "Observation 21612-7 integer",
			in:   obs("21612-7", `"valueInteger":93`),
			want: []string{`"valueQuantity":` + groupYears},
			bad:  []string{`"value":93`, "valueInteger"},
		},
		{
			name: "Observation 29553-5 range",
			in:   obs("29553-5", `"valueRange":{"low":`+q("95", "a")+`,"high":`+q("99", "a")+`}`),
			want: []string{`"valueRange":` + low90},
			bad:  []string{`"value":95`, `"value":99`},
		},
		{
			name: "Observation component 30525-0",
			in: `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"demographics"},` + subjectP + `,
				"component":[{"code":{"coding":[{"system":"http://loinc.org","code":"30525-0"}]},"valueQuantity":` + q("101", "a") + `}]}`,
			want: []string{`"valueQuantity":` + group},
			bad:  []string{`"value":101`},
		},
		{
			name: "Observation age without unit",
			in:   obs("30525-0", `"valueQuantity":{"value":94}`),
			want: []string{`"valueQuantity":` + groupYears},
			bad:  []string{`"value":94`},
		},
		{
			name: "Observation not an age",
			in:   obs("8867-4", `"valueQuantity":`+q("97", "/min")),
			want: []string{`"value":97`},
		},
		{
			name: "Observation age under 90",
			in:   obs("30525-0", `"valueQuantity":`+q("89", "a")),
			want: []string{`"value":89`},
			bad:  []string{"comparator"},
		},
		{
			// An extension's Range is an age only when its unit is of time.
			name: "extension valueRange",
			in: `{"resourceType":"Patient","id":"p","extension":[{"url":"http://example.org/a","valueRange":{"low":` + q("95", "a") + `}},
				{"url":"http://example.org/b","valueRange":{"low":` + q("95", "mg") + `}}]}`,
			want: []string{`"valueRange":` + low90, `"value":95`},
		},
	}, testOpts(acds.OutputFHIRR4Deidentified))
}

// TestDeidentifyAgeUnits (C2): ages are converted to years from their unit
// before the 90-or-older rule, and comparators keep a true meaning.
func TestDeidentifyAgeUnits(t *testing.T) {
	age := func(v, cmp, code, unit string) string {
		c := ""
		if cmp != "" {
			c = `"comparator":"` + cmp + `",`
		}
		return `{"resourceType":"Condition","id":"c",` + subjectP + `,"onsetAge":{"value":` + v + `,` + c + `"unit":"` + unit + `",` + ucumYears + `,"code":"` + code + `"}}`
	}
	group := func(unit string) string {
		return `"onsetAge":{"code":"a","comparator":">=",` + ucumYears + `,"unit":"` + unit + `","value":90}`
	}
	runDateCases(t, []dateCase{
		{name: "120 d", in: age("120", "", "d", "d"), want: []string{`"onsetAge":{"code":"d",` + ucumYears + `,"unit":"d","value":120}`}, bad: []string{">="}},
		{name: "40000 d", in: age("40000", "", "d", "days"), want: []string{group("years")}, bad: []string{`"value":40000`}},
		{name: "1100 mo", in: age("1100", "", "mo", "months"), want: []string{group("years")}, bad: []string{`"value":1100`}},
		{name: "5000 wk", in: age("5000", "", "wk", "wk"), want: []string{group("years")}, bad: []string{`"value":5000`}},
		{name: "800000 h", in: age("800000", "", "h", "h"), want: []string{group("years")}, bad: []string{`"value":800000`}},
		{name: "50000000 min", in: age("50000000", "", "min", "min"), want: []string{group("years")}, bad: []string{`"value":50000000`}},
		{name: "300 min", in: age("300", "", "min", "min"), want: []string{`"value":300`}, bad: []string{">="}},
		{name: "95 years kept unit text", in: age("95", "", "a", "years"), want: []string{group("years")}, bad: []string{`"value":95`}},
		{name: "90 a", in: age("90", "", "a", "yr"), want: []string{group("yr")}},
		{name: "unit text not years", in: age("95", "", "a", "d"), want: []string{group("years")}},
		{name: "89.5 a", in: age("89.5", "", "a", "a"), want: []string{`"value":89.5`}, bad: []string{">="}},
		{name: "> 95 a", in: age("95", ">", "a", "a"), want: []string{group("a")}, bad: []string{`"value":95`}},
		{name: ">= 92 a", in: age("92", ">=", "a", "a"), want: []string{group("a")}, bad: []string{`"value":92`}},
		{name: "> 80 a", in: age("80", ">", "a", "a"), want: []string{`"comparator":">"`, `"value":80`}},
		// "< 95" (under 95) would split the 90-or-older category and cannot
		// become "< 90" (not true): removed.
		{name: "< 95 a", in: age("95", "<", "a", "a"), bad: []string{"onsetAge", `"value":95`}},
		{name: "<= 90 a", in: age("90", "<=", "a", "a"), bad: []string{"onsetAge"}},
		{name: "< 90 a", in: age("90", "<", "a", "a"), want: []string{`"comparator":"<"`, `"value":90`}},
		{name: "< 40 a", in: age("40", "<", "a", "a"), want: []string{`"comparator":"<"`, `"value":40`}},
		{name: "<= 30 d", in: age("30", "<=", "d", "d"), want: []string{`"comparator":"<="`, `"value":30`}},
	}, testOpts(acds.OutputFHIRR4Deidentified))
}

// TestDeidentifyDateTimeZones (V2): a dateTime with a time is reduced to
// its UTC year, so a Period's years keep their order (per-1).
func TestDeidentifyDateTimeZones(t *testing.T) {
	enc := `{"resourceType":"Encounter","id":"e","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},`
	runDateCases(t, []dateCase{
		{
			name: "period across new year",
			in:   enc + `"period":{"start":"2020-01-01T00:30:00+01:00","end":"2019-12-31T23:45:00Z"}}`,
			want: []string{`"period":{"end":"2019","start":"2019"}`},
			bad:  []string{`"2020"`},
		},
		{
			name: "west of UTC",
			in:   enc + `"period":{"start":"2019-12-31T20:00:00-05:00","end":"2020-01-01T02:00:00Z"}}`,
			want: []string{`"period":{"end":"2020","start":"2020"}`},
		},
		{
			name: "fractional seconds",
			in:   enc + `"period":{"start":"2020-01-01T00:30:00.123+01:00","end":"2020-03-01"}}`,
			want: []string{`"period":{"end":"2020","start":"2019"}`},
		},
		{
			name: "instant",
			in:   `{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},` + subjectP + `,"issued":"2021-01-01T00:10:00+02:00"}`,
			want: []string{`"issued":"2020-01-01T00:00:00Z"`},
		},
	}, testOpts(acds.OutputFHIRR4Deidentified))
}

// TestDeidentifyInstants (V3): instants, optional or not, are kept as
// January 1 of their year, so a nested document Bundle keeps its required
// timestamp (bdl-10).
func TestDeidentifyInstants(t *testing.T) {
	doc := `{"resourceType":"Bundle","id":"b","type":"collection","entry":[{"fullUrl":"urn:uuid:11111111-1111-1111-1111-111111111111",
	"resource":{"resourceType":"Bundle","id":"d","type":"document","timestamp":"2020-05-06T07:08:09Z",
	"identifier":{"system":"urn:ietf:rfc:3986","value":"urn:uuid:22222222-2222-2222-2222-222222222222"},
	"entry":[{"fullUrl":"urn:uuid:33333333-3333-3333-3333-333333333333","resource":{"resourceType":"Composition","id":"c","status":"final","type":{"text":"x"},"date":"2020-05-06","title":"t","author":[{"display":"a"}]}}]}}]}`
	runDateCases(t, []dateCase{
		{name: "document timestamp", in: doc, want: []string{`"timestamp":"2020-01-01T00:00:00Z"`}, bad: []string{"05-06", "07:08"}},
		{
			name: "meta.lastUpdated",
			in:   `{"resourceType":"Patient","id":"p","meta":{"lastUpdated":"1930-05-06T07:08:09.5Z"}}`,
			want: []string{`"lastUpdated":"1936-01-01T00:00:00Z"`},
			bad:  []string{"1930-"},
		},
	}, testOpts(acds.OutputFHIRR4Deidentified))
}

// TestDateYear covers dateYear's parsing edges directly.
func TestDateYear(t *testing.T) {
	d := &safeHarbor{now: testNow}
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"2020", 2020, true},
		{"2020-05", 2020, true},
		{"2020-05-06", 2020, true},
		{"2020-01-01T00:30:00+01:00", 2019, true},
		{"2020-12-31T23:30:00-01:00", 2021, true},
		{"2020-01-01T00:00:00Z", 2020, true},
		{"9999-12-31T23:30:00-01:00", 9999, true}, // UTC year 10000: the written year
		{"1800-01-01", 1936, true},
		{"20", 0, false},
		{"abcd-01-01", 0, false},
		{"", 0, false},
	} {
		y, ok := d.dateYear(c.in)
		if y != c.want || ok != c.ok {
			t.Errorf("dateYear(%q) = %d, %v; want %d, %v", c.in, y, ok, c.want, c.ok)
		}
	}
	if got := fourDigits(7); got != "0007" {
		t.Errorf("fourDigits(7) = %q", got)
	}
}

// TestDeidentifyKeepsInvariants: reducing dates of mixed precision (a
// date, and a dateTime whose UTC year is the year before its own) or with
// a leap second, and removing a quantity's system, leave valid R4
// (per-1, qty-3); processOK validates the output.
func TestDeidentifyKeepsInvariants(t *testing.T) {
	for _, in := range []string{
		`{"resourceType":"Encounter","id":"e1","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"period":{"start":"2000-12-31","end":"2001-01-01T01:00:00+05:00"}}`,
		`{"resourceType":"Encounter","id":"e1","status":"finished","class":{"system":"http://terminology.hl7.org/CodeSystem/v3-ActCode","code":"AMB"},"period":{"start":"2016-12-31T23:30:00-05:00","end":"2016-12-31T23:59:60-05:00"}}`,
		`{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},"valueQuantity":{"value":5,"unit":"mg","system":"http://10.1.2.3/units","code":"mg"}}`,
	} {
		processOK(t, in, acds.OutputFHIRR4Deidentified)
	}
}

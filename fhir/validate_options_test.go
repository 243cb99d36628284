package fhir

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/acds-project/acds/internal/testrig/corpus"
)

// issuesAt returns the issues of o at where of severity sev.
func issuesAt(o *OperationOutcome, sev Severity, where string) []Issue {
	var out []Issue
	for _, is := range o.Issues {
		if is.Severity == sev && len(is.Expression) == 1 && is.Expression[0] == where {
			out = append(out, is)
		}
	}
	return out
}

// TestSecurityChecks: HTML-looking text in a string is a warning by
// default and an error, at the string, with SecurityChecks; text that is
// not markup stays fine either way.
func TestSecurityChecks(t *testing.T) {
	in := []byte(`{"resourceType":"Patient","name":[{"text":"Standard <script>somescript</script>"}]}`)
	const where = "Patient.name[0].text"

	o := Validate(in)
	if o.HasErrors() || len(issuesAt(o, SeverityWarning, where)) != 1 {
		t.Errorf("default: want one warning at %s and no error: %v", where, o.Issues)
	}

	o = ValidateWith(in, ValidateOptions{SecurityChecks: true})
	errs := issuesAt(o, SeverityError, where)
	if o.ErrorCount() != 1 || len(errs) != 1 || errs[0].Code != "security" ||
		!strings.Contains(errs[0].Diagnostics, "not allowed for security reasons") {
		t.Errorf("security checks: want one security error at %s: %v", where, o.Issues)
	}
	if len(issuesAt(o, SeverityWarning, where)) != 0 {
		t.Errorf("security checks: the HTML is also a warning: %v", o.Issues)
	}

	for _, s := range []string{"pain <a few days, x<y", "Peter"} {
		in := []byte(`{"resourceType":"Patient","name":[{"text":"` + s + `"}]}`)
		if o := ValidateWith(in, ValidateOptions{SecurityChecks: true}); o.HasErrors() {
			t.Errorf("security checks: %q refused: %v", s, o.Issues)
		}
	}
}

// TestContainedIgnore: with ContainedIgnore nothing is reported about a
// contained resource's content, id or containment rules, while the same
// input under the defaults has those errors; the container is still
// validated, and its references to the ignored resources resolve.
func TestContainedIgnore(t *testing.T) {
	long := strings.Repeat("a", 65)
	// The Practitioner has a 65-character id, a bad birthDate, a code
	// outside a required value set, meta.versionId (dom-4) and a
	// contained resource of its own (dom-2); the Observation lacks its
	// required status and code and nothing refers to it (dom-3).
	in := []byte(`{"resourceType":"Condition","subject":{"reference":"Patient/p"},"asserter":{"reference":"#` + long + `"},
		"contained":[
			{"resourceType":"Practitioner","id":"` + long + `","meta":{"versionId":"1"},"gender":"woman","birthDate":"1970-02-30",
				"contained":[{"resourceType":"Basic","id":"b","code":{"text":"x"}}]},
			{"resourceType":"Observation","id":"o","valueString":"<b>x</b>"}]}`)
	const c0, c1 = "Condition.contained[0]", "Condition.contained[1]"

	def := Validate(in)
	for _, want := range []struct{ where, contains string }{
		{c0 + ".id", "too long"},
		{c0 + ".gender", "value set"},
		{c0 + ".birthDate", "date"},
		{c0, "dom-2"},
		{c0, "dom-4"},
		{c1, "Observation.status"},
		{c1, "dom-3"},
	} {
		found := false
		for _, is := range issuesAt(def, SeverityError, want.where) {
			found = found || strings.Contains(is.Diagnostics, want.contains)
		}
		if !found {
			t.Errorf("default: no error at %s containing %q: %v", want.where, want.contains, def.Issues)
		}
	}

	o := ValidateWith(in, ValidateOptions{Contained: ContainedIgnore})
	if o.HasErrors() {
		t.Errorf("contained ignore: errors: %v", o.Issues)
	}
	for _, is := range o.Issues {
		for _, x := range is.Expression {
			if strings.HasPrefix(x, "Condition.contained") {
				t.Errorf("contained ignore: an issue in a contained resource: %v", is)
			}
		}
		if strings.Contains(is.Diagnostics, "dom-3") {
			t.Errorf("contained ignore: dom-3 reported: %v", is)
		}
	}

	// The container is still validated, including its local references:
	// "#x" to an ignored contained resource resolves, "#nope" does not.
	bad := []byte(`{"resourceType":"Condition","subject":{"reference":"#x"},"asserter":{"reference":"#nope"},"recordedDate":"someday",
		"contained":[{"resourceType":"Patient","id":"x","birthDate":"never"}]}`)
	o = ValidateWith(bad, ValidateOptions{Contained: ContainedIgnore})
	if len(issuesAt(o, SeverityError, "Condition.subject.reference")) != 0 {
		t.Errorf("contained ignore: #x does not resolve: %v", o.Issues)
	}
	if len(issuesAt(o, SeverityError, "Condition.asserter.reference")) != 1 || len(issuesAt(o, SeverityError, "Condition.recordedDate")) != 1 || o.ErrorCount() != 2 {
		t.Errorf("contained ignore: want the errors of the container (#nope, recordedDate) and no other: %v", o.Issues)
	}

	// In a Bundle, the walk goes on after an ignored contained resource:
	// a later entry is validated at its own location.
	b := []byte(`{"resourceType":"Bundle","type":"collection","entry":[
		{"fullUrl":"http://x.org/Condition/c","resource":{"resourceType":"Condition","id":"c","subject":{"reference":"#p"},"contained":[{"resourceType":"Patient","id":"p","birthDate":"never"}]}},
		{"fullUrl":"http://x.org/Patient/q","resource":{"resourceType":"Patient","id":"q","birthDate":"1970-02-30"}}]}`)
	o = ValidateWith(b, ValidateOptions{Contained: ContainedIgnore})
	if o.ErrorCount() != 1 || len(issuesAt(o, SeverityError, "Bundle.entry[1].resource.birthDate")) != 1 {
		t.Errorf("contained ignore in a Bundle: want only the second entry's birthDate: %v", o.Issues)
	}
	if o := Validate(b); o.ErrorCount() != 2 {
		t.Errorf("default in a Bundle: want both birthDates: %v", o.Issues)
	}

	// Decoding findings inside a contained resource are still reported.
	o = ValidateWith([]byte(`{"resourceType":"Condition","subject":{"reference":"#x"},"contained":[{"resourceType":"Patient","id":"x","nickname":"y"}]}`),
		ValidateOptions{Contained: ContainedIgnore})
	if len(issuesAt(o, SeverityError, "Condition.contained[0].nickname")) != 1 {
		t.Errorf("contained ignore: the unknown property is not reported: %v", o.Issues)
	}
}

// TestValidateOptionsZeroValue: ValidateWith with the zero options is
// Validate, finding for finding, on inline inputs and the reference
// validator's cases.
func TestValidateOptionsZeroValue(t *testing.T) {
	inputs := [][]byte{
		[]byte(`{"resourceType":"Patient","name":[{"text":"<script>x</script>"}]}`),
		[]byte(`{"resourceType":"Condition","subject":{"reference":"#x"},"contained":[{"resourceType":"Patient","id":"x","birthDate":"never"},{"resourceType":"Patient","id":"y"}]}`),
	}
	for _, f := range corpus.JSON(t, corpus.ValidatorCases) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, data)
	}
	for _, in := range inputs {
		if a, b := Validate(in), ValidateWith(in, ValidateOptions{}); !reflect.DeepEqual(a, b) {
			t.Errorf("%.80s: Validate and ValidateWith(zero) differ:\n%v\n%v", in, a.Issues, b.Issues)
		}
	}
}

func TestContainedModeText(t *testing.T) {
	for _, m := range []ContainedMode{ContainedCheck, ContainedIgnore} {
		b, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back ContainedMode
		if err := back.UnmarshalText(b); err != nil || back != m {
			t.Errorf("%v: round trip gives %v, %v", m, back, err)
		}
	}
	if ContainedCheck.String() != "check" || ContainedIgnore.String() != "ignore" {
		t.Errorf("text forms: %v, %v", ContainedCheck, ContainedIgnore)
	}
	var m ContainedMode
	if err := m.UnmarshalText([]byte("IGNORE")); err == nil || !strings.Contains(err.Error(), "check or ignore") {
		t.Errorf("a bad mode: %v", err)
	}
	if _, err := ContainedMode(9).MarshalText(); err == nil {
		t.Error("an unknown mode marshals")
	}
}

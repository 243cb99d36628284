package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFHIRPathCLI: acds fhir path prints the result collection as a JSON
// array (DESIGN §8) and exits 0, 1 on an evaluation error, 2 on usage,
// syntax, other static (unknown function or environment variable) or input
// errors.
func TestFHIRPathCLI(t *testing.T) {
	obs := writeFHIRFile(t, "obs.json", `{"resourceType":"Observation","id":"o1","status":"final",
		"code":{"coding":[{"system":"http://loinc.org","code":"4548-4"}]},
		"effectiveDateTime":"2024-03-01","valueQuantity":{"value":6.1,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}}`)
	bundle := writeFHIRFile(t, "bundle.json", `{"resourceType":"Bundle","type":"collection","entry":[
		{"fullUrl":"urn:uuid:5a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":`+goodPatient+`},
		{"fullUrl":"urn:uuid:6a8e7f1c-4a4b-4d9e-9c1e-1b2a3c4d5e6f","resource":{"resourceType":"Patient","id":"p2","name":[{"given":["Ann","Lee"]}]}}]}`)
	cases := []struct {
		args  []string
		stdin string
		code  int
		out   string // the JSON printed, compared as JSON
		err   string // a part of stderr
	}{
		{args: []string{"value.ofType(Quantity)", obs}, out: `[{"value":6.1,"unit":"%","system":"http://unitsofmeasure.org","code":"%"}]`},
		{args: []string{"effective.ofType(dateTime)", obs}, out: `["2024-03-01"]`},
		{args: []string{"value.ofType(Quantity).value > 6", obs}, out: `[true]`},
		{args: []string{"Bundle.entry.resource.ofType(Patient).name.given", bundle}, out: `["Jane","Ann","Lee"]`},
		{args: []string{"entry.count()", "-"}, stdin: `{"resourceType":"Bundle","type":"collection"}`, out: `[0]`},
		{args: []string{"Observation.subject", obs}, out: `[]`},
		{args: []string{"Bundle.entry.single()", bundle}, code: 1, err: "single()"},
		{args: []string{"Bundle.entry.(", bundle}, code: 2, err: "1:14"},
		// Static errors, whatever the input: 2, before FILE is read.
		{args: []string{"nosuchfn()", obs}, code: 2, err: "unknown function nosuchfn()"},
		{args: []string{"%nosuch", obs}, code: 2, err: "unknown environment variable %nosuch"},
		{args: []string{"iif(true, 1, %nosuch)", "/nonexistent/file.json"}, code: 2, err: "offset 13: unknown environment variable %nosuch"},
		{args: []string{"%resource.id | %ucum", obs}, out: `["o1","http://unitsofmeasure.org"]`},
		{args: []string{"Bundle.entry", "/nonexistent/file.json"}, code: 2, err: "/nonexistent/file.json"},
		{args: []string{"Bundle.entry", "-"}, stdin: `{"resourceType":"Nope"}`, code: 2, err: "not FHIR R4 JSON"},
		{args: []string{"Bundle.entry"}, code: 2, err: "want EXPRESSION and FILE"},
	}
	for _, c := range cases {
		code, out, errOut := runFHIRTest(t, c.stdin, append([]string{"path"}, c.args...)...)
		if code != c.code {
			t.Errorf("%q: exit %d, want %d (stderr %q)", c.args, code, c.code, errOut)
			continue
		}
		if c.err != "" && !strings.Contains(errOut, c.err) {
			t.Errorf("%q: stderr %q does not say %q", c.args, errOut, c.err)
		}
		if c.code != 0 {
			continue
		}
		var got, want any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Errorf("%q: output %q is not JSON: %v", c.args, out, err)
			continue
		}
		_ = json.Unmarshal([]byte(c.out), &want)
		if g, w := mustMarshal(got), mustMarshal(want); g != w {
			t.Errorf("%q: output %s, want %s", c.args, g, w)
		}
	}
	if code, out, errOut := runFHIRTest(t, "", "path", "-h"); code != 0 || !strings.Contains(out+errOut, "acds fhir path EXPRESSION FILE") {
		t.Errorf("path -h: exit %d, %q %q", code, out, errOut)
	}
}

func mustMarshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

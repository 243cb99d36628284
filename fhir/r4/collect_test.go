package r4_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// classes names the error classes in test expectations.
var classes = []struct {
	name string
	err  error
}{
	{"syntax", r4.ErrSyntax},
	{"unknown", r4.ErrUnknownProperty},
	{"invalid", r4.ErrInvalidValue},
	{"duplicate", r4.ErrDuplicateProperty},
	{"noType", r4.ErrMissingResourceType},
	{"notR4", r4.ErrNotR4},
	{"limit", r4.ErrLimit},
}

// describe renders an error as "Path class", with "+NotR4" when the NotR4
// flag is set, checking that the error matches exactly its class with
// errors.Is (and ErrNotR4 too when NotR4 is set).
func describe(t *testing.T, e *r4.DecodeError) string {
	t.Helper()
	name := ""
	for _, c := range classes {
		if e.Err == c.err {
			name = c.name
		}
		is := errors.Is(e, c.err)
		want := e.Err == c.err || (c.err == r4.ErrNotR4 && e.NotR4)
		if is != want {
			t.Errorf("%v: errors.Is(%v) = %v", e, c.err, is)
		}
	}
	if name == "" {
		t.Errorf("%v: class %v is not a sentinel", e, e.Err)
	}
	if e.Reason == "" {
		t.Errorf("%v: no reason", e)
	}
	s := e.Path + " " + name
	if e.NotR4 {
		s += "+NotR4"
	}
	return s
}

type collectCase struct {
	name string
	opts r4.Options
	doc  string
	// errs lists the expected errors as "Path class".
	errs []string
	// out is the expected Marshal of the decoded resource ("" when the
	// resource must be nil).
	out string
}

var collectCases = []collectCase{
	{
		name: "clean",
		doc:  `{"resourceType":"Patient","id":"p","name":[{"family":"a"}]}`,
		out:  `{"resourceType":"Patient","id":"p","name":[{"family":"a"}]}`,
	},
	{
		name: "problems at several depths, siblings survive",
		doc: `{"resourceType":"Patient","name":[{"family":"a"},{"foo":1,"family":"b","given":["x",2,"y"]}],` +
			`"gender":"male","bar":[],"birthDate":5,"active":true}`,
		errs: []string{
			"Patient.name[1].foo unknown",
			"Patient.name[1].given[1] invalid",
			"Patient.bar unknown",
			"Patient.birthDate invalid",
		},
		out: `{"resourceType":"Patient","active":true,"name":[{"family":"a"},{"family":"b","given":["x","y"]}],"gender":"male"}`,
	},
	{
		name: "numbers and booleans",
		doc: `{"resourceType":"Observation","status":"final","code":{"text":"c"},` +
			`"valueQuantity":{"value":"1.5","unit":"mg"},"component":[{"code":{"text":"a"},"valueInteger":1.5},` +
			`{"code":{"text":"b"},"valueInteger":-0},{"code":{"text":"c"},"valueInteger":12345678901234567890},` +
			`{"code":{"text":"d"},"valueBoolean":"true"},{"code":{"text":"e"},"valueInteger":7}]}`,
		errs: []string{
			"Observation.valueQuantity.value invalid",
			"Observation.component[0].valueInteger invalid",
			"Observation.component[1].valueInteger invalid",
			"Observation.component[2].valueInteger invalid",
			"Observation.component[3].valueBoolean invalid",
		},
		out: `{"resourceType":"Observation","status":"final","code":{"text":"c"},"valueQuantity":{"unit":"mg"},` +
			`"component":[{"code":{"text":"a"}},{"code":{"text":"b"}},{"code":{"text":"c"}},{"code":{"text":"d"}},{"code":{"text":"e"},"valueInteger":7}]}`,
	},
	{
		name: "invalid UTF-8 and surrogates",
		doc: "{\"resourceType\":\"Patient\",\"name\":[{\"family\":\"\xff\",\"given\":[\"ok\",\"\\ud800\"]}]," +
			"\"gender\":\"male\",\"foo\":\"\xfe\"}",
		errs: []string{
			"Patient.name[0].family invalid",
			"Patient.name[0].given[1] invalid",
			"Patient.foo unknown",
		},
		out: `{"resourceType":"Patient","name":[{"given":["ok"]}],"gender":"male"}`,
	},
	{
		name: "duplicates keep the first",
		doc: `{"resourceType":"Patient","gender":"male","name":[{"family":"a","family":"b"}],"gender":"female",` +
			`"name":[{"family":"c"}],"_gender":{"id":"g"},"_gender":{"id":"h"},"id":"x","id":"y"}`,
		errs: []string{
			"Patient.name[0].family duplicate",
			"Patient.gender duplicate",
			"Patient.name duplicate",
			"Patient.gender duplicate",
			"Patient.id duplicate",
		},
		out: `{"resourceType":"Patient","id":"x","name":[{"family":"a"}],"gender":"male","_gender":{"id":"g"}}`,
	},
	{
		name: "empty objects and arrays, misplaced nulls",
		doc: `{"resourceType":"Patient","maritalStatus":{},"name":[],"telecom":[{},{"value":"1"},null,"x"],` +
			`"gender":null,"address":[{"line":["a",null]}],"photo":[{"data":"QQ=="}]}`,
		errs: []string{
			"Patient.maritalStatus invalid",
			"Patient.name invalid",
			"Patient.telecom[0] invalid",
			"Patient.telecom[2] invalid",
			"Patient.telecom[3] invalid",
			"Patient.gender invalid",
		},
		// A null item in a primitive array is allowed (the "_" array
		// may carry it); the encoder writes it back as it is.
		out: `{"resourceType":"Patient","telecom":[{"value":"1"}],"address":[{"line":["a"]}],"photo":[{"data":"QQ=="}]}`,
	},
	{
		name: "primitive companions",
		doc: `{"resourceType":"Patient","name":[{"given":["a","b"],"_given":[null],"family":"f"},` +
			`{"given":["c"],"_given":[{"id":"i","foo":1},{"id":"j"}]},{"_family":{"id":"k","extension":[]}}],` +
			`"_foo":{"id":"x"},"_name":{"id":"y"},"_birthDate":"1970","birthDate":"1970"}`,
		errs: []string{
			"Patient.name[0].given invalid",
			"Patient.name[1].given[0].foo unknown",
			"Patient.name[1].given invalid",
			"Patient.name[2].family.extension invalid",
			"Patient.foo unknown",
			"Patient.name unknown",
			"Patient.birthDate invalid",
		},
		out: `{"resourceType":"Patient","name":[{"family":"f","given":["a","b"]},{"given":["c"],"_given":[{"id":"i"}]},{"_family":{"id":"k"}}],"birthDate":"1970"}`,
	},
	{
		name: "nested resources",
		doc: `{"resourceType":"Bundle","type":"collection","entry":[` +
			`{"fullUrl":"a","resource":{"resourceType":"MedicationOrder","id":"1"}},` +
			`{"fullUrl":"b","resource":{"resourceType":"Patient","name":[{"x":1}],"contained":[{"id":"c1"},` +
			`{"resourceType":"Foo"},{"resourceType":"Organization","name":"o","bad":true},{"resourceType":"Organization","id":"o2"}]}},` +
			`{"fullUrl":"c","resource":{"id":"x"}},` +
			`{"fullUrl":"d","resource":{"id":"p","resourceType":"Parameters","parameter":[{"name":"r","resource":{"resourceType":""}},` +
			`{"name":"s","resource":{"resourceType":"Basic","code":{"text":"t"},"extra":1}}]}},` +
			`{"fullUrl":"e","resource":"Patient"},` +
			`{"fullUrl":"f","response":{"status":"200","outcome":{"resourceType":7}}},` +
			`{"fullUrl":"g","resource":{"resourceType":"Basic","code":{"text":"ok"}}}]}`,
		errs: []string{
			"Bundle.entry[0].resource notR4",
			"Bundle.entry[1].resource.name[0].x unknown",
			"Bundle.entry[1].resource.contained[0] noType",
			"Bundle.entry[1].resource.contained[1] notR4",
			"Bundle.entry[1].resource.contained[2].bad unknown",
			"Bundle.entry[2].resource noType",
			"Bundle.entry[3].resource.parameter[0].resource invalid",
			"Bundle.entry[3].resource.parameter[1].resource.extra unknown",
			"Bundle.entry[4].resource invalid",
			"Bundle.entry[5].response.outcome.resourceType invalid",
		},
		out: `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"a"},` +
			`{"fullUrl":"b","resource":{"resourceType":"Patient","contained":[{"resourceType":"Organization","name":"o"},{"resourceType":"Organization","id":"o2"}]}},` +
			`{"fullUrl":"c"},{"fullUrl":"d","resource":{"resourceType":"Parameters","id":"p","parameter":[{"name":"r"},` +
			`{"name":"s","resource":{"resourceType":"Basic","code":{"text":"t"}}}]}},{"fullUrl":"e"},` +
			`{"fullUrl":"f","response":{"status":"200"}},{"fullUrl":"g","resource":{"resourceType":"Basic","code":{"text":"ok"}}}]}`,
	},
	{
		name: "STU3 and DSTU2 shapes",
		doc: `{"resourceType":"Bundle","type":"collection","entry":[` +
			`{"resource":{"resourceType":"Condition","clinicalStatus":"active","verificationStatus":"confirmed","subject":{"reference":"Patient/1"},"context":{"reference":"Encounter/1"}}},` +
			`{"resource":{"resourceType":"Encounter","status":"finished","class":"inpatient","patient":{"reference":"Patient/1"}}},` +
			`{"resource":{"resourceType":"MedicationOrder","patient":{"reference":"Patient/1"}}},` +
			`{"resource":{"resourceType":"Patient","careProvider":[{"reference":"Practitioner/1"}],"name":[{"family":"f","fhir_comments":["c"]}]}}]}`,
		errs: []string{
			"Bundle.entry[0].resource.clinicalStatus invalid+NotR4",
			"Bundle.entry[0].resource.verificationStatus invalid+NotR4",
			"Bundle.entry[0].resource.context unknown+NotR4",
			"Bundle.entry[1].resource.class invalid+NotR4",
			"Bundle.entry[1].resource.patient unknown+NotR4",
			"Bundle.entry[2].resource notR4",
			"Bundle.entry[3].resource.careProvider unknown+NotR4",
			"Bundle.entry[3].resource.name[0].fhir_comments unknown+NotR4",
		},
		out: `{"resourceType":"Bundle","type":"collection","entry":[` +
			`{"resource":{"resourceType":"Condition","subject":{"reference":"Patient/1"}}},` +
			`{"resource":{"resourceType":"Encounter","status":"finished"}},` +
			`{"resource":{"resourceType":"Patient","name":[{"family":"f"}]}}]}`,
	},
	{
		name: "resourceType not first",
		doc:  "{\"name\":[{\"family\":\"\xff\",\"foo\":1}],\"resourceType\":\"Patient\",\"resourceType\":\"Person\",\"gender\":\"male\"}",
		errs: []string{
			"Patient.name[0].family invalid",
			"Patient.name[0].foo unknown",
			"Patient.resourceType invalid",
		},
		out: `{"resourceType":"Patient","gender":"male"}`,
	},
	{
		name: "member names that are not UTF-8",
		doc: "{\"resourceType\":\"Patient\",\"name\":[{\"family\":\"a\",\"\xff\":1,\"given\":[\"g\"]}],\"\xfe\":{\"a\":[1]},\"gender\":\"male\"," +
			"\"contained\":[{\"r\xffsourceType\":\"Basic\"},{\"resourceType\":\"Basic\",\"\xff\":1,\"code\":{\"text\":\"t\"}}]}",
		errs: []string{
			"Patient.name[0] invalid",
			"Patient invalid",
			"Patient.contained[0] invalid",
			"Patient.contained[1] invalid",
		},
		out: `{"resourceType":"Patient","contained":[{"resourceType":"Basic","code":{"text":"t"}}],"name":[{"family":"a","given":["g"]}],"gender":"male"}`,
	},
	{
		name: "malformed JSON after recoverable errors",
		doc:  `{"resourceType":"Patient","foo":1,"name":[{"family":"a","x":2},{"family":"b"`,
		errs: []string{"Patient.foo unknown", "Patient.name[0].x unknown", "Patient.name[1] syntax"},
	},
	{
		name: "malformed JSON inside a skipped value",
		doc:  `{"resourceType":"Patient","foo":[1,},"gender":"male"}`,
		errs: []string{"Patient.foo unknown", "Patient.foo syntax"},
	},
	{
		name: "trailing data",
		doc:  `{"resourceType":"Patient","foo":1} {}`,
		errs: []string{"Patient.foo unknown", " syntax"},
	},
	{name: "root not an object", doc: `["Patient"]`, errs: []string{" invalid"}},
	{name: "root not an object, then malformed", doc: `["Patient"] x`, errs: []string{" invalid", " syntax"}},
	{name: "root without resourceType, then malformed", doc: `{"id":"x"} 1`, errs: []string{" noType", " syntax"}},
	{
		name: "member name not UTF-8 and no colon",
		doc:  "{\"resourceType\":\"Patient\",\"foo\":1,\"\xff\"}",
		errs: []string{"Patient.foo unknown", "Patient invalid", " syntax"},
	},
	{name: "root empty object", doc: `{}`, errs: []string{" invalid"}},
	{name: "root without resourceType", doc: `{"id":"x","foo":1}`, errs: []string{" noType"}},
	{name: "root DSTU2 resourceType", doc: `{"resourceType":"MedicationOrder","id":"x"}`, errs: []string{" notR4"}},
	{name: "root resourceType not a string", doc: `{"resourceType":1}`, errs: []string{"resourceType invalid"}},
	{
		name: "depth limit",
		opts: r4.Options{MaxDepth: 4},
		doc:  `{"resourceType":"Patient","foo":1,"name":[{"given":["a"],"extension":[{"url":"u"}]}]}`,
		errs: []string{"Patient.foo unknown", "Patient.name[0].extension[0] limit"},
	},
	{
		name: "size limit",
		opts: r4.Options{MaxBytes: 10},
		doc:  `{"resourceType":"Patient"}`,
		errs: []string{" limit"},
	},
	{
		name: "model limit",
		opts: r4.Options{MaxModelBytes: 2000},
		doc:  `{"resourceType":"Patient","foo":1,"name":[` + strings.Repeat(`{"family":"a"},`, 30) + `{"family":"b"}]}`,
		errs: []string{"Patient.foo unknown", "Patient.name limit"},
	},
	{
		name: "MaxErrors",
		opts: r4.Options{MaxErrors: 3},
		doc:  `{"resourceType":"Patient","a":1,"name":[{"b":2,"c":3}],"d":4,"e":5}`,
		errs: []string{"Patient.a unknown", "Patient.name[0].b unknown", "Patient.name[0].c unknown", "Patient.d limit"},
	},
}

// TestDecodeCollects checks the errors Decode records for documents with
// problems at various depths, and what it keeps of them.
func TestDecodeCollects(t *testing.T) {
	for _, c := range collectCases {
		t.Run(c.name, func(t *testing.T) {
			r, errs := c.opts.Decode([]byte(c.doc))
			var got []string
			for _, e := range errs {
				got = append(got, describe(t, e))
			}
			if strings.Join(got, "\n") != strings.Join(c.errs, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.errs, "\n"))
				for _, e := range errs {
					t.Log(e)
				}
			}
			for i := 1; i < len(errs); i++ {
				if errs[i].Offset < errs[i-1].Offset {
					t.Errorf("errors not in document order: %v before %v", errs[i-1], errs[i])
				}
			}
			fatal := len(errs) > 0 && (errors.Is(errs[len(errs)-1], r4.ErrSyntax) || errors.Is(errs[len(errs)-1], r4.ErrLimit))
			if fatal && r != nil {
				t.Errorf("fatal error %v, but a resource was returned", errs[len(errs)-1])
			}
			if c.out == "" {
				if r != nil {
					t.Errorf("got a %s, want none", r.ResourceType())
				}
			} else {
				if r == nil {
					t.Fatal("no resource")
				}
				out, err := r4.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				if string(out) != c.out {
					t.Errorf("decoded:\n%s\nwant:\n%s", out, c.out)
				}
				checkWalk(t, r)
			}
			checkFirstError(t, []byte(c.doc), c.opts)
		})
	}
}

// checkWalk walks r to the end: a partly decoded model must be safe to use.
func checkWalk(t *testing.T, r r4.Resource) {
	t.Helper()
	if err := r4.Walk(r, func(*r4.Path, any) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// checkFirstError compares Decode with Unmarshal on one input: Decode
// records no error exactly when Unmarshal succeeds, and then both decode the
// same resource; otherwise Decode's first error is Unmarshal's (same path,
// offset, class, reason and NotR4). It returns Decode's errors.
func checkFirstError(t *testing.T, data []byte, opts r4.Options) []*r4.DecodeError {
	t.Helper()
	r, errs := opts.Decode(data)
	for i := 1; i < len(errs); i++ {
		if errs[i].Offset < errs[i-1].Offset {
			t.Fatalf("errors not in document order: %v before %v", errs[i-1], errs[i])
		}
	}
	u, err := opts.Unmarshal(data)
	if err != nil {
		var ue *r4.DecodeError
		if !errors.As(err, &ue) {
			t.Fatalf("Unmarshal error %v is not a *DecodeError", err)
		}
		if len(errs) == 0 {
			t.Fatalf("Unmarshal fails (%v), Decode records nothing", err)
		}
		if e := errs[0]; e.Path != ue.Path || e.Err != ue.Err || e.Offset != ue.Offset || e.Reason != ue.Reason || e.NotR4 != ue.NotR4 {
			t.Fatalf("Decode's first error %v (%v), Unmarshal's %v (%v)", e, e.Err, ue, ue.Err)
		}
		if r != nil {
			// What Decode keeps is well-formed R4 JSON again.
			out, err := r4.Marshal(r)
			if err != nil {
				t.Fatalf("partly decoded resource does not encode: %v", err)
			}
			if _, err := r4.Unmarshal(out); err != nil {
				t.Fatalf("partly decoded resource encodes to %s, which does not decode: %v", out, err)
			}
			checkWalk(t, r)
		}
		return errs
	}
	if len(errs) > 0 {
		t.Fatalf("Unmarshal succeeds, Decode records %v", errs[0])
	}
	a, err1 := r4.Marshal(u)
	b, err2 := r4.Marshal(r)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Fatalf("Decode and Unmarshal differ (%v, %v)", err1, err2)
	}
	return nil
}

// TestDecodeMatchesUnmarshalOfficial runs Decode and Unmarshal on every
// official example (definition bundles over 4 MB only with -r4.all).
func TestDecodeMatchesUnmarshalOfficial(t *testing.T) {
	files := jsonFiles(t, filepath.Join(repoRoot(t), ".fhir-defs", "package"))
	compareFiles(t, files)
}

// TestDecodeMatchesUnmarshalShared runs Decode and Unmarshal on the corpus's
// Synthea and Inferno bundles and the reference validator's cases (many of
// which Unmarshal rejects).
func TestDecodeMatchesUnmarshalShared(t *testing.T) {
	for _, dir := range []string{corpus.Synthea, corpus.Inferno, corpus.ValidatorCases} {
		t.Run(dir, func(t *testing.T) {
			compareFiles(t, corpus.JSON(t, dir))
		})
	}
}

func compareFiles(t *testing.T, files []string) {
	t.Helper()
	n, failed, big := 0, 0, 0
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > 4<<20 && !*allExamples {
			big++
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			if len(checkFirstError(t, data, r4.Options{})) > 0 {
				failed++
			}
		})
		n++
	}
	t.Logf("%d files, %d with decode errors, %d over 4 MB left out", n, failed, big)
}

// fuzzSeeds returns the committed FuzzUnmarshal corpus.
func fuzzSeeds(t testing.TB) [][]byte {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fuzz corpus: %v", err)
	}
	var seeds [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s: not a one-value fuzz corpus file", f)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// mutations are edits that make a valid document invalid in one way each.
var mutations = []struct {
	name string
	edit func(doc []byte, at int) []byte
}{
	{"truncate", func(doc []byte, at int) []byte { return doc[:at] }},
	{"unknown member", func(doc []byte, at int) []byte { return splice(doc, at, `"zz":1,`) }},
	{"number", func(doc []byte, at int) []byte { return splice(doc, at, `1`) }},
	{"null", func(doc []byte, at int) []byte { return splice(doc, at, `null`) }},
	{"empty", func(doc []byte, at int) []byte { return splice(doc, at, `{}`) }},
	{"bad byte", func(doc []byte, at int) []byte { return splice(doc, at, "\xff") }},
	{"drop byte", func(doc []byte, at int) []byte { return append(append([]byte(nil), doc[:at]...), doc[at+1:]...) }},
	{"duplicate", func(doc []byte, at int) []byte {
		// Repeat the member that starts after the '{' or ',' at or
		// before at.
		i := bytes.LastIndexAny(doc[:at+1], "{,")
		j := bytes.IndexAny(doc[i+1:], ",}")
		if i < 0 || j < 0 {
			return doc
		}
		return splice(doc, i+1, string(doc[i+1:i+1+j])+",")
	}},
}

func splice(doc []byte, at int, s string) []byte {
	out := append([]byte(nil), doc[:at]...)
	out = append(out, s...)
	return append(out, doc[at:]...)
}

// TestDecodeFirstErrorMatchesUnmarshal cross-checks Decode against Unmarshal
// on the fuzz corpus and on many deterministic mutations of it: whenever
// Unmarshal fails, Decode's first error is the same, and Decode never
// panics or returns a resource that does not encode.
func TestDecodeFirstErrorMatchesUnmarshal(t *testing.T) {
	seeds := fuzzSeeds(t)
	for _, c := range collectCases {
		seeds = append(seeds, []byte(c.doc))
	}
	n, withErrs, multi := 0, 0, 0
	for si, seed := range seeds {
		step := max(len(seed)/97, 1)
		for _, m := range mutations {
			for at := 0; at < len(seed); at += step {
				doc := m.edit(seed, at)
				if len(doc) == 0 {
					continue
				}
				t.Run(fmt.Sprintf("seed%d/%s@%d", si, m.name, at), func(t *testing.T) {
					errs := checkFirstError(t, doc, r4.Options{})
					if len(errs) > 0 {
						withErrs++
					}
					if len(errs) > 1 {
						multi++
					}
				})
				n++
			}
		}
	}
	t.Logf("%d inputs: %d with errors, %d with more than one", n, withErrs, multi)
}

// FuzzDecode checks that Decode never panics, records no error exactly when
// Unmarshal succeeds (and then decodes the same resource), reports
// Unmarshal's error first when it fails, and that whatever it keeps encodes.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	for _, c := range collectCases {
		f.Add([]byte(c.doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		errs := checkFirstError(t, data, r4.Options{})
		for i, e := range errs {
			if e.Err == nil || e.Reason == "" {
				t.Fatalf("unclassified error %#v", e)
			}
			if (errors.Is(e, r4.ErrSyntax) || errors.Is(e, r4.ErrLimit)) && i != len(errs)-1 {
				t.Fatalf("fatal error %v is not the last", e)
			}
		}
		if len(errs) > r4.DefaultMaxErrors+1 {
			t.Fatalf("%d errors", len(errs))
		}
	})
}

// BenchmarkDecodeLargest compares Decode with Unmarshal on the largest
// Synthea bundle (MB/s of each).
func BenchmarkDecodeLargest(b *testing.B) {
	data := largestSynthea(b)
	b.Run("Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r4.Unmarshal(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, errs := (r4.Options{}).Decode(data); len(errs) > 0 {
				b.Fatal(errs[0])
			}
		}
	})
	// Every "status" member renamed: an unknown property in most resources.
	bad := bytes.ReplaceAll(data, []byte(`"status":`), []byte(`"statux":`))
	b.Run("DecodeWithErrors", func(b *testing.B) {
		b.SetBytes(int64(len(bad)))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			r, errs := (r4.Options{MaxErrors: 1 << 20}).Decode(bad)
			if r == nil || len(errs) == 0 {
				b.Fatal("want a resource and errors")
			}
			n = len(errs)
		}
		b.ReportMetric(float64(n), "errors")
	})
}

package fhir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// pipelines are the two implementations of Process the tests run: the
// node-based one and the typed one (r4.Unmarshal, normalize, encode).
// TEMPORARY: when Process becomes the typed pipeline, this table and
// processTyped go, and the tests run Process alone.
var pipelines = []struct {
	name string
	run  func([]byte, Options) (*Output, error)
}{
	{"node", Process},
	{"typed", processTyped},
}

// processTyped is Process on the typed model: validation (Check, for now),
// r4.Unmarshal, normalize, then the canonical encoding of the output.
// TEMPORARY stand-in for the integrated Process.
func processTyped(input []byte, opts Options) (*Output, error) {
	format := opts.Format
	if format == "" {
		format = FormatR4
	}
	if format != FormatR4 && format != FormatR4Deidentified {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedFormat, format)
	}
	if format == FormatR4Deidentified && len(opts.DeidentKey) < 32 {
		return nil, ErrKey
	}
	if err := Check(input, opts); err != nil {
		return nil, err
	}
	root, err := r4.Unmarshal(input)
	if err != nil {
		return nil, err
	}
	b, n, err := normalize(root, opts, format)
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, &InvalidError{Outcome: &OperationOutcome{Issues: []Issue{noResources()}}}
	}
	buf, err := r4.MarshalCanonical(b)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(buf)
	return &Output{Format: format, JSON: buf, Digest: "sha256:" + hex.EncodeToString(sum[:]), Outcome: &OperationOutcome{}, Resources: n}, nil
}

// encodeTyped is r4.Marshal plus, until the r4 encoders do it themselves,
// the removal of repeating-primitive items that have neither a value nor
// an id or extension (what de-identification leaves of a removed item).
func encodeTyped(r r4.Resource) ([]byte, error) {
	b, err := r4.Marshal(r)
	if err != nil || !bytes.Contains(b, []byte("null")) {
		return b, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	dropEmptyPrimitiveItems(v)
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// dropEmptyPrimitiveItems removes, from every primitive array and its "_x"
// companion, the items that are null in both.
func dropEmptyPrimitiveItems(v any) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			dropEmptyPrimitiveItems(x)
		}
	case map[string]any:
		for k, x := range v {
			dropEmptyPrimitiveItems(x)
			base := strings.TrimPrefix(k, "_")
			vals, _ := v[base].([]any)
			comps, _ := v["_"+base].([]any)
			if comps == nil && !primitiveArray(vals) {
				continue
			}
			n := max(len(vals), len(comps))
			var nv, nc []any
			for i := range n {
				var a, c any
				if i < len(vals) {
					a = vals[i]
				}
				if i < len(comps) {
					c = comps[i]
				}
				if a == nil && c == nil {
					continue
				}
				nv, nc = append(nv, a), append(nc, c)
			}
			setPrimitiveArray(v, base, nv)
			setPrimitiveArray(v, "_"+base, nc)
		}
	}
}

func primitiveArray(a []any) bool {
	for _, x := range a {
		if _, ok := x.(map[string]any); !ok {
			return true
		}
	}
	return false
}

func setPrimitiveArray(m map[string]any, k string, items []any) {
	for _, x := range items {
		if x != nil {
			m[k] = items
			return
		}
	}
	delete(m, k)
}

func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding output: %v", err)
	}
	return v
}

// jsonDiff lists up to limit paths where a and b differ; with companions,
// "_x" companions that only b has are not counted.
func jsonDiff(path string, a, b any, out *[]string, limit int, companions bool) {
	if len(*out) >= limit || reflect.DeepEqual(a, b) {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range av {
				keys[k] = true
			}
			for k := range bv {
				keys[k] = true
			}
			ks := make([]string, 0, len(keys))
			for k := range keys {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				jsonDiff(path+"."+k, av[k], bv[k], out, limit, companions)
			}
			return
		}
	case []any:
		if bv, ok := b.([]any); ok && len(av) == len(bv) {
			for i := range av {
				jsonDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out, limit, companions)
			}
			return
		}
	}
	if companions && a == nil && companionsOnly(path, b) {
		return // a known, documented difference: see TestTypedPipelineMatchesOld
	}
	sa, _ := json.Marshal(a)
	sb, _ := json.Marshal(b)
	*out = append(*out, fmt.Sprintf("%s:\n\t\tnode:  %.300s\n\t\ttyped: %.300s", path, sa, sb))
}

// companionsOnly reports whether v, at path, holds only "_x" companions of
// primitives (ids and extensions without values).
func companionsOnly(path string, v any) bool {
	if i := strings.LastIndexByte(path, '.'); i >= 0 && strings.HasPrefix(path[i+1:], "_") {
		return true
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k := range m {
		if !strings.HasPrefix(k, "_") {
			return false
		}
	}
	return true
}

// equivalenceInputs returns the inputs TestTypedPipelineMatchesOld runs:
// the shared bundles and validator cases, the golden inputs and, when
// fetched, the official R4 examples (clinical ones).
func equivalenceInputs(t *testing.T) []string {
	var files []string
	for _, sub := range []string{"synthea", "inferno", "fhir-validator-cases"} {
		if d := filepath.Join(sharedData, sub); dirExists(d) {
			fs, _ := filepath.Glob(filepath.Join(d, "*.json"))
			files = append(files, fs...)
		}
	}
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	for _, g := range golden {
		if !strings.Contains(filepath.Base(g), ".out.") {
			files = append(files, g)
		}
	}
	examples, _ := filepath.Glob(filepath.Join("..", ".fhir-defs", "package", "*.json"))
	for _, f := range examples {
		if base := filepath.Base(f); !conformance(base) && !strings.HasPrefix(base, "Bundle-") && base != "package.json" && !strings.HasPrefix(base, ".") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Skip("no inputs")
	}
	return files
}

// equivalenceCases are small inputs for the rules the shared data may not
// reach: content-derived ids, collisions and duplicates, searchset entries,
// and the de-identification of ages, devices, identifiers with assigners,
// unresolvable references, instants and required elements.
var equivalenceCases = []string{
	// Entries without ids or fullUrls, an identity collision and an exact duplicate.
	`{"resourceType":"Bundle","type":"batch","entry":[
	 {"resource":{"resourceType":"Patient","gender":"male"},"request":{"method":"POST","url":"Patient"}},
	 {"resource":{"resourceType":"Patient","gender":"male"},"request":{"method":"POST","url":"Patient"}},
	 {"fullUrl":"http://x.example/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"female"},"request":{"method":"PUT","url":"Patient/1"}},
	 {"fullUrl":"http://y.example/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"other"},"request":{"method":"PUT","url":"Patient/1"}},
	 {"fullUrl":"http://x.example/fhir/Observation/2","resource":{"resourceType":"Observation","id":"2","status":"final","code":{"text":"t"},"subject":{"reference":"http://x.example/fhir/Patient/1"},"focus":[{"reference":"http://y.example/fhir/Patient/1/_history/3"}]},"request":{"method":"PUT","url":"Observation/2"}},
	 {"request":{"method":"DELETE","url":"Patient/9"}}]}`,
	// A searchset with an outcome entry and an earlier ACDS Provenance.
	`{"resourceType":"Bundle","type":"searchset","entry":[
	 {"fullUrl":"http://s.example/Patient/a","resource":{"resourceType":"Patient","id":"a"},"search":{"mode":"match"}},
	 {"resource":{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational"}]},"search":{"mode":"outcome"}},
	 {"fullUrl":"http://s.example/Provenance/p","resource":{"resourceType":"Provenance","id":"p","meta":{"tag":[{"system":"urn:acds:tag","code":"provenance"}]},"target":[{"reference":"Patient/a"}],"recorded":"2020-01-01T00:00:00Z","agent":[{"who":{"display":"x"}}]}}]}`,
	// Duplicates that differ only in their references before rewriting.
	`{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"urn:uuid:11111111-1111-1111-1111-111111111111","resource":{"resourceType":"Patient","id":"p"}},
	 {"fullUrl":"urn:uuid:22222222-2222-2222-2222-222222222222","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"t"},"subject":{"reference":"urn:uuid:11111111-1111-1111-1111-111111111111"}}},
	 {"fullUrl":"urn:uuid:33333333-3333-3333-3333-333333333333","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"t"},"subject":{"reference":"Patient/p"}}},
	 {"fullUrl":"urn:uuid:44444444-4444-4444-4444-444444444444","resource":{"resourceType":"Observation","status":"final","code":{"text":"u"},"hasMember":[{"reference":"urn:uuid:33333333-3333-3333-3333-333333333333"}]}}]}`,
	// De-identification: ages, devices, identifiers, references, instants,
	// required elements, IP addresses, extensions.
	`{"resourceType":"Bundle","type":"collection","entry":[
	 {"fullUrl":"urn:uuid:0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50","resource":{"resourceType":"Patient","meta":{"lastUpdated":"2020-01-02T03:04:05Z","source":"http://src.example"},
	  "identifier":[{"use":"official","_use":{"id":"u1"},"system":"urn:oid:1.2.3","value":"MRN-1","period":{"start":"2001"},"type":{"text":"MRN"},
	    "assigner":{"reference":"urn:uuid:7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d","display":"Hospital"}},{"value":"X-2","assigner":{"reference":"Organization/elsewhere"}},{"system":"urn:x"}],
	  "birthDate":"1930-05-06","_birthDate":{"id":"bd","extension":[{"url":"http://hl7.org/fhir/StructureDefinition/patient-birthTime","valueDateTime":"1930-05-06T07:08:09Z"}]},
	  "address":[{"id":"a1","use":"home","line":["1 Main"],"city":"C","state":"MA","postalCode":"ab-8-9","country":"US","period":{"start":"2000"}}],
	  "contact":[{"relationship":[{"text":"mother"}],"gender":"female","telecom":[{"system":"phone","value":"555"}]}],
	  "communication":[{"language":{"coding":[{"system":"urn:ietf:bcp:47","code":"en","display":"English"}],"text":"English"}}],
	  "extension":[{"url":"http://example.org/a","valueAge":{"value":95.5,"unit":"a","system":"http://unitsofmeasure.org","code":"a"}},
	   {"url":"http://example.org/b","extension":[{"url":"c","valueString":"secret"},{"url":"d","valueCode":"ok"}]},
	   {"url":"http://example.org/c","valueUri":"http://10.0.0.1/x"},{"url":"http://example.org/d","valueInstant":"2020-01-02T03:04:05Z"}]}},
	 {"fullUrl":"urn:uuid:7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d","resource":{"resourceType":"Organization","name":"General Hospital","alias":["GH","The Hospital"],"active":true}},
	 {"fullUrl":"urn:uuid:1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Condition","subject":{"reference":"urn:uuid:0b0d2e4a-8a5e-4d55-9d3a-8c1c2b3a4f50","display":"Jane"},
	  "onsetAge":{"value":92,"comparator":"<","unit":"a"},"recorder":{"reference":"Practitioner/999","display":"Dr X"},"asserter":{"reference":"Practitioner/998","type":"Practitioner"},
	  "note":[{"text":"called 10.1.2.3"}],"code":{"text":"flu"}}},
	 {"fullUrl":"urn:uuid:2c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Device","serialNumber":"SN-1","lotNumber":"L-2","udiCarrier":[{"deviceIdentifier":"D-3","carrierHRF":"H-4"}],
	  "deviceName":[{"name":"Pump 10.0.0.7","type":"user-friendly-name"}],"url":"http://device.example"}},
	 {"fullUrl":"urn:uuid:3c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Composition","status":"final","type":{"text":"note"},"date":"2020-03-04T05:06:07Z",
	  "author":[{"reference":"Practitioner/1","display":"Dr Y"}],"title":"Letter about Jane","section":[{"title":"s","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"}}]}},
	 {"fullUrl":"urn:uuid:4c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"DocumentReference","status":"current","content":[{"attachment":{"contentType":"text/plain","data":"aGVsbG8="}}]}},
	 {"fullUrl":"urn:uuid:5c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Media","status":"completed","content":{"contentType":"image/png","url":"http://img.example/1"}}},
	 {"fullUrl":"urn:uuid:6c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"Observation","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"1-1","display":"X"}]},
	  "issued":"2020-01-02T03:04:05.678Z","valueString":"free text","performer":[{"reference":"urn:uuid:7a6b5c4d-3e2f-4a1b-9c8d-7e6f5a4b3c2d","display":"GH"}],
	  "component":[{"code":{"text":"c"},"valueQuantity":{"value":1.50,"unit":"mg"}}]}},
	 {"fullUrl":"urn:uuid:8c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","resource":{"resourceType":"CarePlan","status":"active","intent":"plan","subject":{"reference":"Patient/nowhere"},
	  "instantiatesUri":["http://10.0.0.1/protocol","http://example.org/protocol"],"_instantiatesUri":[null,{"extension":[{"url":"http://example.org/e","valueCode":"x"}]}]}}]}`,
}

func dirExists(d string) bool {
	st, err := os.Stat(d)
	return err == nil && st.IsDir()
}

// TestTypedPipelineMatchesOld: the typed pipeline (r4.Unmarshal, normalize,
// r4.Marshal) gives the same JSON as the node-based Process for every
// input Process accepts, in both formats. TEMPORARY: delete it with the
// node-based pipeline.
//
// One difference is known and accepted, in the de-identified format only:
// a repeating primitive that has extensions ("_event": [{"extension": …}])
// but no values. The node-based code drops such a companion array whole
// (it treats a companion without a value array as misaligned, even when
// nothing was removed); the typed code keeps its extensions, de-identified
// by the same rules as any other, as both do for a single primitive
// ("_birthDate"). The output is valid R4 either way.
func TestTypedPipelineMatchesOld(t *testing.T) {
	compared := 0
	inputs := equivalenceInputs(t)
	for i := range equivalenceCases {
		inputs = append(inputs, fmt.Sprintf("case %d", i))
	}
	for _, f := range inputs {
		var data []byte
		var err error
		if _, err = fmt.Sscanf(f, "case %d", new(int)); err == nil {
			var i int
			fmt.Sscanf(f, "case %d", &i)
			data = []byte(equivalenceCases[i])
		} else if data, err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		for _, format := range Formats() {
			opts := testOpts(format)
			old, err := Process(data, opts)
			if err != nil {
				if strings.HasPrefix(f, "case ") {
					t.Errorf("%s: %v", f, err)
				}
				continue // the typed pipeline is for what validation accepts
			}
			root, err := r4.Unmarshal(data)
			if err != nil {
				t.Errorf("%s: r4.Unmarshal of accepted input: %v", name, err)
				continue
			}
			b, n, err := normalize(root, opts, format)
			if err != nil {
				t.Errorf("%s %s: %v", name, format, err)
				continue
			}
			got, err := encodeTyped(b)
			if err != nil {
				t.Fatal(err)
			}
			compared++
			if !hasResourcesTyped(root) {
				t.Errorf("%s: hasResourcesTyped is false for input Process accepts", name)
			}
			if n != old.Resources {
				t.Errorf("%s %s: %d entries, node pipeline %d", name, format, n, old.Resources)
			}
			want, have := decodeAny(t, old.JSON), decodeAny(t, got)
			var diffs []string
			jsonDiff("", want, have, &diffs, 5, format == FormatR4Deidentified)
			if len(diffs) > 0 {
				t.Errorf("%s %s: typed output differs:\n\t%s", name, format, strings.Join(diffs, "\n\t"))
			} else if !reflect.DeepEqual(want, have) {
				// An accepted difference: the typed output must be valid too.
				if o := Validate(got); o.HasErrors() {
					t.Errorf("%s %s: typed output does not validate: %v", name, format, o.Issues)
				}
			}
		}
	}
	t.Logf("%d outputs compared", compared)
}

// FuzzTypedPipeline: for every input the node-based Process accepts, the
// typed pipeline decodes it, normalises it in both formats without error
// and gives the same JSON (the known companion difference aside).
// TEMPORARY, like TestTypedPipelineMatchesOld.
func FuzzTypedPipeline(f *testing.F) {
	addFuzzSeeds(f)
	for _, c := range equivalenceCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range Formats() {
			opts := testOpts(format)
			old, err := Process(data, opts)
			if err != nil {
				return
			}
			root, err := r4.Unmarshal(data)
			if err != nil {
				t.Skipf("accepted by the node validator, rejected by r4.Unmarshal: %v", err)
			}
			b, n, err := normalize(root, opts, format)
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			got, err := encodeTyped(b)
			if err != nil {
				t.Fatalf("%s: encoding: %v", format, err)
			}
			if n != old.Resources {
				t.Fatalf("%s: %d entries, node pipeline %d", format, n, old.Resources)
			}
			var diffs []string
			jsonDiff("", decodeAny(t, old.JSON), decodeAny(t, got), &diffs, 5, format == FormatR4Deidentified)
			if len(diffs) > 0 {
				t.Fatalf("%s: typed output differs:\n\t%s", format, strings.Join(diffs, "\n\t"))
			}
		}
	})
}

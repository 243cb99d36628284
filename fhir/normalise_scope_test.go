package fhir

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/r4"
)

// processOK runs Process and requires a valid output; for acds.OutputFHIRR4 it
// also requires that processing the output again returns it unchanged.
func processOK(t *testing.T, in string, format string) *Output {
	t.Helper()
	opts := testOpts(format)
	out, err := Process([]byte(in), opts)
	if err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	if o := Validate(out.JSON); o.HasErrors() {
		t.Fatalf("%s: output does not validate: %v\n%s", format, o.Issues, out.JSON)
	}
	again, err := Process(out.JSON, opts)
	if err != nil {
		t.Fatalf("%s: processing the output again: %v\n%s", format, err, out.JSON)
	}
	if format == acds.OutputFHIRR4 && !bytes.Equal(again.JSON, out.JSON) {
		t.Fatalf("%s: not idempotent:\nfirst:  %s\nsecond: %s", format, out.JSON, again.JSON)
	}
	return out
}

// isNoResources reports whether err is the *InvalidError whose one error
// is noResources().
func isNoResources(err error) bool {
	var inv *InvalidError
	if !errors.As(err, &inv) || inv.Outcome.ErrorCount() != 1 {
		return false
	}
	want := noResources()
	for _, is := range inv.Outcome.Issues {
		if is.Severity == want.Severity && is.Code == want.Code && is.Diagnostics == want.Diagnostics {
			return true
		}
	}
	return false
}

// TestRootProvenanceRefused (V4): a bare ACDS Provenance is our own
// output's metadata, not data: Check and Process both refuse it with the
// "no resources to process" error, so Process never produces an output it
// would itself refuse.
func TestRootProvenanceRefused(t *testing.T) {
	in := []byte(`{"resourceType":"Provenance","id":"p","meta":{"tag":[{"system":"urn:acds:tag","code":"provenance"}]},` +
		`"target":[{"reference":"Patient/x"}],"recorded":"2020-01-01T00:00:00Z","agent":[{"who":{"display":"x"}}]}`)
	for _, format := range acds.OutputFormats() {
		_, err := Process(in, testOpts(format))
		if !isNoResources(err) {
			t.Errorf("%s: Process: got %v, want the no-resources error", format, err)
		}
	}
	if err := Check(in, Options{}); !isNoResources(err) {
		t.Errorf("Check: got %v, want the no-resources error", err)
	}
	// A Provenance without our tag is data like any other.
	other := bytes.Replace(in, []byte("urn:acds:tag"), []byte("urn:other:tag"), 1)
	if err := Check(other, Options{}); err != nil {
		t.Errorf("Check of a foreign Provenance: %v", err)
	}
	processOK(t, string(other), acds.OutputFHIRR4)
}

// entryByRef returns the output entry resource (as JSON object) named by
// the reference "Type/id".
func entryByRef(t *testing.T, out *Output, ref string) map[string]any {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource map[string]any `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(out.JSON, &b); err != nil {
		t.Fatal(err)
	}
	for _, e := range b.Entry {
		if e.Resource["resourceType"].(string)+"/"+e.Resource["id"].(string) == ref {
			return e.Resource
		}
	}
	t.Fatalf("no entry %s in %s", ref, out.JSON)
	return nil
}

// TestRelativeReferenceResolvesAgainstEntryBase (C1): a relative
// reference in an entry with a RESTful fullUrl resolves against that
// entry's base first (FHIR R4 Bundle, Resolving references in Bundles), so
// b.org's Observation points at b.org's Patient, not at a.org's of the same
// type and id; a relative reference from an entry without a RESTful base
// falls back to the type and id.
func TestRelativeReferenceResolvesAgainstEntryBase(t *testing.T) {
	in := `{"resourceType":"Bundle","type":"collection","entry":[
{"fullUrl":"http://a.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"male"}},
{"fullUrl":"http://b.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"female"}},
{"fullUrl":"http://b.org/fhir/Observation/o","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"pregnancy"},"subject":{"reference":"Patient/1/_history/1"}}},
{"fullUrl":"http://a.org/fhir/Observation/p","resource":{"resourceType":"Observation","id":"p","status":"final","code":{"text":"prostate"},"subject":{"reference":"Patient/1/_history/1"}}},
{"fullUrl":"urn:uuid:0c3f3c8e-58a6-4d43-9a59-0b6a3c3e2b11","resource":{"resourceType":"Observation","status":"final","code":{"text":"any"},"subject":{"reference":"Patient/1/_history/1"}}}]}`
	for _, format := range acds.OutputFormats() {
		out := processOK(t, in, format)
		var b struct {
			Entry []struct {
				Resource map[string]any `json:"resource"`
			} `json:"entry"`
		}
		if err := json.Unmarshal(out.JSON, &b); err != nil {
			t.Fatal(err)
		}
		gender := func(obs map[string]any) string {
			ref := obs["subject"].(map[string]any)["reference"].(string)
			return entryByRef(t, out, ref)["gender"].(string)
		}
		// Entries keep their order: a.org Patient, b.org Patient, then the
		// Observations.
		if g := gender(b.Entry[2].Resource); g != "female" {
			t.Errorf("%s: b.org's Observation points at the %s Patient, want b.org's (female)", format, g)
		}
		if g := gender(b.Entry[3].Resource); g != "male" {
			t.Errorf("%s: a.org's Observation points at the %s Patient, want a.org's (male)", format, g)
		}
		if g := gender(b.Entry[4].Resource); g != "male" {
			t.Errorf("%s: the urn:uuid Observation points at the %s Patient, want the first Patient/1 (male)", format, g)
		}
	}
}

// nestedDocument is the review's example: a collection holding a Patient
// and a document Bundle whose Composition's author is the document's own
// Practitioner, whose urn:uuid is the same as the outer Patient's.
const nestedDocument = `{"resourceType":"Bundle","type":"collection","entry":[
{"fullUrl":"urn:uuid:aaaaaaaa-1111-1111-1111-111111111111","resource":{"resourceType":"Patient","gender":"male"}},
{"fullUrl":"urn:uuid:bbbbbbbb-1111-1111-1111-111111111111","resource":{"resourceType":"Bundle","type":"document","identifier":{"system":"urn:x","value":"1"},"timestamp":"2020-01-01T00:00:00Z","entry":[
 {"fullUrl":"urn:uuid:cccccccc-1111-1111-1111-111111111111","resource":{"resourceType":"Composition","status":"final","type":{"text":"x"},"date":"2020-01-01","author":[{"reference":"urn:uuid:aaaaaaaa-1111-1111-1111-111111111111"}],"title":"t"}},
 {"fullUrl":"urn:uuid:aaaaaaaa-1111-1111-1111-111111111111","resource":{"resourceType":"Practitioner"}}]}}]}`

// nestedParameters: a Parameters resource whose Coverage refers to its own
// Patient/pp, next to a top-level Patient/pp that is someone else.
const nestedParameters = `{"resourceType":"Bundle","type":"collection","entry":[
{"fullUrl":"http://x.org/fhir/Patient/pp","resource":{"resourceType":"Patient","id":"pp","gender":"male"}},
{"fullUrl":"http://x.org/fhir/Parameters/par","resource":{"resourceType":"Parameters","id":"par","parameter":[
 {"name":"c","resource":{"resourceType":"Coverage","id":"cov","status":"active","beneficiary":{"reference":"Patient/pp"},"payor":[{"reference":"Patient/pp"}]}},
 {"name":"p","resource":{"resourceType":"Patient","id":"pp","gender":"female"}}]}}]}`

// decodeOut decodes an output Bundle as generic JSON.
func decodeOut(t *testing.T, out *Output) map[string]any {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(out.JSON, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// at follows a path of member names and array indexes through generic
// JSON, failing the test when a step is missing.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok || m[p] == nil {
				t.Fatalf("no member %q in %v", p, v)
			}
			v = m[p]
		case int:
			a, ok := v.([]any)
			if !ok || p >= len(a) {
				t.Fatalf("no item %d in %v", p, v)
			}
			v = a[p]
		}
	}
	return v
}

// TestNestedBundleIsItsOwnScope (V1): references inside a nested Bundle
// resolve among that Bundle's entries, never against the outer Bundle's
// fullUrls: the document's author stays its own Practitioner, in both
// formats, and the output validates.
func TestNestedBundleIsItsOwnScope(t *testing.T) {
	for _, format := range acds.OutputFormats() {
		b := decodeOut(t, processOK(t, nestedDocument, format))
		doc := at(t, b, "entry", 1, "resource")
		author := at(t, doc, "entry", 0, "resource", "author", 0, "reference").(string)
		practitioner := at(t, doc, "entry", 1, "fullUrl").(string)
		if at(t, doc, "entry", 1, "resource", "resourceType") != "Practitioner" || author != practitioner {
			t.Errorf("%s: the author is %q, want the document's Practitioner %q", format, author, practitioner)
		}
		if format == acds.OutputFHIRR4 && author != "urn:uuid:aaaaaaaa-1111-1111-1111-111111111111" {
			t.Errorf("%s: the nested reference changed to %q", format, author)
		}
		// A document needs a timestamp (bdl-10): de-identified, the year's.
		if ts := at(t, doc, "timestamp"); format == acds.OutputFHIRR4Deidentified && ts != "2020-01-01T00:00:00Z" {
			t.Errorf("%s: the nested document's timestamp is %v", format, ts)
		}
	}
}

// TestNestedParametersIsItsOwnScope (V1): a reference inside a
// Parameters resource names a resource of that Parameters, in both
// formats: unchanged in acds.OutputFHIRR4; in the de-identified format the nested
// Patient's id and the reference to it get the same pseudonym, distinct
// from nothing the top-level Patient/pp leaks.
func TestNestedParametersIsItsOwnScope(t *testing.T) {
	for _, format := range acds.OutputFormats() {
		b := decodeOut(t, processOK(t, nestedParameters, format))
		params := at(t, b, "entry", 1, "resource")
		cov := at(t, params, "parameter", 0, "resource").(map[string]any)
		pat := at(t, params, "parameter", 1, "resource").(map[string]any)
		want := "Patient/" + pat["id"].(string)
		for _, ref := range []any{at(t, cov, "beneficiary", "reference"), at(t, cov, "payor", 0, "reference")} {
			if ref != want {
				t.Errorf("%s: the Coverage refers to %v, want its Parameters' Patient %s", format, ref, want)
			}
		}
		if format == acds.OutputFHIRR4Deidentified {
			if pat["id"] == "pp" || cov["id"] == "cov" {
				t.Errorf("%s: nested ids kept: %v, %v", format, pat["id"], cov["id"])
			}
		} else if want != "Patient/pp" || cov["id"] != "cov" {
			t.Errorf("%s: nested resources changed: %s, %v", format, want, cov["id"])
		}
	}
}

// validID reports whether s is a valid FHIR id.
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIDChar(s[i]) {
			return false
		}
	}
	return true
}

// leaks fails the test for every secret the output still holds.
func leaks(t *testing.T, out *Output, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if bytes.Contains(out.JSON, []byte(s)) {
			t.Errorf("the de-identified output leaks %q:\n%s", s, out.JSON)
		}
	}
}

// TestDeidentifyContainedIDs (L1): a contained resource's id, which can
// be anything the source chose (here an SSN), is pseudonymised, and the
// local references to it (Reference and canonical) follow, so they still
// resolve and the id stays a valid id. Local references can be
// References, canonicals or uris.
func TestDeidentifyContainedIDs(t *testing.T) {
	out := processOK(t, `{"resourceType":"Observation","id":"o1","status":"final","code":{"text":"x"},`+
		`"contained":[{"resourceType":"Patient","id":"SSN-123-45-6789","name":[{"family":"Smith"}]}],`+
		`"subject":{"reference":"#SSN-123-45-6789"}}`, acds.OutputFHIRR4Deidentified)
	leaks(t, out, "SSN-123-45-6789", "6789")
	obs := at(t, decodeOut(t, out), "entry", 0, "resource")
	id := at(t, obs, "contained", 0, "id").(string)
	if !validID(id) || at(t, obs, "subject", "reference") != "#"+id {
		t.Errorf("contained id %q, subject %v", id, at(t, obs, "subject", "reference"))
	}

	// A Questionnaire's contained ValueSet, named by a canonical "#id", and
	// a contained resource referring back to its container ("#").
	out = processOK(t, `{"resourceType":"Questionnaire","id":"q","status":"active",`+
		`"contained":[{"resourceType":"ValueSet","id":"vs-MRN-4471","status":"active"},`+
		`{"resourceType":"Provenance","id":"prov-MRN-4471","target":[{"reference":"#"}],"recorded":"2020-01-01T00:00:00Z","agent":[{"who":{"reference":"#org-MRN-4471"}}]},`+
		`{"resourceType":"Organization","id":"org-MRN-4471","active":true,"name":"Acme"}],`+
		`"item":[{"linkId":"1","type":"choice","answerValueSet":"#vs-MRN-4471"}]}`, acds.OutputFHIRR4Deidentified)
	leaks(t, out, "MRN-4471")
	q := at(t, decodeOut(t, out), "entry", 0, "resource")
	vs, org := at(t, q, "contained", 0, "id").(string), at(t, q, "contained", 2, "id").(string)
	if at(t, q, "item", 0, "answerValueSet") != "#"+vs {
		t.Errorf("answerValueSet %v, want #%s", at(t, q, "item", 0, "answerValueSet"), vs)
	}
	if at(t, q, "contained", 1, "target", 0, "reference") != "#" || at(t, q, "contained", 1, "agent", 0, "who", "reference") != "#"+org {
		t.Errorf("contained references not kept consistent: %v", at(t, q, "contained", 1))
	}

	// A ValueSet's contained CodeSystem, named by a uri "#id".
	out = processOK(t, `{"resourceType":"ValueSet","id":"v","status":"active",`+
		`"contained":[{"resourceType":"CodeSystem","id":"cs-MRN-5512","status":"active","content":"complete","concept":[{"code":"a"}]}],`+
		`"compose":{"include":[{"system":"#cs-MRN-5512"}]}}`, acds.OutputFHIRR4Deidentified)
	leaks(t, out, "MRN-5512")
	v := at(t, decodeOut(t, out), "entry", 0, "resource")
	if cs := at(t, v, "contained", 0, "id").(string); at(t, v, "compose", "include", 0, "system") != "#"+cs {
		t.Errorf("compose.include.system %v, want #%s", at(t, v, "compose", "include", 0, "system"), cs)
	}
}

// TestDeidentifyNestedBundleURLs (L1): the ids of resources in nested
// Bundles and Parameters, and a nested Bundle's fullUrls, request URLs,
// response locations and links, are pseudonymised or removed; the
// references among the nested entries still resolve.
func TestDeidentifyNestedBundleURLs(t *testing.T) {
	in := `{"resourceType":"Bundle","type":"searchset",
"link":[{"relation":"self","url":"http://hospital.example.org/fhir/Patient?identifier=SSN-999-11-2222"}],
"entry":[
{"fullUrl":"http://hospital.example.org/fhir/Bundle/tx-MRN-1","link":[{"relation":"alternate","url":"http://hospital.example.org/fhir/Bundle/tx-MRN-1?mrn=MRN-1"}],
 "search":{"mode":"match"},
 "resource":{"resourceType":"Bundle","id":"tx-MRN-1","type":"transaction",
 "link":[{"relation":"self","url":"http://hospital.example.org/fhir/Patient?identifier=SSN-999-11-3333"}],
 "entry":[
  {"fullUrl":"http://hospital.example.org/fhir/Patient/MRN-12345","link":[{"relation":"alternate","url":"http://hospital.example.org/fhir/Patient?mrn=MRN-99"}],"resource":{"resourceType":"Patient","id":"MRN-12345","gender":"female"},
   "request":{"method":"PUT","url":"Patient/MRN-12345"}},
  {"fullUrl":"urn:uuid:11111111-2222-3333-4444-555555555555","resource":{"resourceType":"Observation","status":"final","code":{"text":"x"},"subject":{"reference":"http://hospital.example.org/fhir/Patient/MRN-12345"},"performer":[{"reference":"Patient/MRN-12345"}]},
   "request":{"method":"POST","url":"Observation?identifier=SSN-999-11-4444"}},
  {"request":{"method":"DELETE","url":"Patient/MRN-6789"}},
  {"request":{"method":"GET","url":"Patient/MRN-6789/$everything"}}]}},
{"fullUrl":"http://hospital.example.org/fhir/Bundle/resp-MRN-2","search":{"mode":"match"},
 "resource":{"resourceType":"Bundle","id":"resp-MRN-2","type":"transaction-response","entry":[
  {"response":{"status":"201 Created","location":"Patient/MRN-777/_history/1"}},
  {"response":{"status":"200 OK","location":"http://hospital.example.org/fhir/Patient/MRN-778/_history/2",
   "outcome":{"resourceType":"OperationOutcome","id":"oo-MRN-779","issue":[{"severity":"information","code":"informational"}]}}}]}},
{"fullUrl":"http://hospital.example.org/fhir/Parameters/par-MRN-3","search":{"mode":"match"},
 "resource":{"resourceType":"Parameters","id":"par-MRN-3","parameter":[
  {"name":"p","part":[{"name":"q","resource":{"resourceType":"Patient","id":"MRN-880","gender":"male"}}]},
  {"name":"c","resource":{"resourceType":"Coverage","id":"cov-MRN-881","status":"active","beneficiary":{"reference":"Patient/MRN-880"},"payor":[{"reference":"Patient/MRN-880"}]}}]}}]}`
	if err := Check([]byte(in), Options{}); err != nil {
		t.Fatalf("test input: %v", err)
	}
	out := processOK(t, in, acds.OutputFHIRR4Deidentified)
	leaks(t, out, "MRN-", "SSN-", "hospital.example.org", "55555555")
	b := decodeOut(t, out)
	tx := at(t, b, "entry", 0, "resource")
	pat := at(t, tx, "entry", 0).(map[string]any)
	patID := at(t, pat, "resource", "id").(string)
	fu := at(t, pat, "fullUrl").(string)
	if !strings.HasSuffix(fu, "/Patient/"+patID) || at(t, pat, "request", "url") != "Patient/"+patID {
		t.Errorf("the nested Patient's fullUrl %s and request URL %v do not match its id %s", fu, at(t, pat, "request", "url"), patID)
	}
	obs := at(t, tx, "entry", 1, "resource")
	if at(t, obs, "subject", "reference") != fu || at(t, obs, "performer", 0, "reference") != "Patient/"+patID {
		t.Errorf("the nested Observation's references do not follow the Patient: %v", obs)
	}
	if u := at(t, tx, "entry", 1, "request", "url"); u != "Observation" {
		t.Errorf("a conditional create's URL is %v, want the type alone", u)
	}
	if u := at(t, tx, "entry", 2, "request", "url"); u != "Patient/"+pseudonymID(testOpts("").DeidentKey, "Patient/MRN-6789") {
		t.Errorf("a delete's URL is %v", u)
	}
	resp := at(t, b, "entry", 1, "resource")
	if l := at(t, resp, "entry", 0, "response", "location"); l != "Patient/"+pseudonymID(testOpts("").DeidentKey, "Patient/MRN-777")+"/_history/"+versionPseudonym(testOpts("").DeidentKey, "1") {
		t.Errorf("a response location is %v", l)
	}
	params := at(t, b, "entry", 2, "resource")
	p880 := at(t, params, "parameter", 0, "part", 0, "resource", "id").(string)
	if at(t, params, "parameter", 1, "resource", "beneficiary", "reference") != "Patient/"+p880 {
		t.Errorf("the Parameters' Coverage does not refer to its Patient %s: %v", p880, at(t, params, "parameter", 1))
	}
	if b["link"] != nil || tx.(map[string]any)["link"] != nil || pat["link"] != nil {
		t.Errorf("a Bundle.link or Bundle.entry.link survived")
	}
	for _, e := range b["entry"].([]any) {
		if e.(map[string]any)["link"] != nil {
			t.Errorf("a top-level Bundle.entry.link survived")
		}
	}
}

// TestNestedScopesLeftAsTheyAreInFormatR4: in acds.OutputFHIRR4 a nested Bundle
// and a nested Parameters keep their ids, fullUrls and references exactly,
// even a reference that happens to equal an outer entry's fullUrl.
func TestNestedScopesLeftAsTheyAreInFormatR4(t *testing.T) {
	out := processOK(t, nestedParameters, acds.OutputFHIRR4)
	if !bytes.Contains(out.JSON, []byte(`{"beneficiary":{"reference":"Patient/pp"},"id":"cov"`)) {
		t.Errorf("the nested Parameters changed:\n%s", out.JSON)
	}
	in := `{"resourceType":"Bundle","type":"collection","entry":[
{"fullUrl":"urn:uuid:aaaaaaaa-1111-1111-1111-111111111111","resource":{"resourceType":"Organization","active":true,"name":"Acme"}},
{"fullUrl":"urn:uuid:bbbbbbbb-1111-1111-1111-111111111111","resource":{"resourceType":"Parameters","parameter":[
 {"name":"c","resource":{"resourceType":"Coverage","status":"active","beneficiary":{"reference":"Patient/p"},"payor":[{"reference":"urn:uuid:aaaaaaaa-1111-1111-1111-111111111111"}]}},
 {"name":"p","resource":{"resourceType":"Patient","id":"p"}}]}}]}`
	out = processOK(t, in, acds.OutputFHIRR4)
	if !bytes.Contains(out.JSON, []byte(`"payor":[{"reference":"urn:uuid:aaaaaaaa-1111-1111-1111-111111111111"}]`)) {
		t.Errorf("a nested reference was rewritten with the outer Bundle's table:\n%s", out.JSON)
	}
}

// nestedIdentities returns the ids of the resources nested in r
// (contained, in nested Bundles and Parameters) and the fullUrls of nested
// Bundles' entries.
func nestedIdentities(r r4.Resource) map[string]bool {
	out := map[string]bool{}
	_ = r4.Walk(r, func(path *r4.Path, node any) error {
		if path.Len() == 0 {
			return nil
		}
		switch n := node.(type) {
		case r4.Resource:
			nested := path.Segments()[path.Len()-1].Name == "contained" || path.Len() > 2 // deeper than Bundle.entry[i].resource
			if _, top := r.(*r4.Bundle); !top {
				nested = true
			}
			if id := n.ResourceID(); nested && id != "" {
				out[id] = true
			}
		case *r4.BundleEntry:
			if path.Len() > 1 && n.FullURL != nil && n.FullURL.HasValue() {
				out[n.FullURL.Value] = true
			}
		}
		return nil
	})
	return out
}

// outputIdentities returns every resource id, fullUrl and reference of an
// output (with their last segments) and every local "#id" in a canonical
// or uri.
func outputIdentities(t *testing.T, out []byte) map[string]bool {
	t.Helper()
	r, err := r4.Unmarshal(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	add := func(s string) {
		got[s] = true
		plain, _ := splitVersion(s)
		got[plain[strings.LastIndexByte(plain, '/')+1:]] = true
		got[strings.TrimPrefix(s, "#")] = true
	}
	_ = r4.Walk(r, func(_ *r4.Path, node any) error {
		switch n := node.(type) {
		case r4.Resource:
			add(n.ResourceID())
		case *r4.BundleEntry:
			if n.FullURL != nil {
				add(n.FullURL.Value)
			}
		case *r4.Reference:
			if n.Reference != nil {
				add(n.Reference.Value)
			}
		case *r4.Canonical: // only local references: canonical URLs name definitions
			if strings.HasPrefix(n.Value, "#") {
				add(n.Value)
			}
		case *r4.URI:
			if strings.HasPrefix(n.Value, "#") {
				add(n.Value)
			}
		}
		return nil
	})
	return got
}

// TestDeidentifiedNestedIdentitiesDoNotSurvive: across the shared bundles
// and the official examples, no id of a nested resource and no fullUrl of
// a nested Bundle's entry survives de-identification as an id, fullUrl,
// reference or local reference.
func TestDeidentifiedNestedIdentitiesDoNotSurvive(t *testing.T) {
	files := processInputs(t)
	bundles, _ := filepath.Glob(filepath.Join("..", ".fhir-defs", "package", "Bundle-*.json"))
	files = append(files, bundles...)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		root, err := r4.Unmarshal(data)
		if err != nil {
			continue
		}
		secrets := nestedIdentities(root)
		if len(secrets) == 0 {
			continue
		}
		out, err := Process(data, testOpts(acds.OutputFHIRR4Deidentified))
		if err != nil {
			continue // invalid input, or nothing to process
		}
		checked++
		got := outputIdentities(t, out.JSON)
		for s := range secrets {
			if got[s] {
				t.Errorf("%s: the nested identity %q survives", filepath.Base(f), s)
			}
		}
	}
	if checked == 0 {
		t.Skip("no input with nested resources")
	}
	t.Logf("%d inputs with nested resources checked", checked)
}

// TestDeidentifyLocalReferencesWithoutContained: a local reference in a
// canonical or uri ("#id") is pseudonymised even when the resource has no
// contained resources (validation does not resolve those).
func TestDeidentifyLocalReferencesWithoutContained(t *testing.T) {
	in := `{"resourceType":"QuestionnaireResponse","id":"q1","status":"completed","questionnaire":"#john-smith-1950","item":[{"linkId":"a","definition":"#mrn12345"}]}`
	out := processOK(t, in, acds.OutputFHIRR4Deidentified)
	leaks(t, out, "john-smith", "mrn12345")
}

// TestReferenceToOutputFullURLIsIdempotent: a reference that names what
// will be an output fullUrl resolves on the first pass, as it would on a
// second, so acds.OutputFHIRR4 stays idempotent (processOK checks it).
func TestReferenceToOutputFullURLIsIdempotent(t *testing.T) {
	in := `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"http://b.example/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","gender":"male"}},{"fullUrl":"http://b.example/fhir/Observation/o","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"x"},"subject":{"reference":"https://acds.invalid/fhir/Patient/1"}}}]}`
	out := processOK(t, in, acds.OutputFHIRR4)
	if !strings.Contains(string(out.JSON), `"subject":{"reference":"Patient/1"}`) {
		t.Errorf("subject not resolved: %s", out.JSON)
	}
}

// TestDeidentifyNestedVersions: versions of one resource in a nested
// Bundle stay distinct (bdl-7) under keyed version pseudonyms.
func TestDeidentifyNestedVersions(t *testing.T) {
	in := `{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:11111111-1111-1111-1111-111111111111","resource":{"resourceType":"Bundle","type":"collection","entry":[
 {"fullUrl":"http://example.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","meta":{"versionId":"1"},"gender":"male"}},
 {"fullUrl":"http://example.org/fhir/Patient/1","resource":{"resourceType":"Patient","id":"1","meta":{"versionId":"2"},"gender":"female"}}]}}]}`
	processOK(t, in, acds.OutputFHIRR4Deidentified)
}

package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/spec"
)

// routes answers each request by its path and query ("Patient/p1",
// "Observation?subject=Patient/p1"), relative to https://portal.example/fhir/,
// and 404 for anything else; it records what was asked.
type routes struct {
	answers map[string]answer
	asked   []string
}

type answer struct {
	status int
	body   string
}

func (r *routes) RoundTrip(req *http.Request) (*http.Response, error) {
	key := strings.TrimPrefix(req.URL.Path, "/fhir/")
	if req.URL.RawQuery != "" {
		q, _ := url.QueryUnescape(req.URL.RawQuery)
		key += "?" + q
	}
	r.asked = append(r.asked, key)
	a, ok := r.answers[key]
	if !ok {
		a = answer{404, `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found"}]}`}
	}
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"application/fhir+json"}},
		Body: io.NopCloser(strings.NewReader(a.body)), ContentLength: int64(len(a.body)), Request: req}, nil
}

func fetchRoutes(t *testing.T, answers map[string]answer) (*Record, *routes, error) {
	t.Helper()
	r := &routes{answers: answers}
	c := &Connector{MaxRetries: -1}
	rec, err := c.Fetch(context.Background(), &http.Client{Transport: r}, Request{SystemType: acds.SystemFHIRBasic,
		PortalURL: "https://portal.example/fhir", RecordID: "p1", Credentials: testCreds})
	return rec, r, err
}

const (
	patientP1 = `{"resourceType":"Patient","id":"p1"}`
	// capEverything advertises $everything; capSearch Observation and
	// Coverage searches by their compartment parameters.
	capEverything = `{"resourceType":"CapabilityStatement","rest":[{"mode":"server","resource":[{"type":"Patient","interaction":[{"code":"read"}],"operation":[{"name":"everything","definition":"http://hl7.org/fhir/OperationDefinition/Patient-everything"}]}]}]}`
	capSearch     = `{"resourceType":"CapabilityStatement","rest":[{"mode":"server","resource":[
		{"type":"Observation","interaction":[{"code":"search-type"}],"searchParam":[{"name":"subject"},{"name":"code"}]},
		{"type":"Encounter","interaction":[{"code":"read"}]}]}]}`
)

func bundleOf(resources ...string) string {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Bundle","type":"searchset","entry":[`)
	for i, r := range resources {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"resource":` + r + `}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestAdvertisedEverythingMustAnswer: a portal whose CapabilityStatement
// advertises $everything but does not answer it fails the fetch; without
// a statement, the same portal gets its compartment searched.
func TestAdvertisedEverythingMustAnswer(t *testing.T) {
	_, _, err := fetchRoutes(t, map[string]answer{"metadata": {200, capEverything}, "Patient/p1": {200, patientP1}})
	if !errors.Is(err, ErrResponseInvalid) || !strings.Contains(err.Error(), "advertises $everything") {
		t.Fatalf("error %v", err)
	}
	rec, _, err := fetchRoutes(t, map[string]answer{"Patient/p1": {200, patientP1}})
	if err != nil || rec.Coverage.Everything || rec.Coverage.CapabilityStatement || rec.Resources != 1 {
		t.Fatalf("record %+v, error %v", rec, err)
	}
}

// TestOnlyTheStatementsSearches: with a CapabilityStatement, only the
// types it lists as searchable are searched, by the compartment
// parameters it lists; a type it lists without search-type, or without a
// compartment parameter, is unsupported.
func TestOnlyTheStatementsSearches(t *testing.T) {
	obs := `{"resourceType":"Observation","id":"o1","subject":{"reference":"Patient/p1"},"performer":[{"reference":"Practitioner/d1"}]}`
	rec, r, err := fetchRoutes(t, map[string]answer{
		"metadata":                       {200, capSearch},
		"Patient/p1":                     {200, patientP1},
		"Observation?subject=Patient/p1": {200, bundleOf(obs)},
		"Practitioner/d1":                {200, `{"resourceType":"Practitioner","id":"d1"}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"metadata", "Patient/p1", "Observation?subject=Patient/p1", "Practitioner/d1"}
	if !slices.Equal(r.asked, want) {
		t.Fatalf("asked %q, want %q", r.asked, want)
	}
	if rec.Resources != 3 || !slices.Contains(rec.Coverage.Unsupported, "Encounter") || slices.Contains(rec.Coverage.Unsupported, "Observation") ||
		len(rec.Coverage.Unsupported) != len(spec.PatientCompartment())-2 {
		t.Fatalf("%d resources, unsupported %v", rec.Resources, rec.Coverage.Unsupported)
	}
	wantCov := []acds.CoverageRequest{
		{RequestLine: "GET /fhir/metadata HTTP/1.1", Status: 200, Pages: 1},
		{RequestLine: "GET /fhir/Patient/p1 HTTP/1.1", Status: 200, Pages: 1, Entries: 1},
		{RequestLine: "GET /fhir/Observation?subject=Patient/p1 HTTP/1.1", Status: 200, Pages: 1, Entries: 1},
		{RequestLine: "GET /fhir/Practitioner/d1 HTTP/1.1", Status: 200, Pages: 1, Entries: 1},
	}
	if !slices.Equal(rec.Coverage.Requests, wantCov) {
		t.Fatalf("coverage requests %+v", rec.Coverage.Requests)
	}
}

// TestEverythingWithAnotherPatientRefused: $everything that holds another
// patient, or a resource whose compartment references name only another
// patient, fails the fetch.
func TestEverythingWithAnotherPatientRefused(t *testing.T) {
	for name, other := range map[string]string{
		"patient":     `{"resourceType":"Patient","id":"p2"}`,
		"observation": `{"resourceType":"Observation","id":"o2","subject":{"reference":"Patient/p2"}}`,
		"absolute":    `{"resourceType":"Condition","id":"c2","subject":{"reference":"https://elsewhere.example/fhir/Patient/p1"}}`,
	} {
		_, _, err := fetchRoutes(t, map[string]answer{"metadata": {200, capEverything}, "Patient/p1/$everything": {200, bundleOf(patientP1, other)}})
		if !errors.Is(err, ErrResponseInvalid) || !strings.Contains(err.Error(), "another patient") {
			t.Errorf("%s: error %v", name, err)
		}
	}
	// A compartment resource whose references name no patient, and
	// resources outside the compartment, are $everything's to give.
	rec, _, err := fetchRoutes(t, map[string]answer{"metadata": {200, capEverything}, "Patient/p1/$everything": {200, bundleOf(patientP1,
		`{"resourceType":"Observation","id":"o3","subject":{"reference":"Group/g1"}}`, `{"resourceType":"Organization","id":"x"}`)}})
	if err != nil || rec.Resources != 3 {
		t.Fatalf("record %+v, error %v", rec, err)
	}
}

// TestReferencesOfUnsupportedTypes: references to a compartment type the
// portal does not search are read, and kept only when they are in the
// patient's compartment; Patients are never read.
func TestReferencesOfUnsupportedTypes(t *testing.T) {
	obs := `{"resourceType":"Observation","id":"o1","subject":{"reference":"Patient/p1"},"encounter":{"reference":"Encounter/e1"},
		"focus":[{"reference":"Encounter/e2"},{"reference":"Patient/p2"}]}`
	rec, r, err := fetchRoutes(t, map[string]answer{
		"metadata":                       {200, capSearch},
		"Patient/p1":                     {200, patientP1},
		"Observation?subject=Patient/p1": {200, bundleOf(obs)},
		"Encounter/e1":                   {200, `{"resourceType":"Encounter","id":"e1","subject":{"reference":"Patient/p1"}}`},
		"Encounter/e2":                   {200, `{"resourceType":"Encounter","id":"e2","subject":{"reference":"Patient/p2"}}`},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Resources != 3 || !bytes.Contains(rec.FHIR, []byte(`"id":"e1"`)) || bytes.Contains(rec.FHIR, []byte(`"id":"e2"`)) || slices.Contains(r.asked, "Patient/p2") {
		t.Fatalf("%d resources, asked %q: %s", rec.Resources, r.asked, rec.FHIR)
	}
}

// TestPatientOf covers the reference forms that name a patient.
func TestPatientOf(t *testing.T) {
	u, _ := url.Parse("https://portal.example/fhir")
	s := &session{base: u}
	for ref, want := range map[string]string{
		"Patient/p1": "p1", "Patient/p1/_history/3": "p1", "https://portal.example/fhir/Patient/p1": "p1",
		"https://other.example/fhir/Patient/p1": "", "Patient/a b": "-", "Patient/p1/x": "-", "Group/g": "-", "#p1": "-",
		"urn:uuid:1": "-", "Patient/": "-",
	} {
		id, ok := s.patientOf(ref)
		if got := map[bool]string{true: id, false: "-"}[ok]; got != want {
			t.Errorf("patientOf(%q) = %q, %v; want %q", ref, id, ok, want)
		}
	}
}

// FuzzParseCapability: the CapabilityStatement reader never panics, keeps
// only type names, and agrees with encoding/json on what is JSON.
func FuzzParseCapability(f *testing.F) {
	for _, s := range []string{capEverything, capSearch,
		`{"resourceType":"CapabilityStatement"}`, `{"resourceType":"CapabilityStatement","rest":null}`,
		`{"resourceType":"CapabilityStatement","rest":[{"mode":"client","resource":[{"type":"Observation","interaction":[{"code":"search-type"}]}]}]}`,
		`{"resourceType":"CapabilityStatement","rest":[{"operation":[{"name":"$everything","definition":"http://hl7.org/fhir/OperationDefinition/Patient-everything|4.0.1"}]}]}`,
		`{"resourceType":"CapabilityStatement","rest":[{"resource":[{"type":"../x","interaction":[{"code":"search-type"}]},{"type":"Observation","searchParam":[{"name":1}]}]}]}`,
		`{"resourceType":"Bundle"}`, `{"resourceType":"CapabilityStatement","rest":"x"}`, `[]`, `{"resourceType":"Capab`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCapability(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatal("accepted what is not JSON")
		}
		if len(c.searchable) > maxCapTypes {
			t.Fatalf("%d types kept", len(c.searchable))
		}
		for typ, ct := range c.searchable {
			if !fhirType.MatchString(typ) || len(ct.params) > maxCapParams {
				t.Fatalf("kept type %q with %d parameters", typ, len(ct.params))
			}
		}
	})
}

// FuzzReferencesAt checks the reference walk against encoding/json on
// every valid JSON resource: the same references, in the same order.
func FuzzReferencesAt(f *testing.F) {
	for _, s := range []string{
		`{"subject":{"reference":"Patient/p1"}}`, `{"performer":[{"actor":{"reference":"Patient/p1"}},{"actor":[{"reference":"a"}]}]}`,
		`{"subject":{"reference":1}}`, `{"subject":[[{"reference":"x"}]]}`, `{"subj\u0065ct":{"reference":"y"}}`, `{"subject":"Patient/p1"}`,
		`{"subject":{"reference":"a","reference":"b"}}`, `[]`, `{"subject":`, ``,
	} {
		f.Add([]byte(s), "subject")
		f.Add([]byte(s), "performer.actor")
	}
	f.Fuzz(func(t *testing.T, b []byte, path string) {
		segs := strings.Split(path, ".")
		got, err := referencesAt(b, segs, nil)
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		if err != nil {
			t.Fatalf("valid JSON refused: %v", err)
		}
		var want []string
		var walk func(v any, path []string)
		walk = func(v any, path []string) {
			switch v := v.(type) {
			case []any:
				for _, e := range v {
					walk(e, path)
				}
			case map[string]any:
				if len(path) == 0 {
					if r, ok := v["reference"].(string); ok {
						want = append(want, r)
					}
					return
				}
				if e, ok := v[path[0]]; ok {
					walk(e, path[1:])
				}
			}
		}
		walk(v, segs)
		if !jsonHasDuplicateKeys(b) && !slices.Equal(got, want) {
			t.Fatalf("referencesAt %q; encoding/json %q", got, want)
		}
	})
}

// jsonHasDuplicateKeys reports whether some object of b repeats a key,
// where the walk (every member) and encoding/json (the last) differ.
func jsonHasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []map[string]bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = true
				continue
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if expectKey && len(stack) > 0 && stack[len(stack)-1] != nil {
				if stack[len(stack)-1][tok] {
					return true
				}
				stack[len(stack)-1][tok] = true
				expectKey = false
				continue
			}
		}
		expectKey = len(stack) > 0 && stack[len(stack)-1] != nil
	}
}

// TestTotalBeyondThePages: a search whose Bundle.total counts more
// matches than its pages held, with no next link to the rest (a server
// that pages by _offset only), fails the fetch instead of leaving them
// out unseen.
func TestTotalBeyondThePages(t *testing.T) {
	obs := `{"resourceType":"Observation","id":"o1","subject":{"reference":"Patient/p1"}}`
	page := `{"resourceType":"Bundle","type":"searchset","total":%d,"entry":[{"resource":` + obs + `}]}`
	for total, ok := range map[int]bool{1: true, 0: true, 3: false} {
		_, _, err := fetchRoutes(t, map[string]answer{
			"metadata":                       {200, capSearch},
			"Patient/p1":                     {200, patientP1},
			"Observation?subject=Patient/p1": {200, fmt.Sprintf(page, total)},
		})
		if ok != (err == nil) || !ok && (!errors.Is(err, ErrResponseInvalid) || !strings.Contains(err.Error(), "1 of the 3 matches")) {
			t.Errorf("total %d: %v", total, err)
		}
	}
}

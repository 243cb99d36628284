package portal_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/spec"
	"github.com/acds-project/acds/internal/demo/demoportal"
	"github.com/acds-project/acds/portal"
)

// fetchFrom fetches patient id from a demo portal run with failures, by
// fhir-basic.
func fetchFrom(t *testing.T, failures demoportal.Failures, id string) (*portal.Record, error) {
	t.Helper()
	p := startDemo(t, demoportal.Options{Patients: 4, Failures: failures})
	return testConnector().Fetch(context.Background(), p.client, portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: p.Base, RecordID: id, Credentials: demoCreds})
}

// entries returns the "Type/id" of every resource of a fetched record,
// and fails the test when a resource of the Patient compartment refers
// to a patient other than id.
func entries(t *testing.T, rec *portal.Record, id string) map[string]bool {
	t.Helper()
	var b struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(rec.FHIR, &b); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range b.Entry {
		var r struct {
			ResourceType, ID string
			Subject          *struct{ Reference string }
			Patient          *struct{ Reference string }
		}
		if err := json.Unmarshal(e.Resource, &r); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []*struct{ Reference string }{r.Subject, r.Patient} {
			if ref != nil && strings.HasPrefix(ref.Reference, "Patient/") && ref.Reference != "Patient/"+id {
				t.Errorf("%s/%s refers to %s, not Patient/%s", r.ResourceType, r.ID, ref.Reference, id)
			}
		}
		if r.ResourceType == "Patient" && r.ID != id {
			t.Errorf("the record holds another patient, %s", r.ID)
		}
		out[r.ResourceType+"/"+r.ID] = true
	}
	if len(out) != rec.Resources {
		t.Errorf("%d distinct resources, Resources says %d", len(out), rec.Resources)
	}
	return out
}

// TestSearchedRecordIsComplete: on a portal without $everything whose
// searches match only patient=Patient/{id} (not the bare id), the record
// assembled from the compartment's searches and the references they lead
// to holds exactly what $everything gives on the same portal, nothing
// of another patient's; and its coverage lists every request with its
// count, and the compartment types the portal does not search.
func TestSearchedRecordIsComplete(t *testing.T) {
	id := demoportal.PatientID(2)
	whole, err := fetchFrom(t, demoportal.Failures{}, id)
	if err != nil {
		t.Fatal(err)
	}
	if !whole.Coverage.Everything || !whole.Coverage.CapabilityStatement {
		t.Fatalf("coverage of the $everything fetch: %+v", whole.Coverage)
	}
	want := entries(t, whole, id)
	for name, f := range map[string]demoportal.Failures{
		"no $everything":                        {NoEverything: true},
		"no $everything, bare id blind":         {NoEverything: true, BareIDBlind: true},
		"no CapabilityStatement, bare id blind": {NoEverything: true, NoCapabilityStatement: true, BareIDBlind: true},
	} {
		t.Run(name, func(t *testing.T) {
			rec, err := fetchFrom(t, f, id)
			if err != nil {
				t.Fatal(err)
			}
			got := entries(t, rec, id)
			if !maps.Equal(got, want) {
				var missing, extra []string
				for k := range want {
					if !got[k] {
						missing = append(missing, k)
					}
				}
				for k := range got {
					if !want[k] {
						extra = append(extra, k)
					}
				}
				t.Fatalf("%d resources, want %d; missing %d (%.5q), extra %q", len(got), len(want), len(missing), missing, extra)
			}
			c := rec.Coverage
			if c.Everything || c.CapabilityStatement == f.NoCapabilityStatement {
				t.Errorf("coverage everything %v, capabilityStatement %v", c.Everything, c.CapabilityStatement)
			}
			// Every request is there, in order, with what it answered.
			lines := map[string]acds.CoverageRequest{}
			pages := 0
			for _, r := range c.Requests {
				lines[r.RequestLine] = r
				pages += r.Pages
			}
			if len(c.Requests) == 0 || c.Requests[0].RequestLine != "GET /fhir/metadata HTTP/1.1" || pages != rec.Pages {
				t.Errorf("first request %+v; %d pages in the coverage, %d read", c.Requests[0], pages, rec.Pages)
			}
			obs := lines["GET /fhir/Observation?subject=Patient/"+id+"&_count=40 HTTP/1.1"]
			nObs := 0
			for k := range want {
				if strings.HasPrefix(k, "Observation/") {
					nObs++
				}
			}
			if obs.Status != 200 || obs.Entries != nObs || obs.Pages != (nObs+39)/40 {
				t.Errorf("Observation search %+v, want %d entries in %d pages", obs, nObs, (nObs+39)/40)
			}
			if r := lines["GET /fhir/Patient/"+id+" HTTP/1.1"]; r.Status != 200 || r.Entries != 1 {
				t.Errorf("Patient read %+v", r)
			}
			for _, r := range c.Requests {
				if strings.Contains(r.RequestLine, "?") && !strings.Contains(r.RequestLine, "$everything") && !strings.Contains(r.RequestLine, "=Patient/"+id) {
					t.Errorf("a search by the bare id: %s", r.RequestLine)
				}
			}
			// The compartment types the demo has not are listed as
			// unsupported, those it has are not.
			for _, typ := range []string{"Claim", "Coverage", "ExplanationOfBenefit", "ImagingStudy", "MedicationAdministration"} {
				if !slices.Contains(c.Unsupported, typ) {
					t.Errorf("%s is not listed as unsupported: %v", typ, c.Unsupported)
				}
			}
			for _, typ := range []string{"Observation", "Encounter", "Condition", "Immunization", "Patient"} {
				if slices.Contains(c.Unsupported, typ) {
					t.Errorf("%s is listed as unsupported", typ)
				}
			}
			if !slices.IsSorted(c.Unsupported) {
				t.Errorf("unsupported types not sorted: %v", c.Unsupported)
			}
		})
	}
}

// TestWholeCompartmentWithoutCapabilityStatement: a portal that publishes
// no CapabilityStatement gets $everything tried first, and when it has
// none, a search of every compartment type by every one of its
// parameters.
func TestWholeCompartmentWithoutCapabilityStatement(t *testing.T) {
	id := demoportal.PatientID(1)
	rec, err := fetchFrom(t, demoportal.Failures{NoCapabilityStatement: true}, id)
	if err != nil {
		t.Fatal(err)
	}
	if c := rec.Coverage; !c.Everything || c.CapabilityStatement || len(c.Requests) != 2 || c.Requests[0].Status != 404 {
		t.Fatalf("coverage %+v", c)
	}
	rec, err = fetchFrom(t, demoportal.Failures{NoCapabilityStatement: true, NoEverything: true}, id)
	if err != nil {
		t.Fatal(err)
	}
	searched := map[string]bool{}
	for _, r := range rec.Coverage.Requests {
		path, query, ok := strings.Cut(strings.TrimPrefix(r.RequestLine, "GET /fhir/"), "?")
		if ok {
			param, _, _ := strings.Cut(query, "=")
			searched[path+"."+param] = true
		}
	}
	for _, ct := range spec.PatientCompartment() {
		for _, p := range ct.Params {
			if ct.Type != "Patient" && !searched[ct.Type+"."+p.Name] {
				t.Errorf("%s?%s was not searched", ct.Type, p.Name)
			}
		}
	}
	if slices.Contains(rec.Coverage.Unsupported, "Observation") || !slices.Contains(rec.Coverage.Unsupported, "Claim") {
		t.Errorf("unsupported %v", rec.Coverage.Unsupported)
	}
}

// TestUnsupportedTypeListed: a type the portal does not search is missing
// from the record and named in the coverage, not searched.
func TestUnsupportedTypeListed(t *testing.T) {
	id := demoportal.PatientID(2)
	rec, err := fetchFrom(t, demoportal.Failures{NoEverything: true, UnsupportedTypes: []string{"Immunization"}}, id)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rec.Coverage.Unsupported, "Immunization") {
		t.Errorf("Immunization not listed: %v", rec.Coverage.Unsupported)
	}
	for k := range entries(t, rec, id) {
		if strings.HasPrefix(k, "Immunization/") {
			t.Errorf("the record holds %s", k)
		}
	}
	for _, r := range rec.Coverage.Requests {
		if strings.Contains(r.RequestLine, "/Immunization") {
			t.Errorf("requested %s", r.RequestLine)
		}
	}
}

// TestFailedSearchFailsTheFetch: a search that fails — an error status,
// an answer that is not a Bundle, a next link that leaves the portal —
// fails the fetch with an error naming the request, never a record with
// a silent gap.
func TestFailedSearchFailsTheFetch(t *testing.T) {
	id := demoportal.PatientID(2)
	obs := "GET Observation?subject=Patient/" + id + "&_count=40"
	for _, tc := range []struct {
		name     string
		failures demoportal.Failures
		want     error
		op       string
	}{
		{"500", demoportal.Failures{NoEverything: true, FailSearch: "Observation"}, portal.ErrUnavailable, obs},
		{"400 of an advertised search", demoportal.Failures{NoEverything: true, FailSearch: "Observation", FailStatus: 400}, portal.ErrResponseInvalid, obs},
		{"403", demoportal.Failures{NoEverything: true, FailSearch: "Observation", FailStatus: 403}, portal.ErrRecordNotFound, obs},
		{"not a Bundle", demoportal.Failures{NoEverything: true, FailSearch: "Observation", FailStatus: 200}, portal.ErrResponseInvalid, obs},
		{"truncated", demoportal.Failures{NoEverything: true, TruncatePages: true}, portal.ErrResponseInvalid, "GET AllergyIntolerance?patient=Patient/" + id},
		{"next link leaves", demoportal.Failures{NoEverything: true, ForeignNext: true}, portal.ErrResponseInvalid, obs + ": "},
		{"$everything's next link leaves", demoportal.Failures{ForeignNext: true}, portal.ErrResponseInvalid, "GET Patient/" + id + "/$everything?_count=40: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := fetchFrom(t, tc.failures, id)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.op) {
				t.Fatalf("record %v, error %v; want %v naming %q", rec != nil, err, tc.want, tc.op)
			}
		})
	}
}

// TestSearchIgnoringItsParameterRefused: a portal that answers a search
// with every patient's resources (it did not apply the parameter) fails
// the fetch: none of another patient's resources enter a record.
func TestSearchIgnoringItsParameterRefused(t *testing.T) {
	id := demoportal.PatientID(1)
	_, err := fetchFrom(t, demoportal.Failures{NoEverything: true, IgnoreSearchParams: true}, id)
	if !errors.Is(err, portal.ErrResponseInvalid) || !strings.Contains(err.Error(), "not in the compartment of Patient/"+id) {
		t.Fatalf("error %v, want the foreign resource refused", err)
	}
}

// TestEmptyRecordIDIsTheLoginsPatient: recordId "" fetches the patient the
// SMART login names (the token response's patient), with the form flow
// and the password grant; fhir-basic refuses it before any request.
func TestEmptyRecordIDIsTheLoginsPatient(t *testing.T) {
	p := startDemo(t, demoportal.Options{Patients: 3})
	first := p.Patients()[0]
	for _, st := range []string{acds.SystemSMARTForm, acds.SystemSMARTPassword, acds.SystemDemo} {
		rec, err := testConnector().Fetch(context.Background(), p.client, portal.Request{SystemType: st, PortalURL: p.Base, Credentials: demoCreds})
		if err != nil {
			t.Fatalf("%s: %v", st, err)
		}
		if got := entries(t, rec, first.ID); !got["Patient/"+first.ID] || rec.Resources != first.Resources {
			t.Errorf("%s: %d resources, want %s's %d", st, rec.Resources, first.ID, first.Resources)
		}
	}
	req := portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: p.Base, Credentials: demoCreds}
	err := testConnector().Admit(req)
	if !errors.Is(err, portal.ErrInvalidRequest) || !errors.Is(err, portal.ErrRecordIDRequired) || portal.ProblemField(err) != "recordId" {
		t.Fatalf("Admit: %v (field %q)", err, portal.ProblemField(err))
	}
	if _, ferr := testConnector().Fetch(context.Background(), p.client, req); !errors.Is(ferr, portal.ErrRecordIDRequired) {
		t.Fatalf("Fetch: %v", ferr)
	}
}

// TestCompartmentFetchFigures fetches every demo patient from a portal
// with $everything, and from portals without it whose searches ignore the
// bare id (with and without a CapabilityStatement), and logs per patient
// the resources of the patient's compartment fetched against those the
// portal holds there, the resources outside it that came along, and the
// time of each fetch (go test -run TestCompartmentFetchFigures -v
// ./portal/). It asserts the counts only: the whole compartment, and
// nothing $everything would not give.
func TestCompartmentFetchFigures(t *testing.T) {
	shapes := []struct {
		name     string
		failures demoportal.Failures
	}{
		{"$everything", demoportal.Failures{}},
		{"searches, bare-id blind", demoportal.Failures{NoEverything: true, BareIDBlind: true}},
		{"searches, no CapabilityStatement", demoportal.Failures{NoEverything: true, BareIDBlind: true, NoCapabilityStatement: true}},
	}
	whole := map[string]map[string]bool{}
	for _, sh := range shapes {
		p := startDemo(t, demoportal.Options{Patients: 4, Failures: sh.failures})
		for _, pt := range p.Patients() {
			start := time.Now()
			rec, err := testConnector().Fetch(context.Background(), p.client, portal.Request{SystemType: acds.SystemFHIRBasic, PortalURL: p.Base, RecordID: pt.ID, Credentials: demoCreds})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("%s %s: %v", sh.name, pt.ID, err)
			}
			got := entries(t, rec, pt.ID)
			if whole[pt.ID] == nil {
				whole[pt.ID] = got // $everything's, the first shape
			}
			inside := 0
			for k := range got {
				typ, _, _ := strings.Cut(k, "/")
				if spec.PatientCompartmentType(typ) != nil {
					inside++
				}
				if !whole[pt.ID][k] {
					t.Errorf("%s %s: %s, which $everything does not give", sh.name, pt.ID, k)
				}
			}
			if inside != pt.Compartment {
				t.Errorf("%s %s: %d of the %d compartment resources", sh.name, pt.ID, inside, pt.Compartment)
			}
			t.Logf("%-34s %s: compartment %4d of %4d held (%5.1f %%), %2d outside it, %3d requests, %4d pages, %v", sh.name, pt.ID, inside, pt.Compartment,
				100*float64(inside)/float64(pt.Compartment), rec.Resources-inside, len(rec.Coverage.Requests), rec.Pages, took.Round(time.Millisecond))
		}
	}
}

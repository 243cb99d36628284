package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/spec"
)

// collected accumulates resources, each once, in arrival order.
type collected struct {
	keys    map[string]bool
	entries []string // "Type/id"
	raw     []json.RawMessage
}

func (c *collected) add(key string, raw json.RawMessage) {
	if c.keys[key] {
		return
	}
	c.keys[key] = true
	c.entries = append(c.entries, key)
	c.raw = append(c.raw, raw)
}

// recordFetch is the state of fetching one record: what was collected,
// and the coverage that says how.
type recordFetch struct {
	s   *session
	id  string // the patient
	got *collected
	cov *acds.Coverage
	cap *capability // nil when the portal published no CapabilityStatement
	// searched are the compartment types searched by at least one of
	// their parameters; the others are cov.Unsupported.
	searched map[string]bool
}

// maxReferenceRounds bounds how many times references are followed from
// what the previous round read (a medication's manufacturer, an
// organization's parent…).
const maxReferenceRounds = 3

// fetchRecord fetches the record of patient id, as the portal's
// CapabilityStatement says it can be: Patient/{id}/$everything where it
// is advertised (and, without a statement, where it answers), otherwise
// the Patient, a search of every type of the Patient compartment the
// portal searches, and the resources outside the compartment those refer
// to.
func (s *session) fetchRecord(ctx context.Context, id string) (*Record, error) {
	f := &recordFetch{s: s, id: id, got: &collected{keys: map[string]bool{}}, cov: &acds.Coverage{}, searched: map[string]bool{}}
	if err := f.readCapability(ctx); err != nil {
		return nil, err
	}
	done := false
	if f.cap == nil || f.cap.everything {
		var err error
		if done, err = f.everything(ctx); err != nil {
			return nil, err
		}
	}
	if !done {
		if err := f.readPatient(ctx); err != nil {
			return nil, err
		}
		if err := f.searchCompartment(ctx); err != nil {
			return nil, err
		}
		if err := f.followReferences(ctx); err != nil {
			return nil, err
		}
	}
	if !f.got.keys["Patient/"+id] {
		return nil, &Error{Kind: ErrResponseInvalid, Op: "GET Patient/" + id + "/$everything", Detail: "the answer does not contain the patient"}
	}
	return f.record(), nil
}

// record assembles the collection Bundle.
func (f *recordFetch) record() *Record {
	s, b := f.s, f.s.base.String()
	var out bytes.Buffer
	out.Grow(int(s.bytes))
	out.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, e := range f.got.entries {
		if i > 0 {
			out.WriteByte(',')
		}
		fu, _ := json.Marshal(b + "/" + e)
		out.WriteString(`{"fullUrl":`)
		out.Write(fu)
		out.WriteString(`,"resource":`)
		out.Write(f.got.raw[i])
		out.WriteByte('}')
	}
	out.WriteString(`]}`)
	return &Record{FHIR: out.Bytes(), Host: s.base.Hostname(), RequestLines: s.lines, Pages: s.pages,
		Resources: len(f.got.entries), Coverage: f.cov}
}

// get runs one FHIR API exchange for the request named op ("GET
// Observation?subject=Patient/7"): a new coverage request when req is
// negative, a further page of the coverage request req otherwise. It
// returns the exchange and the coverage request's index.
func (f *recordFetch) get(ctx context.Context, op, u string, req int) (*exchange, int, error) {
	s := f.s
	ex, err := s.do(ctx, op, true, func(ctx context.Context) (*http.Request, error) {
		r, err := getter(u, "application/fhir+json")(ctx)
		if err == nil {
			s.auth(r)
		}
		return r, err
	})
	if err != nil {
		return nil, req, err
	}
	if req < 0 {
		f.cov.Requests = append(f.cov.Requests, acds.CoverageRequest{RequestLine: ex.line})
		req = len(f.cov.Requests) - 1
	}
	f.cov.Requests[req].Status = ex.status
	f.cov.Requests[req].Pages++
	return ex, req, nil
}

// counted adds n entries to the coverage request req.
func (f *recordFetch) counted(req, n int) { f.cov.Requests[req].Entries += n }

// withCount adds the connector's _count to a search URL.
func (s *session) withCount(u string) string {
	if s.c.Count <= 0 {
		return u
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "_count=" + strconv.Itoa(s.c.Count)
}

// opOf names the request of the URL u, relative to the FHIR base.
func (f *recordFetch) opOf(u string) string {
	return "GET " + strings.TrimPrefix(u, f.s.base.String()+"/")
}

// readCapability reads GET [base]/metadata. A portal that answers with
// anything but a CapabilityStatement (an error status, another resource,
// no JSON) publishes none: the record is then fetched as if it had
// advertised $everything and every search.
func (f *recordFetch) readCapability(ctx context.Context) error {
	ex, _, err := f.get(ctx, "GET metadata", f.s.base.String()+"/metadata", -1)
	if err != nil {
		return err
	}
	if ex.status != http.StatusOK {
		return nil
	}
	c, err := parseCapability(ex.body)
	if err != nil {
		return nil
	}
	f.cap, f.cov.CapabilityStatement = c, true
	return nil
}

// everything reads Patient/{id}/$everything to its last page. It returns
// false when the portal has no such operation and the record is to be
// searched for; a portal that advertised it must answer it.
func (f *recordFetch) everything(ctx context.Context) (bool, error) {
	u := f.s.withCount(f.s.base.String() + "/Patient/" + f.id + "/$everything")
	err := f.pages(ctx, u, nil, false)
	var nf *notFound
	if !errors.As(err, &nf) {
		if err == nil {
			f.cov.Everything = true
		}
		return err == nil, err
	}
	// No $everything, or no such patient: the Patient read tells which.
	if err := f.readPatient(ctx); err != nil {
		return false, err
	}
	if f.cap != nil {
		return false, &Error{Kind: ErrResponseInvalid, Op: f.opOf(u), Status: nf.status,
			Detail: "the portal's CapabilityStatement advertises $everything, which it does not answer"}
	}
	return false, nil
}

// readPatient reads Patient/{id} into the record, once.
func (f *recordFetch) readPatient(ctx context.Context) error {
	if f.got.keys["Patient/"+f.id] {
		return nil
	}
	s, op := f.s, "GET Patient/"+f.id
	ex, req, err := f.get(ctx, op, s.base.String()+"/Patient/"+f.id, -1)
	if err != nil {
		return err
	}
	switch {
	case ex.status == http.StatusNotFound || ex.status == http.StatusGone:
		return &Error{Kind: ErrRecordNotFound, Op: op, Status: ex.status, Detail: s.outcomeText(ex.body)}
	case ex.status == http.StatusUnauthorized || ex.status == http.StatusForbidden:
		return s.authError(op, ex)
	case ex.status != http.StatusOK:
		return &Error{Kind: ErrResponseInvalid, Op: op, Status: ex.status, Detail: s.outcomeText(ex.body)}
	}
	if err := f.addRead(ex.body, "Patient", f.id); err != nil {
		return err
	}
	f.counted(req, 1)
	return nil
}

// searchCompartment searches every type of the Patient compartment that
// the portal searches, by each of the type's compartment parameters it
// supports, as param=Patient/{id}. With a CapabilityStatement, the types
// it lists with a search-type interaction, by the parameters it lists (by
// all the type's compartment parameters when it lists none); without one,
// every type by every parameter. The Patient type itself is the read of
// Patient/{id}: a search by its compartment parameter (link) would find
// other Patient resources, other records of the same person that the
// login need not cover.
func (f *recordFetch) searchCompartment(ctx context.Context) error {
	for _, ct := range spec.PatientCompartment() {
		if ct.Type == "Patient" {
			continue
		}
		ct := &ct
		// strict: the portal said it supports the search, so it must
		// answer it; otherwise an answer that it lacks one (404, 400, 405,
		// 501, 410) leaves the parameter out.
		strict := false
		var params []spec.CompartmentParam
		switch t := f.searchableType(ct.Type); {
		case f.cap != nil && t == nil:
		case f.cap != nil && t.params != nil:
			strict = true
			for _, p := range ct.Params {
				if t.params[p.Name] {
					params = append(params, p)
				}
			}
		default:
			params = ct.Params
		}
		for _, p := range params {
			u := f.s.withCount(f.s.base.String() + "/" + ct.Type + "?" + p.Name + "=Patient/" + f.id)
			err := f.pages(ctx, u, ct, strict)
			var nf *notFound
			if errors.As(err, &nf) {
				continue
			}
			if err != nil {
				return err
			}
			f.searched[ct.Type] = true
		}
		if !f.searched[ct.Type] {
			f.cov.Unsupported = append(f.cov.Unsupported, ct.Type)
		}
	}
	return nil
}

// searchableType is the CapabilityStatement's entry of a searchable type,
// nil when there is no statement or the type is not searchable.
func (f *recordFetch) searchableType(typ string) *capType {
	if f.cap == nil {
		return nil
	}
	return f.cap.searchable[typ]
}

// notFound is a 404, 400, 405, 410 or 501 answer to the first page of a
// search or operation the portal was not known to support: it lacks it
// (or, for $everything, perhaps the patient).
type notFound struct{ status int }

func (e *notFound) Error() string { return "not found: HTTP " + strconv.Itoa(e.status) }

// pages reads a searchset and its next pages into the record. ct is the
// compartment type searched, nil for $everything. Every resource of a
// search must be in the patient's compartment, and none of $everything
// in another patient's; a failed page fails the fetch, except a first
// page that says the portal lacks the search when strict is false
// (*notFound), and so does a last page whose Bundle.total counts more
// matches than the pages held.
func (f *recordFetch) pages(ctx context.Context, u string, ct *spec.CompartmentType, strict bool) error {
	s := f.s
	first := f.opOf(u)
	op := first
	seen := map[string]bool{}
	req := -1
	answered, total := 0, -1 // the matches read, and the last page's count of them
	for n := 1; u != ""; n++ {
		if seen[u] {
			return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the next links loop"}
		}
		seen[u] = true
		ex, r, err := f.get(ctx, op, u, req)
		if err != nil {
			return err
		}
		req = r
		switch ex.status {
		case http.StatusOK:
		case http.StatusUnauthorized, http.StatusForbidden:
			return s.authError(op, ex)
		case http.StatusNotFound, http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusGone:
			if n == 1 && !strict {
				return &notFound{status: ex.status}
			}
			fallthrough
		default:
			return &Error{Kind: ErrResponseInvalid, Op: op, Status: ex.status, Detail: s.outcomeText(ex.body)}
		}
		// One validating pass over the page, then a walk that takes each
		// resource as a slice of the body: decoding the page with
		// encoding/json scanned it twice and copied every resource.
		p, err := scanPage(ex.body)
		if err != nil {
			return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the page is not JSON (truncated?)", Err: err}
		}
		if p.resourceType != "Bundle" {
			return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the answer is not a Bundle"}
		}
		total = p.total
		for _, e := range p.entries {
			if e.outcome || e.typ == "OperationOutcome" {
				continue // not data
			}
			if ct == nil || !e.include {
				answered++
			}
			if ct != nil && (e.include || e.typ != ct.Type && e.headerErr == nil && e.resource != nil) {
				// Not a match of the search (an included resource, or
				// another type): read as a reference if it is one.
				continue
			}
			if err := f.addEntry(op, e, ct); err != nil {
				return err
			}
			f.counted(req, 1)
		}
		if u = p.next; u != "" {
			nu, err := ex.url.Parse(u)
			if err != nil || nu.Scheme != s.base.Scheme || nu.Host != s.base.Host {
				return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "a next link leaves the portal"}
			}
			u = nu.String()
			op = fmt.Sprintf("%s (page %d)", first, n+1)
		}
	}
	if total > answered {
		// A server that pages without next links (by _offset, say) would
		// otherwise leave the rest out unseen.
		return &Error{Kind: ErrResponseInvalid, Op: first,
			Detail: fmt.Sprintf("the answer holds %d of the %d matches it counts, with no next link to the others", answered, total)}
	}
	return nil
}

// addEntry checks one page entry and collects it. A search's resource
// (ct set) must be in the patient's compartment: a portal that ignored
// the search parameter would otherwise hand over other patients'
// records. $everything's may be outside it (the practitioners,
// organizations and medications it refers to, or a compartment resource
// whose compartment references name no patient), but never another
// patient's: not a Patient other than the record's, and not a resource
// whose compartment references name only other patients.
func (f *recordFetch) addEntry(op string, e pageEntry, ct *spec.CompartmentType) error {
	if e.headerErr != nil || e.resource == nil || !fhirType.MatchString(e.typ) || !fhirID.MatchString(e.id) {
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "an entry is not a resource with a type and an id"}
	}
	key := e.typ + "/" + e.id
	switch {
	case ct != nil:
		m, err := f.s.compartmentOf(ct, e.resource, f.id)
		if err != nil {
			return &Error{Kind: ErrResponseInvalid, Op: op, Detail: key + " is not JSON", Err: err}
		}
		if m != ours {
			return &Error{Kind: ErrResponseInvalid, Op: op,
				Detail: key + " is not in the compartment of Patient/" + f.id + ": the portal did not apply the search parameter"}
		}
	case e.typ == "Patient" && e.id != f.id:
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the answer holds another patient, " + key}
	default:
		if ct := spec.PatientCompartmentType(e.typ); ct != nil {
			m, err := f.s.compartmentOf(ct, e.resource, f.id)
			if err != nil {
				return &Error{Kind: ErrResponseInvalid, Op: op, Detail: key + " is not JSON", Err: err}
			}
			if m == another {
				return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the answer holds " + key + ", which is another patient's"}
			}
		}
	}
	f.got.add(key, e.resource)
	return nil
}

// addRead checks the body of a read of wantType/wantID and collects it.
func (f *recordFetch) addRead(raw json.RawMessage, wantType, wantID string) error {
	op := "GET " + wantType + "/" + wantID
	if !json.Valid(raw) {
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the answer is not JSON"}
	}
	typ, id, err := resourceHeader(raw)
	if err != nil || !fhirType.MatchString(typ) || !fhirID.MatchString(id) {
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the answer is not a resource with a type and an id"}
	}
	if typ != wantType || id != wantID {
		return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "the portal answered another resource"}
	}
	f.got.add(typ+"/"+id, raw)
	return nil
}

var referenceRE = regexp.MustCompile(`"reference"\s*:\s*"([^"]{1,512})"`)
var relRefRE = regexp.MustCompile(`^([A-Z][A-Za-z]{1,63})/([A-Za-z0-9\-.]{1,64})(/_history/[A-Za-z0-9\-.]{1,64})?$`)

// followReferences reads the resources the record refers to that the
// searches could not return: every type outside the Patient compartment
// (practitioners, organizations, locations, medications, devices…), and
// the compartment types the portal does not search, which are kept only
// when they are in the patient's compartment. Patients are never read (the
// record's own is there). It follows what each round read, for
// maxReferenceRounds rounds; a reference that is not found, gone or
// forbidden is left dangling, and its request says so in the coverage.
func (f *recordFetch) followReferences(ctx context.Context) error {
	s, b := f.s, f.s.base.String()+"/"
	done := 0
	for range maxReferenceRounds {
		var missing []string
		want := map[string]bool{}
		for _, raw := range f.got.raw[done:] {
			for _, m := range referenceRE.FindAllSubmatch(raw, -1) {
				r := strings.TrimPrefix(string(m[1]), b)
				sm := relRefRE.FindStringSubmatch(r)
				if sm == nil {
					continue
				}
				typ, key := sm[1], sm[1]+"/"+sm[2]
				if typ == "Patient" || f.searched[typ] || f.got.keys[key] || want[key] {
					continue
				}
				want[key] = true
				missing = append(missing, key)
			}
		}
		done = len(f.got.raw)
		if len(missing) == 0 {
			return nil
		}
		for _, r := range missing {
			ex, req, err := f.get(ctx, "GET "+r, b+r, -1)
			if err != nil {
				return err
			}
			switch ex.status {
			case http.StatusOK:
			case http.StatusNotFound, http.StatusGone, http.StatusForbidden:
				continue // dangling or not visible: the record is complete without it
			case http.StatusUnauthorized:
				return s.authError("GET "+r, ex)
			default:
				return &Error{Kind: ErrResponseInvalid, Op: "GET " + r, Status: ex.status, Detail: s.outcomeText(ex.body)}
			}
			typ, id, _ := strings.Cut(r, "/")
			if ct := spec.PatientCompartmentType(typ); ct != nil {
				m, err := s.compartmentOf(ct, ex.body, f.id)
				if err != nil {
					return &Error{Kind: ErrResponseInvalid, Op: "GET " + r, Detail: "the answer is not JSON", Err: err}
				}
				if m != ours {
					continue // another patient's, or not decidably this one's
				}
			}
			if err := f.addRead(ex.body, typ, id); err != nil {
				return err
			}
			f.counted(req, 1)
		}
	}
	return nil
}

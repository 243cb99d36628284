package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// searchTypes are searched by patient when $everything is missing (the
// US Core patient-compartment types).
var searchTypes = []string{
	"AllergyIntolerance", "CarePlan", "CareTeam", "Condition", "Device", "DiagnosticReport", "DocumentReference",
	"Encounter", "Goal", "Immunization", "MedicationRequest", "Observation", "Procedure", "ServiceRequest",
}

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

func (s *session) data(ctx context.Context, u string) (*exchange, error) {
	op := "GET " + strings.TrimPrefix(u, s.base.String()+"/")
	if i := strings.IndexByte(op, '?'); i >= 0 {
		op = op[:i]
	}
	return s.do(ctx, op, true, func(ctx context.Context) (*http.Request, error) {
		req, err := getter(u, "application/fhir+json")(ctx)
		if err == nil {
			s.auth(req)
		}
		return req, err
	})
}

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

func (s *session) fetchRecord(ctx context.Context, id string) (*Record, error) {
	got := &collected{keys: map[string]bool{}}
	b := s.base.String()
	everything := true
	err := s.pagesOf(ctx, s.withCount(b+"/Patient/"+id+"/$everything"), got)
	var nf *notFound
	if errors.As(err, &nf) {
		// No $everything, or no such patient: the Patient read tells which.
		ex, err := s.data(ctx, b+"/Patient/"+id)
		if err != nil {
			return nil, err
		}
		switch {
		case ex.status == http.StatusNotFound || ex.status == http.StatusGone:
			return nil, &Error{Kind: ErrRecordNotFound, Op: "GET Patient/" + id, Status: ex.status, Detail: s.outcomeText(ex.body)}
		case ex.status == http.StatusUnauthorized || ex.status == http.StatusForbidden:
			return nil, s.authError("GET Patient/"+id, ex)
		case ex.status != http.StatusOK:
			return nil, &Error{Kind: ErrResponseInvalid, Op: "GET Patient/" + id, Status: ex.status, Detail: s.outcomeText(ex.body)}
		}
		if err := s.addResource(got, ex.body, "Patient", id); err != nil {
			return nil, err
		}
		everything = false
		for _, t := range searchTypes {
			err := s.pagesOf(ctx, s.withCount(b+"/"+t+"?patient="+url.QueryEscape(id)), got)
			if errors.As(err, &nf) {
				continue // the portal does not know this type
			}
			if err != nil {
				return nil, err
			}
		}
		if err := s.followReferences(ctx, got); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if !got.keys["Patient/"+id] {
		return nil, &Error{Kind: ErrResponseInvalid, Op: "GET Patient/" + id + "/$everything", Detail: "the answer does not contain the patient"}
	}
	var out bytes.Buffer
	out.Grow(int(s.bytes))
	out.WriteString(`{"resourceType":"Bundle","type":"collection","entry":[`)
	for i, e := range got.entries {
		if i > 0 {
			out.WriteByte(',')
		}
		fu, _ := json.Marshal(b + "/" + e)
		out.WriteString(`{"fullUrl":`)
		out.Write(fu)
		out.WriteString(`,"resource":`)
		out.Write(got.raw[i])
		out.WriteByte('}')
	}
	out.WriteString(`]}`)
	return &Record{FHIR: out.Bytes(), Host: s.base.Hostname(), RequestLines: s.lines, Pages: s.pages,
		Resources: len(got.entries), Everything: everything}, nil
}

// notFound is a 404, 400, 405 or 501 answer to a search or operation: the
// portal lacks it (or, for $everything, perhaps the patient).
type notFound struct{ status int }

func (e *notFound) Error() string { return "not found: HTTP " + strconv.Itoa(e.status) }

// pagesOf reads a searchset and its next pages into got.
func (s *session) pagesOf(ctx context.Context, u string, got *collected) error {
	seen := map[string]bool{}
	for first := true; u != ""; first = false {
		if seen[u] {
			return &Error{Kind: ErrResponseInvalid, Op: "paging", Detail: "the next links loop"}
		}
		seen[u] = true
		ex, err := s.data(ctx, u)
		if err != nil {
			return err
		}
		op := "GET " + strings.TrimPrefix(ex.url.Path, s.base.Path+"/")
		switch ex.status {
		case http.StatusOK:
		case http.StatusUnauthorized, http.StatusForbidden:
			return s.authError(op, ex)
		case http.StatusNotFound, http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusGone:
			if first {
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
		for _, e := range p.entries {
			if e.outcome {
				continue
			}
			if err := s.addHeader(got, e.resource, e.typ, e.id, e.headerErr, "", ""); err != nil {
				return err
			}
		}
		u = p.next
		if u != "" {
			nu, err := ex.url.Parse(u)
			if err != nil || nu.Scheme != s.base.Scheme || nu.Host != s.base.Host {
				return &Error{Kind: ErrResponseInvalid, Op: op, Detail: "a next link leaves the portal"}
			}
			u = nu.String()
		}
	}
	return nil
}

// addResource checks a resource's type and id and collects it.
func (s *session) addResource(got *collected, raw json.RawMessage, wantType, wantID string) error {
	if wantType != "" && !json.Valid(raw) { // a read's body; page entries were checked with their page
		return &Error{Kind: ErrResponseInvalid, Op: "GET " + wantType + "/" + wantID, Detail: "the answer is not JSON"}
	}
	typ, id, err := resourceHeader(raw)
	return s.addHeader(got, raw, typ, id, err, wantType, wantID)
}

// addHeader is addResource for a resource whose header was read already
// (typ, id and the error of reading them).
func (s *session) addHeader(got *collected, raw json.RawMessage, typ, id string, err error, wantType, wantID string) error {
	if err != nil || raw == nil || !fhirType.MatchString(typ) || !fhirID.MatchString(id) {
		return &Error{Kind: ErrResponseInvalid, Op: "reading resources", Detail: "an entry is not a resource with a type and an id"}
	}
	if wantType != "" && (typ != wantType || id != wantID) {
		return &Error{Kind: ErrResponseInvalid, Op: "GET " + wantType + "/" + wantID, Detail: "the portal answered another resource"}
	}
	got.add(typ+"/"+id, raw)
	return nil
}

var referenceRE = regexp.MustCompile(`"reference"\s*:\s*"([^"]{1,512})"`)
var relRefRE = regexp.MustCompile(`^([A-Z][A-Za-z]{1,63})/([A-Za-z0-9\-.]{1,64})$`)

// followReferences reads the resources that collected resources refer to
// and that searches did not return (practitioners, organizations,
// medications, …), two levels deep.
func (s *session) followReferences(ctx context.Context, got *collected) error {
	b := s.base.String() + "/"
	done := 0
	for range 2 {
		var missing []string
		want := map[string]bool{}
		for _, raw := range got.raw[done:] {
			for _, m := range referenceRE.FindAllSubmatch(raw, -1) {
				r := strings.TrimPrefix(string(m[1]), b)
				if relRefRE.MatchString(r) && !got.keys[r] && !want[r] {
					want[r] = true
					missing = append(missing, r)
				}
			}
		}
		done = len(got.raw)
		if len(missing) == 0 {
			return nil
		}
		for _, r := range missing {
			ex, err := s.data(ctx, b+r)
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
			if err := s.addResource(got, ex.body, typ, id); err != nil {
				return err
			}
		}
	}
	return nil
}

package fhir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/fhir/r4"
)

// The identifiers ACDS writes into its Provenance resource.
const (
	// TagSystem is the meta.tag system marking resources ACDS generated.
	TagSystem = "urn:acds:tag"
	// MeasurementSystem is the identifier system of the Provenance agent:
	// its value is the enclave measurement.
	MeasurementSystem = "urn:acds:measurement"
	// SourceSystem is the identifier system of the Provenance entity: its
	// value is the portal host, or "raw" for a direct submission.
	SourceSystem = "urn:acds:source"
)

// idFromFullURL returns the id a fullUrl implies: the uuid of a urn:uuid,
// the last segment of a RESTful URL.
func idFromFullURL(fu string) string {
	if strings.HasPrefix(fu, "urn:uuid:") {
		return strings.TrimPrefix(fu, "urn:uuid:")
	}
	if refType(fu) != "" {
		return lastID(fu)
	}
	return ""
}

// restBase returns the service base of a RESTful fullUrl
// ("http://x/fhir" of "http://x/fhir/Patient/1"), or "".
func restBase(fu string) string {
	if !strings.Contains(fu, "://") || refType(fu) == "" {
		return ""
	}
	s := fu
	if i := strings.Index(s, "/_history/"); i >= 0 {
		s = s[:i]
	}
	s = s[:strings.LastIndexByte(s, '/')]
	return s[:strings.LastIndexByte(s, '/')]
}

// resolveAlias maps a reference to the final Type/id of the entry it
// names. A relative reference from an entry with a RESTful fullUrl
// resolves against that entry's base first, as the FHIR R4 Bundle rules
// say (http://hl7.org/fhir/R4/bundle.html#references): of two entries
// Patient/1 on different servers, it names the one on the referring
// entry's server. Otherwise it matches a fullUrl or Type/id exactly,
// ignoring a version. It reports false for references outside the Bundle,
// which are left as they are.
func resolveAlias(alias map[string]string, base, ref string) (string, bool) {
	plain := ref
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		plain = ref[:i]
	}
	if base != "" && !strings.Contains(plain, ":") {
		if t, ok := alias[base+"/"+plain]; ok {
			return t, true
		}
	}
	if t, ok := alias[ref]; ok {
		return t, true
	}
	if t, ok := alias[plain]; ok {
		return t, true
	}
	return "", false
}

// errNoRoot is returned by normalize for a nil resource.
var errNoRoot = errors.New("fhir: normalise: no resource")

// entry is one resource on its way into the output Bundle.
type entry struct {
	res      r4.Resource
	fullURL  string
	typ, id  string // original type and id ("" when none)
	finalID  string
	collided *entry // an earlier entry that had this entry's identity
	dropped  bool
}

// normalize turns a validated resource (any resource, typically a Bundle)
// into the output collection Bundle and returns it with its entry count,
// the Provenance included. For acds.OutputFHIRR4Deidentified it de-identifies the
// resources first (opts.DeidentKey must then be set; Process checks its
// length). The rules are those of the package doc (Normalisation and
// De-identification). It may modify root: the output Bundle holds root's
// resources, changed in place.
func normalize(root r4.Resource, opts Options, format string) (*r4.Bundle, int, error) {
	if root == nil {
		return nil, 0, errNoRoot
	}
	var entries []*entry
	if b, ok := root.(*r4.Bundle); ok {
		for i := range b.Entry {
			be := &b.Entry[i]
			if !carried(be) {
				continue
			}
			r := be.Resource
			e := &entry{res: r, typ: r.ResourceType(), id: r.ResourceID()}
			if be.FullURL != nil {
				e.fullURL = be.FullURL.Value
			}
			entries = append(entries, e)
		}
	} else if !isOurProvenance(root) {
		// A bare ACDS Provenance is our own output's metadata: like the one
		// in a Bundle it is not carried over, so the input has nothing to
		// process (hasResources agrees).
		entries = append(entries, &entry{res: root, typ: root.ResourceType(), id: root.ResourceID()})
	}

	// Final ids: the resource's own, else the uuid or id of its fullUrl,
	// else one derived from its content. An identity already taken gets a
	// content-derived id; exact copies are dropped.
	taken := map[string]*entry{}
	for _, e := range entries {
		id := e.id
		if id == "" {
			id = idFromFullURL(e.fullURL)
		}
		if id == "" {
			var err error
			if id, err = contentID(e.res); err != nil {
				return nil, 0, err
			}
		}
		if prev := taken[e.typ+"/"+id]; prev != nil {
			e.collided = prev
			var err error
			if id, err = contentID(e.res); err != nil {
				return nil, 0, err
			}
			if dup := taken[e.typ+"/"+id]; dup != nil {
				e.dropped, e.finalID = true, dup.finalID
				continue
			}
		}
		e.finalID = id
		taken[e.typ+"/"+id] = e
	}
	if format == acds.OutputFHIRR4Deidentified {
		for _, e := range entries {
			e.finalID = pseudonymID(opts.DeidentKey, e.typ+"/"+e.finalID)
		}
	}
	alias := map[string]string{} // fullUrl or Type/id -> final Type/id
	for _, e := range entries {
		final := e.typ + "/" + e.finalID
		if e.fullURL != "" {
			if _, ok := alias[e.fullURL]; !ok {
				alias[e.fullURL] = final
			}
		}
		if e.id != "" && !e.dropped {
			if _, ok := alias[e.typ+"/"+e.id]; !ok {
				alias[e.typ+"/"+e.id] = final
			}
		}
	}

	// The output's own fullUrls: a reference that already names one (as in
	// an earlier output processed again) resolves now as it would then, so
	// processing the output again changes nothing.
	outBase := DefaultBaseURL
	if opts.BaseURL != "" {
		outBase = strings.TrimSuffix(opts.BaseURL, "/")
	}
	for _, e := range entries {
		final := e.typ + "/" + e.finalID
		if _, ok := alias[outBase+"/"+final]; !ok {
			alias[outBase+"/"+final] = final
		}
	}

	// Rewrite references, in each entry's own scope (see scopeWalk).
	var kept []*entry
	for _, e := range entries {
		if e.dropped {
			continue
		}
		base := restBase(e.fullURL)
		rewriteReferences(e.res, func(ref string) (string, bool) {
			return resolveAlias(alias, base, ref)
		})
		kept = append(kept, e)
	}
	// A resource that collided with an earlier one and now, references
	// rewritten, has the same content is a duplicate: drop it and point its
	// referrers at the first.
	redirect := map[string]string{}
	for _, e := range kept {
		if p := e.collided; p != nil && !p.dropped {
			same, err := sameContent(e.res, p.res)
			if err != nil {
				return nil, 0, err
			}
			if same {
				e.dropped = true
				redirect[e.typ+"/"+e.finalID] = p.typ + "/" + p.finalID
			}
		}
	}
	var out []*entry
	for _, e := range kept {
		if e.dropped {
			continue
		}
		if len(redirect) > 0 {
			rewriteReferences(e.res, func(ref string) (string, bool) {
				r, ok := redirect[ref]
				return r, ok
			})
		}
		e.res.SetResourceID(e.finalID)
		out = append(out, e)
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	if format == acds.OutputFHIRR4Deidentified {
		maxBytes := opts.MaxBytes
		if maxBytes <= 0 {
			maxBytes = DefaultMaxBytes
		}
		// The repair evaluates constraints before and after: twice the
		// validation's budget for the largest input allowed.
		budget := 2 * constraintBudget(maxBytes)
		d := &safeHarbor{key: opts.DeidentKey, now: now, resolves: make(map[string]bool, len(out)), budget: &budget}
		rs := make([]r4.Resource, len(out))
		for i, e := range out {
			d.resolves[e.typ+"/"+e.finalID] = true
			rs[i] = e.res
		}
		nested := pseudonymiseNested(opts.DeidentKey, rs, d.resolves)
		for _, e := range out {
			if err := d.resource(e.res); err != nil {
				return nil, 0, err
			}
		}
		nested.restoreDocumentTimestamps()
	}

	prov := provenance(opts, format, now, out)
	bundle := &r4.Bundle{Type: r4.NewCode("collection"), Entry: make([]r4.BundleEntry, 0, len(out)+1)}
	for _, e := range out {
		bundle.Entry = append(bundle.Entry, r4.BundleEntry{FullURL: r4.NewURI(outBase + "/" + e.typ + "/" + e.finalID), Resource: e.res})
	}
	bundle.Entry = append(bundle.Entry, r4.BundleEntry{FullURL: r4.NewURI(outBase + "/Provenance/" + prov.ID), Resource: prov})
	return bundle, len(bundle.Entry), nil
}

// hasResources reports whether a validated root holds anything
// normalize carries into its output besides the Provenance: a resource
// that is neither a Bundle nor our earlier Provenance, or a Bundle entry
// resource that is neither our earlier Provenance nor a search outcome.
// (Check needs it to refuse, as Process does, input with nothing to
// process.)
func hasResources(root r4.Resource) bool {
	b, ok := root.(*r4.Bundle)
	if !ok {
		return root != nil && !isOurProvenance(root)
	}
	for i := range b.Entry {
		if carried(&b.Entry[i]) {
			return true
		}
	}
	return false
}

// carried reports whether normalize carries a Bundle entry's resource into
// its output. It does not carry request-only or response-only entries (no
// data), our earlier Provenance (regenerated, which keeps normalisation
// idempotent) or a search's OperationOutcome (about the search, not the
// record).
func carried(e *r4.BundleEntry) bool {
	return e.Resource != nil && !isOurProvenance(e.Resource) && (e.Search == nil || text(e.Search.Mode) != "outcome")
}

// isOurProvenance reports whether r is a Provenance ACDS produced
// (meta.tag TagSystem#provenance).
func isOurProvenance(r r4.Resource) bool {
	p, ok := r.(*r4.Provenance)
	if !ok || p == nil || p.Meta == nil {
		return false
	}
	for i := range p.Meta.Tag {
		t := &p.Meta.Tag[i]
		if text(t.System) == TagSystem && text(t.Code) == "provenance" {
			return true
		}
	}
	return false
}

// rewriteReferences replaces every Reference.reference in r's scope (see
// scopeWalk) for which f returns a replacement.
func rewriteReferences(r r4.Resource, f func(string) (string, bool)) {
	// EachReference without nested resources keeps to scopeWalk's scope,
	// without a full walk.
	r4.EachReference(r, false, func(ref *r4.Reference) {
		if s := ref.Reference; s != nil && s.HasValue() {
			if v, ok := f(s.Value); ok {
				s.Value = v
			}
		}
	})
}

// scopeWalk walks r like r4.Walk, its contained resources included, but
// not the other resources nested in it: the entries of a Bundle, the
// resources of a Parameters and a Bundle response's outcome. Each of these
// is a scope of its own, where references resolve among its own resources
// (a nested document Bundle's urn:uuid names its own entry, not the outer
// Bundle's entry of the same fullUrl), so rewriting them with the outer
// Bundle's table would misattribute data.
func scopeWalk(r r4.Resource, fn r4.WalkFunc) error {
	return r4.Walk(r, func(path *r4.Path, node any) error {
		// Nested resources are held by elements named resource
		// (Bundle.entry, Parameters.parameter) and outcome (a Bundle
		// response): only those nodes are asked whether they are one,
		// sparing every other node an interface assertion.
		if n := path.Len(); n > 0 {
			if name := path.Segments()[n-1].Name; name == "resource" || name == "outcome" {
				if _, ok := node.(r4.Resource); ok {
					return r4.SkipChildren
				}
			}
		}
		return fn(path, node)
	})
}

// withoutID calls f with r's id removed, then restores it.
func withoutID(r r4.Resource, f func() ([]byte, error)) ([]byte, error) {
	id := r.ResourceID()
	r.SetResourceID("")
	defer r.SetResourceID(id)
	return f()
}

// sameContent reports whether a and b are equal but for their ids. The
// encoder is deterministic, so equal content gives equal bytes.
func sameContent(a, b r4.Resource) (bool, error) {
	x, err := withoutID(a, func() ([]byte, error) { return r4.Marshal(a) })
	if err != nil {
		return false, fmt.Errorf("fhir: normalise: %w", err)
	}
	y, err := withoutID(b, func() ([]byte, error) { return r4.Marshal(b) })
	if err != nil {
		return false, fmt.Errorf("fhir: normalise: %w", err)
	}
	return bytes.Equal(x, y), nil
}

// contentID derives an id from a resource's content: the first 16
// bytes, in hex, of the SHA-256 of its canonical JSON without its id.
func contentID(r r4.Resource) (string, error) {
	b, err := withoutID(r, func() ([]byte, error) { return canonicalResource(r) })
	if err != nil {
		return "", fmt.Errorf("fhir: normalise: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// provenance builds the Provenance resource describing this
// processing of the entries out.
func provenance(opts Options, format string, now time.Time, out []*entry) *r4.Provenance {
	recorded := now.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
	measurement := opts.Measurement
	if measurement == "" {
		measurement = "unmeasured"
	}
	source := opts.Source
	if source == "" {
		source = "raw"
	}
	targets := make([]r4.Reference, 0, len(out))
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", measurement, source, recorded, format)
	for _, e := range out {
		ref := e.typ + "/" + e.finalID
		targets = append(targets, r4.Reference{Reference: r4.NewString(ref)})
		h.Write([]byte(ref))
		h.Write([]byte{0})
	}
	sourceDisplay := "raw submission"
	if source != "raw" {
		sourceDisplay = "portal " + source + " (MPC-TLS)"
	}
	return &r4.Provenance{
		ID:       hex.EncodeToString(h.Sum(nil)[:16]),
		Meta:     &r4.Meta{Tag: []r4.Coding{{System: r4.NewURI(TagSystem), Code: r4.NewCode("provenance")}}},
		Target:   targets,
		Recorded: r4.NewInstant(recorded),
		Activity: &r4.CodeableConcept{Text: r4.NewString("ACDS " + format + " processing")},
		Agent: []r4.ProvenanceAgent{{
			Type: &r4.CodeableConcept{Coding: []r4.Coding{{
				System: r4.NewURI("http://terminology.hl7.org/CodeSystem/provenance-participant-type"),
				Code:   r4.NewCode("assembler"),
			}}},
			Who: &r4.Reference{
				Identifier: &r4.Identifier{System: r4.NewURI(MeasurementSystem), Value: r4.NewString(measurement)},
				Display:    r4.NewString("ACDS enclave"),
			},
		}},
		Entity: []r4.ProvenanceEntity{{
			Role: r4.NewCode("source"),
			What: &r4.Reference{
				Identifier: &r4.Identifier{System: r4.NewURI(SourceSystem), Value: r4.NewString(source)},
				Display:    r4.NewString(sourceDisplay),
			},
		}},
	}
}

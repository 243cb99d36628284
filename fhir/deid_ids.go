package fhir

import (
	"strings"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// nestedIDs pseudonymises, for acds.OutputFHIRR4Deidentified, the ids and URLs
// that the top-level id pseudonyms do not cover: those of the resources
// nested in the output's entries. It runs after normalize has given the
// entries their pseudonymous ids and rewritten their references, and
// before the Safe Harbor walk, which then keeps the rewritten references
// because they are in resolves.
//
//   - A contained resource's id X becomes pseudonymID(key, "#"+X), and
//     every local reference "#X" (Reference.reference, a canonical such as
//     Questionnaire.item.answerValueSet, or a uri such as
//     ValueSet.compose.include.system) becomes "#" + that pseudonym.
//   - A resource nested in a Bundle entry, a Parameters parameter (or part)
//     or a Bundle response's outcome gets the id pseudonymID(key,
//     Type+"/"+id), the very pseudonym a top-level resource of that type
//     and id gets.
//   - Each nested Bundle and Parameters is a scope of its own: a reference
//     inside it that names one of its resources (by fullUrl, by Type/id, or
//     relative to the referring entry's RESTful base) is rewritten to that
//     resource's pseudonymous identity; any other is left for the Safe
//     Harbor walk to drop, like a top-level reference outside the Bundle.
//   - A nested Bundle's fullUrls become pseudonyms: a urn:uuid, or any
//     other URL that is not RESTful, becomes a urn:uuid derived from it; a
//     RESTful URL keeps its type and gets the pseudonymous id, under a
//     base pseudonymous too (https://acds.invalid/ + the keyed hash of the
//     original base), so entries of different servers stay distinct.
//     entry.request.url and entry.response.location are rewritten the same
//     way (a search's query string is dropped, an unrecognised request URL
//     masked, an unrecognised location removed); Bundle.link and
//     entry.link, URLs of the original server, are removed.
type nestedIDs struct {
	key []byte
	// resolves is the Safe Harbor walk's set of references to keep: every
	// reference rewritten here is added.
	resolves map[string]bool
	// docs are the nested document Bundles and their original timestamps'
	// years (see restoreDocumentTimestamps).
	docs []docStamp
	// local remembers the pseudonyms of contained ids (see localID).
	local map[string]string
}

// docStamp is a nested document Bundle and the year of its timestamp.
type docStamp struct {
	b    *r4.Bundle
	year string
}

// pseudonymiseNested pseudonymises the ids and URLs nested in rs, the
// output's entry resources (see nestedIDs), adding every reference it
// rewrites to resolves. Call restoreDocumentTimestamps on the result after
// the Safe Harbor walk.
func pseudonymiseNested(key []byte, rs []r4.Resource, resolves map[string]bool) *nestedIDs {
	p := &nestedIDs{key: key, resolves: resolves}
	for _, r := range rs {
		p.resource(r, nil)
	}
	return p
}

// restoreDocumentTimestamps gives a nested document Bundle whose timestamp
// the Safe Harbor walk removed (an optional instant) the first instant of
// its original year: bdl-10 requires a document to have one.
func (p *nestedIDs) restoreDocumentTimestamps() {
	for _, d := range p.docs {
		if t := d.b.Timestamp; t == nil || (!t.HasValue() && len(t.Extension) == 0) {
			d.b.Timestamp = r4.NewInstant(d.year + "-01-01T00:00:00Z")
		}
	}
}

// resource pseudonymises what is nested in r, whose own id is already
// set: its contained resources' ids and the local references to them, and
// every nested scope. scope rewrites r's other references (those of its
// contained resources too), reporting false for those it leaves; nil
// leaves them all.
func (p *nestedIDs) resource(r r4.Resource, scope func(string) (string, bool)) {
	// Every resource is walked: a local reference ("#id") names a
	// contained resource by its id, and must follow its pseudonym even
	// where no contained resource is present (a canonical or uri, which
	// validation does not resolve).
	holders := []r4.Resource{r}
	_ = scopeWalk(r, func(path *r4.Path, node any) error {
		switch n := node.(type) {
		case r4.Resource:
			if path.Len() > 0 { // contained (scopeWalk skips the others)
				if id := n.ResourceID(); id != "" {
					n.SetResourceID(p.localID(id))
				}
				holders = append(holders, n)
			}
		case *r4.Reference:
			s := n.Reference
			if s == nil || !s.HasValue() {
				break
			}
			if strings.HasPrefix(s.Value, "#") {
				s.Value = p.localRef(s.Value)
			} else if scope != nil {
				if v, ok := scope(s.Value); ok {
					s.Value = v
					p.resolves[v] = true
				}
			}
		case *r4.Canonical:
			if n.HasValue() && strings.HasPrefix(n.Value, "#") {
				n.Value = p.localRef(n.Value)
			}
		case *r4.URI:
			// A code system contained in a ValueSet is named by a uri
			// (compose.include.system "#id").
			if n.HasValue() && strings.HasPrefix(n.Value, "#") {
				n.Value = p.localRef(n.Value)
			}
		}
		return nil
	})
	for _, h := range holders {
		switch n := h.(type) {
		case *r4.Bundle:
			p.bundle(n)
		case *r4.Parameters:
			p.parameters(n)
		}
	}
}

// localID is the pseudonym of a contained resource's id. Sources reuse a
// few contained ids ("coverage", "referral") in many resources, so the
// pseudonyms are remembered.
func (p *nestedIDs) localID(id string) string {
	v, ok := p.local[id]
	if !ok {
		if p.local == nil {
			p.local = map[string]string{}
		}
		v = pseudonymID(p.key, "#"+id)
		p.local[id] = v
	}
	return v
}

// localRef rewrites a local reference "#id" ("#" alone names the
// container and is kept).
func (p *nestedIDs) localRef(ref string) string {
	if ref == "#" {
		return ref
	}
	return "#" + p.localID(ref[1:])
}

// setID gives a nested resource its pseudonymous id.
func (p *nestedIDs) setID(r r4.Resource) {
	if id := r.ResourceID(); id != "" {
		r.SetResourceID(pseudonymID(p.key, r.ResourceType()+"/"+id))
	}
}

// typeID returns the pseudonym of a relative "Type/id" (no version).
func (p *nestedIDs) typeID(plain string) string {
	return refType(plain) + "/" + pseudonymID(p.key, refType(plain)+"/"+lastID(plain))
}

// url returns the pseudonym of an absolute URL without a version: a
// RESTful one keeps its type under a pseudonymous base, any other becomes
// a urn:uuid.
func (p *nestedIDs) url(u string) string {
	if base := restBase(u); base != "" {
		return "https://acds.invalid/" + keyed(p.key, "base", base) + "/" + p.typeID(u[len(base)+1:])
	}
	h := keyed(p.key, "url", u)
	return "urn:uuid:" + h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// splitVersion splits "/_history/v" off a reference.
func splitVersion(ref string) (plain, version string) {
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		return ref[:i], ref[i:]
	}
	return ref, ""
}

// versionPseudonym is the keyed pseudonym of a version id, the same for
// meta.versionId and "/_history/" references.
func versionPseudonym(key []byte, v string) string { return keyed(key, "version", v) }

// version pseudonymises the "/_history/v" suffix splitVersion returned.
func (p *nestedIDs) version(suffix string) string {
	if suffix == "" {
		return ""
	}
	return "/_history/" + versionPseudonym(p.key, strings.TrimPrefix(suffix, "/_history/"))
}

// bundle pseudonymises a nested Bundle's entries as one scope.
func (p *nestedIDs) bundle(b *r4.Bundle) {
	b.Link = nil
	if b.Type != nil && b.Type.Value == "document" && b.Timestamp != nil && len(b.Timestamp.Value) >= 4 {
		p.docs = append(p.docs, docStamp{b, b.Timestamp.Value[:4]})
	}
	fullURLs := map[string]string{} // original fullUrl -> pseudonym
	ids := map[string]bool{}        // Type/id of the entries' resources
	for i := range b.Entry {
		e := &b.Entry[i]
		if r := e.Resource; r != nil && r.ResourceID() != "" {
			ids[r.ResourceType()+"/"+r.ResourceID()] = true
		}
		if fu := e.FullURL; fu != nil && fu.HasValue() {
			if _, ok := fullURLs[fu.Value]; !ok {
				fullURLs[fu.Value] = p.url(fu.Value)
			}
		}
	}
	for i := range b.Entry {
		e := &b.Entry[i]
		e.Link = nil
		base := ""
		if fu := e.FullURL; fu != nil && fu.HasValue() {
			base = restBase(fu.Value)
			fu.Value = fullURLs[fu.Value]
		}
		scope := func(ref string) (string, bool) {
			plain, version := splitVersion(ref)
			if strings.Contains(plain, ":") {
				if u, ok := fullURLs[plain]; ok {
					return u + p.version(version), true
				}
				return "", false
			}
			if refType(plain) == "" {
				return "", false
			}
			if _, ok := fullURLs[base+"/"+plain]; (base != "" && ok) || ids[plain] {
				return p.typeID(plain) + p.version(version), true
			}
			return "", false
		}
		if e.Resource != nil {
			p.setID(e.Resource)
			p.resource(e.Resource, scope)
		}
		if q := e.Request; q != nil && q.URL != nil && q.URL.HasValue() {
			if u, ok := p.requestURL(q.URL.Value); ok {
				q.URL.Value = u
			} else {
				q.URL = &r4.URI{Extension: []r4.Extension{maskedExtension()}}
			}
		}
		if s := e.Response; s != nil {
			if l := s.Location; l != nil && l.HasValue() {
				if u, ok := p.requestURL(l.Value); ok {
					l.Value = u
				} else {
					s.Location = nil
				}
			}
			if s.Outcome != nil {
				p.setID(s.Outcome)
				p.resource(s.Outcome, scope)
			}
		}
	}
}

// requestURL pseudonymises a request URL or response location: "Type"
// stays, "Type/id[/_history/v]" and a RESTful absolute URL get their
// pseudonyms, a query string is dropped. It reports false for anything
// else (operations, other URLs).
func (p *nestedIDs) requestURL(u string) (string, bool) {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	plain, version := splitVersion(u)
	switch {
	case !strings.Contains(plain, ":") && spec.IsResource(plain) && version == "":
		return plain, true
	case !strings.Contains(plain, ":") && refType(plain) != "" && strings.Count(plain, "/") == 1:
		return p.typeID(plain) + p.version(version), true
	case restBase(plain) != "":
		return p.url(plain) + p.version(version), true
	}
	return "", false
}

// parameters pseudonymises a nested Parameters' resources as one scope,
// where a relative reference names one of them by Type/id.
func (p *nestedIDs) parameters(x *r4.Parameters) {
	var rs []r4.Resource
	var collect func(ps []r4.ParametersParameter)
	collect = func(ps []r4.ParametersParameter) {
		for i := range ps {
			if ps[i].Resource != nil {
				rs = append(rs, ps[i].Resource)
			}
			collect(ps[i].Part)
		}
	}
	collect(x.Parameter)
	ids := map[string]bool{}
	for _, r := range rs {
		if r.ResourceID() != "" {
			ids[r.ResourceType()+"/"+r.ResourceID()] = true
		}
	}
	scope := func(ref string) (string, bool) {
		plain, version := splitVersion(ref)
		if strings.Contains(plain, ":") || !ids[plain] {
			return "", false
		}
		return p.typeID(plain) + p.version(version), true
	}
	for _, r := range rs {
		p.setID(r)
		p.resource(r, scope)
	}
}

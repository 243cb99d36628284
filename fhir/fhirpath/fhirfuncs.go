package fhirpath

import (
	"strings"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

func notSupported(what string) *funcDef {
	return &funcDef{0, -1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
		return nil, evalErr(ErrNotSupported, n.at, "%s() is not supported", what)
	}}
}

func fhirFuncs() map[string]*funcDef {
	return map[string]*funcDef{
		"extension": {1, 1, extensionFn},
		// hasExtension(url) is extension(url).exists(), used by R4's own
		// search parameters.
		"hasExtension": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			ext, err := extensionFn(e, n, t, sc)
			if err != nil {
				return nil, err
			}
			return boolColl(len(ext) > 0), nil
		}},
		"hasValue": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(t) != 1 {
				return boolColl(false), nil
			}
			nd, ok := t[0].(*Node)
			if !ok {
				return boolColl(false), nil
			}
			p, ok := nd.primitive()
			return boolColl(ok && p.HasValue()), nil
		}},
		"getValue": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			if len(t) != 1 {
				return nil, nil
			}
			nd, ok := t[0].(*Node)
			if !ok {
				return nil, nil
			}
			if _, ok := nd.primitive(); !ok {
				return nil, nil
			}
			v, ok := toSystem(nd)
			if !ok {
				return nil, nil
			}
			return Collection{v}, nil
		}},
		"resolve": {0, 0, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			var out Collection
			for _, v := range t {
				ref := ""
				switch x := v.(type) {
				case *Node:
					if r, ok := x.Value.(*r4.Reference); ok {
						if r.Reference != nil {
							ref = r.Reference.Value
						}
					} else if p, ok := x.primitive(); ok {
						ref = p.Text()
					}
				case String:
					ref = string(x)
				}
				if ref == "" {
					continue
				}
				r, err := e.resolve(ref, n.at)
				if err != nil {
					return nil, err
				}
				if r != nil {
					out = append(out, NodeOf(r))
				}
			}
			return out, nil
		}},
		"conformsTo": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			url, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			const base = "http://hl7.org/fhir/StructureDefinition/"
			if !strings.HasPrefix(url, base) {
				return nil, evalErr(ErrNotSupported, n.at, "conformsTo(%q): only the base R4 definitions are known", url)
			}
			typ := strings.TrimPrefix(url, base)
			if spec.Lookup(typ) == nil && !fhirAbstract[typ] {
				return nil, evalErr(ErrNotSupported, n.at, "conformsTo(%q): not a base R4 type; profiles are not supported", url)
			}
			v, ok, err := singleton(t, n.at)
			if err != nil || !ok {
				return nil, err
			}
			nd, ok := v.(*Node)
			return boolColl(ok && nodeIs(nd, typ)), nil
		}},
		"memberOf": {1, 1, func(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
			url, ok, err := e.argString(n, 0, sc)
			if err != nil || !ok {
				return nil, err
			}
			if len(t) == 0 {
				return nil, nil
			}
			if len(t) > 1 {
				return nil, evalErr(ErrEvaluation, n.at, "memberOf() on %d items", len(t))
			}
			vs := spec.LookupValueSet(url)
			if vs == nil {
				return nil, evalErr(ErrNotSupported, n.at, "memberOf(%q): value set not available without a terminology server", url)
			}
			return memberOf(vs, t[0], n.at)
		}},
		"htmlChecks":        notSupported("htmlChecks"),
		"subsumes":          notSupported("subsumes"),
		"subsumedBy":        notSupported("subsumedBy"),
		"elementDefinition": notSupported("elementDefinition"),
		"slice":             notSupported("slice"),
		"checkModifiers":    notSupported("checkModifiers"),
	}
}

func memberOf(vs *spec.ValueSet, v Value, at int) (Collection, error) {
	if nd, ok := v.(*Node); ok {
		switch x := nd.Value.(type) {
		case *r4.Coding:
			return boolColl(codingIn(vs, x)), nil
		case *r4.CodeableConcept:
			for i := range x.Coding {
				if codingIn(vs, &x.Coding[i]) {
					return boolColl(true), nil
				}
			}
			return boolColl(false), nil
		}
	}
	s, ok := toSystem(v)
	if !ok {
		return nil, nil
	}
	if str, ok := s.(String); ok {
		return boolColl(vs.Contains("", string(str))), nil
	}
	return nil, evalErr(ErrEvaluation, at, "memberOf() of %s", typeName(v))
}

func codingIn(vs *spec.ValueSet, c *r4.Coding) bool {
	if c.Code == nil || !c.Code.HasValue() {
		return false
	}
	sys := ""
	if c.System != nil {
		sys = c.System.Value
	}
	if sys == "" {
		return false
	}
	return vs.Contains(sys, c.Code.Value)
}

// resolve finds the resource a reference points to: a contained resource
// (#id) of %rootResource (# alone is %rootResource itself), or an entry of
// %bundle by fullUrl or Type/id.
func (e *evaluator) resolve(ref string, at int) (r4.Resource, error) {
	if ref == "#" {
		for _, v := range e.rootColl() {
			if r, ok := v.(*Node).Value.(r4.Resource); ok {
				return r, nil
			}
		}
		return nil, nil
	}
	if strings.HasPrefix(ref, "#") {
		for _, v := range e.rootColl() {
			nd, ok := v.(*Node)
			if !ok {
				continue
			}
			var found r4.Resource
			visited := 0
			r4.ChildrenNamed(nd.Value, "contained", false, func(_ string, _ int, c any) bool {
				visited++
				if r, ok := c.(r4.Resource); ok && r.ResourceID() == ref[1:] {
					found = r
					return false
				}
				return true
			})
			if err := e.step(visited, at); err != nil {
				return nil, err
			}
			if found != nil {
				return found, nil
			}
		}
		return nil, nil
	}
	if e.bundle == nil {
		return nil, nil
	}
	if ix := e.env.BundleIndex; ix != nil && ix.b == e.bundle {
		return ix.find(ref), nil
	}
	// Without an index each resolve() scans the entries, and counts them
	// as steps.
	if err := e.step(len(e.bundle.Entry), at); err != nil {
		return nil, err
	}
	return scanEntries(e.bundle, ref), nil
}

// scanEntries finds the first entry of b whose fullUrl is ref, or whose
// resource is the Type/id ref names (for an absolute ref, with a fullUrl
// ending the same way).
func scanEntries(b *r4.Bundle, ref string) r4.Resource {
	typ, id := refTypeID(ref)
	for i := range b.Entry {
		en := &b.Entry[i]
		if en.Resource == nil {
			continue
		}
		if entryMatches(en, ref, typ, id) {
			return en.Resource
		}
	}
	return nil
}

// entryMatches reports whether entry en is what ref (of type typ and id
// id, "" when it names none) points to.
func entryMatches(en *r4.BundleEntry, ref, typ, id string) bool {
	if en.FullURL != nil && en.FullURL.Value == ref {
		return true
	}
	// A relative reference matches the entry of that type and id; an
	// absolute one only when the fullUrl ends the same way.
	return typ != "" && en.Resource.ResourceType() == typ && en.Resource.ResourceID() == id &&
		(!strings.Contains(ref, "://") || en.FullURL != nil && strings.HasSuffix(en.FullURL.Value, "/"+typ+"/"+id))
}

// BundleIndex finds the entries of a Bundle by fullUrl and by Type/id, so
// that resolve() does not scan the entries each time. Build one with
// NewBundleIndex and pass it in Env.BundleIndex to every evaluation whose
// %bundle is that Bundle; it is read-only once built, so evaluations may
// share it concurrently.
type BundleIndex struct {
	b        *r4.Bundle
	byURL    map[string]int   // first entry with that fullUrl
	byTypeID map[string][]int // entries holding Type/id, in order
}

// NewBundleIndex indexes the entries of b.
func NewBundleIndex(b *r4.Bundle) *BundleIndex {
	ix := &BundleIndex{b: b, byURL: make(map[string]int, len(b.Entry)), byTypeID: make(map[string][]int, len(b.Entry))}
	for i := range b.Entry {
		en := &b.Entry[i]
		if en.Resource == nil {
			continue
		}
		if en.FullURL != nil {
			if _, ok := ix.byURL[en.FullURL.Value]; !ok {
				ix.byURL[en.FullURL.Value] = i
			}
		}
		k := en.Resource.ResourceType() + "/" + en.Resource.ResourceID()
		ix.byTypeID[k] = append(ix.byTypeID[k], i)
	}
	return ix
}

// find is scanEntries with the index: the first entry in order that ref
// matches.
func (ix *BundleIndex) find(ref string) r4.Resource {
	best := -1
	if i, ok := ix.byURL[ref]; ok {
		best = i
	}
	if typ, id := refTypeID(ref); typ != "" {
		for _, i := range ix.byTypeID[typ+"/"+id] {
			if best >= 0 && i > best {
				break
			}
			if entryMatches(&ix.b.Entry[i], ref, typ, id) {
				best = i
				break
			}
		}
	}
	if best < 0 {
		return nil
	}
	return ix.b.Entry[best].Resource
}

// refTypeID splits a reference into its resource type and id, dropping a
// _history suffix.
func refTypeID(ref string) (string, string) {
	if i := strings.Index(ref, "/_history/"); i >= 0 {
		ref = ref[:i]
	}
	parts := strings.Split(ref, "/")
	if len(parts) < 2 {
		return "", ""
	}
	typ, id := parts[len(parts)-2], parts[len(parts)-1]
	if !r4.IsResourceType(typ) {
		return "", ""
	}
	return typ, id
}

// extensionFn is extension(url): the extensions of the input items with
// that url.
func extensionFn(e *evaluator, n *callNode, t Collection, sc *scope) (Collection, error) {
	url, ok, err := e.argString(n, 0, sc)
	if err != nil || !ok {
		return nil, err
	}
	var out Collection
	for _, v := range t {
		nd, ok := v.(*Node)
		if !ok {
			continue
		}
		for _, x := range navigate(nd, "extension", nil, e, nil) {
			if ext, ok := x.(*Node).Value.(*r4.Extension); ok && ext.URL == url {
				out = append(out, x)
			}
		}
	}
	return out, nil
}

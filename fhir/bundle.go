package fhir

import (
	"strconv"
	"strings"

	"github.com/acds-project/acds/fhir/r4"
)

// bundleRules checks the Bundle rules on the typed model: fullUrl form and
// consistency, the bdl-* invariants that matter for data integrity, and
// reference resolution inside the Bundle. where is the Bundle's path; bc
// holds what the walk collected from the entries (their references and
// versions).
func (v *validator) bundleRules(where string, b *r4.Bundle, bc *bundleCtx) {
	btype := text(b.Type)
	for i := range b.Link {
		rel := text(b.Link[i].Relation)
		for j := 0; j < i && rel != ""; j++ {
			if text(b.Link[j].Relation) == rel {
				v.errorf("invariant", where+".link["+strconv.Itoa(i)+"]", "the link relation %q is repeated; a Bundle has one link of each relation", rel)
				break
			}
		}
	}
	if b.Total != nil && btype != "searchset" && btype != "history" {
		v.errorf("invariant", where, "bdl-1: total only when a search or history")
	}
	if len(b.Entry) == 0 {
		if btype == "document" {
			v.errorf("invariant", where, "bdl-11: a document must have a Composition as the first resource")
		}
		if btype == "message" {
			v.errorf("invariant", where, "bdl-12: a message must have a MessageHeader as the first resource")
		}
		return
	}
	entryAt := func(i int) string { return where + ".entry[" + strconv.Itoa(i) + "]" }
	// Relative references per entry, for the missing-fullUrl check.
	relative := map[int]bool{}
	for _, r := range bc.refs {
		if !strings.Contains(r.ref, ":") && !strings.HasPrefix(r.ref, "#") {
			relative[r.entry] = true
		}
	}
	seenFull := bc.seenFull
	// byTypeID: for each type and id, the first entry holding it and how
	// many do.
	byTypeID := bc.byTypeID
	// Whether a reference is the fullUrl of an entry (with a resource or
	// not).
	isFullURL := func(ref string) bool {
		_, ok := bc.fullURLTypes[ref]
		return ok
	}
	for i := range b.Entry {
		e := &b.Entry[i]
		res := e.Resource
		fu := text(e.FullURL)
		if res == nil && e.Request == nil && e.Response == nil && !(v.damaged != nil && v.damaged[entryAt(i)]) {
			v.errorf("invariant", entryAt(i), "bdl-5: an entry must have a resource unless there is a request or response")
		}
		if e.Search != nil && btype != "searchset" {
			v.errorf("invariant", entryAt(i), "bdl-2: entry.search only when a search")
		}
		hasReq := e.Request != nil
		switch btype {
		case "batch", "transaction", "history":
			if !hasReq {
				v.errorf("invariant", entryAt(i), "bdl-3: entry.request mandatory for batch/transaction/history")
			}
		default:
			if hasReq {
				v.errorf("invariant", entryAt(i), "bdl-3: entry.request allowed only for batch/transaction/history")
			}
		}
		hasResp := e.Response != nil
		switch btype {
		case "batch-response", "transaction-response", "history":
			if !hasResp {
				v.errorf("invariant", entryAt(i), "bdl-4: entry.response mandatory for batch-response/transaction-response/history")
			}
		default:
			if hasResp {
				v.errorf("invariant", entryAt(i), "bdl-4: entry.response allowed only for batch-response/transaction-response/history")
			}
		}
		searchMode := ""
		if e.Search != nil {
			searchMode = text(e.Search.Mode)
		}
		var typ, id string
		if res != nil {
			typ, id = res.ResourceType(), res.ResourceID()
			if id != "" {
				k := typeID{typ, id}
				if m, ok := byTypeID[k]; ok {
					byTypeID[k] = matches{m.first, m.n + 1}
				} else {
					byTypeID[k] = matches{i, 1}
				}
			}
			if btype == "searchset" && id == "" && searchMode == "match" {
				v.errorf("required", entryAt(i)+".resource", "search results must have ids")
			}
		}
		if fu == "" && res != nil {
			// Transaction and batch entries may leave fullUrl out: their
			// relative references resolve against the receiving server.
			switch {
			case btype == "transaction" || btype == "batch" || btype == "batch-response" || btype == "transaction-response":
			case btype == "searchset" && searchMode == "outcome":
				// A search's OperationOutcome has no identity.
			default:
				v.errorf("required", entryAt(i), "bundle entry missing fullUrl")
				if relative[i] {
					v.errorf("invalid", entryAt(i), "relative reference appears inside a Bundle whose entry is missing a fullUrl")
				}
			}
		} else if fu != "" {
			at := func() string { return entryAt(i) + ".fullUrl" }
			switch {
			case !strings.Contains(fu, ":"):
				v.errorf("value", at(), "the fullUrl must be an absolute URL (not %q)", fu)
			case strings.Contains(fu, "/_history/"):
				v.errorf("invariant", at(), "bdl-8: fullUrl cannot be a version specific reference")
			case strings.HasPrefix(fu, "urn:uuid:") && !validUUID(fu):
				v.errorf("value", at(), "the fullUrl %q is not a valid urn:uuid", fu)
			case id != "" && !fullURLMatches(fu, typ, id) && refType(fu) != "":
				v.errorf("value", at(), "the fullUrl %q does not match the resource %s/%s", fu, typ, id)
			}
			k := fullURLVersion{fu, bc.versions[i]}
			if j, dup := seenFull[k]; dup && btype != "history" {
				v.errorf("invariant", at(), "bdl-7: fullUrl must be unique in a bundle (also entry[%d])", j)
			} else {
				seenFull[k] = i
			}
		}
	}

	if btype != "history" {
		for i := range b.Entry {
			res := b.Entry[i].Resource
			if res == nil || res.ResourceID() == "" {
				continue
			}
			if m := byTypeID[typeID{res.ResourceType(), res.ResourceID()}]; m.n > 1 && m.first != i {
				v.add(SeverityWarning, "duplicate", entryAt(i), "duplicate resource id: %s/%s is also in entry[%d]", res.ResourceType(), res.ResourceID(), m.first)
			}
		}
	}

	first := ""
	if r := b.Entry[0].Resource; r != nil {
		first = r.ResourceType()
	}
	switch btype {
	case "document":
		if idn := b.Identifier; idn == nil || text(idn.System) == "" || text(idn.Value) == "" {
			v.errorf("invariant", where, "bdl-9: a document must have an identifier with a system and a value")
		}
		if b.Timestamp == nil {
			v.errorf("invariant", where, "bdl-10: a document must have a date (timestamp)")
		}
		if first != "Composition" {
			v.errorf("invariant", where, "bdl-11: a document must have a Composition as the first resource")
		}
	case "message":
		if first != "MessageHeader" {
			v.errorf("invariant", where, "bdl-12: a message must have a MessageHeader as the first resource")
		}
	}

	// Reference resolution inside the Bundle.
	for _, r := range bc.refs {
		ref := r.ref
		at := func() string { return entryAt(r.entry) + ".resource" }
		switch {
		case strings.HasPrefix(ref, "urn:uuid:") || strings.HasPrefix(ref, "urn:oid:"):
			if !isFullURL(ref) && (btype == "transaction" || btype == "batch" || btype == "document") {
				v.errorf("not-found", at(), "unable to resolve resource with reference %q in the Bundle", ref)
			}
		case strings.Contains(ref, ":") || strings.HasPrefix(ref, "#") || strings.Contains(ref, "?"):
			if isFullURL(ref) {
				continue
			}
			if typ := refType(ref); typ != "" {
				if m := byTypeID[typeID{typ, lastID(ref)}]; m.n > 1 && btype == "document" {
					v.errorf("not-found", at(), "found %d matches for %q in the Bundle", m.n, ref)
				}
			}
		default:
			base := ref
			versioned := false
			if j := strings.Index(ref, "/_history/"); j >= 0 {
				base, versioned = ref[:j], true
			}
			var m matches
			if j := strings.LastIndexByte(base, '/'); j >= 0 {
				m = byTypeID[typeID{base[:j], base[j+1:]}]
			}
			switch {
			case m.n > 1 && !versioned:
				v.errorf("not-found", at(), "multiple matches in the Bundle for reference %q", ref)
			case m.n == 0 && btype == "document":
				v.errorf("not-found", at(), "can't find %q in the Bundle", ref)
			case versioned && btype == "document":
				want := ref[strings.LastIndexByte(ref, '/')+1:]
				found := false
				for j := range b.Entry {
					if r := b.Entry[j].Resource; r != nil && bc.versions[j] == want && base == r.ResourceType()+"/"+r.ResourceID() {
						found = true
					}
				}
				if !found {
					v.errorf("not-found", at(), "can't find %q in the Bundle", ref)
				}
			}
		}
	}
}

// fullURLVersion is an entry's fullUrl and its resource's meta.versionId.
type fullURLVersion struct{ full, version string }

// typeID is a resource's type and id.
type typeID struct{ typ, id string }

// matches counts the entries holding one type and id.
type matches struct{ first, n int }

// fullURLMatches reports whether fullUrl ends in "/typ/id".
func fullURLMatches(fullURL, typ, id string) bool {
	n := len(fullURL)
	return n >= len(typ)+len(id)+2 && fullURL[n-len(id):] == id && fullURL[n-len(id)-1] == '/' &&
		fullURL[n-len(id)-1-len(typ):n-len(id)-1] == typ && fullURL[n-len(id)-2-len(typ)] == '/'
}

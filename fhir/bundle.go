package fhir

import (
	"strings"
)

// bundle checks the Bundle rules: fullUrl form and consistency, the
// bdl-* invariants that matter for data integrity, and reference
// resolution inside the Bundle. n is the Bundle object; the validator's
// path points at it.
func (v *validator) bundle(n *node) {
	btype := n.getStr("type")
	if n.get("total") != nil && btype != "searchset" && btype != "history" {
		v.errorf("invariant", "bdl-1: total only when a search or history")
	}
	entries := n.get("entry")
	if entries == nil || entries.kind != kArray {
		if btype == "document" {
			v.errorf("invariant", "bdl-11: a document must have a Composition as the first resource")
		}
		if btype == "message" {
			v.errorf("invariant", "bdl-12: a message must have a MessageHeader as the first resource")
		}
		return
	}
	type key struct{ full, version string }
	seenFull := map[key]int{}
	byTypeID := map[string][]int{}
	fullUrls := map[string]bool{}
	for i := range entries.kids {
		e := &entries.kids[i].val
		if e.kind != kObject {
			continue
		}
		v.push("entry", i)
		res := e.get("resource")
		fu := e.getStr("fullUrl")
		if res == nil && e.get("request") == nil && e.get("response") == nil {
			v.errorf("invariant", "bdl-5: an entry must have a resource unless there is a request or response")
		}
		if e.get("search") != nil && btype != "searchset" {
			v.errorf("invariant", "bdl-2: entry.search only when a search")
		}
		hasReq := e.get("request") != nil
		switch btype {
		case "batch", "transaction", "history":
			if !hasReq {
				v.errorf("invariant", "bdl-3: entry.request mandatory for batch/transaction/history")
			}
		default:
			if hasReq {
				v.errorf("invariant", "bdl-3: entry.request allowed only for batch/transaction/history")
			}
		}
		hasResp := e.get("response") != nil
		switch btype {
		case "batch-response", "transaction-response", "history":
			if !hasResp {
				v.errorf("invariant", "bdl-4: entry.response mandatory for batch-response/transaction-response/history")
			}
		default:
			if hasResp {
				v.errorf("invariant", "bdl-4: entry.response allowed only for batch-response/transaction-response/history")
			}
		}
		var typ, id, version string
		if res != nil && res.kind == kObject {
			typ, id = res.getStr("resourceType"), res.getStr("id")
			version = res.get("meta").getStr("versionId")
			if id != "" {
				byTypeID[typ+"/"+id] = append(byTypeID[typ+"/"+id], i)
			}
			if btype == "searchset" && id == "" && e.get("search").getStr("mode") == "match" {
				v.push("resource", -1)
				v.errorf("required", "search results must have ids")
				v.pop()
			}
		}
		if fu == "" && res != nil {
			// Transaction and batch entries may leave fullUrl out: their
			// relative references resolve against the receiving server.
			switch {
			case btype == "transaction" || btype == "batch" || btype == "batch-response" || btype == "transaction-response":
			case btype == "searchset" && e.get("search").getStr("mode") == "outcome":
				// A search's OperationOutcome has no identity.
			default:
				v.errorf("required", "bundle entry missing fullUrl")
				if res.kind == kObject && hasRelativeRef(res) {
					v.errorf("invalid", "relative reference appears inside a Bundle whose entry is missing a fullUrl")
				}
			}
		} else if fu != "" {
			v.push("fullUrl", -1)
			switch {
			case !strings.Contains(fu, ":"):
				v.errorf("value", "the fullUrl must be an absolute URL (not %q)", fu)
			case strings.Contains(fu, "/_history/"):
				v.errorf("invariant", "bdl-8: fullUrl cannot be a version specific reference")
			case strings.HasPrefix(fu, "urn:uuid:") && !validUUID(fu):
				v.errorf("value", "the fullUrl %q is not a valid urn:uuid", fu)
			case id != "" && refType(fu) != "" && !strings.HasSuffix(fu, "/"+typ+"/"+id):
				v.errorf("value", "the fullUrl %q does not match the resource %s/%s", fu, typ, id)
			}
			k := key{fu, version}
			if j, dup := seenFull[k]; dup && btype != "history" {
				v.errorf("invariant", "bdl-7: fullUrl must be unique in a bundle (also entry[%d])", j)
			} else {
				seenFull[k] = i
			}
			fullUrls[fu] = true
			v.pop()
		}
		v.pop()
	}

	if btype != "history" {
		for i := range entries.kids {
			res := entries.kids[i].val.get("resource")
			if res == nil || res.getStr("id") == "" {
				continue
			}
			key := res.getStr("resourceType") + "/" + res.getStr("id")
			if ms := byTypeID[key]; len(ms) > 1 && ms[0] != i {
				v.push("entry", i)
				v.add(SeverityWarning, "duplicate", "duplicate resource id: %s is also in entry[%d]", key, ms[0])
				v.pop()
			}
		}
	}

	first := func() string {
		if len(entries.kids) == 0 {
			return ""
		}
		return entries.kids[0].val.get("resource").getStr("resourceType")
	}
	switch btype {
	case "document":
		idn := n.get("identifier")
		if idn == nil || idn.getStr("system") == "" || idn.getStr("value") == "" {
			v.errorf("invariant", "bdl-9: a document must have an identifier with a system and a value")
		}
		if n.get("timestamp") == nil {
			v.errorf("invariant", "bdl-10: a document must have a date (timestamp)")
		}
		if first() != "Composition" {
			v.errorf("invariant", "bdl-11: a document must have a Composition as the first resource")
		}
	case "message":
		if first() != "MessageHeader" {
			v.errorf("invariant", "bdl-12: a message must have a MessageHeader as the first resource")
		}
	}

	// Reference resolution inside the Bundle.
	for i := range entries.kids {
		e := &entries.kids[i].val
		res := e.get("resource")
		if res == nil || res.kind != kObject {
			continue
		}
		v.push("entry", i)
		v.push("resource", -1)
		walkRefs(res, func(ref string) {
			switch {
			case strings.HasPrefix(ref, "urn:uuid:") || strings.HasPrefix(ref, "urn:oid:"):
				if !fullUrls[ref] && (btype == "transaction" || btype == "batch" || btype == "document") {
					v.errorf("not-found", "unable to resolve resource with reference %q in the Bundle", ref)
				}
			case strings.Contains(ref, ":") || strings.HasPrefix(ref, "#") || strings.Contains(ref, "?"):
				if fullUrls[ref] {
					return
				}
				if typ := refType(ref); typ != "" {
					if matches := len(byTypeID[typ+"/"+lastID(ref)]); matches > 1 && !fullUrls[ref] && btype == "document" {
						v.errorf("not-found", "found %d matches for %q in the Bundle", matches, ref)
					}
				}
			default:
				base := ref
				versioned := false
				if j := strings.Index(ref, "/_history/"); j >= 0 {
					base, versioned = ref[:j], true
				}
				ms := byTypeID[base]
				switch {
				case len(ms) > 1 && !versioned:
					v.errorf("not-found", "multiple matches in the Bundle for reference %q", ref)
				case len(ms) == 0 && btype == "document":
					v.errorf("not-found", "can't find %q in the Bundle", ref)
				case versioned && btype == "document":
					want := ref[strings.LastIndexByte(ref, '/')+1:]
					found := false
					for _, j := range ms {
						if entries.kids[j].val.get("resource").get("meta").getStr("versionId") == want {
							found = true
						}
					}
					if !found {
						v.errorf("not-found", "can't find %q in the Bundle", ref)
					}
				}
			}
		})
		v.pop()
		v.pop()
	}
}

// walkRefs calls f with every Reference.reference string inside the
// resource n, not descending into nested Bundles' entries or contained
// resources (their references are resolved in their own context).
func walkRefs(n *node, f func(string)) {
	switch n.kind {
	case kObject:
		for i := range n.kids {
			m := &n.kids[i]
			switch {
			case m.key == "reference" && m.val.kind == kString:
				f(m.val.str)
			case m.key == "contained" || m.key == "entry" && n.getStr("resourceType") == "Bundle":
			default:
				walkRefs(&m.val, f)
			}
		}
	case kArray:
		for i := range n.kids {
			walkRefs(&n.kids[i].val, f)
		}
	}
}

func hasRelativeRef(n *node) bool {
	found := false
	walkRefs(n, func(r string) {
		if !strings.Contains(r, ":") && !strings.HasPrefix(r, "#") {
			found = true
		}
	})
	return found
}

// parameters checks that relative references between the resources of a
// Parameters resource resolve, as the reference validator does.
func (v *validator) parameters(n *node) {
	ids := map[string]bool{}
	var res []*node
	var collect func(ps *node)
	collect = func(ps *node) {
		if ps == nil || ps.kind != kArray {
			return
		}
		for i := range ps.kids {
			p := &ps.kids[i].val
			if r := p.get("resource"); r != nil && r.kind == kObject {
				res = append(res, r)
				if id := r.getStr("id"); id != "" {
					ids[r.getStr("resourceType")+"/"+id] = true
				}
			}
			collect(p.get("part"))
		}
	}
	collect(n.get("parameter"))
	for _, r := range res {
		if r.getStr("resourceType") == "Bundle" {
			continue
		}
		walkRefs(r, func(ref string) {
			if refType(ref) != "" && !strings.Contains(ref, ":") && !ids[strings.SplitN(ref, "/_history/", 2)[0]] {
				v.errorf("not-found", "unable to resolve resource with reference %q", ref)
			}
		})
	}
}

package fhir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

type normalizer struct {
	opts   Options
	format string
}

type nEntry struct {
	res      *node
	fullURL  string
	typ, id  string // original type and id ("" when none)
	finalID  string
	collided *nEntry // an earlier entry that had this entry's identity
	dropped  bool
}

func (n *normalizer) baseURL() string {
	if n.opts.BaseURL != "" {
		return strings.TrimSuffix(n.opts.BaseURL, "/")
	}
	return DefaultBaseURL
}

// run turns the validated tree into the output Bundle and returns it with
// its entry count.
func (n *normalizer) run(root *node) (node, int, error) {
	var entries []*nEntry
	if root.getStr("resourceType") == "Bundle" {
		if es := root.get("entry"); es != nil {
			for i := range es.kids {
				e := &es.kids[i].val
				r := e.get("resource")
				if r == nil || r.kind != kObject {
					continue // request-only or response-only entries carry no data
				}
				if isOurProvenance(r) {
					continue // regenerated below, which keeps normalisation idempotent
				}
				if e.get("search").getStr("mode") == "outcome" {
					continue // a search's OperationOutcome is about the search, not the record
				}
				entries = append(entries, &nEntry{res: r, fullURL: e.getStr("fullUrl"), typ: r.getStr("resourceType"), id: r.getStr("id")})
			}
		}
	} else {
		entries = append(entries, &nEntry{res: root, typ: root.getStr("resourceType"), id: root.getStr("id")})
	}

	// Final ids: the resource's own, else the uuid or id of its fullUrl,
	// else one derived from its content. An identity already taken gets a
	// content-derived id; exact copies are dropped.
	taken := map[string]*nEntry{}
	for _, e := range entries {
		id := e.id
		if id == "" {
			id = idFromFullURL(e.fullURL)
		}
		if id == "" {
			id = contentID(e.res)
		}
		if prev := taken[e.typ+"/"+id]; prev != nil {
			e.collided = prev
			id = contentID(e.res)
			if dup := taken[e.typ+"/"+id]; dup != nil {
				e.dropped, e.finalID = true, dup.finalID
				continue
			}
		}
		e.finalID = id
		taken[e.typ+"/"+id] = e
	}
	if n.format == FormatR4Deidentified {
		for _, e := range entries {
			e.finalID = pseudonymID(n.opts.DeidentKey, e.typ+"/"+e.finalID)
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

	// Rewrite references and ids.
	var kept []*nEntry
	for _, e := range entries {
		if e.dropped {
			continue
		}
		base := restBase(e.fullURL)
		rewriteRefs(e.res, func(ref string) (string, bool) {
			return resolveAlias(alias, base, ref)
		})
		kept = append(kept, e)
	}
	// A resource that collided with an earlier one and now, references
	// rewritten, has the same content is a duplicate: drop it and point its
	// referrers at the first.
	redirect := map[string]string{}
	for _, e := range kept {
		if p := e.collided; p != nil && !p.dropped && bytes.Equal(canonicalWithoutID(e.res), canonicalWithoutID(p.res)) {
			e.dropped = true
			redirect[e.typ+"/"+e.finalID] = p.typ + "/" + p.finalID
		}
	}
	var out []*nEntry
	for _, e := range kept {
		if e.dropped {
			continue
		}
		if len(redirect) > 0 {
			rewriteRefs(e.res, func(ref string) (string, bool) {
				r, ok := redirect[ref]
				return r, ok
			})
		}
		e.res.set("id", strNode(e.finalID))
		out = append(out, e)
	}
	if n.format == FormatR4Deidentified {
		d := &deidentifier{key: n.opts.DeidentKey, now: n.now(), resolves: map[string]bool{}}
		for _, e := range out {
			d.resolves[e.typ+"/"+e.finalID] = true
		}
		for _, e := range out {
			d.resource(e.res)
		}
	}

	prov := n.provenance(out)
	entryNodes := make([]member, 0, len(out)+1)
	for _, e := range out {
		entryNodes = append(entryNodes, member{val: objNode(
			member{"fullUrl", strNode(n.baseURL() + "/" + e.typ + "/" + e.finalID)},
			member{"resource", *e.res},
		)})
	}
	provID := prov.getStr("id")
	entryNodes = append(entryNodes, member{val: objNode(
		member{"fullUrl", strNode(n.baseURL() + "/Provenance/" + provID)},
		member{"resource", prov},
	)})
	bundle := objNode(
		member{"resourceType", strNode("Bundle")},
		member{"type", strNode("collection")},
		member{"entry", node{kind: kArray, kids: entryNodes}},
	)
	return bundle, len(entryNodes), nil
}

func isOurProvenance(r *node) bool {
	if r.getStr("resourceType") != "Provenance" {
		return false
	}
	tags := r.get("meta").get("tag")
	if tags == nil || tags.kind != kArray {
		return false
	}
	for i := range tags.kids {
		t := &tags.kids[i].val
		if t.getStr("system") == TagSystem && t.getStr("code") == "provenance" {
			return true
		}
	}
	return false
}

// canonicalWithoutID returns the canonical JSON of a resource, ignoring
// its id, for duplicate detection.
func canonicalWithoutID(r *node) []byte {
	c := cloneNode(r)
	c.del("id")
	b, _ := appendCanonical(nil, &c)
	return b
}

// contentID derives an id from a resource's content.
func contentID(r *node) string {
	sum := sha256.Sum256(canonicalWithoutID(r))
	return hex.EncodeToString(sum[:16])
}

// rewriteRefs replaces every Reference.reference in n for which f returns
// a replacement.
func rewriteRefs(n *node, f func(string) (string, bool)) {
	switch n.kind {
	case kObject:
		for i := range n.kids {
			m := &n.kids[i]
			if m.key == "reference" && m.val.kind == kString {
				if r, ok := f(m.val.str); ok {
					m.val.str = r
				}
				continue
			}
			if m.val.kind == kObject || m.val.kind == kArray {
				rewriteRefs(&m.val, f)
			}
		}
	case kArray:
		for i := range n.kids {
			if v := &n.kids[i].val; v.kind == kObject || v.kind == kArray {
				rewriteRefs(v, f)
			}
		}
	}
}

func cloneNode(n *node) node {
	c := *n
	if n.kids != nil {
		c.kids = make([]member, len(n.kids))
		for i := range n.kids {
			c.kids[i].key = n.kids[i].key
			c.kids[i].val = cloneNode(&n.kids[i].val)
		}
	}
	return c
}

func (n *normalizer) now() time.Time {
	if n.opts.Now.IsZero() {
		return time.Now()
	}
	return n.opts.Now
}

// provenance builds the Provenance resource describing this processing.
func (n *normalizer) provenance(entries []*nEntry) node {
	recorded := n.now().UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00")
	measurement := n.opts.Measurement
	if measurement == "" {
		measurement = "unmeasured"
	}
	source := n.opts.Source
	if source == "" {
		source = "raw"
	}
	targets := make([]member, 0, len(entries))
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", measurement, source, recorded, n.format)
	for _, e := range entries {
		ref := e.typ + "/" + e.finalID
		targets = append(targets, member{val: objNode(member{"reference", strNode(ref)})})
		h.Write([]byte(ref))
		h.Write([]byte{0})
	}
	id := hex.EncodeToString(h.Sum(nil)[:16])
	sourceDisplay := "raw submission"
	if source != "raw" {
		sourceDisplay = "portal " + source + " (MPC-TLS)"
	}
	return objNode(
		member{"resourceType", strNode("Provenance")},
		member{"id", strNode(id)},
		member{"meta", objNode(member{"tag", arrNode(objNode(
			member{"system", strNode(TagSystem)},
			member{"code", strNode("provenance")},
		))})},
		member{"target", node{kind: kArray, kids: targets}},
		member{"recorded", strNode(recorded)},
		member{"activity", objNode(member{"text", strNode("ACDS " + n.format + " processing")})},
		member{"agent", arrNode(objNode(
			member{"type", objNode(member{"coding", arrNode(objNode(
				member{"system", strNode("http://terminology.hl7.org/CodeSystem/provenance-participant-type")},
				member{"code", strNode("assembler")},
			))})},
			member{"who", objNode(
				member{"identifier", objNode(member{"system", strNode(MeasurementSystem)}, member{"value", strNode(measurement)})},
				member{"display", strNode("ACDS enclave")},
			)},
		))},
		member{"entity", arrNode(objNode(
			member{"role", strNode("source")},
			member{"what", objNode(
				member{"identifier", objNode(member{"system", strNode(SourceSystem)}, member{"value", strNode(source)})},
				member{"display", strNode(sourceDisplay)},
			)},
		))},
	)
}

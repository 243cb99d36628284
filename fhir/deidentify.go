package fhir

import (
	"reflect"
	"strings"
	"time"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// safeHarbor de-identifies typed resources in place under the Safe Harbor
// rules of the package doc (De-identification). It walks each resource with
// specWalk, so every element is judged by its definition: its type, its
// name, its parent's type and its minimum cardinality.
//
// Removing an element means setting it to its zero value, which the r4
// encoder leaves out (an empty object, a primitive without value, id or
// extensions). A removed element that FHIR requires is replaced by the
// data-absent-reason extension with code "masked".
type safeHarbor struct {
	key      []byte
	now      time.Time
	resolves map[string]bool // Type/id of every output resource
	frames   []shFrame       // one per specWalk frame
	// indexes are the nested Bundles' entry indexes for resolve() in the
	// constraints (deid_repair.go), made on first use: by then
	// pseudonymiseNested has rewritten the entries' ids and fullUrls,
	// which the walk does not change.
	indexes map[*r4.Bundle]*fhirpath.BundleIndex
	// budget bounds the FHIRPath steps of the constraint repair; once it
	// is spent, the remaining constraints are neither checked nor
	// repaired.
	budget *int
}

// shFrame is the de-identification state of one node on the walk's path.
type shFrame struct {
	removed bool
	// handled marks an Identifier or Address already rewritten at enter:
	// its primitive children keep their values.
	handled byte
	// definitional marks a node inside a definitional (knowledge or
	// conformance) resource, whose URIs name artefacts, not people.
	definitional bool
	prim         r4.Primitive // the node, when it is a primitive
	valuePresent bool         // the primitive had a value before the walk
	kids         []kidRecord  // the node's children, one record per element name
	held         []*rule      // error-level constraints that held at enter (deid_repair.go)
}

// kidRecord sums up what became of the values of one child element.
type kidRecord struct {
	name         string
	elem         *spec.Element
	prim         bool
	valuePresent bool  // a primitive item had a value
	valueKept    bool  // a primitive item still has a value
	elemKept     bool  // a primitive item still has extensions
	kept         bool  // a complex item is kept
	items        []any // every item, for required elements only (masking)
}

const (
	handledIdentifier = 'I'
	handledAddress    = 'A'
)

// resource de-identifies r and every resource nested in it, in place.
func (d *safeHarbor) resource(r r4.Resource) error {
	d.frames = d.frames[:0]
	return specWalk(r, d.enter, d.leave)
}

// repairInvariant restores, on leaving an element whose children are done,
// the invariants that removing or reducing values can break: a Period whose
// start year came out after its end year (dates of mixed precision or zones
// reduced to their years; per-1) starts in its end year, and a quantity
// whose system was removed (it held an IP address) loses its code too
// (qty-3).
func repairInvariant(node any) {
	switch n := node.(type) {
	case *r4.Period:
		if n.Start != nil && n.End != nil && n.Start.HasValue() && n.End.HasValue() &&
			len(n.Start.Value) >= 4 && len(n.End.Value) >= 4 && n.Start.Value[:4] > n.End.Value[:4] {
			n.Start.Value = n.End.Value[:4] + n.Start.Value[4:]
		}
	case *r4.Quantity:
		dropOrphanCode(&n.Code, n.System)
	case *r4.Age:
		dropOrphanCode(&n.Code, n.System)
	case *r4.Duration:
		dropOrphanCode(&n.Code, n.System)
	case *r4.Distance:
		dropOrphanCode(&n.Code, n.System)
	case *r4.Count:
		dropOrphanCode(&n.Code, n.System)
	}
}

// dropOrphanCode removes a quantity's unit code when it has no system left.
func dropOrphanCode(code **r4.Code, system *r4.URI) {
	if *code != nil && (system == nil || !system.HasValue() && len(system.Extension) == 0) {
		*code = nil
	}
}

func (d *safeHarbor) push() *shFrame {
	n := len(d.frames)
	if n < cap(d.frames) {
		d.frames = d.frames[:n+1]
		f := &d.frames[n]
		*f = shFrame{kids: f.kids[:0], held: f.held[:0]}
		return f
	}
	d.frames = append(d.frames, shFrame{})
	return &d.frames[n]
}

func (d *safeHarbor) enter(_ *r4.Path, stack []specFrame) error {
	f := &stack[len(stack)-1]
	fr := d.push()
	d.constraintsBefore(stack, fr)
	d.enterDates(stack)
	if res, ok := f.Node.(r4.Resource); ok {
		// The resource being de-identified, or a nested resource: kept,
		// and de-identified in turn.
		fr.definitional = definitionalResource(res.ResourceType())
		return nil
	}
	parent := &d.frames[len(d.frames)-2]
	fr.definitional = parent.definitional
	pt := stack[len(stack)-2].Type
	if pt != nil && pt.Kind == spec.Primitive {
		pt = elementType // a primitive's extensions are Element's
	}
	e := f.Elem
	if e == nil || pt == nil {
		return d.remove(fr, f.Node)
	}
	// Element ids are free text (Element.id is a string): always removed.
	id, _ := r4.ElementOf(f.Node)
	if id != nil {
		*id = ""
	}
	if p, ok := f.Node.(r4.Primitive); ok {
		fr.prim, fr.valuePresent = p, p.HasValue()
		if parent.handled == 0 && fr.valuePresent && (!keepOpenValue(stack, p, e, pt) || !d.keepValue(p, e, pt)) {
			p.Clear()
		}
		return nil
	}
	if f.Type == nil {
		return d.remove(fr, f.Node)
	}
	switch e.Type {
	case "HumanName", "ContactPoint", "Attachment", "Annotation", "Narrative",
		// Contacts are relatives and guardians: their details are
		// identifiers of the individual's household (Safe Harbor (2)(i)).
		"Patient.contact",
		// Coordinates are a geographic subdivision smaller than a state.
		"Location.position":
		return d.remove(fr, f.Node)
	case "Address":
		if a, ok := f.Node.(*r4.Address); ok {
			d.address(fr, a)
		}
	case "Identifier":
		if x, ok := f.Node.(*r4.Identifier); ok {
			if x.Value == nil || !x.Value.HasValue() {
				return d.remove(fr, x)
			}
			d.identifier(fr, x)
		}
	case "Age":
		if a, ok := f.Node.(*r4.Age); ok {
			d.age(a)
		}
	case "Extension":
		if x, ok := f.Node.(*r4.Extension); ok && (hasIP(x.URL) || x.URL == geolocationURL) {
			// The url cannot be masked (it is a plain string); the
			// geolocation extension holds coordinates.
			return d.remove(fr, x)
		}
	}
	return nil
}

// remove zeroes the node and skips its children.
func (d *safeHarbor) remove(fr *shFrame, node any) error {
	zeroElement(node)
	fr.removed = true
	return r4.SkipChildren
}

// keepValue rewrites the value of primitive p, of element e in a parent of
// type pt, and reports whether it is kept.
func (d *safeHarbor) keepValue(p r4.Primitive, e *spec.Element, pt *spec.Type) bool {
	s := p.Text()
	switch e.Type {
	case "xhtml", "base64Binary", "url":
		return false
	case "date", "dateTime", "instant":
		return d.keepDate(p, e.Type == "instant")
	case "string", "markdown":
		switch e.Name {
		case "serialNumber", "lotNumber", "deviceIdentifier", "carrierHRF", "distinctIdentifier", "modelNumber":
			_ = p.SetText(keyed(d.key, "device", s))
			return true
		}
		path := pt.Name + "." + e.Name
		if !keptText(path) || hasIP(s) {
			return false
		}
		if path != "Reference.reference" {
			if t := d.scrubText(s); t != s {
				if t == "" {
					return false
				}
				_ = p.SetText(t)
			}
		}
		return true
	case "uri", "canonical":
		return !hasIP(s) && d.keptURI(e, pt)
	case "id":
		switch {
		case pt.Name == "Meta" && e.Name == "versionId":
			// Chosen by the server, possibly telling; a keyed pseudonym
			// (as in "/_history/" references) keeps versions of one
			// resource apart, which a nested Bundle may need (bdl-7).
			_ = p.SetText(versionPseudonym(d.key, s))
			return true
		case e.Name == "uid":
			// DICOM UIDs (ImagingStudy.series.uid, series.instance.uid)
			// are unique identifiers of the study; the pseudonym is a
			// valid id.
			_ = p.SetText(keyed(d.key, "uid", s))
			return true
		}
		return !hasIP(s)
	case "boolean", "integer", "decimal", "unsignedInt", "positiveInt":
		return true
	}
	return !hasIP(s)
}

// keptURI reports whether a uri or canonical value of element e, in a
// parent of type pt, names terminology or a definition rather than
// something of the individual: every URI of a definitional resource
// (except implicitRules, Meta.source and extension values), canonical
// references, code systems and the URIs of instantiated protocols and
// definitions. Any other URI (Device.url, DocumentManifest.source, policies, a
// QuestionnaireResponse's valueUri…) may be the individual's own address
// and is removed.
func (d *safeHarbor) keptURI(e *spec.Element, pt *spec.Type) bool {
	switch {
	case e.Name == "implicitRules" || pt.Name == "Meta" && e.Name == "source":
		return false
	case pt.Name == "Extension":
		return false // an extension's value may point at the person
	case d.frames[len(d.frames)-1].definitional:
		return true
	case strings.HasSuffix(e.Path, "[x]"):
		return false // a value chosen by the author: valueUri, valueCanonical
	case e.Type == "canonical":
		return true // Meta.profile, instantiatesCanonical, questionnaire…
	}
	switch pt.Name + "." + e.Name {
	case "Coding.system", "Identifier.system", "Quantity.system", "Age.system", "Count.system",
		"Distance.system", "Duration.system", "Reference.type",
		"Device.udiCarrier.issuer", "Device.udiCarrier.jurisdiction",
		"DeviceDefinition.udiDeviceIdentifier.issuer", "DeviceDefinition.udiDeviceIdentifier.jurisdiction",
		// A nested Bundle's fullUrls, request URLs and response locations,
		// already pseudonymised (deid_ids.go), which its entries need.
		"Bundle.entry.fullUrl", "Bundle.entry.request.url", "Bundle.entry.response.location":
		return true
	}
	switch e.Name {
	case "instantiatesUri", "instantiates", "definitionUri", "definition", "protocol":
		return true
	}
	return false
}

// keepOpenValue reports whether the primitive value p of element e, in a
// parent of type pt, may be kept when e is an open value slot (any type,
// any meaning): the value of an Extension with an arbitrary url, of a
// Parameters parameter or of a Task input or output. Only booleans, codes
// of known extensions bound to value sets, and dates (which the date rules
// reduce) are kept; any other primitive (code, id, oid, uuid, string, uri,
// integer, decimal…) may be an identifier and is removed. Complex values
// (Coding, CodeableConcept, Quantity, Identifier…) are de-identified by
// the rules of their types. Values of other elements report true.
func keepOpenValue(stack []specFrame, p r4.Primitive, e *spec.Element, pt *spec.Type) bool {
	switch pt.Name {
	case "Extension", "Parameters.parameter", "Task.input", "Task.output":
	default:
		return true
	}
	if !strings.HasSuffix(e.Path, ".value[x]") {
		return true
	}
	switch e.Type {
	case "boolean", "date", "dateTime", "instant":
		return true
	case "code":
		if x, ok := stack[len(stack)-2].Node.(*r4.Extension); ok {
			return extensionCode(x.URL, p.Text())
		}
	}
	return false
}

// address keeps only use, type, state, country and the first three ZIP
// digits ("000" for the restricted prefixes); a state or country holding
// an IP address is dropped. The extensions of state and country are
// de-identified by the walk, like any others.
func (d *safeHarbor) address(fr *shFrame, a *r4.Address) {
	na := r4.Address{Use: codeValue(a.Use), Type: codeValue(a.Type), State: a.State, Country: a.Country}
	if na.State != nil && hasIP(na.State.Value) {
		na.State = nil
	}
	if na.Country != nil && hasIP(na.Country.Value) {
		na.Country = nil
	}
	if a.PostalCode != nil && a.PostalCode.HasValue() {
		if z := digitsOnly(a.PostalCode.Value); len(z) >= 3 {
			z = z[:3]
			if restrictedZIP3(z) {
				z = "000"
			}
			na.PostalCode = r4.NewString(z)
		}
	}
	*a = na
	fr.handled = handledAddress
}

// identifier keeps use, system (unless it holds an IP address) and type,
// replaces the value by its keyed pseudonym and keeps the assigner only as
// a reference that resolves.
func (d *safeHarbor) identifier(fr *shFrame, x *r4.Identifier) {
	system := ""
	if x.System != nil {
		system = x.System.Value
	}
	var sys *r4.URI
	if x.System != nil && x.System.HasValue() && !hasIP(x.System.Value) {
		sys = r4.NewURI(x.System.Value)
	}
	*x = r4.Identifier{
		Use:      codeValue(x.Use),
		System:   sys,
		Type:     x.Type,
		Assigner: x.Assigner,
		Value:    r4.NewString(keyed(d.key, "identifier", system+"|"+x.Value.Value)),
	}
	fr.handled = handledIdentifier
}

// codeValue returns a copy of c's value without its id and extensions, or
// nil when c has no value.
func codeValue(c *r4.Code) *r4.Code {
	if c == nil || !c.HasValue() {
		return nil
	}
	return r4.NewCode(c.Value)
}

func (d *safeHarbor) leave(stack []specFrame) {
	f := &stack[len(stack)-1]
	fr := &d.frames[len(d.frames)-1]
	defer func() { d.frames = d.frames[:len(d.frames)-1] }()
	var parent *shFrame
	if len(d.frames) > 1 {
		parent = &d.frames[len(d.frames)-2]
	}
	if _, ok := f.Node.(r4.Resource); ok {
		d.mask(fr)
		d.keepConstraints(stack, fr)
		if parent != nil {
			parent.record(f, fr, false, false, true)
		}
		return
	}
	if fr.removed {
		parent.record(f, fr, false, false, false)
		return
	}
	if fr.prim != nil {
		elemKept := fr.kidsKept(false)
		if !elemKept {
			if _, ext := r4.ElementOf(f.Node); ext != nil {
				*ext = nil // every extension was removed
			}
		}
		parent.record(f, fr, fr.prim.HasValue(), elemKept, false)
		return
	}
	repairInvariant(f.Node)
	d.mask(fr)
	d.keepConstraints(stack, fr)
	_, isExt := f.Node.(*r4.Extension)
	kept := fr.kidsKept(!isExt)
	if ref, ok := f.Node.(*r4.Reference); ok {
		kept = d.reference(fr, ref, kept)
		if parent.handled == handledIdentifier && f.Name == "assigner" {
			// An organisation: kept only as a reference that resolves.
			kept = kept && ref.Reference != nil && ref.Reference.HasValue()
		}
	}
	if !kept {
		zeroElement(f.Node)
	}
	parent.record(f, fr, false, false, kept)
}

// record adds what became of child f (frame fr) to the parent's records.
func (p *shFrame) record(f *specFrame, fr *shFrame, valueKept, elemKept, kept bool) {
	var k *kidRecord
	if n := len(p.kids); n > 0 && p.kids[n-1].name == f.Name {
		k = &p.kids[n-1]
	} else {
		if n < cap(p.kids) {
			p.kids = p.kids[:n+1]
			p.kids[n] = kidRecord{items: p.kids[n].items[:0]}
		} else {
			p.kids = append(p.kids, kidRecord{})
		}
		k = &p.kids[n]
		k.name, k.elem, k.prim = f.Name, f.Elem, fr.prim != nil
	}
	k.valuePresent = k.valuePresent || fr.valuePresent
	k.valueKept = k.valueKept || valueKept
	k.elemKept = k.elemKept || elemKept
	k.kept = k.kept || kept
	if f.Elem != nil && (f.Elem.Min > 0 || len(p.held) > 0) {
		k.items = append(k.items, f.Node)
	}
}

// kidsKept reports whether anything of the node is left: a child other
// than a url (whose extensions alone count) when skipURL is set.
func (fr *shFrame) kidsKept(skipURL bool) bool {
	for i := range fr.kids {
		k := &fr.kids[i]
		switch {
		case k.prim && skipURL && k.name == "url":
			if k.elemKept {
				return true
			}
		case k.prim:
			if k.valueKept || k.elemKept {
				return true
			}
		case k.kept:
			return true
		}
	}
	return false
}

// mask replaces every required child element whose values were all
// removed by the data-absent-reason extension (code "masked"): a repeating
// element is left with one masked item.
func (d *safeHarbor) mask(fr *shFrame) {
	for i := range fr.kids {
		k := &fr.kids[i]
		if k.elem == nil || k.elem.Min == 0 || len(k.items) == 0 {
			continue
		}
		if k.prim {
			if !k.valuePresent || k.valueKept {
				continue
			}
			k.elemKept = true
		} else {
			if k.kept {
				continue
			}
			k.kept = true
		}
		for j, it := range k.items {
			zeroElement(it)
			if j == 0 {
				if _, ext := r4.ElementOf(it); ext != nil {
					*ext = []r4.Extension{maskedExtension()}
				}
			}
		}
	}
}

// reference keeps a Reference's reference only when it is local (#id) or
// names a resource of the output; a Reference left with nothing, or only
// its type, becomes the masked extension. It reports whether the Reference
// is kept.
func (d *safeHarbor) reference(fr *shFrame, ref *r4.Reference, kept bool) bool {
	r := ref.Reference
	if r == nil || !r.HasValue() || strings.HasPrefix(r.Value, "#") || d.resolves[r.Value] {
		return kept
	}
	ref.Reference = nil
	members, typeOnly := 0, true
	for i := range fr.kids {
		k := &fr.kids[i]
		if k.name == "reference" {
			continue
		}
		n := 0
		if k.prim {
			if k.valueKept {
				n++
			}
			if k.elemKept {
				n++
			}
		} else if k.kept {
			n++
		}
		if n > 0 && (k.name != "type" || k.elemKept) {
			typeOnly = false
		}
		members += n
	}
	if members == 0 || (members == 1 && typeOnly) {
		zeroElement(ref)
		ref.Extension = []r4.Extension{maskedExtension()}
	}
	return true
}

func maskedExtension() r4.Extension {
	return r4.Extension{URL: darURL, ValueCode: r4.NewCode("masked")}
}

// zeroElement sets the element x points to (a primitive, data type or
// backbone element of package r4) to its zero value, which the encoder
// leaves out.
func zeroElement(x any) {
	if v := reflect.ValueOf(x); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
}

package fhir

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/acds-project/acds/fhir/spec"
)

// validateBytes validates data and returns the parsed tree when it parsed.
func validateBytes(data []byte, maxBytes int) (*OperationOutcome, *node) {
	return validateBytesWith(&validator{}, data, maxBytes)
}

func validateBytesWith(v *validator, data []byte, maxBytes int) (*OperationOutcome, *node) {
	o := &OperationOutcome{}
	if len(data) > maxBytes {
		o.Issues = append(o.Issues, Issue{Severity: SeverityFatal, Code: "too-costly",
			Diagnostics: fmt.Sprintf("input is %d bytes, above the limit of %d", len(data), maxBytes)})
		return o, nil
	}
	root, ws, err := parseJSONWS(data)
	v.inputWS = ws
	if err != nil {
		o.Issues = append(o.Issues, Issue{Severity: SeverityFatal, Code: "structure",
			Diagnostics: "error parsing JSON: " + err.Error()})
		return o, nil
	}
	v.topLevel(&root)
	o.Issues = v.issues
	return o, &root
}

type pathSeg struct {
	name string
	idx  int // -1 when not an array item
}

type validator struct {
	issues   []Issue
	inputWS  int // whitespace bytes in the input
	errors   int // errors and fatal issues found, reported or not
	warnings int // warnings and information found, reported or not
	path     []pathSeg
	notR4    bool
	res      *resCtx // the resource being validated

	// fullURLTypes maps, for each enclosing Bundle, entry fullUrls to
	// their resource types, so urn:uuid references get target-type checks.
	fullURLTypes []map[string]string
}

// resCtx is per-resource state for the reference and contained checks.
type resCtx struct {
	typ         string
	contained   map[string]bool // ids of contained resources
	localRefs   map[string]bool // "#id" references seen
	isContained bool
}

func (v *validator) where() string {
	var b strings.Builder
	for i, s := range v.path {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
		if s.idx >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.idx))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func (v *validator) add(sev Severity, code, format string, args ...any) {
	if sev == SeverityError || sev == SeverityFatal {
		v.errors++
		if v.errors > maxErrors {
			if v.errors == maxErrors+1 {
				v.issues = append(v.issues, Issue{Severity: SeverityFatal, Code: "too-costly",
					Diagnostics: fmt.Sprintf("more than %d errors; validation stopped reporting them", maxErrors)})
			}
			return
		}
	} else {
		v.warnings++
		if v.warnings > maxWarnings {
			if v.warnings == maxWarnings+1 {
				v.issues = append(v.issues, Issue{Severity: SeverityInformation, Code: "informational",
					Diagnostics: fmt.Sprintf("more than %d warnings; the rest are not reported", maxWarnings)})
			}
			return
		}
	}
	v.issues = append(v.issues, Issue{Severity: sev, Code: code,
		Diagnostics: fmt.Sprintf(format, args...), Expression: []string{v.where()}})
}

func (v *validator) errorf(code, format string, args ...any) {
	v.add(SeverityError, code, format, args...)
}

func (v *validator) push(name string, idx int) { v.path = append(v.path, pathSeg{name, idx}) }
func (v *validator) pop()                      { v.path = v.path[:len(v.path)-1] }

func (v *validator) topLevel(root *node) {
	if root.kind != kObject {
		v.add(SeverityFatal, "structure", "the content is %s, not a FHIR resource (a JSON object)", root.kind.article())
		return
	}
	rt := root.get("resourceType")
	if rt == nil || rt.kind != kString {
		v.add(SeverityFatal, "structure", "the JSON object has no resourceType, so it is not a FHIR resource")
		return
	}
	v.resource(root, rt.str, false)
}

// resource validates one resource object whose resourceType is typ.
func (v *validator) resource(n *node, typ string, contained bool) {
	// Locations are FHIRPath from the root resource: its type starts the
	// path; nested resources continue their parent's (Bundle.entry[0].resource.id).
	if len(v.path) == 0 {
		v.push(typ, -1)
		defer v.pop()
	}
	if typ == "" {
		v.errorf("structure", "the resource has no resourceType")
		return
	}
	if !spec.IsResource(typ) {
		if why := preR4Resource(typ); why != "" {
			v.notR4 = true
			v.errorf("not-supported", "resource type %s is %s, not FHIR R4", typ, why)
			return
		}
		v.errorf("structure", "unknown resource type %q", typ)
		return
	}
	t := spec.Lookup(typ)
	saved := v.res
	rc := &resCtx{typ: typ, isContained: contained}
	v.res = rc
	defer func() { v.res = saved }()

	if c := n.get("contained"); c != nil && c.kind == kArray {
		rc.contained = map[string]bool{}
		for i := range c.kids {
			if id := c.kids[i].val.getStr("id"); id != "" {
				rc.contained[id] = true
			}
		}
	}
	if id := n.get("id"); id != nil && id.kind == kString {
		v.resourceID(id.str, contained)
	}
	if typ == "Bundle" {
		v.fullURLTypes = append(v.fullURLTypes, entryTypes(n))
		defer func() { v.fullURLTypes = v.fullURLTypes[:len(v.fullURLTypes)-1] }()
	}
	v.object(n, t, nil)
	v.resourceRules(n, typ, rc)
	switch typ {
	case "Bundle":
		v.bundle(n)
	case "Parameters":
		v.parameters(n)
	}
}

func (v *validator) resourceID(id string, contained bool) {
	if len(id) > 64 {
		sev := SeverityError
		if contained {
			// The reference validator does not hold contained ids to the length limit.
			sev = SeverityWarning
		}
		v.push("id", -1)
		v.add(sev, "value", "invalid resource id: too long (%d chars)", len(id))
		v.pop()
		return
	}
	for i := 0; i < len(id); i++ {
		if !isIDChar(id[i]) {
			v.push("id", -1)
			v.errorf("value", "invalid resource id: invalid characters (%q)", id)
			v.pop()
			return
		}
	}
}

// resourceRules checks the dom-* invariants and a few resource-specific ones.
func (v *validator) resourceRules(n *node, typ string, rc *resCtx) {
	if c := n.get("contained"); c != nil && c.kind == kArray {
		for i := range c.kids {
			cr := &c.kids[i].val
			if cr.kind != kObject {
				continue
			}
			v.push("contained", i)
			if cr.get("contained") != nil {
				v.errorf("invariant", "dom-2: a contained resource must not contain resources")
			}
			if m := cr.get("meta"); m != nil {
				if m.get("versionId") != nil || m.get("lastUpdated") != nil {
					v.errorf("invariant", "dom-4: a contained resource must not have meta.versionId or meta.lastUpdated")
				}
				if m.get("security") != nil {
					v.errorf("invariant", "dom-5: a contained resource must not have a security label")
				}
			}
			id := cr.getStr("id")
			if id != "" && !rc.localRefs[id] && !rc.localRefs[""] && !refersTo(cr, "#") {
				v.add(SeverityWarning, "invariant", "dom-3: the contained resource %q is not referenced from elsewhere in the containing resource", id)
			}
			v.pop()
		}
	}
	if t := spec.Lookup(typ); t != nil && !rc.isContained && t.Element("text") != nil && n.get("text") == nil {
		v.add(SeverityWarning, "invariant", "dom-6: a resource should have narrative for robust management")
	}
	if typ == "Observation" {
		v.obs6(n)
		if cs := n.get("component"); cs != nil && cs.kind == kArray {
			for i := range cs.kids {
				v.push("component", i)
				v.obs6(&cs.kids[i].val)
				v.pop()
			}
		}
	}
	if typ == "RiskAssessment" {
		if ps := n.get("prediction"); ps != nil && ps.kind == kArray {
			for i := range ps.kids {
				if d := ps.kids[i].val.get("probabilityDecimal"); d != nil && d.kind == kNumber {
					if f, err := strconv.ParseFloat(d.str, 64); err == nil && f > 100 {
						v.push("prediction", i)
						v.errorf("invariant", "ras-2: probability must be <= 100")
						v.pop()
					}
				}
			}
		}
	}
}

// refersTo reports whether any reference inside n equals ref.
func refersTo(n *node, ref string) bool {
	switch n.kind {
	case kObject:
		for i := range n.kids {
			m := &n.kids[i]
			if m.key == "reference" && m.val.kind == kString && m.val.str == ref {
				return true
			}
			if refersTo(&m.val, ref) {
				return true
			}
		}
	case kArray:
		for i := range n.kids {
			if refersTo(&n.kids[i].val, ref) {
				return true
			}
		}
	}
	return false
}

// object validates the members of n against type t. el is the element n
// was found in (nil for a resource root).
func (v *validator) object(n *node, t *spec.Type, el *spec.Element) {
	if len(n.kids) == 0 {
		v.errorf("invariant", "ele-1: an element must have a value or children (empty object)")
		return
	}
	var seenChoice []string
	var presentBuf [8]string
	present := presentBuf[:0] // paths of required elements found
	var seen dupCheck
	for i := range n.kids {
		m := &n.kids[i]
		k := m.key
		if k == "resourceType" && t.Kind == spec.Resource {
			continue
		}
		if seen.dup(n.kids, i) {
			v.push(k, -1)
			v.errorf("structure", "duplicate JSON property %q", k)
			v.pop()
			continue // validating it again would only repeat findings
		}
		if len(k) > 1 && k[0] == '_' {
			if be := t.Element(k[1:]); be != nil && be.Min > 0 {
				present = append(present, be.Path)
			}
			v.primitiveExt(n, m, t)
			continue
		}
		e := t.Element(k)
		if e == nil {
			v.unknown(k, t)
			continue
		}
		if e.Min > 0 {
			present = append(present, e.Path)
		}
		if strings.HasSuffix(e.Path, "[x]") {
			for _, p := range seenChoice {
				if p == e.Path {
					v.push(k, -1)
					v.errorf("structure", "only one of the choices of %s may be present", e.Path)
					v.pop()
				}
			}
			seenChoice = append(seenChoice, e.Path)
		}
		v.member(n, m, e)
	}
	// Required elements (in the base R4 definitions a minimum is at most 1).
required:
	for _, path := range t.Required {
		for _, p := range present {
			if p == path {
				continue required
			}
		}
		name := path[strings.LastIndexByte(path, '.')+1:]
		v.errorf("required", "%s: minimum required = 1, but only found 0", t.Name+"."+name)
	}
	switch t.Name {
	case "Attachment":
		v.attachment(n)
	case "Coding":
		if s := n.get("system"); s != nil && s.kind == kString && s.str != "" && !strings.Contains(s.str, ":") {
			v.push("system", -1)
			v.errorf("value", "Coding.system must be an absolute reference, not a local reference")
			v.pop()
		}
	case "Reference":
		v.reference(n, el)
	case "Quantity", "Age", "Duration", "Distance", "Count", "MoneyQuantity", "SimpleQuantity":
		if n.get("code") != nil && n.get("system") == nil {
			v.errorf("invariant", "qty-3: if a code for the unit is present, the system shall also be present")
		}
	case "ContactPoint":
		if n.get("value") != nil && n.get("system") == nil {
			v.errorf("invariant", "cpt-2: a system is required if a value is provided")
		}
	case "Period":
		if start, end := n.getStr("start"), n.getStr("end"); start != "" && end != "" && laterThan(start, end) {
			v.errorf("invariant", "per-1: if present, start shall have a lower value than end")
		}
	case "Patient.contact":
		if n.get("name") == nil && n.get("telecom") == nil && n.get("address") == nil && n.get("organization") == nil {
			v.errorf("invariant", "pat-1: a contact shall at least contain a contact's details or a reference to an organization")
		}
	}
	if t.Name == "Extension" {
		hasValue, hasExt := false, false
		for i := range n.kids {
			k := n.kids[i].key
			hasValue = hasValue || strings.HasPrefix(k, "value") || strings.HasPrefix(k, "_value")
			hasExt = hasExt || k == "extension"
		}
		if hasValue == hasExt {
			v.errorf("invariant", "ext-1: an extension must have either extensions or value[x], not both")
		}
	}
}

func (v *validator) unknown(k string, t *spec.Type) {
	v.push(k, -1)
	defer v.pop()
	if why := preR4Element(t.Name + "." + k); why != "" {
		v.notR4 = true
		v.errorf("not-supported", "property %s.%s is %s, not FHIR R4", t.Name, k, why)
		return
	}
	if k == "fhir_comments" {
		v.notR4 = true
		v.errorf("not-supported", "fhir_comments is a DSTU2/STU3 JSON feature, not FHIR R4")
		return
	}
	v.errorf("structure", "unrecognized property %q", k)
}

// member validates one property's value(s) against its element.
func (v *validator) member(parent *node, m *member, e *spec.Element) {
	val := &m.val
	if e.Max != 1 {
		if val.kind != kArray {
			v.push(m.key, -1)
			v.errorf("structure", "the property %s must be a JSON Array, not %s", m.key, val.kind.article())
			v.pop()
			return
		}
		if len(val.kids) == 0 {
			v.push(m.key, -1)
			v.errorf("structure", "array cannot be empty: the property should not be present if it has no values")
			v.pop()
			return
		}
		if e.Max > 0 && len(val.kids) > e.Max {
			v.push(m.key, -1)
			v.errorf("structure", "maximum allowed = %d, but found %d", e.Max, len(val.kids))
			v.pop()
		}
		ext := parent.get("_" + m.key)
		for i := range val.kids {
			item := &val.kids[i].val
			v.push(m.key, i)
			if item.kind == kNull {
				if ext == nil || ext.kind != kArray || i >= len(ext.kids) || ext.kids[i].val.kind == kNull {
					v.errorf("structure", "null is only allowed in an array when the matching _%s entry holds an extension", m.key)
				}
			} else {
				v.value(item, e)
			}
			v.pop()
		}
		return
	}
	v.push(m.key, -1)
	if val.kind == kArray {
		v.errorf("structure", "the property %s must be a single value, not a JSON Array", m.key)
	} else if val.kind == kNull {
		v.errorf("structure", "null is not a valid value for %s", m.key)
	} else {
		v.value(val, e)
	}
	v.pop()
}

// primitiveExt validates "_name", the id and extensions of primitive name.
func (v *validator) primitiveExt(parent *node, m *member, t *spec.Type) {
	base := m.key[1:]
	e := t.Element(base)
	if e == nil || !isPrimitive(e.Type) {
		v.unknown(m.key, t)
		return
	}
	elemT := spec.Lookup("Element")
	v.push(m.key, -1)
	defer v.pop()
	val := &m.val
	if e.Max != 1 {
		if val.kind != kArray {
			v.errorf("structure", "the property %s must be a JSON Array, not %s", m.key, val.kind.article())
			return
		}
		if pv := parent.get(base); pv != nil && pv.kind == kArray && len(pv.kids) != len(val.kids) {
			v.errorf("structure", "%s has %d items but %s has %d", m.key, len(val.kids), base, len(pv.kids))
		}
		for i := range val.kids {
			it := &val.kids[i].val
			if it.kind == kNull {
				continue
			}
			v.path[len(v.path)-1].idx = i
			if it.kind != kObject {
				v.errorf("structure", "%s items must be objects or null", m.key)
				continue
			}
			v.object(it, elemT, nil)
		}
		return
	}
	if val.kind != kObject {
		v.errorf("structure", "the property %s must be a JSON object", m.key)
		return
	}
	v.object(val, elemT, nil)
}

// value validates one (non-array) value of element e.
func (v *validator) value(n *node, e *spec.Element) {
	if isPrimitive(e.Type) {
		v.primitive(n, e)
		return
	}
	if n.kind != kObject {
		v.errorf("structure", "expected a JSON object for %s, found %s", e.Type, n.kind.article())
		return
	}
	if e.Type == "Resource" {
		v.resource(n, n.getStr("resourceType"), e.Path == "DomainResource.contained" || strings.HasSuffix(e.Path, ".contained"))
		return
	}
	t := e.TypeDef()
	if t == nil {
		v.errorf("structure", "no definition for type %s", e.Type)
		return
	}
	v.object(n, t, e)
	if (e.Strength == spec.Required || e.Strength == spec.Extensible) && e.ValueSet != "" {
		switch e.Type {
		case "CodeableConcept":
			v.codeableConcept(n, e)
		case "Coding":
			v.coding(n, e)
		}
	}
}

func (v *validator) codeableConcept(n *node, e *spec.Element) {
	vs := spec.LookupValueSet(e.ValueSet)
	cs := n.get("coding")
	if vs == nil || cs == nil || cs.kind != kArray || len(cs.kids) == 0 {
		return
	}
	for i := range cs.kids {
		c := &cs.kids[i].val
		if vs.Contains(c.getStr("system"), c.getStr("code")) {
			return
		}
	}
	v.binding(e, "none of the codings provided are in the value set %s", e.ValueSet)
}

// binding reports a code outside a bound value set: an error for a
// required binding, a warning for an extensible one (as the HL7 validator).
func (v *validator) binding(e *spec.Element, format string, args ...any) {
	if e.Strength == spec.Required {
		v.errorf("code-invalid", format+", which is required", args...)
		return
	}
	v.add(SeverityWarning, "code-invalid", format+", which is extensible", args...)
}

func (v *validator) coding(n *node, e *spec.Element) {
	vs := spec.LookupValueSet(e.ValueSet)
	if vs == nil || n.getStr("code") == "" {
		return
	}
	if !vs.Contains(n.getStr("system"), n.getStr("code")) {
		v.binding(e, "the coding %s#%s is not in the value set %s", n.getStr("system"), n.getStr("code"), e.ValueSet)
	}
}

// reference checks a Reference's reference string: its format, its target
// type against the element's allowed targets, and local (#id) resolution.
func (v *validator) reference(n *node, e *spec.Element) {
	r := n.get("reference")
	if r == nil || r.kind != kString {
		return
	}
	ref := r.str
	if strings.HasPrefix(ref, "#") {
		if v.res != nil {
			if v.res.localRefs == nil {
				v.res.localRefs = map[string]bool{}
			}
			v.res.localRefs[ref[1:]] = true
			if ref != "#" && !v.res.contained[ref[1:]] && !v.res.isContained {
				v.push("reference", -1)
				v.errorf("not-found", "unable to resolve resource with reference %q (ref-1: a local reference needs a contained resource)", ref)
				v.pop()
			}
		}
		return
	}
	typ := refType(ref)
	if typ == "" && strings.HasPrefix(ref, "urn:") && len(v.fullURLTypes) > 0 {
		typ = v.fullURLTypes[len(v.fullURLTypes)-1][ref]
	}
	if typ == "" {
		if !strings.Contains(ref, ":") && !strings.Contains(ref, "?") {
			v.push("reference", -1)
			v.errorf("value", "relative URLs must be of the format [ResourceName]/[id]; found %q", ref)
			v.pop()
		}
		return
	}
	if t := n.getStr("type"); t != "" && t != typ && spec.IsResource(t) {
		v.push("reference", -1)
		v.errorf("value", "the type %q does not match the reference's type %s", t, typ)
		v.pop()
	}
	if e == nil || len(e.Targets) == 0 {
		return
	}
	for _, t := range e.Targets {
		if t == typ {
			return
		}
	}
	v.push("reference", -1)
	v.errorf("structure", "invalid resource target type: found %s, but expected one of (%s)", typ, strings.Join(e.Targets, ", "))
	v.pop()
}

// attachment checks Attachment.size against the decoded data.
func (v *validator) attachment(n *node) {
	if n.get("data") != nil && n.get("contentType") == nil {
		v.errorf("invariant", "att-1: if the attachment has data, it shall have a contentType")
	}
	d, s := n.get("data"), n.get("size")
	if d == nil || s == nil || d.kind != kString || s.kind != kNumber {
		return
	}
	raw, err := decodeBase64(d.str)
	if err != nil {
		return
	}
	if size, err := strconv.Atoi(s.str); err == nil && size != len(raw) {
		v.errorf("structure", "stated attachment size %d does not match actual attachment size %d", size, len(raw))
	}
}

// primitive validates a primitive value's JSON type and lexical form, and
// its code against a required binding.
func (v *validator) primitive(n *node, e *spec.Element) {
	typ := e.Type
	switch typ {
	case "boolean":
		if n.kind != kBool {
			v.errorf("structure", "the property must be a JSON boolean, not %s", n.kind.article())
		}
		return
	case "integer", "positiveInt", "unsignedInt", "integer64":
		if n.kind != kNumber {
			v.errorf("structure", "the property must be a JSON number, not %s", n.kind.article())
			return
		}
		i, err := strconv.ParseInt(n.str, 10, 32)
		switch {
		case err != nil:
			v.errorf("value", "the value %q is not a valid integer", n.str)
		case typ == "positiveInt" && i < 1:
			v.errorf("value", "the value %d must be a positive integer (>= 1)", i)
		case typ == "unsignedInt" && i < 0:
			v.errorf("value", "the value %d must not be negative", i)
		}
		return
	case "decimal":
		if n.kind != kNumber {
			v.errorf("structure", "the property must be a JSON number, not %s", n.kind.article())
			return
		}
		if _, err := strconv.ParseFloat(n.str, 64); err != nil {
			v.errorf("value", "the value %q is not a valid decimal", n.str)
		}
		return
	}
	if n.kind != kString {
		v.errorf("structure", "the property must be a JSON string, not %s", n.kind.article())
		return
	}
	s := n.str
	if s == "" {
		v.errorf("value", "@value cannot be empty")
		return
	}
	if strings.TrimSpace(s) == "" {
		v.errorf("value", "the value must not be only whitespace")
		return
	}
	var msg string
	switch typ {
	case "string", "markdown":
		if len(s) > 1<<20 {
			msg = "value is longer than 1 MiB"
		} else if typ == "string" && looksLikeHTML(s) {
			msg = "the string value contains text that looks like embedded HTML tags, which are not allowed for security reasons"
		}
	case "code":
		if !validCode(s) {
			msg = "not a valid code (no leading, trailing or repeated whitespace)"
		} else if e.Strength == spec.Required || e.Strength == spec.Extensible {
			if vs := spec.LookupValueSet(e.ValueSet); vs != nil && !vs.Contains("", s) {
				v.binding(e, "the value provided (%q) is not in the value set %s", s, e.ValueSet)
				return
			}
		}
	case "id":
		if e.Name == "id" && strings.Count(e.Path, ".") == 1 && spec.IsResource(e.Path[:strings.IndexByte(e.Path, '.')]) {
			return // a resource's own id: resourceID checked it
		}
		if len(s) > 64 {
			msg = "id is longer than 64 characters"
		}
		for i := 0; i < len(s) && msg == ""; i++ {
			if !isIDChar(s[i]) {
				msg = "not a valid id"
			}
		}
	case "uri", "url", "canonical":
		if strings.ContainsAny(s, " \t\r\n") {
			msg = "URIs must not contain whitespace"
		} else if strings.HasPrefix(s, "urn:oid:") && !validOID(s) {
			msg = "not a valid OID"
		} else if strings.HasPrefix(s, "urn:uuid:") && !validUUID(strings.ToLower(s)) {
			msg = "not a valid UUID"
		}
	case "oid":
		if !validOID(s) {
			msg = "not a valid OID (urn:oid:…)"
		}
	case "uuid":
		if !validUUID(s) {
			msg = "not a valid UUID (urn:uuid:…, lowercase)"
		}
	case "date":
		if !validDate(s) {
			msg = "not a valid date format"
		}
	case "dateTime":
		msg = checkDateTime(s, false)
	case "instant":
		msg = checkDateTime(s, true)
	case "time":
		if !validTime(s) {
			msg = "not a valid time format (hh:mm:ss)"
		}
	case "base64Binary":
		if _, err := decodeBase64(s); err != nil {
			msg = "not valid base64 content"
		}
	case "xhtml":
		msg = checkXHTML(s)
	}
	if msg != "" {
		v.errorf("value", "%s: %q", msg, clip(s))
	}
}

// dupCheck finds repeated member names: by scanning for small objects, with
// a map for large ones, so hostile input cannot make validation quadratic.
type dupCheck struct {
	names map[string]bool
}

// dup reports whether kids[i].key occurs in kids[:i].
func (d *dupCheck) dup(kids []member, i int) bool {
	k := kids[i].key
	if len(kids) <= 32 {
		for j := 0; j < i; j++ {
			if kids[j].key == k {
				return true
			}
		}
		return false
	}
	if d.names == nil {
		d.names = make(map[string]bool, len(kids))
	}
	if d.names[k] {
		return true
	}
	d.names[k] = true
	return false
}

// entryTypes maps the fullUrls of a Bundle's entries to resource types.
func entryTypes(bundle *node) map[string]string {
	m := map[string]string{}
	es := bundle.get("entry")
	if es == nil || es.kind != kArray {
		return m
	}
	for i := range es.kids {
		e := &es.kids[i].val
		if fu := e.getStr("fullUrl"); fu != "" {
			if rt := e.get("resource").getStr("resourceType"); rt != "" {
				m[fu] = rt
			}
		}
	}
	return m
}

// obs6 checks obs-6: dataAbsentReason only when there is no value[x].
func (v *validator) obs6(n *node) {
	if n.get("dataAbsentReason") == nil {
		return
	}
	for i := range n.kids {
		if k := n.kids[i].key; strings.HasPrefix(k, "value") && len(k) > 5 {
			v.errorf("invariant", "obs-6: dataAbsentReason shall only be present if value[x] is not present")
			return
		}
	}
}

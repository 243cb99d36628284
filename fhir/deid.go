package fhir

import (
	"strconv"
	"strings"
	"time"

	"github.com/acds-project/acds/fhir/spec"
)

// De-identification: the rules are documented in the package doc (doc.go).

type deidentifier struct {
	key      []byte
	now      time.Time
	resolves map[string]bool // Type/id of every output resource
}

func maskedExt() node {
	return objNode(member{"extension", arrNode(objNode(
		member{"url", strNode(darURL)},
		member{"valueCode", strNode("masked")},
	))})
}

// resource de-identifies one resource in place.
func (d *deidentifier) resource(r *node) {
	t := spec.Lookup(r.getStr("resourceType"))
	if t == nil {
		return
	}
	d.object(r, t)
}

// object de-identifies the members of n, of type t, in place.
func (d *deidentifier) object(n *node, t *spec.Type) {
	kids := n.kids[:0:0]
	var masked []string // required elements that were removed
	for i := range n.kids {
		m := n.kids[i]
		if m.key == "resourceType" {
			kids = append(kids, m)
			continue
		}
		name := m.key
		if len(name) > 1 && name[0] == '_' {
			name = name[1:]
		}
		e := t.Element(name)
		if e == nil {
			continue
		}
		if m.key[0] == '_' {
			// A primitive's id and extensions.
			if !d.values(&m.val, func(v *node) bool { return d.complex(v, spec.Lookup("Element")) }) {
				continue
			}
			kids = append(kids, m)
			continue
		}
		keep := d.values(&m.val, func(v *node) bool { return d.value(v, e, t) })
		if keep {
			kids = append(kids, m)
		} else if e.Min > 0 {
			masked = append(masked, e.Name)
		}
	}
	n.kids = kids
	for _, name := range masked {
		e := t.Element(name)
		if isPrimitive(e.Type) {
			if e.Max != 1 {
				n.set(name, arrNode(node{kind: kNull}))
				n.set("_"+name, arrNode(maskedExt()))
			} else {
				n.set("_"+name, maskedExt())
			}
			continue
		}
		if e.Max != 1 {
			n.set(name, arrNode(maskedExt()))
		} else {
			n.set(name, maskedExt())
		}
	}
	alignPrimitiveArrays(n)
	if t.Name == "Reference" {
		d.reference(n)
	}
}

// alignPrimitiveArrays repairs primitive arrays and their "_x" companions
// after items were removed: companions whose length no longer matches are
// dropped, and nulls left without a companion entry are removed, so the
// output keeps FHIR's alignment rule.
func alignPrimitiveArrays(n *node) {
	for i := range n.kids {
		m := &n.kids[i]
		if len(m.key) < 2 || m.key[0] != '_' || m.val.kind != kArray {
			continue
		}
		if base := n.get(m.key[1:]); base == nil || base.kind != kArray || len(base.kids) != len(m.val.kids) {
			m.val = node{} // marked for removal below
		}
	}
	kids := n.kids[:0:0]
	for _, m := range n.kids {
		if len(m.key) > 1 && m.key[0] == '_' && m.val.kind == kNull {
			continue
		}
		kids = append(kids, m)
	}
	n.kids = kids
	drop := map[string]bool{}
	for i := range n.kids {
		m := &n.kids[i]
		if m.val.kind != kArray || m.key == "" || m.key[0] == '_' {
			continue
		}
		ext := n.get("_" + m.key)
		items := m.val.kids[:0:0]
		for j, it := range m.val.kids {
			if it.val.kind == kNull && (ext == nil || ext.kids[j].val.kind == kNull) {
				continue
			}
			items = append(items, it)
		}
		if len(items) != len(m.val.kids) && ext != nil {
			// Removing items would misalign the companion: drop it, and
			// with it the nulls that only held its place.
			drop["_"+m.key] = true
			items = items[:0]
			for _, it := range m.val.kids {
				if it.val.kind != kNull {
					items = append(items, it)
				}
			}
		}
		m.val.kids = items
	}
	kids = n.kids[:0:0]
	for _, m := range n.kids {
		if drop[m.key] || (m.val.kind == kArray && len(m.val.kids) == 0) {
			continue
		}
		kids = append(kids, m)
	}
	n.kids = kids
}

// values applies f to n, or to each item of array n dropping the items f
// rejects (alignPrimitiveArrays then repairs "_x" companions). It reports
// whether anything is left.
func (d *deidentifier) values(n *node, f func(*node) bool) bool {
	if n.kind != kArray {
		if n.kind == kNull {
			return true
		}
		return f(n)
	}
	kids := n.kids[:0:0]
	any := false
	for i := range n.kids {
		v := n.kids[i].val
		if v.kind == kNull {
			kids = append(kids, n.kids[i])
			continue
		}
		if f(&v) {
			kids = append(kids, member{val: v})
			any = true
		}
	}
	n.kids = kids
	return any
}

func (d *deidentifier) complex(v *node, t *spec.Type) bool {
	if v.kind != kObject || t == nil {
		return false
	}
	d.object(v, t)
	for _, m := range v.kids {
		if m.key != "id" && m.key != "url" {
			if t.Name == "Extension" {
				if m.key == "extension" || strings.HasPrefix(m.key, "value") || strings.HasPrefix(m.key, "_value") {
					return true
				}
				continue
			}
			return true
		}
	}
	return false
}

// value de-identifies one value of element e (of parent type pt) and
// reports whether it is kept.
func (d *deidentifier) value(v *node, e *spec.Element, pt *spec.Type) bool {
	switch e.Type {
	case "HumanName", "ContactPoint", "Attachment", "Annotation", "Narrative", "xhtml", "base64Binary", "url":
		return false
	case "Resource":
		if v.kind == kObject {
			d.resource(v)
		}
		return true
	case "Patient.contact":
		// Contacts are relatives and guardians: their details are
		// identifiers of the individual's household (Safe Harbor (2)(i)).
		return false
	case "Address":
		return d.address(v)
	case "Identifier":
		return d.identifier(v)
	case "Age":
		d.age(v)
	case "date", "dateTime":
		if v.kind == kString && len(v.str) >= 4 {
			y := v.str[:4]
			if e.Name == "birthDate" {
				if year, err := strconv.Atoi(y); err == nil && d.now.Year()-year > 89 {
					y = strconv.Itoa(d.now.Year() - 90)
				}
			}
			v.str = y
		}
		return true
	case "instant":
		if e.Min == 0 {
			return false
		}
		if v.kind == kString && len(v.str) >= 4 {
			v.str = v.str[:4] + "-01-01T00:00:00Z"
		}
		return true
	case "string", "markdown":
		switch e.Name {
		case "serialNumber", "lotNumber", "deviceIdentifier", "carrierHRF", "distinctIdentifier", "modelNumber":
			v.str = keyed(d.key, "device", v.str)
			return true
		}
		if !keptText(pt.Name+"."+e.Name) || hasIP(v.str) {
			return false
		}
		return true
	case "uri", "canonical":
		if hasIP(v.str) {
			return false
		}
		if pt.Name == "Meta" && e.Name == "source" {
			return false
		}
		if pt.Name == "Extension" && e.Name != "url" {
			return false // an extension's URI value may point at the person
		}
		return true
	}
	if isPrimitive(e.Type) {
		if v.kind == kString && hasIP(v.str) {
			return false
		}
		return true
	}
	if e.Type == "Reference" && pt.Name == "Identifier" {
		// Identifier.assigner names an organisation: keep only a resolvable reference.
		return d.complex(v, spec.Lookup("Reference"))
	}
	return d.complex(v, e.TypeDef())
}

func (d *deidentifier) address(v *node) bool {
	if v.kind != kObject {
		return false
	}
	var kids []member
	for _, m := range v.kids {
		switch m.key {
		case "use", "type", "state", "country", "_state", "_country":
			kids = append(kids, m)
		case "postalCode":
			if m.val.kind == kString {
				z := digitsOnly(m.val.str)
				if len(z) >= 3 {
					z = z[:3]
					if restrictedZIP3(z) {
						z = "000"
					}
					kids = append(kids, member{"postalCode", strNode(z)})
				}
			}
		}
	}
	v.kids = kids
	return len(kids) > 0
}

func (d *deidentifier) identifier(v *node) bool {
	if v.kind != kObject {
		return false
	}
	var kids []member
	for _, m := range v.kids {
		switch m.key {
		case "use", "system":
			kids = append(kids, m)
		case "type":
			d.complex(&m.val, spec.Lookup("CodeableConcept"))
			kids = append(kids, m)
		case "assigner":
			// An organisation: kept only as a reference that resolves.
			if d.complex(&m.val, spec.Lookup("Reference")) && m.val.get("reference") != nil {
				kids = append(kids, m)
			}
		case "value":
			if m.val.kind == kString {
				kids = append(kids, member{"value", strNode(keyed(d.key, "identifier", v.getStr("system")+"|"+m.val.str))})
			}
		}
	}
	v.kids = kids
	return v.get("value") != nil
}

func (d *deidentifier) age(v *node) {
	if q := v.get("value"); q != nil && q.kind == kNumber {
		if f, err := strconv.ParseFloat(q.str, 64); err == nil && f > 89 {
			q.str = "90"
			v.set("comparator", strNode(">="))
		}
	}
}

// reference keeps a Reference's reference only when it is local (#id) or
// names a resource of the output; display is removed with the free text.
func (d *deidentifier) reference(n *node) {
	r := n.get("reference")
	if r == nil || r.kind != kString {
		return
	}
	if strings.HasPrefix(r.str, "#") || d.resolves[r.str] {
		return
	}
	n.del("reference")
	n.del("_reference")
	if len(n.kids) == 0 || (len(n.kids) == 1 && n.kids[0].key == "type") {
		*n = maskedExt()
	}
}

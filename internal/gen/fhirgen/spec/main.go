// Command spec generates package fhir/spec: compact Go tables of every
// element of every FHIR R4 resource and data type, the code lists of every
// value set used by a required or extensible binding, every constraint of
// the resources and data types (ele-1 aside; a profile's own constraints,
// such as sqty-1 of SimpleQuantity, on the elements that name the
// profile), the contexts of the core extensions, and the types of the
// Patient compartment with the element paths of their search parameters.
//
// It reads the official R4 4.0.1 definitions (npm package
// hl7.fhir.r4.examples@4.0.1, fetched by scripts/fetch-fhir-defs.sh) and
// writes one Go file. The output depends only on the inputs: maps are
// iterated in sorted order, so running it twice gives identical bytes.
//
// Usage:
//
//	go run ./internal/gen/fhirgen/spec -defs .fhir-defs/package -out fhir/spec/tables.go
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	defs := flag.String("defs", ".fhir-defs/package", "folder holding the unpacked hl7.fhir.r4.examples package")
	out := flag.String("out", "tables.go", "Go file to write")
	flag.Parse()
	if err := run(*defs, *out); err != nil {
		fmt.Fprintln(os.Stderr, "spec:", err)
		os.Exit(1)
	}
}

type bundle struct {
	Entry []struct {
		Resource json.RawMessage `json:"resource"`
	} `json:"entry"`
}

type structureDef struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	URL          string `json:"url"`
	Context      []struct {
		Type       string `json:"type"`
		Expression string `json:"expression"`
	} `json:"context"`
	Kind       string `json:"kind"`
	Abstract   bool   `json:"abstract"`
	Derivation string `json:"derivation"`
	Type       string `json:"type"`
	Snapshot   struct {
		Element []elementDef `json:"element"`
	} `json:"snapshot"`
}

type elementDef struct {
	Path             string    `json:"path"`
	Min              int       `json:"min"`
	Max              string    `json:"max"`
	ContentReference string    `json:"contentReference"`
	Type             []typeRef `json:"type"`
	Binding          *struct {
		Strength string `json:"strength"`
		ValueSet string `json:"valueSet"`
	} `json:"binding"`
	Constraint []constraintDef `json:"constraint"`
}

type typeRef struct {
	Code      string `json:"code"`
	Extension []struct {
		URL      string `json:"url"`
		ValueURL string `json:"valueUrl"`
	} `json:"extension"`
	Profile       []string `json:"profile"`
	TargetProfile []string `json:"targetProfile"`
}

type constraintDef struct {
	Key        string `json:"key"`
	Severity   string `json:"severity"`
	Human      string `json:"human"`
	Expression string `json:"expression"`
	Extension  []struct {
		URL          string `json:"url"`
		ValueBoolean bool   `json:"valueBoolean"`
	} `json:"extension"`
}

// genConstraint is one row of the constraints table.
type genConstraint struct {
	Key, Path, Type, Human, Expression string
	Error, BestPractice                bool
}

const bestPracticeExt = "http://hl7.org/fhir/StructureDefinition/elementdefinition-bestpractice"

func newConstraint(c constraintDef, path, typ string) genConstraint {
	g := genConstraint{Key: c.Key, Path: path, Type: typ, Human: c.Human, Expression: c.Expression, Error: c.Severity == "error"}
	for _, x := range c.Extension {
		if x.URL == bestPracticeExt && x.ValueBoolean {
			g.BestPractice = true
		}
	}
	return g
}

type valueSetDef struct {
	ResourceType string `json:"resourceType"`
	URL          string `json:"url"`
	Compose      *struct {
		Include []struct {
			System   string   `json:"system"`
			ValueSet []string `json:"valueSet"`
			Concept  []struct {
				Code string `json:"code"`
			} `json:"concept"`
			Filter []json.RawMessage `json:"filter"`
		} `json:"include"`
		Exclude []json.RawMessage `json:"exclude"`
	} `json:"compose"`
	Expansion *struct {
		Contains []containsDef `json:"contains"`
	} `json:"expansion"`
	// CodeSystem fields
	Content string       `json:"content"`
	Concept []conceptDef `json:"concept"`
}

type containsDef struct {
	System   string        `json:"system"`
	Code     string        `json:"code"`
	Contains []containsDef `json:"contains"`
}

type conceptDef struct {
	Code    string       `json:"code"`
	Concept []conceptDef `json:"concept"`
}

// implemented lists the invariants the fhir package checks; the tables
// record which types carry them.
var implemented = map[string]bool{
	"ele-1": true, "dom-2": true, "dom-3": true, "dom-4": true, "dom-5": true, "dom-6": true,
	"bdl-1": true, "bdl-2": true, "bdl-3": true, "bdl-4": true, "bdl-5": true, "bdl-7": true,
	"bdl-8": true, "bdl-9": true, "bdl-10": true, "bdl-11": true, "bdl-12": true, "ref-1": true,
	"ext-1": true, "ras-2": true, "obs-6": true, "qty-3": true, "cpt-2": true, "per-1": true, "att-1": true, "pat-1": true,
}

// grammarBased lists code systems whose codes follow a grammar, so any
// enumeration found in the definitions is only a sample.
var grammarBased = map[string]bool{
	"http://unitsofmeasure.org": true,
	"urn:ietf:bcp:47":           true,
	"urn:ietf:bcp:13":           true,
}

type genElement struct {
	Name, Path, Type string
	Min, Max         int
	Strength         string
	ValueSet         string
	Targets          []string
}

type genType struct {
	Name       string
	Kind       string
	Abstract   bool
	Elements   []genElement
	Invariants []string
}

func readBundle(path string) ([]json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var bd bundle
	if err := json.Unmarshal(b, &bd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]json.RawMessage, len(bd.Entry))
	for i, e := range bd.Entry {
		out[i] = e.Resource
	}
	return out, nil
}

func stripVersion(u string) string {
	if i := strings.IndexByte(u, '|'); i >= 0 {
		return u[:i]
	}
	return u
}

func typeCode(t typeRef) string {
	for _, e := range t.Extension {
		if e.URL == "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type" {
			return e.ValueURL
		}
	}
	if strings.HasPrefix(t.Code, "http://hl7.org/fhirpath/System.") {
		switch strings.TrimPrefix(t.Code, "http://hl7.org/fhirpath/System.") {
		case "Boolean":
			return "boolean"
		case "Integer":
			return "integer"
		case "Decimal":
			return "decimal"
		case "Date":
			return "date"
		case "DateTime":
			return "dateTime"
		case "Time":
			return "time"
		}
		return "string"
	}
	return t.Code
}

func run(defs, out string) error {
	var sds []structureDef
	profileConstraints := map[string][]constraintDef{}
	// baseKeys are the constraint keys of the base data types, which a
	// profile's snapshot repeats.
	baseKeys := map[string]bool{}
	var constraints []genConstraint
	seenConstraint := map[[2]string]bool{}
	addConstraint := func(g genConstraint) {
		if g.Key == "ele-1" || g.Expression == "" || seenConstraint[[2]string{g.Path, g.Key}] {
			return
		}
		seenConstraint[[2]string{g.Path, g.Key}] = true
		constraints = append(constraints, g)
	}
	for _, f := range []string{"Bundle-types.json", "Bundle-resources.json"} {
		rs, err := readBundle(filepath.Join(defs, f))
		if err != nil {
			return err
		}
		for _, r := range rs {
			var peek struct {
				ResourceType string `json:"resourceType"`
			}
			if err := json.Unmarshal(r, &peek); err != nil || peek.ResourceType != "StructureDefinition" {
				continue
			}
			var sd structureDef
			if err := json.Unmarshal(r, &sd); err != nil {
				return err
			}
			if sd.ResourceType != "StructureDefinition" {
				continue
			}
			if sd.Derivation == "constraint" {
				// Profiles of data types (SimpleQuantity, MoneyQuantity):
				// their own root constraints apply where an element names
				// the profile.
				if len(sd.Snapshot.Element) > 0 {
					for _, c := range sd.Snapshot.Element[0].Constraint {
						profileConstraints[sd.URL] = append(profileConstraints[sd.URL], c)
					}
				}
				continue
			}
			if len(sd.Snapshot.Element) > 0 {
				for _, c := range sd.Snapshot.Element[0].Constraint {
					baseKeys[c.Key] = true
				}
			}
			sds = append(sds, sd)
		}
	}
	// Drop the profiles' constraints that their base type has anyway.
	for url, cs := range profileConstraints {
		var own []constraintDef
		for _, c := range cs {
			if c.Key != "ele-1" && c.Expression != "" && !baseKeys[c.Key] {
				own = append(own, c)
			}
		}
		profileConstraints[url] = own
	}
	extDefs, err := readExtensions(filepath.Join(defs, "Bundle-extensions.json"))
	if err != nil {
		return err
	}
	if len(sds) == 0 {
		return errors.New("no StructureDefinitions found")
	}
	types := map[string]*genType{}
	required := map[string]bool{}
	for _, sd := range sds {
		kind := map[string]string{"primitive-type": "Primitive", "complex-type": "Complex", "resource": "Resource"}[sd.Kind]
		if kind == "" {
			continue
		}
		root := &genType{Name: sd.Type, Kind: kind, Abstract: sd.Abstract}
		types[sd.Type] = root
		if kind == "Primitive" {
			continue
		}
		// Parents with children become their own (backbone) types named by path.
		hasKids := map[string]bool{}
		for _, el := range sd.Snapshot.Element {
			if i := strings.LastIndexByte(el.Path, '.'); i >= 0 {
				hasKids[el.Path[:i]] = true
			}
		}
		for _, el := range sd.Snapshot.Element {
			for _, c := range el.Constraint {
				addConstraint(newConstraint(c, el.Path, ""))
			}
			for _, t := range el.Type {
				for _, p := range t.Profile {
					for _, c := range profileConstraints[stripVersion(p)] {
						addConstraint(newConstraint(c, el.Path, typeCode(t)))
					}
				}
			}
			i := strings.LastIndexByte(el.Path, '.')
			if i < 0 {
				for _, c := range el.Constraint {
					if implemented[c.Key] {
						root.Invariants = append(root.Invariants, c.Key)
					}
				}
				continue
			}
			parent, name := el.Path[:i], el.Path[i+1:]
			pt := types[parent]
			if pt == nil {
				return fmt.Errorf("%s: parent %s not seen before", el.Path, parent)
			}
			max := -1
			if el.Max != "*" {
				fmt.Sscan(el.Max, &max)
			}
			ge := genElement{Name: name, Path: el.Path, Min: el.Min, Max: max}
			if el.Binding != nil && el.Binding.ValueSet != "" {
				ge.Strength = el.Binding.Strength
				ge.ValueSet = stripVersion(el.Binding.ValueSet)
				if ge.Strength == "required" || ge.Strength == "extensible" {
					required[ge.ValueSet] = true
				}
			}
			if el.ContentReference != "" {
				ge.Type = strings.TrimPrefix(el.ContentReference, "#")
				pt.Elements = append(pt.Elements, ge)
				continue
			}
			if hasKids[el.Path] {
				bt := &genType{Name: el.Path, Kind: "Backbone"}
				for _, c := range el.Constraint {
					if implemented[c.Key] {
						bt.Invariants = append(bt.Invariants, c.Key)
					}
				}
				types[el.Path] = bt
				ge.Type = el.Path
				pt.Elements = append(pt.Elements, ge)
				continue
			}
			// A resource's own id is an id, whatever the snapshot's System type says.
			if name == "id" && kind == "Resource" && parent == sd.Type {
				ge.Type = "id"
				pt.Elements = append(pt.Elements, ge)
				continue
			}
			choice := strings.HasSuffix(name, "[x]")
			for _, t := range el.Type {
				e := ge
				e.Type = typeCode(t)
				if e.Type == "Reference" {
					for _, p := range t.TargetProfile {
						p = p[strings.LastIndexByte(p, '/')+1:]
						if p != "Resource" {
							e.Targets = append(e.Targets, p)
						}
					}
				}
				if choice {
					e.Name = strings.TrimSuffix(name, "[x]") + strings.ToUpper(e.Type[:1]) + e.Type[1:]
				}
				pt.Elements = append(pt.Elements, e)
			}
		}
	}

	compartment, err := readPatientCompartment(defs, types)
	if err != nil {
		return err
	}

	// Value sets of required bindings.
	var all []valueSetDef
	for _, f := range []string{"Bundle-valuesets.json", "Bundle-v3-valuesets.json", "Bundle-v2-valuesets.json"} {
		rs, err := readBundle(filepath.Join(defs, f))
		if err != nil {
			return err
		}
		for _, r := range rs {
			var v valueSetDef
			if err := json.Unmarshal(r, &v); err != nil {
				return err
			}
			all = append(all, v)
		}
	}
	codeSystems := map[string][]string{}
	valueSets := map[string]*valueSetDef{}
	for i := range all {
		v := &all[i]
		switch v.ResourceType {
		case "CodeSystem":
			if v.Content == "complete" {
				var codes []string
				var walk func([]conceptDef)
				walk = func(cs []conceptDef) {
					for _, c := range cs {
						codes = append(codes, c.Code)
						walk(c.Concept)
					}
				}
				walk(v.Concept)
				codeSystems[v.URL] = codes
			}
		case "ValueSet":
			valueSets[v.URL] = v
		}
	}
	expansions := map[string]*valueSetDef{}
	rs, err := readBundle(filepath.Join(defs, "Bundle-valueset-expansions.json"))
	if err != nil {
		return err
	}
	for _, r := range rs {
		var v valueSetDef
		if err := json.Unmarshal(r, &v); err != nil {
			return err
		}
		expansions[v.URL] = &v
	}
	type code struct{ System, Code string }
	var expand func(url string, depth int) ([]code, bool)
	expand = func(url string, depth int) ([]code, bool) {
		if depth > 8 {
			return nil, false
		}
		v := valueSets[url]
		if v != nil && v.Compose != nil && len(v.Compose.Exclude) == 0 {
			var codes []code
			ok := true
			for _, inc := range v.Compose.Include {
				if len(inc.Filter) > 0 {
					ok = false
					break
				}
				for _, sub := range inc.ValueSet {
					cs, k := expand(stripVersion(sub), depth+1)
					if !k {
						ok = false
					}
					codes = append(codes, cs...)
				}
				if inc.System == "" {
					continue
				}
				if len(inc.Concept) > 0 {
					for _, c := range inc.Concept {
						codes = append(codes, code{inc.System, c.Code})
					}
					continue
				}
				cs, found := codeSystems[inc.System]
				if !found {
					ok = false
					break
				}
				for _, c := range cs {
					codes = append(codes, code{inc.System, c})
				}
			}
			if ok {
				return codes, true
			}
		}
		if x := expansions[url]; x != nil && x.Expansion != nil {
			var codes []code
			var walk func([]containsDef)
			walk = func(cs []containsDef) {
				for _, c := range cs {
					if c.Code != "" {
						codes = append(codes, code{c.System, c.Code})
					}
					walk(c.Contains)
				}
			}
			walk(x.Expansion.Contains)
			for _, c := range codes {
				// Grammar-based systems have no finite expansion; a sample is not a code list.
				if grammarBased[c.System] {
					return nil, false
				}
			}
			return codes, len(codes) > 0
		}
		return nil, false
	}

	var buf bytes.Buffer
	buf.WriteString("// Code generated by internal/gen/fhirgen/spec from the FHIR R4 4.0.1 definitions; DO NOT EDIT.\n\npackage spec\n\n")
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	buf.WriteString("var types = [...]Type{\n")
	nElems := 0
	index := make(map[string]int, len(names))
	for i, n := range names {
		index[n] = i
	}
	for _, n := range names {
		t := types[n]
		sort.SliceStable(t.Elements, func(i, j int) bool { return t.Elements[i].Name < t.Elements[j].Name })
		fmt.Fprintf(&buf, "{Name: %q, Kind: %s, Abstract: %v,", t.Name, t.Kind, t.Abstract)
		if len(t.Invariants) > 0 {
			sort.Strings(t.Invariants)
			fmt.Fprintf(&buf, " Invariants: %#v,", t.Invariants)
		}
		var req []string
		for _, e := range t.Elements {
			if e.Min > 0 && (len(req) == 0 || req[len(req)-1] != e.Path) {
				req = append(req, e.Path)
			}
		}
		if len(req) > 0 {
			sort.Strings(req)
			fmt.Fprintf(&buf, " Required: %#v,", req)
		}
		if len(t.Elements) > 0 {
			buf.WriteString(" Elements: []Element{\n")
			for _, e := range t.Elements {
				nElems++
				fmt.Fprintf(&buf, "{%q, %q, %q, %d, %d, %s, %q, ", e.Name, e.Path, e.Type, e.Min, e.Max, strength(e.Strength), e.ValueSet)
				if len(e.Targets) > 0 {
					fmt.Fprintf(&buf, "%#v", e.Targets)
				} else {
					buf.WriteString("nil")
				}
				ti, ok := index[e.Type]
				if !ok {
					ti = -1
				}
				fmt.Fprintf(&buf, ", %d, %d},\n", ti, nElems-1)
			}
			buf.WriteString("}")
		}
		buf.WriteString("},\n")
	}
	buf.WriteString("}\n\n")

	vsNames := make([]string, 0, len(required))
	for u := range required {
		vsNames = append(vsNames, u)
	}
	sort.Strings(vsNames)
	var skipped []string
	for _, u := range vsNames {
		if codes, ok := expand(u, 0); !ok || len(codes) == 0 {
			skipped = append(skipped, u)
		}
	}
	buf.WriteString("// Required and extensible value sets not expanded, so not checked\n// (grammar-based code systems, or content outside the core definitions):\n")
	for _, u := range skipped {
		fmt.Fprintf(&buf, "//   - %s\n", u)
	}
	buf.WriteString("var valueSets = [...]ValueSet{\n")
	nVS := 0
	for _, u := range vsNames {
		codes, ok := expand(u, 0)
		if !ok || len(codes) == 0 {
			continue
		}
		nVS++
		sort.Slice(codes, func(i, j int) bool {
			if codes[i].Code != codes[j].Code {
				return codes[i].Code < codes[j].Code
			}
			return codes[i].System < codes[j].System
		})
		fmt.Fprintf(&buf, "{URL: %q, Codes: []Code{", u)
		var prev code
		for i, c := range codes {
			if i > 0 && c == prev {
				continue
			}
			prev = c
			fmt.Fprintf(&buf, "{%q, %q},", c.System, c.Code)
		}
		buf.WriteString("}},\n")
	}
	buf.WriteString("}\n\n")

	sort.Slice(constraints, func(i, j int) bool {
		if constraints[i].Path != constraints[j].Path {
			return constraints[i].Path < constraints[j].Path
		}
		return constraints[i].Key < constraints[j].Key
	})
	buf.WriteString("// constraints holds every constraint of the R4 resources and data types\n// but ele-1, sorted by Path, then Key.\nvar constraints = [...]Constraint{\n")
	for _, c := range constraints {
		fmt.Fprintf(&buf, "{Key: %q, Path: %q,", c.Key, c.Path)
		if c.Type != "" {
			fmt.Fprintf(&buf, " Type: %q,", c.Type)
		}
		if c.Error {
			buf.WriteString(" Error: true,")
		}
		if c.BestPractice {
			buf.WriteString(" BestPractice: true,")
		}
		fmt.Fprintf(&buf, " Human: %q, Expression: %q},\n", c.Human, c.Expression)
	}
	buf.WriteString("}\n\n")
	writePatientCompartment(&buf, compartment)
	buf.WriteString("// extensionDefs holds the contexts of the core R4 extensions, sorted by URL.\nvar extensionDefs = [...]ExtensionDef{\n")
	for _, x := range extDefs {
		fmt.Fprintf(&buf, "{URL: %q, Contexts: %#v},\n", x.URL, x.Contexts)
	}
	buf.WriteString("}\n")
	src, err := format.Source(buf.Bytes())
	if err != nil {
		return fmt.Errorf("formatting output: %w", err)
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "spec: %d types, %d elements, %d of %d required and extensible value sets expanded, %d constraints, %d extensions, %d Patient compartment types\n", len(types), nElems, nVS, len(required), len(constraints), len(extDefs), len(compartment))
	return nil
}

func strength(s string) string {
	switch s {
	case "required":
		return "Required"
	case "extensible":
		return "Extensible"
	case "preferred":
		return "Preferred"
	case "example":
		return "Example"
	}
	return "NoBinding"
}

type genExtension struct {
	URL      string
	Contexts []string
}

// readExtensions reads the element contexts of the core extension
// definitions, sorted by URL.
func readExtensions(path string) ([]genExtension, error) {
	rs, err := readBundle(path)
	if err != nil {
		return nil, err
	}
	var out []genExtension
	for _, r := range rs {
		var sd structureDef
		if err := json.Unmarshal(r, &sd); err != nil {
			return nil, err
		}
		if sd.ResourceType != "StructureDefinition" || sd.Type != "Extension" || sd.URL == "" {
			continue
		}
		x := genExtension{URL: sd.URL}
		for _, c := range sd.Context {
			if c.Type == "element" {
				x.Contexts = append(x.Contexts, c.Expression)
			} else {
				x.Contexts = append(x.Contexts, c.Type+":"+c.Expression)
			}
		}
		if len(x.Contexts) == 0 {
			continue
		}
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}

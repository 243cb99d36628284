package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The subset of a FHIR StructureDefinition that the generator reads.
type structureDefinition struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	Abstract     bool   `json:"abstract"`
	Derivation   string `json:"derivation"`
	Type         string `json:"type"`
	Description  string `json:"description"`
	Snapshot     struct {
		Element []elementDefinition `json:"element"`
	} `json:"snapshot"`
}

type elementDefinition struct {
	Path             string `json:"path"`
	Short            string `json:"short"`
	Min              int    `json:"min"`
	Max              string `json:"max"`
	ContentReference string `json:"contentReference"`
	Type             []struct {
		Code string `json:"code"`
	} `json:"type"`
}

type bundle struct {
	Entry []struct {
		Resource json.RawMessage `json:"resource"`
	} `json:"entry"`
}

// fieldKind says how a field is represented and serialised.
type fieldKind int

const (
	kindString    fieldKind = iota // a plain Go string (element ids, Extension.url)
	kindPrimitive                  // a FHIR primitive (*T or []T) with its _x companion
	kindComplex                    // a data type or backbone element struct (*T or []T)
	kindResource                   // the Resource interface ([]Resource or Resource)
)

type field struct {
	GoName   string
	JSONName string
	Kind     fieldKind
	GoType   string // element type without pointer/slice
	Array    bool
	Short    string
	Min      int
	Max      string
	Choice   string // the choice element's base name (value for value[x]) or ""
	FHIRType string // FHIR type code
}

type structType struct {
	GoName     string
	FHIRPath   string // e.g. Patient.contact
	Short      string
	IsResource bool
	IsDataType bool
	File       string // output file base name
	Fields     []*field
}

// primitiveKind is how a primitive's value is held in Go.
type primitiveKind int

const (
	primString primitiveKind = iota
	primBool
	primInt
	primDecimal
)

type primitiveType struct {
	FHIRName string
	GoName   string
	Kind     primitiveKind
	Short    string
}

var primitiveGoNames = map[string]string{
	"base64Binary": "Base64Binary",
	"boolean":      "Boolean",
	"canonical":    "Canonical",
	"code":         "Code",
	"date":         "Date",
	"dateTime":     "DateTime",
	"decimal":      "Decimal",
	"id":           "ID",
	"instant":      "Instant",
	"integer":      "Integer",
	"markdown":     "Markdown",
	"oid":          "OID",
	"positiveInt":  "PositiveInt",
	"string":       "String",
	"time":         "Time",
	"unsignedInt":  "UnsignedInt",
	"uri":          "URI",
	"url":          "URL",
	"uuid":         "UUID",
	"xhtml":        "XHTML",
}

type model struct {
	Primitives []*primitiveType
	Structs    []*structType // all structs, in a deterministic order
	Resources  []*structType
	DataTypes  []string // names of complex data types
	byPath     map[string]*structType
	byName     map[string]*structType
}

func loadDefinitions(dir string) ([]structureDefinition, error) {
	var out []structureDefinition
	for _, name := range []string{"Bundle-types.json", "Bundle-resources.json"} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("read definitions: %w", err)
		}
		var b bundle
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("parse %s: %w", name, err)
		}
		for _, e := range b.Entry {
			var probe struct {
				ResourceType string `json:"resourceType"`
			}
			if err := json.Unmarshal(e.Resource, &probe); err != nil {
				return nil, fmt.Errorf("parse %s entry: %w", name, err)
			}
			if probe.ResourceType != "StructureDefinition" {
				continue
			}
			var sd structureDefinition
			if err := json.Unmarshal(e.Resource, &sd); err != nil {
				return nil, fmt.Errorf("parse %s structure definition: %w", name, err)
			}
			out = append(out, sd)
		}
	}
	return out, nil
}

func buildModel(sds []structureDefinition) (*model, error) {
	m := &model{byPath: map[string]*structType{}, byName: map[string]*structType{}}
	var complexSDs, resourceSDs []structureDefinition
	for _, sd := range sds {
		if sd.Derivation == "constraint" || sd.Abstract {
			continue
		}
		switch sd.Kind {
		case "primitive-type":
			goName, ok := primitiveGoNames[sd.ID]
			if !ok {
				return nil, fmt.Errorf("unexpected primitive type %q", sd.ID)
			}
			short := firstSentence(sd.Description)
			if i := strings.Index(short, ": "); i >= 0 && strings.HasPrefix(short, "Base StructureDefinition") {
				short = short[i+2:]
			}
			if short == "" || strings.HasPrefix(short, "Base StructureDefinition") {
				short = "XHTML narrative."
			}
			p := &primitiveType{FHIRName: sd.ID, GoName: goName, Short: short}
			switch sd.ID {
			case "boolean":
				p.Kind = primBool
			case "integer", "positiveInt", "unsignedInt":
				p.Kind = primInt
			case "decimal":
				p.Kind = primDecimal
			}
			m.Primitives = append(m.Primitives, p)
		case "complex-type":
			complexSDs = append(complexSDs, sd)
		case "resource":
			resourceSDs = append(resourceSDs, sd)
		}
	}
	if len(m.Primitives) != len(primitiveGoNames) {
		return nil, fmt.Errorf("found %d primitive types, want %d", len(m.Primitives), len(primitiveGoNames))
	}
	sort.Slice(m.Primitives, func(i, j int) bool { return m.Primitives[i].GoName < m.Primitives[j].GoName })
	sort.Slice(complexSDs, func(i, j int) bool { return complexSDs[i].ID < complexSDs[j].ID })
	sort.Slice(resourceSDs, func(i, j int) bool { return resourceSDs[i].ID < resourceSDs[j].ID })
	complexNames := map[string]bool{}
	for _, sd := range complexSDs {
		complexNames[sd.ID] = true
		m.DataTypes = append(m.DataTypes, sd.ID)
	}
	for _, sd := range complexSDs {
		if err := m.addStructs(sd, false, "datatypes", complexNames); err != nil {
			return nil, err
		}
	}
	for _, sd := range resourceSDs {
		if err := m.addStructs(sd, true, "res_"+strings.ToLower(sd.ID), complexNames); err != nil {
			return nil, err
		}
	}
	// contentReference fields point at structs by path; resolve them now.
	for _, s := range m.Structs {
		for _, f := range s.Fields {
			if strings.HasPrefix(f.GoType, "#") {
				target, ok := m.byPath[strings.TrimPrefix(f.GoType, "#")]
				if !ok {
					return nil, fmt.Errorf("%s.%s: unresolved content reference %s", s.FHIRPath, f.JSONName, f.GoType)
				}
				f.GoType = target.GoName
			}
		}
	}
	return m, nil
}

func (m *model) addStructs(sd structureDefinition, isResource bool, file string, complexNames map[string]bool) error {
	for _, el := range sd.Snapshot.Element {
		if el.Max == "0" {
			continue
		}
		if !strings.Contains(el.Path, ".") {
			s := &structType{GoName: sd.ID, FHIRPath: sd.ID, Short: firstSentence(sd.Description), IsResource: isResource, IsDataType: !isResource, File: file}
			if err := m.addStruct(s); err != nil {
				return err
			}
			continue
		}
		parentPath := el.Path[:strings.LastIndex(el.Path, ".")]
		name := el.Path[strings.LastIndex(el.Path, ".")+1:]
		parent, ok := m.byPath[parentPath]
		if !ok {
			return fmt.Errorf("%s: parent %s not known", el.Path, parentPath)
		}
		if el.ContentReference != "" {
			parent.Fields = append(parent.Fields, &field{
				GoName: goFieldName(name), JSONName: name, Kind: kindComplex, GoType: el.ContentReference,
				Array: el.Max != "1", Short: el.Short, Min: el.Min, Max: el.Max, FHIRType: "BackboneElement",
			})
			continue
		}
		if len(el.Type) == 0 {
			return fmt.Errorf("%s: no type", el.Path)
		}
		if code := el.Type[0].Code; len(el.Type) == 1 && (code == "BackboneElement" || code == "Element") {
			s := &structType{GoName: structNameForPath(el.Path), FHIRPath: el.Path, Short: el.Short, File: file}
			if err := m.addStruct(s); err != nil {
				return err
			}
			parent.Fields = append(parent.Fields, &field{
				GoName: goFieldName(name), JSONName: name, Kind: kindComplex, GoType: s.GoName,
				Array: el.Max != "1", Short: el.Short, Min: el.Min, Max: el.Max, FHIRType: code,
			})
			continue
		}
		choice := strings.HasSuffix(name, "[x]")
		base := strings.TrimSuffix(name, "[x]")
		for _, t := range el.Type {
			f := &field{JSONName: base, Array: el.Max != "1", Short: el.Short, Min: el.Min, Max: el.Max, FHIRType: t.Code}
			if choice {
				f.Choice = base
				f.JSONName = base + upperFirst(t.Code)
			}
			f.GoName = goFieldName(f.JSONName)
			switch {
			case strings.HasPrefix(t.Code, "http://hl7.org/fhirpath/System."):
				if choice || f.Array {
					return fmt.Errorf("%s: unexpected system type %s", el.Path, t.Code)
				}
				f.Kind = kindString
				f.GoType = "string"
			case primitiveGoNames[t.Code] != "":
				f.Kind = kindPrimitive
				f.GoType = primitiveGoNames[t.Code]
			case t.Code == "Resource":
				f.Kind = kindResource
				f.GoType = "Resource"
			case complexNames[t.Code]:
				f.Kind = kindComplex
				f.GoType = t.Code
			default:
				return fmt.Errorf("%s: unknown type %s", el.Path, t.Code)
			}
			parent.Fields = append(parent.Fields, f)
		}
	}
	return nil
}

func (m *model) addStruct(s *structType) error {
	if prev, ok := m.byName[s.GoName]; ok {
		return fmt.Errorf("type name %s used by %s and %s", s.GoName, prev.FHIRPath, s.FHIRPath)
	}
	m.byName[s.GoName] = s
	m.byPath[s.FHIRPath] = s
	m.Structs = append(m.Structs, s)
	if s.IsResource {
		m.Resources = append(m.Resources, s)
	}
	return nil
}

func structNameForPath(path string) string {
	var b strings.Builder
	for _, part := range strings.Split(path, ".") {
		b.WriteString(upperFirst(part))
	}
	return b.String()
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// initialisms are camel-case words written in capitals in Go names.
var initialisms = map[string]string{"Id": "ID", "Url": "URL", "Uri": "URI", "Uuid": "UUID", "Oid": "OID"}

// goFieldName turns a JSON member name into an exported Go field name,
// writing the words id, url, uri, uuid and oid as initialisms.
func goFieldName(json string) string {
	s := upperFirst(json)
	var words []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			words = append(words, s[start:i])
			start = i
		}
	}
	words = append(words, s[start:])
	for i, w := range words {
		if r, ok := initialisms[w]; ok {
			words[i] = r
		}
	}
	return strings.Join(words, "")
}

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '.' && s[i+1] == ' ' && !strings.HasSuffix(s[:i], "e.g") && !strings.HasSuffix(s[:i], "i.e") {
			s = s[:i+1]
			break
		}
	}
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

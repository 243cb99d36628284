package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// genCompartmentParam is one search parameter of a compartment type, with
// the element paths (from the resource, without the type) of the
// references it searches.
type genCompartmentParam struct {
	Name  string
	Paths []string
}

// genCompartmentType is one resource type of the Patient compartment.
type genCompartmentType struct {
	Type   string
	Params []genCompartmentParam
}

// simplePath is a dotted element path with no function in it.
var simplePath = regexp.MustCompile(`^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)*$`)

// readPatientCompartment reads CompartmentDefinition-patient and, from
// Bundle-searchParams.json, the expression of every parameter it names.
// An expression is a union of paths; the paths of the type itself are
// kept, each without the ".where(resolve() is Patient)" that restricts a
// reference to patients (the connector checks the reference's target
// type itself). A path that is anything else, or that does not lead to a
// Reference element of the type in types, is an error: the connector
// relies on every path being one it can walk.
func readPatientCompartment(defs string, types map[string]*genType) ([]genCompartmentType, error) {
	b, err := os.ReadFile(filepath.Join(defs, "CompartmentDefinition-patient.json"))
	if err != nil {
		return nil, err
	}
	var cd struct {
		ResourceType string `json:"resourceType"`
		Code         string `json:"code"`
		Resource     []struct {
			Code  string   `json:"code"`
			Param []string `json:"param"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(b, &cd); err != nil {
		return nil, fmt.Errorf("CompartmentDefinition-patient.json: %w", err)
	}
	if cd.ResourceType != "CompartmentDefinition" || cd.Code != "Patient" {
		return nil, errors.New("CompartmentDefinition-patient.json is not the Patient compartment")
	}
	params, err := readSearchParams(filepath.Join(defs, "Bundle-searchParams.json"))
	if err != nil {
		return nil, err
	}
	var out []genCompartmentType
	for _, r := range cd.Resource {
		if len(r.Param) == 0 {
			continue // the type is not in the compartment
		}
		ct := genCompartmentType{Type: r.Code}
		for _, p := range r.Param {
			expr, ok := params[[2]string{r.Code, p}]
			if !ok {
				return nil, fmt.Errorf("compartment %s.%s: no such search parameter", r.Code, p)
			}
			gp := genCompartmentParam{Name: p}
			for _, alt := range strings.Split(expr, "|") {
				alt = strings.TrimSpace(alt)
				rest, ok := strings.CutPrefix(alt, r.Code+".")
				if !ok {
					continue // another type's path in a shared parameter
				}
				rest = strings.ReplaceAll(rest, ".where(resolve() is Patient)", "")
				if !simplePath.MatchString(rest) {
					return nil, fmt.Errorf("compartment %s.%s: path %q is not a plain element path", r.Code, p, alt)
				}
				if err := checkReferencePath(types, r.Code, rest); err != nil {
					return nil, fmt.Errorf("compartment %s.%s: %w", r.Code, p, err)
				}
				gp.Paths = append(gp.Paths, rest)
			}
			if len(gp.Paths) == 0 {
				return nil, fmt.Errorf("compartment %s.%s: the expression %q has no path of the type", r.Code, p, expr)
			}
			ct.Params = append(ct.Params, gp)
		}
		out = append(out, ct)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	if len(out) == 0 {
		return nil, errors.New("the Patient compartment has no types")
	}
	return out, nil
}

// readSearchParams maps (base type, code) to the FHIRPath expression of
// every search parameter of the definitions.
func readSearchParams(path string) (map[[2]string]string, error) {
	rs, err := readBundle(path)
	if err != nil {
		return nil, err
	}
	out := map[[2]string]string{}
	for _, r := range rs {
		var sp struct {
			ResourceType string   `json:"resourceType"`
			Code         string   `json:"code"`
			Base         []string `json:"base"`
			Expression   string   `json:"expression"`
		}
		if err := json.Unmarshal(r, &sp); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if sp.ResourceType != "SearchParameter" {
			continue
		}
		for _, b := range sp.Base {
			out[[2]string{b, sp.Code}] = sp.Expression
		}
	}
	return out, nil
}

// checkReferencePath checks that path leads, through the type's elements
// and backbone elements, to a Reference element.
func checkReferencePath(types map[string]*genType, typ, path string) error {
	t := types[typ]
	segs := strings.Split(path, ".")
	for i, seg := range segs {
		if t == nil {
			return fmt.Errorf("%s.%s: no such type", typ, path)
		}
		var el *genElement
		for k := range t.Elements {
			if t.Elements[k].Name == seg {
				el = &t.Elements[k]
				break
			}
		}
		if el == nil {
			return fmt.Errorf("%s.%s: no element %q", typ, path, seg)
		}
		if i == len(segs)-1 {
			if el.Type != "Reference" {
				return fmt.Errorf("%s.%s: a %s, not a Reference", typ, path, el.Type)
			}
			return nil
		}
		t = types[el.Type]
	}
	return nil
}

// writePatientCompartment writes the patientCompartment table.
func writePatientCompartment(buf *bytes.Buffer, cts []genCompartmentType) {
	buf.WriteString("// patientCompartment holds the resource types of the R4 Patient compartment\n" +
		"// (CompartmentDefinition-patient) with their parameters and the paths of\n" +
		"// the references those search, sorted by Type.\n" +
		"var patientCompartment = [...]CompartmentType{\n")
	for _, ct := range cts {
		fmt.Fprintf(buf, "{Type: %q, Params: []CompartmentParam{", ct.Type)
		for _, p := range ct.Params {
			fmt.Fprintf(buf, "{Name: %q, Paths: %#v},", p.Name, p.Paths)
		}
		buf.WriteString("}},\n")
	}
	buf.WriteString("}\n\n")
}

package portal

import (
	"encoding/json"
	"errors"
	"strings"
)

// capability is what a portal's CapabilityStatement says about fetching
// a record: whether it offers Patient/{id}/$everything, and which types it
// searches by which parameters.
type capability struct {
	// everything: Patient/{id}/$everything is advertised, as an operation
	// of Patient or of the system.
	everything bool
	// searchable are the types with a search-type interaction.
	searchable map[string]*capType
}

// capType is one searchable type of a CapabilityStatement.
type capType struct {
	// params are the search parameters it lists for the type; nil when it
	// lists none, which says nothing of which it supports.
	params map[string]bool
}

// errNotCapability: the answer to GET [base]/metadata is JSON, but not a
// CapabilityStatement.
var errNotCapability = errors.New("not a CapabilityStatement")

// capOperation is an operation of a CapabilityStatement.
type capOperation struct {
	Name       string `json:"name"`
	Definition string `json:"definition"`
}

// patientEverything reports whether op is Patient/{id}/$everything:
// named "everything" on the Patient resource, or defined by the
// specification's Patient-everything OperationDefinition (or named
// "patient-everything") anywhere.
func (op capOperation) patientEverything(onPatient bool) bool {
	name := strings.ToLower(strings.TrimPrefix(op.Name, "$"))
	def, _, _ := strings.Cut(op.Definition, "|")
	return (onPatient && name == "everything") || name == "patient-everything" ||
		strings.HasSuffix(def, "/OperationDefinition/Patient-everything")
}

// maxCapTypes and maxCapParams bound what parseCapability keeps: R4 has
// 146 resource types, and no type has a hundred search parameters.
const (
	maxCapTypes  = 512
	maxCapParams = 256
)

// parseCapability reads a CapabilityStatement (b is bounded by the
// exchange that read it). The rest entries of mode "server" (or of no
// mode) count; resource types that are not type names are ignored, as are
// types and parameters beyond maxCapTypes and maxCapParams. An error means
// b is not JSON of a CapabilityStatement's shape; the caller then fetches
// as from a portal that published none.
func parseCapability(b []byte) (*capability, error) {
	var cs struct {
		ResourceType string `json:"resourceType"`
		Rest         []struct {
			Mode     string `json:"mode"`
			Resource []struct {
				Type        string `json:"type"`
				Interaction []struct {
					Code string `json:"code"`
				} `json:"interaction"`
				SearchParam []struct {
					Name string `json:"name"`
				} `json:"searchParam"`
				Operation []capOperation `json:"operation"`
			} `json:"resource"`
			Operation []capOperation `json:"operation"`
		} `json:"rest"`
	}
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, err
	}
	if cs.ResourceType != "CapabilityStatement" {
		return nil, errNotCapability
	}
	c := &capability{searchable: map[string]*capType{}}
	for _, r := range cs.Rest {
		if r.Mode != "" && r.Mode != "server" {
			continue
		}
		for _, op := range r.Operation {
			c.everything = c.everything || op.patientEverything(false)
		}
		for _, res := range r.Resource {
			if !fhirType.MatchString(res.Type) {
				continue
			}
			for _, op := range res.Operation {
				c.everything = c.everything || (res.Type == "Patient" && op.patientEverything(true))
			}
			search := false
			for _, in := range res.Interaction {
				search = search || in.Code == "search-type"
			}
			if !search {
				continue
			}
			t := c.searchable[res.Type]
			if t == nil {
				if len(c.searchable) >= maxCapTypes {
					continue
				}
				t = &capType{}
				c.searchable[res.Type] = t
			}
			for _, p := range res.SearchParam {
				if t.params == nil {
					t.params = map[string]bool{}
				}
				if len(t.params) < maxCapParams {
					t.params[p.Name] = true
				}
			}
		}
	}
	return c, nil
}

package portal

import (
	"strings"

	"github.com/acds-project/acds/fhir/spec"
	"github.com/acds-project/acds/internal/base/jsonscan"
)

// membership is where a resource stands to a patient's compartment, as
// its references at the compartment's paths (spec.PatientCompartment)
// say.
type membership int

const (
	// notDecided: no reference at the compartment's paths names a
	// patient.
	notDecided membership = iota
	// ours: one names the patient.
	ours
	// another: they name other patients only.
	another
)

// compartmentOf says whether raw, a resource of the compartment type ct,
// is in the compartment of the patient id of this portal: ours when a
// reference at one of ct's paths names Patient/id (relative, or absolute
// on the portal's base, with or without a _history suffix), another when
// such references name only other patients. An error means raw is not
// JSON.
func (s *session) compartmentOf(ct *spec.CompartmentType, raw []byte, id string) (membership, error) {
	var refs []string
	for _, p := range ct.Params {
		for _, path := range p.Paths {
			var err error
			if refs, err = referencesAt(raw, strings.Split(path, "."), refs); err != nil {
				return notDecided, err
			}
		}
	}
	m := notDecided
	for _, r := range refs {
		pid, ok := s.patientOf(r)
		switch {
		case !ok:
		case pid == id:
			return ours, nil
		default:
			m = another
		}
	}
	return m, nil
}

// patientOf returns the id of the patient ref names, and false when it
// names no Patient. An absolute reference names one of this portal's
// patients only on its FHIR base; elsewhere it is another server's, so
// not ours, and reported with an empty id.
func (s *session) patientOf(ref string) (string, bool) {
	if rest, ok := strings.CutPrefix(ref, s.base.String()+"/"); ok {
		ref = rest
	} else if strings.Contains(ref, "://") {
		i := strings.Index(ref, "/Patient/")
		return "", i >= 0 && fhirID.MatchString(strings.SplitN(ref[i+len("/Patient/"):], "/", 2)[0])
	}
	rest, ok := strings.CutPrefix(ref, "Patient/")
	if !ok {
		return "", false
	}
	id, hist, _ := strings.Cut(rest, "/")
	if !fhirID.MatchString(id) || (hist != "" && !strings.HasPrefix(hist, "_history/")) {
		return "", false
	}
	return id, true
}

// referencesAt appends to refs the "reference" strings of the Reference
// values at path (element names from the top of the resource raw),
// walking the arrays that repeating elements are on the way. Values of
// another JSON type than the path expects are skipped; an error means raw
// is not JSON.
func referencesAt(raw []byte, path []string, refs []string) ([]string, error) {
	i := jsonscan.SkipSpace(raw, 0)
	_, err := refsIn(raw, i, 0, path, &refs)
	return refs, err
}

// refsIn walks the value at raw[i], depth levels deep, along path.
func refsIn(raw []byte, i, depth int, path []string, refs *[]string) (int, error) {
	if i >= len(raw) {
		return jsonscan.Value(raw, i, depth) // the scanner's error for the end of input
	}
	switch raw[i] {
	case '[':
		return jsonscan.Array(raw, i, depth, func(i int) (int, error) {
			return refsIn(raw, i, depth+1, path, refs)
		})
	case '{':
		return jsonscan.Object(raw, i, depth, func(key []byte, i int) (int, error) {
			switch {
			case len(path) > 0 && string(key) == path[0]:
				return refsIn(raw, i, depth+1, path[1:], refs)
			case len(path) == 0 && string(key) == "reference":
				end, err := jsonscan.Value(raw, i, depth+1)
				var r string
				if err == nil && jsonscan.DecodeString(raw[i:end], &r) == nil {
					*refs = append(*refs, r)
				}
				return end, err
			}
			return jsonscan.Value(raw, i, depth+1)
		})
	}
	return jsonscan.Value(raw, i, depth)
}

package fhir

import (
	"context"
	"strings"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/fhir/spec"
)

// De-identification keeps the output valid: the error-level constraints
// of the R4 definitions that hold on an element before its children are
// de-identified are evaluated again once they are done, and a constraint
// that removing values broke (org-1 when an Organization's name goes,
// cmp-1 when a section's text goes, app-1 when a participant's actor
// goes, exp-1, inv-1…) is repaired by masking what was removed, never by
// restoring it:
//
//   - a removed primitive the constraint names gets the data-absent-reason
//     extension (code "masked") in place of its value (_name);
//   - a removed data type gets the same extension as its only content (a
//     Reference, HumanName, Identifier… with nothing but the extension);
//   - a removed Narrative becomes a placeholder saying that the text was
//     removed, and a removed Annotation keeps only a masked text.
//
// Only the children named in the failing constraint are masked, one at a
// time, until it holds again. The evaluations share a step budget (twice
// the validation's for the largest input allowed); past it, as for a
// constraint that cannot be evaluated, nothing is repaired.

// narrativePlaceholder is the text of a narrative removed by
// de-identification where a constraint needs one (cmp-1).
const narrativePlaceholder = `<div xmlns="http://www.w3.org/1999/xhtml">Removed for de-identification.</div>`

// repairConstraints turns the repair on; a test turns it off to count
// what de-identification alone would break.
var repairConstraints = true

// constraintsBefore records, at enter, the error-level constraints that
// hold on the node before its children are de-identified.
func (d *safeHarbor) constraintsBefore(stack []specFrame, fr *shFrame) {
	if !repairConstraints {
		return
	}
	f := &stack[len(stack)-1]
	rs := loadRules()
	var cand []*rule
	if f.Type != nil {
		cand = rs.byType[f.Type.Index()]
	}
	if f.Elem != nil {
		if more := rs.byElem[f.Elem.Index()]; len(more) > 0 {
			cand = append(cand[:len(cand):len(cand)], more...)
		}
	}
	if len(cand) == 0 {
		return
	}
	node, env := d.constraintInput(stack)
	if node == nil {
		return
	}
	for _, r := range cand {
		if r.x == nil || !r.c.Error || r.c.BestPractice || r.c.Type != "" && f.Type.Name != r.c.Type {
			continue
		}
		if holds(r, node, env) {
			fr.held = append(fr.held, r)
		}
	}
}

// constraintInput returns the node of the walk's current element and the
// environment of its resource.
func (d *safeHarbor) constraintInput(stack []specFrame) (*fhirpath.Node, *fhirpath.Env) {
	f := &stack[len(stack)-1]
	var node *fhirpath.Node
	if r, ok := f.Node.(r4.Resource); ok {
		node = fhirpath.NodeOf(r)
	} else if f.Type != nil {
		node = fhirpath.NodeOfType(f.Node, f.Type)
	} else {
		return nil, nil
	}
	lim := constraintLimits
	lim.Budget = d.budget
	env := &fhirpath.Env{Now: d.now, Limits: lim, SkipEmpty: true}
	for i := len(stack) - 1; i >= 0; i-- {
		if r, ok := stack[i].Node.(r4.Resource); ok {
			if env.Resource == nil {
				env.Resource = r
			}
			env.RootResource = r
			if b, ok := r.(*r4.Bundle); ok && env.Bundle == nil {
				env.Bundle = b
				if d.indexes == nil {
					d.indexes = map[*r4.Bundle]*fhirpath.BundleIndex{}
				}
				if d.indexes[b] == nil {
					d.indexes[b] = fhirpath.NewBundleIndex(b)
				}
				env.BundleIndex = d.indexes[b]
			}
		}
	}
	if root, ok := stack[0].Node.(r4.Resource); ok {
		env.RootResource = root
	}
	return node, env
}

// holds reports whether rule r is met on node (true, or a result that is
// not a single false and not empty); an evaluation error counts as met,
// since the validator does not fail input on it either.
func holds(r *rule, node *fhirpath.Node, env *fhirpath.Env) bool {
	out, err := r.x.Evaluate(context.Background(), fhirpath.Collection{node}, env)
	if err != nil || len(out) > 1 {
		return true
	}
	return len(out) == 1 && out[0] != fhirpath.Boolean(false)
}

// keepConstraints re-evaluates at leave the constraints that held at enter
// and repairs those de-identification broke.
func (d *safeHarbor) keepConstraints(stack []specFrame, fr *shFrame) {
	if len(fr.held) == 0 {
		return
	}
	node, env := d.constraintInput(stack)
	for _, r := range fr.held {
		if holds(r, node, env) {
			continue
		}
		for i := range fr.kids {
			k := &fr.kids[i]
			if !namedIn(r.c.Expression, k) || !maskKid(k) {
				continue
			}
			if holds(r, node, env) {
				break
			}
		}
	}
}

// namedIn reports whether the constraint expression names the child of
// record k (value for valueString).
func namedIn(expr string, k *kidRecord) bool {
	name := k.name
	if k.elem != nil {
		_, name = splitLast(k.elem.Path)
		name = strings.TrimSuffix(name, "[x]")
	}
	for i := strings.Index(expr, name); i >= 0; {
		end := i + len(name)
		before := i == 0 || !isNameChar(expr[i-1])
		after := end == len(expr) || !isNameChar(expr[end])
		if before && after {
			return true
		}
		j := strings.Index(expr[end:], name)
		if j < 0 {
			break
		}
		i = end + j
	}
	return false
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// maskKid masks the first removed item of child record k, as described
// above, and reports whether it did.
func maskKid(k *kidRecord) bool {
	if len(k.items) == 0 || k.elem == nil {
		return false
	}
	it := k.items[0]
	if k.prim {
		if !k.valuePresent || k.valueKept || k.elemKept {
			return false
		}
		zeroElement(it)
		if _, ext := r4.ElementOf(it); ext != nil {
			*ext = []r4.Extension{maskedExtension()}
		}
		k.elemKept = true
		return true
	}
	if k.kept {
		return false
	}
	switch n := it.(type) {
	case *r4.Narrative:
		*n = r4.Narrative{Status: r4.NewCode("empty"), Div: r4.NewXHTML(narrativePlaceholder)}
	case *r4.Annotation:
		*n = r4.Annotation{Text: &r4.Markdown{Extension: []r4.Extension{maskedExtension()}}}
	default:
		if t := k.elem.TypeDef(); t == nil || t.Kind == spec.Resource || len(t.Required) > 0 {
			return false // masking it would leave its own required elements out
		}
		zeroElement(it)
		_, ext := r4.ElementOf(it)
		if ext == nil {
			return false
		}
		*ext = []r4.Extension{maskedExtension()}
	}
	k.kept = true
	return true
}

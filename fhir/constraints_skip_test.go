package fhir

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/fhir/fhirpath"
	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// TestTrueWithoutSound: wherever a check for errors only leaves a
// constraint unevaluated because fhirpath.Expression.TrueWithout says it
// is met (obs-7 on an Observation without components…), evaluating it
// gives true or fails, never false or nothing, on every element of the
// shared bundles, the HL7 validator cases and the 20 KB load bundle; and
// Check's verdict on them is Validate's.
func TestTrueWithoutSound(t *testing.T) {
	files := corpusBundles(t)
	cases := corpus.JSON(t, corpus.ValidatorCases)
	files = append(files, cases...)
	inputs := [][]byte{bundle20KB()}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, data)
	}
	rs := loadRules()
	skipped := 0
	for i, data := range inputs {
		name := "bundle20KB"
		if i > 0 {
			name = filepath.Base(files[i-1])
		}
		if cerr := Check(data, Options{}); Validate(data).HasErrors() != (cerr != nil && !isNoResources(cerr)) {
			t.Errorf("%s: Validate has errors %v, Check says %v", name, Validate(data).HasErrors(), cerr)
		}
		root, _ := (r4.Options{MaxBytes: DefaultMaxBytes}).Decode(data)
		if root == nil {
			continue
		}
		_ = specWalk(root, func(path *r4.Path, stack []specFrame) error {
			f := &stack[len(stack)-1]
			var sets [2][]*rule
			if f.Type != nil {
				sets[0] = rs.byType[f.Type.Index()]
			}
			if f.Elem != nil {
				sets[1] = rs.byElem[f.Elem.Index()]
			}
			for _, set := range sets {
				for _, r := range set {
					tw := r.trueWithout[f.Type]
					if tw == nil || r.c.Type != "" && (f.Type == nil || f.Type.Name != r.c.Type) || !tw(f.Node) {
						continue
					}
					skipped++
					var node *fhirpath.Node
					if res, ok := f.Node.(r4.Resource); ok {
						node = fhirpath.NodeOf(res)
					} else {
						node = fhirpath.NodeOfType(f.Node, f.Type)
					}
					env := &fhirpath.Env{Resource: root, RootResource: root, Limits: constraintLimits}
					if b, ok := root.(*r4.Bundle); ok {
						env.Bundle = b
					}
					out, err := r.x.Evaluate(context.Background(), fhirpath.Collection{node}, env)
					if err == nil && !(len(out) == 1 && out[0] == fhirpath.Boolean(true)) {
						t.Errorf("%s: %s at %s is left out as met, but evaluates to %v", name, r.c.Key, path.String(), out)
					}
				}
			}
			return nil
		}, nil)
	}
	if skipped == 0 {
		t.Error("no constraint was left out: the test tests nothing")
	}
	t.Logf("%d evaluations left out as met, over %d inputs", skipped, len(inputs))
}

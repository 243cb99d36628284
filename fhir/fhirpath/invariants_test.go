package fhirpath

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// invariant is one constraint of an R4 StructureDefinition.
type invariant struct {
	key, severity, expr, path string
}

// r4Invariants reads every constraint of the base R4 definitions (resources
// and data types) in .fhir-defs, ele-1 aside (it is on every element).
func r4Invariants(t *testing.T) []invariant {
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, ".fhir-defs", "package", "StructureDefinition-*.json"))
	if len(files) == 0 {
		t.Skip("R4 definitions not present: run scripts/fetch-fhir-defs.sh")
	}
	seen := map[invariant]bool{}
	var out []invariant
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sd struct {
			Derivation string `json:"derivation"`
			Snapshot   struct {
				Element []struct {
					Path       string `json:"path"`
					Constraint []struct {
						Key, Severity, Expression string
					} `json:"constraint"`
				} `json:"element"`
			} `json:"snapshot"`
		}
		if err := json.Unmarshal(data, &sd); err != nil {
			t.Fatal(err)
		}
		if sd.Derivation == "constraint" {
			continue // profiles and extensions
		}
		for _, e := range sd.Snapshot.Element {
			for _, c := range e.Constraint {
				iv := invariant{c.Key, c.Severity, c.Expression, e.Path}
				if c.Expression == "" || c.Key == "ele-1" || seen[iv] {
					continue
				}
				seen[iv] = true
				out = append(out, iv)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// brokenInvariants are constraints of R4 4.0.1 that cannot hold as
// written, with the error the engine gives.
var brokenInvariants = map[string]error{
	"cid-0": ErrSemantic, // ChargeItemDefinition has no name element
}

// TestR4Invariants compiles every constraint of the R4 definitions and
// evaluates those of resources on a sample of the official examples: no
// error-level constraint may be false on them, and no evaluation may fail
// except where the engine says so plainly (ErrNotSupported: htmlChecks()).
func TestR4Invariants(t *testing.T) {
	invs := r4Invariants(t)
	for _, iv := range invs {
		if _, err := Parse(iv.expr); err != nil {
			t.Errorf("%s (%s): %v\n\t%s", iv.key, iv.path, err, iv.expr)
		}
	}
	root := repoRoot(t)
	files, _ := filepath.Glob(filepath.Join(root, ".fhir-defs", "package", "*.json"))
	byType := map[string][]invariant{}
	dataTypes := map[string][]invariant{}
	for _, iv := range invs {
		rt := strings.SplitN(iv.path, ".", 2)[0]
		switch {
		case strings.Contains(iv.path, "[x]"):
		case r4.IsResourceType(rt):
			byType[rt] = append(byType[rt], iv)
		case !fhirAbstract[rt]:
			dataTypes[rt] = append(dataTypes[rt], iv)
		}
	}
	descendants := MustCompile("descendants()")
	ctx := context.Background()
	evaluated, notSupported := 0, 0
	for i, f := range files {
		base := filepath.Base(f)
		if i%7 != 0 || strings.HasPrefix(base, "StructureDefinition-") || strings.HasPrefix(base, "Bundle-") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := r4.Unmarshal(data)
		if err != nil {
			continue
		}
		in := Collection{NodeOf(r)}
		// Data type constraints apply wherever the type occurs.
		all, err := descendants.Evaluate(ctx, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		byNodeType := map[string]Collection{}
		for _, v := range all {
			n := v.(*Node)
			byNodeType[n.Type] = append(byNodeType[n.Type], n)
		}
		type job struct {
			iv    invariant
			nodes Collection
		}
		var jobs []job
		for typ, ivs := range dataTypes {
			for _, iv := range ivs {
				nodes := byNodeType[typ]
				if rest, ok := strings.CutPrefix(iv.path, typ+"."); ok && len(nodes) > 0 {
					var err error
					if nodes, err = MustCompile(rest).Evaluate(ctx, nodes, nil); err != nil {
						t.Fatalf("%s: context %s: %v", base, iv.path, err)
					}
				}
				jobs = append(jobs, job{iv, nodes})
			}
		}
		for _, iv := range byType[r.ResourceType()] {
			nodes, err := MustCompile(iv.path).Evaluate(ctx, in, nil)
			if err != nil {
				t.Fatalf("%s: context %s: %v", base, iv.path, err)
			}
			jobs = append(jobs, job{iv, nodes})
		}
		for _, j := range jobs {
			iv, nodes := j.iv, j.nodes
			x := MustCompile(iv.expr)
			for _, n := range nodes {
				out, err := x.Evaluate(ctx, Collection{n}, &Env{Resource: r})
				evaluated++
				switch {
				case err != nil && errors.Is(err, ErrNotSupported):
					notSupported++
				case err != nil && brokenInvariants[iv.key] != nil && errors.Is(err, brokenInvariants[iv.key]):
				case err != nil:
					t.Errorf("%s %s (%s): %v\n\t%s", base, iv.key, iv.path, err, iv.expr)
				case iv.severity == "error" && len(out) == 1 && out[0] == Boolean(false):
					t.Errorf("%s: %s is false at %s\n\t%s", base, iv.key, iv.path, iv.expr)
				}
			}
		}
	}
	t.Logf("%d R4 constraints compile; %d evaluations on the sampled examples, %d not supported", len(invs), evaluated, notSupported)
}

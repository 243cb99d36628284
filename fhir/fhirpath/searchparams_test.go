package fhirpath

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// TestR4SearchParameters compiles the expression of every official R4
// SearchParameter and evaluates it on a sample of the official examples of
// its base types: none may fail (they are written for R4 engines, which,
// for one, apply as to collections).
func TestR4SearchParameters(t *testing.T) {
	dir := filepath.Join(repoRoot(t), ".fhir-defs", "package")
	files, _ := filepath.Glob(filepath.Join(dir, "SearchParameter-*.json"))
	if len(files) == 0 {
		t.Skip("R4 definitions not present: run scripts/fetch-fhir-defs.sh")
	}
	type searchParam struct {
		ID         string   `json:"id"`
		Expression string   `json:"expression"`
		Base       []string `json:"base"`
		x          *Expression
	}
	byBase := map[string][]*searchParam{}
	compiled := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var sp searchParam
		if err := json.Unmarshal(data, &sp); err != nil {
			t.Fatal(err)
		}
		if sp.Expression == "" {
			continue
		}
		if sp.x, err = Parse(sp.Expression); err != nil {
			t.Errorf("SearchParameter/%s: %v\n\t%s", sp.ID, err, sp.Expression)
			continue
		}
		compiled++
		for _, b := range sp.Base {
			byBase[b] = append(byBase[b], &sp)
		}
	}
	examples, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	ctx := context.Background()
	evaluated := 0
	for i, f := range examples {
		if i%5 != 0 {
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
		for _, base := range []string{r.ResourceType(), "Resource", "DomainResource"} {
			for _, sp := range byBase[base] {
				evaluated++
				if _, err := sp.x.Evaluate(ctx, in, nil); err != nil {
					t.Errorf("%s: SearchParameter/%s: %v\n\t%s", filepath.Base(f), sp.ID, err, sp.Expression)
				}
			}
		}
	}
	t.Logf("%d search parameter expressions compile; %d evaluations on sampled examples", compiled, evaluated)
}

package r4

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acds-project/acds/internal/testrig/corpus"
)

// TestAppendNamed checks the generated appendNamed and appendAll (and
// AppendAllChildren) against the walker, restricted to the same name, for
// every element of the official examples (when fetched) and the Synthea
// bundles: for
// every child name, every choice base name (value for valueQuantity), with
// and without choice, and a name no type has. The definition bundles
// (above 512 KB) are left to -r4.all.
func TestAppendNamed(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", ".fhir-defs", "package", "*.json"))
	files = append(files, corpus.JSON(t, corpus.Synthea)...)
	checked, elements := 0, 0
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Size() > 512<<10 && !allFlag() {
			continue // the definition bundles take long; -r4.all checks them
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Unmarshal(data)
		if err != nil {
			continue // not a resource (package.json…) or not R4
		}
		err = Walk(r, func(path *Path, x any) error {
			elements++
			if _, ok := x.(namedAppender); !ok {
				t.Fatalf("%s: %T has no appendNamed", path, x)
			}
			all := walkChildren(nil, x.(walkable), "", false)
			if got := AppendChildren(nil, x, "", false); !reflect.DeepEqual(got, all) {
				t.Fatalf("%s: appendAll %v, walker %v", path, got, all)
			}
			wantID := ""
			if r, ok := x.(Resource); ok {
				wantID = r.ResourceID()
			} else if idp, _ := ElementOf(x); idp != nil {
				wantID = *idp
			}
			if got, id := AppendAllChildren(nil, x); !reflect.DeepEqual(got, all) || id != wantID {
				t.Fatalf("%s: AppendAllChildren %v %q, walker %v, id %q", path, got, id, all, wantID)
			}
			names := map[string]bool{"nosuch": true, "": false}
			for _, c := range all {
				names[c.Name] = true
				for i := 1; i < len(c.Name); i++ {
					if c.Name[i] >= 'A' && c.Name[i] <= 'Z' {
						names[c.Name[:i]] = true
					}
				}
			}
			for name := range names {
				if name == "" {
					continue
				}
				for _, choice := range []bool{false, true} {
					want := walkChildren(nil, x.(walkable), name, choice)
					got := AppendChildren(nil, x, name, choice)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: %q (choice %v): appendNamed %v, walker %v", path, name, choice, got, want)
					}
					checked++
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Nil pointers have no children.
	for _, x := range []any{(*Patient)(nil), (*HumanName)(nil), (*String)(nil), (*PatientContact)(nil)} {
		for _, name := range []string{"", "name", "extension", "deceased"} {
			if got := AppendChildren(nil, x, name, true); len(got) != 0 {
				t.Errorf("%T(nil) %q: %v", x, name, got)
			}
		}
	}
	if elements == 0 {
		t.Fatal("no elements walked")
	}
	t.Logf("%d names checked on %d elements of %d files", checked, elements, len(files))
}

// allFlag reports -r4.all, which the external tests define.
func allFlag() bool {
	f := flag.Lookup("r4.all")
	return f != nil && f.Value.String() == "true"
}

package r4_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

const walkBundle = `{"resourceType":"Bundle","type":"transaction","entry":[
 {"fullUrl":"urn:uuid:p","resource":{"resourceType":"Patient","name":[{"given":["A","B"]}],"managingOrganization":{"reference":"urn:uuid:o"},
   "contained":[{"resourceType":"Practitioner","id":"pr","name":[{"family":"Doc"}]}],"generalPractitioner":[{"reference":"#pr"}]},"request":{"method":"POST","url":"Patient"}},
 {"fullUrl":"urn:uuid:o","resource":{"resourceType":"Organization","name":"O"},"request":{"method":"POST","url":"Organization"}},
 {"fullUrl":"urn:uuid:e","resource":{"resourceType":"Encounter","status":"finished","class":{"code":"AMB"},"subject":{"reference":"urn:uuid:p"},
   "extension":[{"url":"http://x","valueReference":{"reference":"urn:uuid:o"}}]},"request":{"method":"POST","url":"Encounter"}}]}`

func TestWalkFindsEveryReferenceWithItsPath(t *testing.T) {
	r := mustDecode(t, walkBundle)
	var got []string
	err := r4.Walk(r, func(p *r4.Path, node any) error {
		if ref, ok := node.(*r4.Reference); ok {
			got = append(got, p.String()+"="+ref.Reference.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Bundle.entry[0].resource.generalPractitioner[0]=#pr",
		"Bundle.entry[0].resource.managingOrganization=urn:uuid:o",
		"Bundle.entry[2].resource.extension[0].valueReference=urn:uuid:o",
		"Bundle.entry[2].resource.subject=urn:uuid:p",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWalkRewritesInPlace(t *testing.T) {
	r := mustDecode(t, walkBundle)
	ids := map[string]string{"urn:uuid:p": "Patient/1", "urn:uuid:o": "Organization/2"}
	err := r4.Walk(r, func(p *r4.Path, node any) error {
		switch n := node.(type) {
		case *r4.Reference:
			if to, ok := ids[n.Reference.Value]; ok {
				n.Reference.Value = to
			}
		case *r4.String: // every string, including repeating ones
			if p.Segments()[p.Len()-1].Name == "given" {
				n.Value = strings.ToLower(n.Value)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := mustEncode(t, r)
	for _, s := range []string{`"managingOrganization":{"reference":"Organization/2"}`, `"subject":{"reference":"Patient/1"}`, `"valueReference":{"reference":"Organization/2"}`, `"given":["a","b"]`, `"reference":"#pr"`} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %s", s)
		}
	}
}

func TestWalkSkipAndStop(t *testing.T) {
	r := mustDecode(t, walkBundle)
	var visited []string
	err := r4.Walk(r, func(p *r4.Path, node any) error {
		visited = append(visited, p.String())
		if _, ok := node.(*r4.Patient); ok {
			return r4.SkipChildren
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range visited {
		if strings.HasPrefix(v, "Bundle.entry[0].resource.") {
			t.Fatalf("children of a skipped resource visited: %s", v)
		}
	}
	if visited[0] != "Bundle" {
		t.Fatalf("root not visited first: %v", visited[:3])
	}
	stop := errors.New("stop")
	n := 0
	err = r4.Walk(r, func(p *r4.Path, node any) error {
		n++
		if _, ok := node.(*r4.Organization); ok {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v", err)
	}
	if n >= len(visited)+5 {
		t.Fatalf("walk went on after an error: %d visits", n)
	}
}

// blank clears the value of any primitive.
func blank(node any) {
	switch n := node.(type) {
	case *r4.Base64Binary:
		*n = r4.Base64Binary{ID: n.ID, Extension: n.Extension}
	case *r4.Boolean:
		*n = r4.Boolean{ID: n.ID, Extension: n.Extension}
	case *r4.Canonical:
		*n = r4.Canonical{ID: n.ID, Extension: n.Extension}
	case *r4.Code:
		*n = r4.Code{ID: n.ID, Extension: n.Extension}
	case *r4.Date:
		*n = r4.Date{ID: n.ID, Extension: n.Extension}
	case *r4.DateTime:
		*n = r4.DateTime{ID: n.ID, Extension: n.Extension}
	case *r4.Decimal:
		*n = r4.Decimal{ID: n.ID, Extension: n.Extension}
	case *r4.ID:
		*n = r4.ID{ID: n.ID, Extension: n.Extension}
	case *r4.Instant:
		*n = r4.Instant{ID: n.ID, Extension: n.Extension}
	case *r4.Integer:
		*n = r4.Integer{ID: n.ID, Extension: n.Extension}
	case *r4.Markdown:
		*n = r4.Markdown{ID: n.ID, Extension: n.Extension}
	case *r4.OID:
		*n = r4.OID{ID: n.ID, Extension: n.Extension}
	case *r4.PositiveInt:
		*n = r4.PositiveInt{ID: n.ID, Extension: n.Extension}
	case *r4.String:
		*n = r4.String{ID: n.ID, Extension: n.Extension}
	case *r4.Time:
		*n = r4.Time{ID: n.ID, Extension: n.Extension}
	case *r4.UnsignedInt:
		*n = r4.UnsignedInt{ID: n.ID, Extension: n.Extension}
	case *r4.URI:
		*n = r4.URI{ID: n.ID, Extension: n.Extension}
	case *r4.URL:
		*n = r4.URL{ID: n.ID, Extension: n.Extension}
	case *r4.UUID:
		*n = r4.UUID{ID: n.ID, Extension: n.Extension}
	case *r4.XHTML:
		*n = r4.XHTML{ID: n.ID, Extension: n.Extension}
	}
}

// onlyStructure fails if v holds any value other than element ids,
// Extension urls, resourceType, and nulls aligning primitive arrays.
func onlyStructure(t *testing.T, name, key string, v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, w := range x {
			onlyStructure(t, name, k, w)
		}
	case []any:
		for _, w := range x {
			onlyStructure(t, name, key, w)
		}
	case string:
		if key != "id" && key != "url" && key != "resourceType" {
			t.Fatalf("%s: Walk did not reach the value of %q (%q)", name, key, x)
		}
	case nil:
	default:
		t.Fatalf("%s: Walk did not reach the value of %q (%v)", name, key, x)
	}
}

// TestWalkReachesEveryPrimitive blanks every primitive value reached by Walk
// in each official example and checks that no value is left in the encoding.
func TestWalkReachesEveryPrimitive(t *testing.T) {
	dir := filepath.Join(repoRoot(t), ".fhir-defs", "package")
	files := jsonFiles(t, dir)
	checked := 0
	for _, f := range files {
		if !strings.Contains(filepath.Base(f), "-example") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := r4.Unmarshal(data)
		if err != nil {
			continue // npm metadata, not a resource
		}
		if err := r4.Walk(r, func(_ *r4.Path, node any) error { blank(node); return nil }); err != nil {
			t.Fatal(err)
		}
		v, err := generic([]byte(mustEncode(t, r)))
		if err != nil {
			t.Fatal(err)
		}
		onlyStructure(t, filepath.Base(f), "", v)
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d examples checked", checked)
	}
}

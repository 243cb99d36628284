package r4_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
	if p, ok := node.(r4.Primitive); ok {
		p.Clear()
	}
}

// allPrimitives has one of each primitive type; it does not compile unless
// all of them implement Primitive.
var allPrimitives = []r4.Primitive{
	new(r4.Base64Binary), new(r4.Boolean), new(r4.Canonical), new(r4.Code), new(r4.Date),
	new(r4.DateTime), new(r4.Decimal), new(r4.ID), new(r4.Instant), new(r4.Integer),
	new(r4.Markdown), new(r4.OID), new(r4.PositiveInt), new(r4.String), new(r4.Time),
	new(r4.UnsignedInt), new(r4.URI), new(r4.URL), new(r4.UUID), new(r4.XHTML),
}

func TestPrimitiveInterface(t *testing.T) {
	for _, p := range allPrimitives {
		if p.HasValue() || p.Text() != "" {
			t.Fatalf("%s: zero value has a value", p.PrimitiveType())
		}
		text := map[string]string{"boolean": "false", "integer": "-7", "positiveInt": "7", "unsignedInt": "0", "decimal": "1.50"}[p.PrimitiveType()]
		if text == "" {
			text = "x"
		}
		if err := p.SetText(text); err != nil {
			t.Fatalf("%s: SetText(%q): %v", p.PrimitiveType(), text, err)
		}
		if !p.HasValue() || p.Text() != text {
			t.Fatalf("%s: after SetText(%q): HasValue %v Text %q", p.PrimitiveType(), text, p.HasValue(), p.Text())
		}
		p.Clear()
		if p.HasValue() {
			t.Fatalf("%s: Clear left a value", p.PrimitiveType())
		}
	}
	for _, bad := range []struct {
		p    r4.Primitive
		text string
	}{{new(r4.Boolean), "yes"}, {new(r4.Integer), "1.0"}, {new(r4.Integer), "1 "}, {new(r4.Decimal), "1,5"}, {new(r4.Decimal), ""}} {
		if err := bad.p.SetText(bad.text); !errors.Is(err, r4.ErrInvalidValue) {
			t.Errorf("%s: SetText(%q) = %v", bad.p.PrimitiveType(), bad.text, err)
		}
	}
}

func TestReferences(t *testing.T) {
	r := mustDecode(t, walkBundle)
	var got []string
	err := r4.References(r, func(p *r4.Path, ref *r4.Reference) error {
		got = append(got, p.String())
		ref.Reference = r4.NewString("X/1")
		return nil
	})
	if err != nil || len(got) != 4 {
		t.Fatalf("References: %v %v", got, err)
	}
	if out := mustEncode(t, r); strings.Count(out, `"reference":"X/1"`) != 4 {
		t.Fatalf("references not rewritten: %s", out)
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

// TestWalkIDs checks that WalkIDs visits what Walk visits, in the same
// order and at the same paths, with each node's id: its element id, or a
// resource's logical id. The bundle has ids on resources (contained too),
// on a complex element and on a primitive, and nodes without one.
func TestWalkIDs(t *testing.T) {
	r := mustDecode(t, `{"resourceType":"Bundle","id":"b","entry":[{"id":"e1","resource":{"resourceType":"Patient","id":"p",
	  "contained":[{"resourceType":"Practitioner","id":"pr"}],"name":[{"id":"n1","family":"F","_family":{"id":"f1"},"given":["A"]}],
	  "extension":[{"id":"x1","url":"http://x","valueString":"v"}]}},{"resource":{"resourceType":"Organization","name":"O"}}]}`)
	type visit struct {
		path string
		node any
		id   string
	}
	var want, got []visit
	if err := r4.Walk(r, func(p *r4.Path, node any) error {
		id := ""
		if idp, _ := r4.ElementOf(node); idp != nil {
			id = *idp
		} else if res, ok := node.(r4.Resource); ok {
			id = res.ResourceID()
		}
		want = append(want, visit{p.String(), node, id})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := r4.WalkIDs(r, func(p *r4.Path, node any, id string) error {
		got = append(got, visit{p.String(), node, id})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("WalkIDs visited %d nodes, Walk %d", len(got), len(want))
	}
	ids := map[string]bool{}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("node %d: WalkIDs gave %+v, want %+v", i, got[i], want[i])
		}
		if got[i].id != "" {
			ids[got[i].id] = true
		}
	}
	for _, id := range []string{"b", "e1", "p", "pr", "n1", "f1", "x1"} {
		if !ids[id] {
			t.Errorf("id %q not given", id)
		}
	}
	// SkipChildren and errors as in Walk.
	stop := errors.New("stop")
	n := 0
	err := r4.WalkIDs(r, func(p *r4.Path, node any, id string) error {
		n++
		if id == "p" {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Errorf("stopping at the Patient: %v after %d nodes, want stop after 3", err, n)
	}
}

// TestEachReference checks EachReference against Walk on every official
// example (Bundles, Parameters and contained resources among them): with
// nested, the References Walk visits, in its order; without, those Walk
// visits when it skips the resources held by elements named resource or
// outcome (contained ones stay). A hand-made Bundle covers a reference in
// a primitive's extension, in a contained resource, in an entry, and in a
// response outcome.
func TestEachReference(t *testing.T) {
	walked := func(r r4.Resource, nested bool) []*r4.Reference {
		var refs []*r4.Reference
		_ = r4.Walk(r, func(p *r4.Path, node any) error {
			if n := p.Len(); !nested && n > 0 {
				if name := p.Segments()[n-1].Name; name == "resource" || name == "outcome" {
					if _, ok := node.(r4.Resource); ok {
						return r4.SkipChildren
					}
				}
			}
			if ref, ok := node.(*r4.Reference); ok {
				refs = append(refs, ref)
			}
			return nil
		})
		return refs
	}
	each := func(r r4.Resource, nested bool) []*r4.Reference {
		var refs []*r4.Reference
		r4.EachReference(r, nested, func(ref *r4.Reference) { refs = append(refs, ref) })
		return refs
	}
	compare := func(name string, r r4.Resource) int {
		n := 0
		for _, nested := range []bool{true, false} {
			want, got := walked(r, nested), each(r, nested)
			if !slices.Equal(got, want) {
				t.Errorf("%s (nested %v): EachReference gave %d references, Walk %d, or another order", name, nested, len(got), len(want))
			}
			n += len(want)
		}
		return n
	}
	r := mustDecode(t, `{"resourceType":"Bundle","type":"batch-response","entry":[
	  {"resource":{"resourceType":"Patient","_birthDate":{"extension":[{"url":"http://x","valueReference":{"reference":"Practitioner/a"}}]},
	    "contained":[{"resourceType":"Practitioner","id":"pr","identifier":[{"assigner":{"reference":"Organization/o"}}]}],
	    "generalPractitioner":[{"reference":"#pr"}]},
	   "response":{"status":"200","outcome":{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"x",
	     "details":{"extension":[{"url":"http://y","valueReference":{"reference":"Patient/q"}}]}}]}}}],
	  "signature":{"type":[{"system":"urn:x","code":"y"}],"when":"2020-01-01T00:00:00Z","who":{"reference":"Device/d"}}}`)
	if got := len(each(r, true)); got != 5 {
		t.Errorf("nested: %d references, want 5", got)
	}
	if got := len(each(r, false)); got != 1 {
		t.Errorf("own scope of the Bundle: %d references, want 1 (the signature's)", got)
	}
	compare("hand-made Bundle", r)
	r4.EachReference(nil, true, func(*r4.Reference) { t.Error("a nil resource has no references") })

	files := jsonFiles(t, filepath.Join(repoRoot(t), ".fhir-defs", "package"))
	checked, refs := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := r4.Unmarshal(data)
		if err != nil {
			continue // npm metadata, not a resource
		}
		refs += compare(filepath.Base(f), r)
		checked++
	}
	if checked < 1000 || refs < 1000 {
		t.Fatalf("only %d resources and %d references checked", checked, refs)
	}
	t.Logf("%d resources, %d references", checked, refs)
}

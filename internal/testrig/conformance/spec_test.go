package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/build"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/acds-project/acds/server"
)

// specPath is the committed copy of SPEC.md, the tables the OpenAPI
// document is walked against; sharedSpec is the original, in the shared
// folder beside the repository when there is one.
var (
	specPath   = filepath.Join("testdata", "SPEC.md")
	sharedSpec = filepath.Join("..", "..", "..", "..", "shared", "SPEC.md")
)

// TestSPECCopyCurrent: the committed copy is byte for byte the shared
// SPEC.md, so a change to the specification fails CI until the copy, and
// whatever it changes in the tables, is committed.
func TestSPECCopyCurrent(t *testing.T) {
	shared, err := os.ReadFile(sharedSpec)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no %s beside the repository", sharedSpec)
	}
	if err != nil {
		t.Fatal(err)
	}
	copy, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shared, copy) {
		t.Fatalf("%s differs from %s: copy it (cp %s %s) and re-run the tests", specPath, sharedSpec, sharedSpec, specPath)
	}
}

// specTable is one table of SPEC §2: its column names (lower case) and
// its rows by column name, backquotes removed.
type specTable struct {
	section, title string
	columns        []string
	rows           []map[string]string
}

func (tb *specTable) has(column string) bool { return slices.Contains(tb.columns, column) }

func (tb *specTable) fields() []string {
	var f []string
	for _, r := range tb.rows {
		f = append(f, r["field"])
	}
	return f
}

// specEndpoint is one subsection of SPEC §4: its method and path, and the
// §2 tables its request and response bodies are ("" when it names none).
type specEndpoint struct {
	section, method, path string
	request, response     string
	noFields              bool // "The request carries no fields."
}

func (e specEndpoint) String() string { return e.method + " " + e.path }

type spec struct {
	tables    map[string]*specTable // by section number, "2.1"…
	endpoints []specEndpoint        // §4.1…, in order
	listed    []string              // "METHOD /path" of §4's endpoint table
}

var (
	headingRE = regexp.MustCompile(`^#{2,3} (\d+(?:\.\d+)?)\.? (.*)$`)
	opRE      = regexp.MustCompile(`^(GET|POST|PUT|PATCH|DELETE) (/\S+)$`)
	tableRef  = regexp.MustCompile(`\b(2\.\d+)\b`)
)

// parseSpec reads SPEC.md's §2 tables, §4's endpoint table and §4's
// per-endpoint subsections.
func parseSpec(t *testing.T, md string) spec {
	t.Helper()
	sp := spec{tables: map[string]*specTable{}}
	var section, title string
	var table *specTable
	var ep *specEndpoint
	for _, line := range strings.Split(md, "\n") {
		line = strings.TrimRight(line, "\r ")
		if m := headingRE.FindStringSubmatch(line); m != nil {
			section, title, table = m[1], m[2], nil
			ep = nil
			if m := opRE.FindStringSubmatch(title); m != nil && strings.HasPrefix(section, "4.") {
				sp.endpoints = append(sp.endpoints, specEndpoint{section: section, method: m[1], path: m[2]})
				ep = &sp.endpoints[len(sp.endpoints)-1]
			}
			continue
		}
		if strings.HasPrefix(line, "|") {
			cells := splitRow(line)
			switch {
			case table == nil:
				table = &specTable{section: section, title: title}
				for _, c := range cells {
					table.columns = append(table.columns, strings.ToLower(c))
				}
				if strings.HasPrefix(section, "2.") {
					if sp.tables[section] != nil {
						t.Fatalf("SPEC §%s has two tables", section)
					}
					sp.tables[section] = table
				}
			case strings.Trim(strings.Join(cells, ""), "-: ") == "":
				// the separator row
			default:
				if len(cells) != len(table.columns) {
					t.Fatalf("SPEC §%s: row %q has %d cells, the header %d", section, line, len(cells), len(table.columns))
				}
				row := map[string]string{}
				for i, c := range cells {
					row[table.columns[i]] = c
				}
				table.rows = append(table.rows, row)
				if section == "4" && table.has("method") && table.has("path") {
					sp.listed = append(sp.listed, row["method"]+" "+row["path"])
				}
			}
			continue
		}
		table = nil
		if ep == nil {
			continue
		}
		switch l := strings.TrimPrefix(line, "- "); {
		case strings.HasPrefix(l, "Request body:"):
			ep.request = firstTableRef(l)
		case strings.HasPrefix(l, "Response"):
			ep.response = firstTableRef(l)
		}
		if strings.Contains(line, "carries no fields") {
			ep.noFields = true
		}
	}
	return sp
}

func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.TrimSpace(c), "`", "")
	}
	return cells
}

func firstTableRef(s string) string {
	if m := tableRef.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

func loadSpec(t *testing.T) spec {
	t.Helper()
	md, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	sp := parseSpec(t, string(md))
	// The parse found what SPEC.md has: seven tables in §2, five
	// endpoints in §4, each subsection naming its tables.
	for _, sec := range []string{"2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7"} {
		if tb := sp.tables[sec]; tb == nil || len(tb.rows) == 0 || !tb.has("field") || !tb.has("type") {
			t.Fatalf("SPEC §%s: no table with Field and Type columns parsed", sec)
		}
	}
	if len(sp.endpoints) == 0 {
		t.Fatal("SPEC §4: no endpoint subsections parsed")
	}
	var sub []string
	for _, e := range sp.endpoints {
		sub = append(sub, e.String())
		if e.response == "" {
			t.Fatalf("SPEC §%s %s: no response table parsed", e.section, e)
		}
	}
	if !slices.Equal(sub, sp.listed) {
		t.Fatalf("SPEC §4's table lists %v, its subsections %v", sp.listed, sub)
	}
	return sp
}

// TestSuiteCoversSPEC: the suite calls exactly SPEC §4's endpoints, and
// its literal bodies carry exactly the fields of SPEC's request tables.
func TestSuiteCoversSPEC(t *testing.T) {
	sp := loadSpec(t)
	if !slices.Equal(specEndpoints, sp.listed) {
		t.Errorf("the suite's endpoints %v, SPEC §4's %v", specEndpoints, sp.listed)
	}
	bodies := map[string]string{
		epFetch:   fetchBody(FetchTarget{"a", "b", "c", "d", "e"}),
		epProcess: processBody,
	}
	for _, e := range sp.endpoints {
		body, ok := bodies[e.String()]
		if e.request == "" || !ok {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatalf("%s: the suite's body is not JSON: %v", e, err)
		}
		got, want := slices.Sorted(maps.Keys(obj)), slices.Sorted(slices.Values(sp.tables[e.request].fields()))
		if !slices.Equal(got, want) {
			t.Errorf("%s: the suite sends %v, SPEC §%s names %v", e, got, e.request, want)
		}
	}
}

// jsonSchemaType maps SPEC's Type column to the OpenAPI type and format
// that say the same. A type SPEC gains must be added here on purpose.
var jsonSchemaType = map[string]struct{ typ, format string }{
	"string":                 {"string", ""},
	"string (URL)":           {"string", "uri"},
	"string, UUID-shaped":    {"string", "uuid"},
	"string, base64-encoded": {"string", "byte"},
	"boolean":                {"boolean", ""},
	"FHIR Bundle as JSON":    {"object", ""},
}

// TestOpenAPIMatchesSPEC walks SPEC's §2 tables against the OpenAPI
// document, through §4's mapping of endpoints to tables: each request
// body and success response schema names exactly SPEC's fields with
// SPEC's types, requires what SPEC requires (a request table's Required
// column; every field of a response; §2.4's Present in column, a field
// not present being absent from the schema), and any further property is
// marked x-acds-extension and is not required.
func TestOpenAPIMatchesSPEC(t *testing.T) {
	sp := loadSpec(t)
	doc := openAPI(t)
	for _, e := range sp.endpoints {
		op := doc.operation(t, e.method, e.path)
		if op == nil {
			continue
		}
		if e.request != "" || e.noFields {
			t.Run("§"+e.section+" "+e.String()+" request", func(t *testing.T) {
				name, schema := doc.requestSchema(t, op)
				if e.noFields {
					doc.checkNoFields(t, name, schema)
					return
				}
				doc.checkTable(t, e, sp.tables[e.request], name, schema, true)
			})
		}
		t.Run("§"+e.section+" "+e.String()+" response", func(t *testing.T) {
			name, schema := doc.successSchema(t, op)
			doc.checkTable(t, e, sp.tables[e.response], name, schema, false)
		})
	}
}

type openAPIDoc map[string]any

func openAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(server.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func (d openAPIDoc) operation(t *testing.T, method, path string) map[string]any {
	t.Helper()
	op := obj(obj(obj(d["paths"])[path])[strings.ToLower(method)])
	if op == nil {
		t.Errorf("OpenAPI has no operation %s %s", method, path)
	}
	return op
}

// resolve follows a $ref to the components; it returns the component's
// name ("" for an inline schema) and the schema.
func (d openAPIDoc) resolve(t *testing.T, s map[string]any) (string, map[string]any) {
	t.Helper()
	ref, _ := s["$ref"].(string)
	if ref == "" {
		return "", s
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	target := obj(obj(obj(d["components"])["schemas"])[name])
	if !ok || target == nil {
		t.Fatalf("OpenAPI: unresolvable $ref %q", ref)
	}
	return name, target
}

// typeOf is a property schema's type and format, through $ref and allOf.
func (d openAPIDoc) typeOf(t *testing.T, s map[string]any) (typ, format string) {
	t.Helper()
	_, s = d.resolve(t, s)
	typ, _ = s["type"].(string)
	format, _ = s["format"].(string)
	all, _ := s["allOf"].([]any)
	for _, part := range all {
		pt, pf := d.typeOf(t, obj(part))
		if typ == "" {
			typ = pt
		} else if pt != "" && pt != typ {
			t.Errorf("OpenAPI: allOf mixes types %q and %q", typ, pt)
		}
		if format == "" {
			format = pf
		}
	}
	return typ, format
}

func (d openAPIDoc) jsonSchema(t *testing.T, content any, what string) (string, map[string]any) {
	t.Helper()
	s := obj(obj(obj(content)["application/json"])["schema"])
	if s == nil {
		t.Fatalf("%s: no application/json schema", what)
	}
	return d.resolve(t, s)
}

func (d openAPIDoc) requestSchema(t *testing.T, op map[string]any) (string, map[string]any) {
	t.Helper()
	return d.jsonSchema(t, obj(op["requestBody"])["content"], "request body")
}

// successSchema is the schema of the operation's one 2xx JSON response.
func (d openAPIDoc) successSchema(t *testing.T, op map[string]any) (string, map[string]any) {
	t.Helper()
	var codes []string
	for code, r := range obj(op["responses"]) {
		if strings.HasPrefix(code, "2") && obj(r)["content"] != nil {
			codes = append(codes, code)
		}
	}
	if len(codes) != 1 {
		t.Fatalf("want one 2xx JSON response, have %v", codes)
	}
	return d.jsonSchema(t, obj(obj(op["responses"])[codes[0]])["content"], codes[0]+" response")
}

func requiredSet(s map[string]any) []string {
	var req []string
	for _, r := range s["required"].([]any) {
		req = append(req, r.(string))
	}
	return req
}

func isExtension(prop map[string]any) bool { ext, _ := prop["x-acds-extension"].(bool); return ext }

// checkExtras: every property beyond spec's fields is an extension and is
// not required.
func (d openAPIDoc) checkExtras(t *testing.T, name string, schema map[string]any, spec []string) {
	t.Helper()
	props := obj(schema["properties"])
	required, _ := schema["required"].([]any)
	for p, ps := range props {
		if slices.Contains(spec, p) {
			continue
		}
		if !isExtension(obj(ps)) {
			t.Errorf("%s.%s: a property SPEC does not name, not marked \"x-acds-extension\": true", name, p)
		}
		if slices.Contains(required, any(p)) {
			t.Errorf("%s.%s: a property SPEC does not name is required; a SPEC-only client must not need it", name, p)
		}
	}
	for _, r := range required {
		if _, ok := props[r.(string)]; !ok {
			t.Errorf("%s: requires %q, which it does not define", name, r)
		}
	}
}

// checkNoFields: SPEC §4.1's "The request carries no fields."
func (d openAPIDoc) checkNoFields(t *testing.T, name string, schema map[string]any) {
	t.Helper()
	if typ, _ := schema["type"].(string); typ != "object" {
		t.Errorf("%s: type %q, want object", name, typ)
	}
	d.checkExtras(t, name, schema, nil)
}

// checkTable compares schema with SPEC's table for endpoint e.
func (d openAPIDoc) checkTable(t *testing.T, e specEndpoint, tb *specTable, name string, schema map[string]any, request bool) {
	t.Helper()
	if name == "" {
		name = "(inline)"
	}
	t.Logf("SPEC §%s ↔ OpenAPI schema %s", tb.section, name)
	if typ, _ := schema["type"].(string); typ != "object" {
		t.Errorf("%s: type %q, want object", name, typ)
	}
	props := obj(schema["properties"])
	required, _ := schema["required"].([]any)
	var named []string
	for _, row := range tb.rows {
		field := row["field"]
		// Whether SPEC has the field in this body, and requires it.
		present, mustRequire := true, !request
		switch {
		case tb.has("present in"):
			where := row["present in"]
			if only, ok := strings.CutSuffix(where, " only"); ok {
				present = strings.TrimPrefix(e.path, "/v1/") == only
			} else if where != "both" {
				t.Fatalf("SPEC §%s %s: Present in %q not understood", tb.section, field, where)
			}
			mustRequire = present
		case tb.has("required"):
			mustRequire = row["required"] == "yes"
		}
		prop, defined := props[field]
		if !present {
			if defined {
				t.Errorf("%s.%s: SPEC §%s has no %s in %s, the schema defines it", name, field, tb.section, field, e)
			}
			continue
		}
		named = append(named, field)
		if !defined {
			t.Errorf("%s: no property %q (SPEC §%s); have %v", name, field, tb.section, slices.Sorted(maps.Keys(props)))
			continue
		}
		want, ok := jsonSchemaType[row["type"]]
		if !ok {
			t.Fatalf("SPEC §%s %s: type %q has no OpenAPI mapping; add it to jsonSchemaType", tb.section, field, row["type"])
		}
		typ, format := d.typeOf(t, obj(prop))
		if typ != want.typ || (want.format != "" && format != want.format) {
			t.Errorf("%s.%s: type %q format %q, want %q format %q (SPEC §%s: %s)", name, field, typ, format, want.typ, want.format, tb.section, row["type"])
		}
		if isExtension(obj(prop)) {
			t.Errorf("%s.%s: SPEC §%s names it, but it is marked x-acds-extension", name, field, tb.section)
		}
		if is := slices.Contains(required, any(field)); is != mustRequire {
			t.Errorf("%s.%s: required %v, want %v (SPEC §%s)", name, field, is, mustRequire, tb.section)
		}
	}
	d.checkExtras(t, name, schema, named)
}

// TestStandardLibraryOnly: the suite is written from SPEC alone, so it
// imports none of the module's packages (not the wire types of package
// acds, not package client) and nothing outside the standard library.
func TestStandardLibraryOnly(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
			t.Errorf("package conformance imports %s", imp)
		}
	}
}

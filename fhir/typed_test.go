package fhir

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// pipelines are the two implementations of Process the tests run: the
// node-based one and the typed one (r4.Unmarshal, normalize, encode).
// TEMPORARY: when Process becomes the typed pipeline, this table and
// processTyped go, and the tests run Process alone.
var pipelines = []struct {
	name string
	run  func([]byte, Options) (*Output, error)
}{
	{"node", Process},
	{"typed", processTyped},
}

// processTyped is Process on the typed model: validation (Check, for now),
// r4.Unmarshal, normalize, then the canonical encoding of the output.
// TEMPORARY stand-in for the integrated Process.
func processTyped(input []byte, opts Options) (*Output, error) {
	format := opts.Format
	if format == "" {
		format = FormatR4
	}
	if format != FormatR4 && format != FormatR4Deidentified {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedFormat, format)
	}
	if format == FormatR4Deidentified && len(opts.DeidentKey) < 32 {
		return nil, ErrKey
	}
	if err := Check(input, opts); err != nil {
		return nil, err
	}
	root, err := r4.Unmarshal(input)
	if err != nil {
		return nil, err
	}
	b, n, err := normalize(root, opts, format)
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, &InvalidError{Outcome: &OperationOutcome{Issues: []Issue{noResources()}}}
	}
	buf, err := encodeTyped(b)
	if err != nil {
		return nil, err
	}
	buf, _ = resort(make([]byte, 0, len(buf)), buf, 0)
	sum := sha256.Sum256(buf)
	return &Output{Format: format, JSON: buf, Digest: "sha256:" + hex.EncodeToString(sum[:]), Outcome: &OperationOutcome{}, Resources: n}, nil
}

// encodeTyped is r4.Marshal plus, until the r4 encoders do it themselves,
// the removal of repeating-primitive items that have neither a value nor
// an id or extension (what de-identification leaves of a removed item).
func encodeTyped(r r4.Resource) ([]byte, error) {
	b, err := r4.Marshal(r)
	if err != nil || !bytes.Contains(b, []byte("null")) {
		return b, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	dropEmptyPrimitiveItems(v)
	var out bytes.Buffer
	e := json.NewEncoder(&out)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// dropEmptyPrimitiveItems removes, from every primitive array and its "_x"
// companion, the items that are null in both.
func dropEmptyPrimitiveItems(v any) {
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			dropEmptyPrimitiveItems(x)
		}
	case map[string]any:
		for k, x := range v {
			dropEmptyPrimitiveItems(x)
			base := strings.TrimPrefix(k, "_")
			vals, _ := v[base].([]any)
			comps, _ := v["_"+base].([]any)
			if comps == nil && !primitiveArray(vals) {
				continue
			}
			n := max(len(vals), len(comps))
			var nv, nc []any
			for i := range n {
				var a, c any
				if i < len(vals) {
					a = vals[i]
				}
				if i < len(comps) {
					c = comps[i]
				}
				if a == nil && c == nil {
					continue
				}
				nv, nc = append(nv, a), append(nc, c)
			}
			setPrimitiveArray(v, base, nv)
			setPrimitiveArray(v, "_"+base, nc)
		}
	}
}

func primitiveArray(a []any) bool {
	for _, x := range a {
		if _, ok := x.(map[string]any); !ok {
			return true
		}
	}
	return false
}

func setPrimitiveArray(m map[string]any, k string, items []any) {
	for _, x := range items {
		if x != nil {
			m[k] = items
			return
		}
	}
	delete(m, k)
}

func decodeAny(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding output: %v", err)
	}
	return v
}

// jsonDiff lists up to limit paths where a and b differ; with companions,
// "_x" companions that only b has are not counted.
func jsonDiff(path string, a, b any, out *[]string, limit int, companions bool) {
	if len(*out) >= limit || reflect.DeepEqual(a, b) {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		if bv, ok := b.(map[string]any); ok {
			keys := map[string]bool{}
			for k := range av {
				keys[k] = true
			}
			for k := range bv {
				keys[k] = true
			}
			ks := make([]string, 0, len(keys))
			for k := range keys {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				jsonDiff(path+"."+k, av[k], bv[k], out, limit, companions)
			}
			return
		}
	case []any:
		if bv, ok := b.([]any); ok && len(av) == len(bv) {
			for i := range av {
				jsonDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i], out, limit, companions)
			}
			return
		}
	}
	if companions && a == nil && companionsOnly(path, b) {
		return // a known, documented difference: see TestTypedPipelineMatchesOld
	}
	sa, _ := json.Marshal(a)
	sb, _ := json.Marshal(b)
	*out = append(*out, fmt.Sprintf("%s:\n\t\tnode:  %.300s\n\t\ttyped: %.300s", path, sa, sb))
}

// companionsOnly reports whether v, at path, holds only "_x" companions of
// primitives (ids and extensions without values).
func companionsOnly(path string, v any) bool {
	if i := strings.LastIndexByte(path, '.'); i >= 0 && strings.HasPrefix(path[i+1:], "_") {
		return true
	}
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k := range m {
		if !strings.HasPrefix(k, "_") {
			return false
		}
	}
	return true
}

// equivalenceInputs returns the inputs TestTypedPipelineMatchesOld runs:
// the shared bundles and validator cases, the golden inputs and, when
// fetched, the official R4 examples (clinical ones).
func equivalenceInputs(t *testing.T) []string {
	var files []string
	for _, sub := range []string{"synthea", "inferno", "fhir-validator-cases"} {
		if d := filepath.Join(sharedData, sub); dirExists(d) {
			fs, _ := filepath.Glob(filepath.Join(d, "*.json"))
			files = append(files, fs...)
		}
	}
	golden, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	for _, g := range golden {
		if !strings.Contains(filepath.Base(g), ".out.") {
			files = append(files, g)
		}
	}
	examples, _ := filepath.Glob(filepath.Join("..", ".fhir-defs", "package", "*.json"))
	for _, f := range examples {
		if base := filepath.Base(f); !conformance(base) && !strings.HasPrefix(base, "Bundle-") && base != "package.json" && !strings.HasPrefix(base, ".") {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		t.Skip("no inputs")
	}
	return files
}

func dirExists(d string) bool {
	st, err := os.Stat(d)
	return err == nil && st.IsDir()
}

// TestTypedPipelineMatchesOld: the typed pipeline (r4.Unmarshal, normalize,
// r4.Marshal) gives the same JSON as the node-based Process for every
// input Process accepts, in both formats. TEMPORARY: delete it with the
// node-based pipeline.
//
// One difference is known and accepted, in the de-identified format only:
// a repeating primitive that has extensions ("_event": [{"extension": …}])
// but no values. The node-based code drops such a companion array whole
// (it treats a companion without a value array as misaligned, even when
// nothing was removed); the typed code keeps its extensions, de-identified
// by the same rules as any other, as both do for a single primitive
// ("_birthDate"). The output is valid R4 either way.
func TestTypedPipelineMatchesOld(t *testing.T) {
	compared := 0
	for _, f := range equivalenceInputs(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		for _, format := range Formats() {
			opts := testOpts(format)
			old, err := Process(data, opts)
			if err != nil {
				continue // the typed pipeline is for what validation accepts
			}
			root, err := r4.Unmarshal(data)
			if err != nil {
				t.Errorf("%s: r4.Unmarshal of accepted input: %v", name, err)
				continue
			}
			b, n, err := normalize(root, opts, format)
			if err != nil {
				t.Errorf("%s %s: %v", name, format, err)
				continue
			}
			got, err := encodeTyped(b)
			if err != nil {
				t.Fatal(err)
			}
			compared++
			if n != old.Resources {
				t.Errorf("%s %s: %d entries, node pipeline %d", name, format, n, old.Resources)
			}
			want, have := decodeAny(t, old.JSON), decodeAny(t, got)
			var diffs []string
			jsonDiff("", want, have, &diffs, 5, format == FormatR4Deidentified)
			if len(diffs) > 0 {
				t.Errorf("%s %s: typed output differs:\n\t%s", name, format, strings.Join(diffs, "\n\t"))
			}
		}
	}
	t.Logf("%d outputs compared", compared)
}

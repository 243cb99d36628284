package r4_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// checkBundleEntries checks AppendCanonicalBundle on the Bundle data
// against AppendCanonical (the same bytes) and encoding/json (the same
// entries). With empty, empty entries are added first and last.
func checkBundleEntries(t *testing.T, name string, data []byte, empty bool) {
	t.Helper()
	res, err := r4.Unmarshal(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, ok := res.(*r4.Bundle)
	if !ok {
		return
	}
	if empty {
		// The decoder refuses empty objects; a producer can still build
		// them. They are left out of the output and have no span.
		b.Entry = append([]r4.BundleEntry{{}}, b.Entry...)
		b.Entry = append(b.Entry, r4.BundleEntry{})
	}
	want, err := r4.AppendCanonical(nil, b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	prefix := []byte("prefix")
	got, spans, err := r4.AppendCanonicalBundle(append([]byte(nil), prefix...), b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(got, append(prefix, want...)) {
		t.Fatalf("%s: AppendCanonicalBundle writes other bytes than AppendCanonical", name)
	}
	var v struct{ Entry []json.RawMessage }
	if err := json.Unmarshal(want, &v); err != nil {
		t.Fatal(err)
	}
	if len(spans) != len(v.Entry) {
		t.Fatalf("%s: %d spans for %d entries", name, len(spans), len(v.Entry))
	}
	for i, s := range spans {
		if e := got[s.Start:s.End]; !bytes.Equal(e, v.Entry[i]) {
			t.Fatalf("%s: entry %d: span holds %.80q, want %.80q", name, i, e, v.Entry[i])
		}
	}
}

func TestAppendCanonicalBundleEntries(t *testing.T) {
	cases := map[string]string{
		"no entries": `{"resourceType":"Bundle","type":"collection"}`,
		// A nested Bundle's entries, a string
		// that looks like an entry array and an extension on type (written
		// before "entry") do not count.
		"mixed": `{"resourceType":"Bundle","type":"collection","_type":{"extension":[{"url":"http://x.invalid/entry","valueString":"\"entry\":[{}]"}]},"entry":[
			{"fullUrl":"urn:uuid:1","resource":{"resourceType":"Patient","id":"p","name":[{"text":"\"entry\":[{\"x\":1}]"}]}},
			{"resource":{"resourceType":"Bundle","id":"inner","type":"collection","entry":[{"resource":{"resourceType":"Basic","id":"b1","code":{"text":"x"}}},{"resource":{"resourceType":"Basic","id":"b2","code":{"text":"y"}}}]}},
			{"fullUrl":"urn:uuid:3","resource":{"resourceType":"Observation","id":"o","status":"final","code":{"text":"c"},"valueQuantity":{"value":6.10,"unit":"%"}}}]}`,
	}
	for name, data := range cases {
		checkBundleEntries(t, name, []byte(data), false)
		checkBundleEntries(t, name+" with empty entries", []byte(data), true)
	}
	for _, f := range corpus.JSON(t, corpus.Synthea, corpus.Inferno) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r4.Unmarshal(data); err != nil {
			continue // not every file decodes; those that do are checked
		}
		checkBundleEntries(t, filepath.Base(f), data, false)
	}
}

func TestAppendCanonicalBundleNil(t *testing.T) {
	if _, _, err := r4.AppendCanonicalBundle(nil, nil); err == nil {
		t.Fatal("a nil Bundle encodes")
	}
}

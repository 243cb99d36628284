package disclosure_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/attestation/disclosure"
)

// FuzzParse feeds arbitrary bytes to Parse and Check: never a panic, and
// what parses checks against a commitment without panicking either.
func FuzzParse(f *testing.F) {
	out := output(5)
	c, err := disclosure.Commit(testKey, out)
	if err != nil {
		f.Fatal(err)
	}
	for _, idx := range [][]int{{0}, {1, 3}, {4}} {
		d, err := disclosure.New([]byte("bundle"), testKey, out, idx)
		if err != nil {
			f.Fatal(err)
		}
		b, err := d.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"acds-disclosure","version":1,"attestationBundle":"AA==","entryCount":1,"entries":[{"index":0,"salt":"","proof":[],"entry":{}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := disclosure.Parse(data)
		if err != nil {
			return
		}
		_ = disclosure.Check(d, c)
	})
}

// FuzzEntries checks the entry scanner against encoding/json: on valid
// JSON it accepts, it must find exactly the elements of the top-level
// "entry" array, byte for byte.
func FuzzEntries(f *testing.F) {
	f.Add(output(3))
	f.Add([]byte(`{"entry":[{"a":"\\\""}],"b":[[],{}]}`))
	f.Add([]byte(`{"resourceType":"Bundle"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := disclosure.Entries(data)
		if err != nil || !json.Valid(data) {
			return
		}
		var v map[string]json.RawMessage
		if json.Unmarshal(data, &v) != nil {
			t.Fatalf("Entries accepted what is not an object: %q", data)
		}
		var want []json.RawMessage
		if raw, ok := v["entry"]; ok {
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("Entries accepted an entry member that is not an array: %q", data)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%d entries, encoding/json finds %d in %q", len(got), len(want), data)
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("entry %d = %q, encoding/json %q", i, got[i], want[i])
			}
		}
	})
}

// refCases are entries on which Ref's compact path must give what
// encoding/json gives, or leave them to it.
var refCases = []string{
	`{"fullUrl":"u","resource":{"id":"o1","resourceType":"Observation","status":"final"}}`,
	`{"resource":{"resourceType":"Patient"}}`,
	`{"resource":{"id":"x"}}`,
	`{"fullUrl":"u"}`,
	`{}`,
	`{"resource":{"id":"a\"b","resourceType":"Basic"}}`,
	`{"resource":{"ID":"upper","resourceType":"Basic","id":"lower"}}`,
	`{"Resource":{"resourceType":"Basic","id":"x"}}`,
	`{"resource":{"resourceType":"Basic","id":"1"},"resource":{"id":"2"}}`,
	`{"resource":{"resourceType":"Basic","id":"1","id":"2"}}`,
	`{"resource":{"resourceType":"Basic","id":5}}`,
	`{"resource":{"resourceType":"Basic","id":null}}`,
	`{"resource":"Basic/1"}`,
	`{"resource":{"resourceType":"Basic","id":"` + "\xff" + `"}}`,
	`{ "resource" : { "resourceType" : "Basic" , "id" : "sp" } }`,
	`{"resource":{"code":{"text":"\"id\":\"no\""},"id":"i","resourceType":"Basic"},"search":{"mode":"match"}}`,
	`{"resource":{"resourceType":"Basic","id":"1"}} trailing`,
}

func TestRefMatchesEncodingJSON(t *testing.T) {
	cases := refCases
	for _, f := range []string{"testdata/record.json", "testdata/record-deidentified.json"} {
		out, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := disclosure.Entries(bytes.TrimSpace(out))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			cases = append(cases, string(e))
		}
	}
	labelled := 0
	for _, c := range cases {
		got, want := disclosure.Ref([]byte(c)), disclosure.RefDecodedForTest([]byte(c))
		if got != want {
			t.Errorf("Ref(%.100q) = %q, encoding/json gives %q", c, got, want)
		}
		if got != "" {
			labelled++
		}
	}
	if labelled < len(cases)/2 {
		t.Fatalf("only %d of %d entries labelled", labelled, len(cases))
	}
}

// FuzzRef checks Ref against encoding/json on valid JSON.
func FuzzRef(f *testing.F) {
	for _, c := range refCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // Ref is a label: on invalid JSON it need not agree
		}
		if got, want := disclosure.Ref(data), disclosure.RefDecodedForTest(data); got != want {
			t.Fatalf("Ref(%q) = %q, encoding/json gives %q", data, got, want)
		}
	})
}

// canonicalCases are entries on which canonical must not be wrong.
var canonicalCases = []string{
	`{"a":"b"}`, `{"a": "b"}`, `{"a":"\/"}`, `{"a":"\u0041"}`, `{"a":"\u001f\u0000"}`, `{"a":"\u000a"}`,
	`{"a":"\n\t\"\\"}`, `{"a":"\u001F"}`, `{"a":"é\u2028"}`, `{"a":"\ud83d\ude00"}`, `{"a":[1,2.50,-0,1e3,true,null]}`,
	"{\"a\":\"\xff\"}", `{"a":{}}`, "{\"a\":1}\n",
}

func TestCanonicalIsOutputBytes(t *testing.T) {
	accepted := 0
	cases := canonicalCases
	out, err := os.ReadFile("testdata/record.json")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := disclosure.Entries(bytes.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		cases = append(cases, string(e))
		if !disclosure.CanonicalForTest(e) {
			t.Errorf("a committed entry is not taken as canonical: %.80q", e)
		}
	}
	for _, c := range cases {
		if !disclosure.CanonicalForTest([]byte(c)) {
			continue
		}
		accepted++
		got, err := acds.OutputBytes([]byte(c))
		if err != nil || string(got) != c {
			t.Errorf("canonical(%q) but OutputBytes gives %q (%v)", c, got, err)
		}
	}
	if accepted < len(entries)+3 {
		t.Fatalf("only %d cases accepted", accepted)
	}
}

// FuzzCanonical checks that canonical never says so of JSON that
// acds.OutputBytes would change.
func FuzzCanonical(f *testing.F) {
	for _, c := range canonicalCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || !disclosure.CanonicalForTest(data) {
			return
		}
		if got, err := acds.OutputBytes(data); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("canonical(%q) but OutputBytes gives %q (%v)", data, got, err)
		}
	})
}

// Marshal writes each entry in its committed form, which Parse keeps.
func TestMarshalWritesEntriesCompact(t *testing.T) {
	out := output(4)
	d := disclose(t, out, 1, 3)
	b, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := disclosure.Entries(out)
	for _, i := range []int{1, 3} {
		if !bytes.Contains(b, entries[i]) {
			t.Fatalf("entry %d is not in the disclosure in its committed form", i)
		}
	}
	p, err := disclosure.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Entries[0].Entry, entries[1]) || !bytes.Equal(p.Entries[1].Entry, entries[3]) {
		t.Fatal("Parse changed the entries")
	}
}

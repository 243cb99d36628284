package disclosure_test

import (
	"encoding/json"
	"testing"

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

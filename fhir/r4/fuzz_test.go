package r4_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
	"github.com/acds-project/acds/internal/testrig/corpus"
)

// FuzzUnmarshal checks that decoding never panics, that every failure is a
// *DecodeError with a class, and that whatever decodes re-encodes to valid
// JSON that decodes again to the same encoding. The committed corpus in
// testdata/fuzz/FuzzUnmarshal holds small official examples; every 25th resource of
// a Synthea bundle of the corpus is added.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"resourceType":"Patient","name":[{"given":["a",null],"_given":[null,{"extension":[{"url":"u","valueDecimal":1.50}]}]}]}`))
	f.Add([]byte(`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Basic","code":{"text":"\u00e9\ud83d\ude00"}}}]}`))
	f.Add([]byte(`{"resourceType":"Condition","clinicalStatus":"active","subject":{"reference":"Patient/1"}}`)) // STU3
	f.Add([]byte(`{"resourceType":"MedicationOrder","patient":{"reference":"Patient/1"}}`))                     // DSTU2
	var b struct {
		Entry []struct {
			Resource json.RawMessage `json:"resource"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(corpus.Read(f, corpus.MaryLind), &b); err != nil {
		f.Fatal(err)
	}
	for i, e := range b.Entry {
		if i%25 == 0 {
			f.Add([]byte(e.Resource))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := r4.Unmarshal(data)
		if err != nil {
			var de *r4.DecodeError
			if !errors.As(err, &de) || de.Err == nil {
				t.Fatalf("error %v (%T) is not a classified *DecodeError", err, err)
			}
			return
		}
		n1 := countNodes(t, r)
		out, err := r4.Marshal(r)
		if err != nil {
			t.Fatalf("decoded input does not encode: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON output: %s", out)
		}
		r2, err := r4.Unmarshal(out)
		if err != nil {
			t.Fatalf("output does not decode: %v\n%s", err, out)
		}
		if n2 := countNodes(t, r2); n2 > n1 {
			t.Fatalf("re-decoded value has %d elements, the first %d", n2, n1)
		}
		out2, err := r4.Marshal(r2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("encoding not stable:\n%s\n%s", out, out2)
		}
	})
}

func countNodes(t *testing.T, r r4.Resource) int {
	n := 0
	if err := r4.Walk(r, func(*r4.Path, any) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

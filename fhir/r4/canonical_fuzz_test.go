package r4_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/acds-project/acds/fhir/r4"
)

// FuzzCanonical checks, for whatever Unmarshal accepts, that the canonical
// encoder succeeds, agrees byte for byte with the reference canonicaliser
// applied to Marshal's output (the two encoders must carry the same content),
// and is idempotent through Unmarshal.
func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"resourceType":"Patient","name":[{"given":["a",null,"b"],"_given":[null,{"id":"x"},null]}]}`))
	f.Add([]byte(`{"resourceType":"Bundle","type":"collection","entry":[{"resource":{"resourceType":"Basic","code":{"text":"\u0001\u2028\ud83d\ude00\"\\"}}}]}`))
	f.Add([]byte(`{"resourceType":"Observation","status":"final","valueQuantity":{"value":-1.50e+3},"_status":{"extension":[{"url":"u","valueInteger":-7}]}}`))
	f.Add([]byte(`{"resourceType":"Parameters","parameter":[{"name":"p","resource":{"resourceType":"Patient","active":false}}]}`))
	if files, _ := filepath.Glob(filepath.Join("..", "..", ".fhir-defs", "package", "*.json")); len(files) > 0 {
		for i, name := range files {
			if fi, err := os.Stat(name); i%40 != 0 || err != nil || fi.Size() > 8<<10 {
				continue
			}
			if data, err := os.ReadFile(name); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := r4.Unmarshal(data)
		if err != nil {
			return
		}
		got, err := r4.MarshalCanonical(r)
		if err != nil {
			t.Fatalf("decoded input does not canonicalise: %v", err)
		}
		plain, err := r4.Marshal(r)
		if err != nil {
			t.Fatalf("decoded input does not encode: %v", err)
		}
		want, err := referenceCanonical(plain)
		if err != nil {
			t.Fatalf("Marshal output is not JSON: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical form differs from the reference %s", firstDifference(got, want))
		}
		r2, err := r4.Unmarshal(got)
		if err != nil {
			t.Fatalf("canonical output does not decode: %v\n%s", err, got)
		}
		again, err := r4.MarshalCanonical(r2)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("not idempotent (%v):\n%s\n%s", err, got, again)
		}
	})
}
